// memscale-golden: prints the estimates and plans of a fixed, seeded set of runs, one line each,
// so that a restructuring can be checked byte for byte against the commit before it.
//
//   memscale-golden [HF_CONFIG_DIR]   > golden.txt
//
// The runs: every preset and every config.json in HF_CONFIG_DIR (default tests/data/hf_configs)
// under 40,000 random training runs (a plan for every eighth, on a GPU of random memory),
// random per-GPU layouts, random generate() runs and random vision runs. An input the library
// refuses prints its error, which is part of the behaviour compared. tools/golden/compare.sh
// also answers every record file with `memscale-plan --cases`.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <memscale/json.hpp>
#include <memscale/memscale.hpp>
#include <memscale/inference.hpp>
#include <memscale/parallel/per_gpu.hpp>
#include <memscale/vision/estimate.hpp>
#include <memscale/vision/planner.hpp>
#include <memscale/vision/presets.hpp>

namespace {

using nlohmann::json;

// splitmix64: the same sequence on every machine and compiler.
class random_source {
 public:
  explicit random_source(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31U);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
  bool chance(std::uint64_t one_in) { return below(one_in) == 0; }
  template <class T, std::size_t N>
  T pick(const T (&values)[N]) {
    return values[below(N)];
  }

 private:
  std::uint64_t state_;
};

std::string compact(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Runs `body`, printing its JSON or the error it throws.
template <class Body>
void line(const std::string& id, Body&& body) {
  std::string out;
  try {
    out = compact(body());
  } catch (const std::exception& e) {
    out = std::string("error: ") + e.what();
  }
  std::printf("%s %s\n", id.c_str(), out.c_str());
}

memscale::training_spec random_run(random_source& rng) {
  using namespace memscale;
  training_spec t{};
  t.micro_batch = rng.pick({1ULL, 1ULL, 2ULL, 3ULL, 4ULL, 8ULL, 16ULL, 32ULL});
  t.seq_len = rng.pick({64ULL, 128ULL, 256ULL, 512ULL, 1000ULL, 1024ULL, 2048ULL, 4096ULL});
  t.prec = rng.pick({precision::fp32, precision::amp_fp16, precision::amp_bf16, precision::pure_bf16,
                     precision::pure_fp16});
  t.optimizer = rng.pick({optimizer_kind::sgd, optimizer_kind::sgd_momentum, optimizer_kind::adam,
                          optimizer_kind::adamw, optimizer_kind::adamw, optimizer_kind::adamw_8bit,
                          optimizer_kind::adafactor, optimizer_kind::lion});
  t.optimizer_impl = rng.pick({optimizer_implementation::for_loop, optimizer_implementation::foreach,
                               optimizer_implementation::fused});
  t.grad_accum = rng.pick({1ULL, 1ULL, 2ULL, 4ULL});
  t.ckpt = rng.pick({checkpointing::none, checkpointing::none, checkpointing::full, checkpointing::selective});
  t.attention = rng.pick({attention_impl::eager, attention_impl::sdpa_math, attention_impl::flash});
  const auto target = rng.pick({training_target::full, training_target::full, training_target::lora,
                                training_target::qlora});
  t.target = target;
  if (target != training_target::full) {
    t.lora_rank = rng.pick({4ULL, 8ULL, 16ULL, 64ULL});
    t.lora_targets = static_cast<lora_modules>(1 + rng.below(127));
    t.lora_kind = rng.pick({lora_variant::lora, lora_variant::rslora, lora_variant::dora});
    t.lora_dropout = rng.chance(2);
    t.adapters = rng.pick({adapter_dtype::framework_default, adapter_dtype::as_base, adapter_dtype::fp32});
    if (target == training_target::qlora) {
      t.quant = rng.pick({base_quant::nf4, base_quant::nf4_double_quant});
      t.bitsandbytes_version = rng.pick({4200U, 4302U, 4902U});
    }
  }
  t.dropout = !rng.chance(4);
  if (rng.chance(5)) {
    t.loss = loss_impl::chunked;
    t.loss_chunk = rng.pick({64ULL, 128ULL, 256ULL});
  }
  t.zero_grad_to_none = !rng.chance(5);
  t.offload_optimizer = rng.chance(6);
  t.offload_parameters = rng.chance(10);
  t.offload_activations = t.ckpt != checkpointing::none && rng.chance(4) && t.ckpt == checkpointing::full;
  t.device = rng.chance(5) ? device_kind::cpu : device_kind::cuda;
  t.torch_version = rng.pick({113U, 200U, 205U, 211U});
  t.transformers_version = rng.pick({0U, 440U, 448U, 451U, 500U});
  return t;
}

struct named_model {
  std::string id;
  memscale::model_spec spec;
};

std::vector<named_model> models(const std::filesystem::path& config_dir) {
  std::vector<named_model> out;
  for (const auto& m : memscale::presets::all) out.push_back({"preset:" + std::string(m.name), m});
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(config_dir))
    if (entry.path().extension() == ".json" && entry.path().filename() != "README.md") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    try {
      out.push_back({"config:" + f.filename().string(), memscale::json_io::load_hf_model(f.string())});
    } catch (const std::exception& e) {
      std::printf("config:%s error: %s\n", f.filename().string().c_str(), e.what());
    }
  }
  return out;
}

memscale::gpu_spec random_gpu(random_source& rng) {
  static const char* const names[] = {"rtx3090", "rtx4090", "a100-80gb", "h100-80gb", "t4", "v100-16gb", "a10"};
  auto gpu = memscale::find_gpu(names[rng.below(std::size(names))]);
  if (!gpu) gpu = memscale::find_gpu("rtx3090");
  gpu->memory = memscale::bytes{(4ULL + rng.below(156)) << 29U};  // 2 to 80 GiB in 0.5 GiB steps
  return *gpu;
}

