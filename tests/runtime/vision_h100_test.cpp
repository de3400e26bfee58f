// The torchvision runs measured on an H100 (docs/data/gpu_measured_h100.json: torch 2.11,
// torchvision 0.26, CUDA 13): vit_b_16's tensor peak and replayed reserved peak, and
// resnet50's replayed reserved peak, each within 5% of the measurement.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "memscale/allocator/replay_vision.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "memscale/vision/estimate.hpp"

namespace vision_h100_test {
namespace {

using namespace memscale;

nlohmann::json h100_record(const std::string& id) {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/gpu_measured_h100.json");
  REQUIRE(in);
  for (const nlohmann::json& r : nlohmann::json::parse(in))
    if (r.at("id") == "h100-" + id) return r;
  FAIL("no record " << id);
  return {};
}

double measured(const nlohmann::json& r) { return static_cast<double>(r.at("measured_bytes").get<std::uint64_t>()); }

double error_of(double predicted, double actual) { return (predicted - actual) / actual; }

training_spec run_of(const nlohmann::json& r) { return json_io::run_from_record(json_io::vision_run_record(r)); }

double replayed_reserved(const nlohmann::json& r) {
  const vision::vision_spec model = json_io::vision_model_from_record(r);
  const training_spec run = run_of(r);
  const auto g = std::make_unique<vision::layer_graph>(vision::build_graph(model, run));
  return static_cast<double>(allocator::replay_vision_training<16384, 16384>(*g, run).reserved_peak.value);
}

}  // namespace

TEST_CASE("torchvision ViT on torch 2.x: MultiheadAttention runs SDPA, no probabilities kept", "[vision][h100]") {
  const nlohmann::json allocated = h100_record("vit_b_16-b32-224-amp_bf16-adamw-allocated");
  const nlohmann::json reserved = h100_record("vit_b_16-b32-224-amp_bf16-adamw-reserved");
  const vision::vision_spec model = json_io::vision_model_from_record(allocated);
  const training_spec run = run_of(allocated);
  const double tensor_error = error_of(static_cast<double>(vision::estimate(model, run).steady.tensor.value),
                                       measured(allocated));
  CAPTURE(tensor_error);
  CHECK(tensor_error > -0.05);
  CHECK(tensor_error < 0.05);
  const double reserved_error = error_of(replayed_reserved(reserved), measured(reserved));
  CAPTURE(reserved_error);
  CHECK(reserved_error > -0.05);
  CHECK(reserved_error < 0.05);
  // Torch 1.13 keeps the B x H x S x S bf16 probabilities in each of the 12 blocks (and copies
  // of q, k, v and the context: as many bytes as SDPA's packed q, k, v and output); flash keeps
  // a per-row fp32 log-sum-exp instead.
  training_spec old = run;
  old.torch_version = 113;
  const std::uint64_t probabilities = 12ULL * 32 * 12 * 197 * 197 * 2;
  const std::uint64_t log_sum_exp = 12ULL * 32 * 12 * 197 * 4;
  CHECK(vision::estimate(model, old).saved_activation_bytes.value ==
        vision::estimate(model, run).saved_activation_bytes.value + probabilities - log_sum_exp);
  // MultiheadAttention has no eager path of its own: an eager request gets SDPA's math kernel.
  training_spec eager = run;
  eager.attention = attention_impl::eager;
  training_spec math = run;
  math.attention = attention_impl::sdpa_math;
  CHECK(vision::estimate(model, eager).saved_activation_bytes == vision::estimate(model, math).saved_activation_bytes);
  CHECK(vision::estimate(model, math).saved_activation_bytes.value >
        vision::estimate(model, run).saved_activation_bytes.value + probabilities);
}

TEST_CASE("resnet50 on H100: the replay takes cuDNN's convolution workspaces", "[vision][h100][allocator]") {
  for (const char* id : {"resnet50-b64-224-fp32-sgd_momentum-reserved", "resnet50-b64-224-amp_bf16-adamw-reserved"}) {
    CAPTURE(id);
    const nlohmann::json r = h100_record(id);
    const double error = error_of(replayed_reserved(r), measured(r));
    CAPTURE(error);
    CHECK(error > -0.05);
    CHECK(error < 0.05);
  }
  // A 3x3 convolution's workspace is its input plus its output; a 1x1 stride-1 one takes none,
  // and neither does any convolution on the CPU.
  const vision::vision_spec resnet = *vision::presets::find("resnet50");
  training_spec cuda{.micro_batch = 2, .seq_len = 1, .device = device_kind::cuda};
  const auto g = std::make_unique<vision::layer_graph>(vision::build_graph(resnet, cuda));
  const std::uint64_t stem = 2ULL * 3 * 224 * 224 * 4 + 2ULL * 64 * 112 * 112 * 4;  // 7x7 stride 2
  CHECK(g->call_workspace[0].value == stem);
  std::size_t without = 0;
  for (std::size_t i = 0; i < g->size; ++i) without += g->call_workspace[i].value == 0 ? 1 : 0;
  CHECK(without > 0);
  training_spec cpu = cuda;
  cpu.device = device_kind::cpu;
  const auto h = std::make_unique<vision::layer_graph>(vision::build_graph(resnet, cpu));
  for (std::size_t i = 0; i < h->size; ++i) CHECK(h->call_workspace[i].value == 0);
}

}  // namespace vision_h100_test