void training_runs(const std::vector<named_model>& all, random_source& rng, int count) {
  for (int i = 0; i < count; ++i) {
    const auto& m = all[rng.below(all.size())];
    const auto run = random_run(rng);
    const std::string id = "train#" + std::to_string(i) + ":" + m.id;
    line(id, [&] { return memscale::json_io::estimate_to_json(memscale::estimate(m.spec, run)); });
    if (i % 8 == 0) {
      const auto gpu = random_gpu(rng);
      line(id + ":plan@" + std::string(gpu.name) + "/" + std::to_string(gpu.memory.value),
           [&] { return memscale::json_io::plan_to_json(memscale::make_plan(m.spec, run, gpu)); });
    }
  }
}

void per_gpu_runs(const std::vector<named_model>& all, random_source& rng, int count) {
  using namespace memscale;
  for (int i = 0; i < count; ++i) {
    const auto& m = all[rng.below(all.size())];
    auto run = random_run(rng);
    run.offload_optimizer = run.offload_parameters = run.offload_activations = false;
    parallel_spec p{};
    p.engine = static_cast<strategy>(rng.below(7));
    p.gpus_per_node = rng.pick({2ULL, 4ULL, 8ULL});
    p.nodes = rng.pick({1ULL, 1ULL, 2ULL});
    p.offload_optimizer = rng.chance(4);
    p.offload_parameters = rng.chance(6);
    line("pergpu#" + std::to_string(i) + ":" + m.id, [&] {
      const auto r = estimate_per_gpu(m.spec, run, p);
      return json{{"world", r.world},
                  {"dp", r.data_parallel},
                  {"shard", r.shard},
                  {"global_batch", r.global_batch},
                  {"peak_rank", r.peak_rank},
                  {"peak", json_io::peak_to_json(r.peak)},
                  {"breakdown", json_io::breakdown_to_json(r.peak.breakdown)},
                  {"host", {r.host.optimizer.value, r.host.parameters.value, r.host.per_node.value}},
                  {"traffic", {r.traffic.collectives.value, r.traffic.host_link.value}}};
    });
  }
}

void inference_runs(const std::vector<named_model>& all, random_source& rng, int count) {
  using namespace memscale;
  for (int i = 0; i < count; ++i) {
    const auto& m = all[rng.below(all.size())];
    inference_spec r{};
    r.batch = rng.pick({1ULL, 2ULL, 4ULL, 16ULL});
    r.context = rng.pick({16ULL, 128ULL, 512ULL, 2000ULL, 4096ULL});
    r.new_tokens = rng.pick({1ULL, 32ULL, 128ULL, 512ULL});
    r.compute = rng.pick({dtype::fp16, dtype::bf16, dtype::fp32});
    r.weights = static_cast<weight_format>(rng.below(6));
    r.kv = rng.pick({dtype::fp16, dtype::bf16, dtype::fp8_e4m3, dtype::int8});
    r.cache = rng.pick({kv_cache_kind::dynamic, kv_cache_kind::static_preallocated, kv_cache_kind::sliding_window});
    if (r.cache == kv_cache_kind::sliding_window) r.sliding_window = rng.pick({256ULL, 4096ULL});
    r.attention = rng.pick({attention_impl::eager, attention_impl::sdpa_math, attention_impl::flash});
    r.transformers_version = rng.pick({432U, 440U, 445U, 451U});
    r.legacy_tuple_cache = rng.chance(4);
    r.device = rng.chance(4) ? device_kind::cpu : device_kind::cuda;
    const std::string id = "infer#" + std::to_string(i) + ":" + m.id;
    line(id, [&] { return json_io::inference_to_json(estimate_inference(m.spec, r)); });
    if (i % 4 == 0) {
      const auto gpu = random_gpu(rng);
      line(id + ":plan@" + std::to_string(gpu.memory.value), [&] {
        const auto p = plan_inference(m.spec, r, gpu);
        return json{{"fits", p.fits}, {"verdict", std::string(to_string(p.verdict.v))}, {"device", p.device.device.value},
                    {"replayed", p.device.replayed()}, {"budget", p.budget.value}, {"max_batch", p.max_batch},
                    {"max_context", p.max_context}, {"peak", json_io::inference_to_json(p.estimate)}};
      });
    }
  }
}

void vision_runs(random_source& rng, int count) {
  using namespace memscale;
  for (int i = 0; i < count; ++i) {
    auto model = vision::presets::all[rng.below(vision::presets::all.size())];
    const std::uint64_t side = rng.pick({64ULL, 128ULL, 224ULL, 384ULL});
    model.image_height = model.image_width = side;
    model.channels_last = rng.chance(3);
    auto run = random_run(rng);
    run.target = training_target::full;
    run.lora_rank = 0;
    run.micro_batch = rng.pick({1ULL, 8ULL, 32ULL, 64ULL, 256ULL});
    const std::string id = "vision#" + std::to_string(i) + ":" + std::string(model.name) + "@" + std::to_string(side);
    line(id, [&] { return json_io::estimate_to_json(vision::estimate(model, run)); });
    if (i % 4 == 0) {
      const auto gpu = random_gpu(rng);
      line(id + ":plan@" + std::to_string(gpu.memory.value),
           [&] { return json_io::plan_to_json(vision::make_plan(model, run, gpu)); });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path config_dir = argc > 1 ? argv[1] : "tests/data/hf_configs";
  const auto all = models(config_dir);
  random_source rng(20261125);
  training_runs(all, rng, 40000);
  per_gpu_runs(all, rng, 4000);
  inference_runs(all, rng, 4000);
  vision_runs(rng, 2000);
  return 0;
}
