// Emitted engine configs (json/emit_deepspeed.hpp, json/emit_accelerate.hpp): every key is one
// the engine defines (json/engine_config_keys.hpp, read from the engines' source) and the batch
// sizes always multiply out as DeepSpeed asserts.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <sstream>
#include <string>

#include "error_capture.hpp"
#include "memscale/json/emit_accelerate.hpp"
#include "memscale/json/emit_deepspeed.hpp"

namespace emit_test {
namespace {
using namespace memscale;
namespace keys = memscale::json_io::engine_keys;
using nlohmann::json;

template <std::size_t N>
void check_keys(const json& section, const std::array<std::string_view, N>& allowed, const std::string& where) {
  REQUIRE(section.is_object());
  for (const auto& [k, v] : section.items()) {
    INFO(where << "." << k);
    CHECK(keys::contains(allowed, k));
  }
}

void check_deepspeed(const json& cfg, const training_spec& r, const parallel_spec& p) {
  check_keys(cfg, keys::deepspeed_top, "ds_config");
  check_keys(cfg.at("bf16"), keys::deepspeed_precision, "bf16");
  check_keys(cfg.at("fp16"), keys::deepspeed_precision, "fp16");
  CHECK_FALSE((cfg.at("bf16").at("enabled").get<bool>() && cfg.at("fp16").at("enabled").get<bool>()));
  const auto& zero = cfg.at("zero_optimization");
  check_keys(zero, keys::deepspeed_zero, "zero_optimization");
  const int stage = zero.at("stage").get<int>();
  CHECK((stage >= 0 && stage <= 3));
  for (const char* section : {"offload_param", "offload_optimizer"}) {
    if (!zero.contains(section)) continue;
    if (std::string(section) == "offload_param") {
      check_keys(zero.at(section), keys::deepspeed_offload_param, section);
      CHECK(stage == 3);
    } else {
      check_keys(zero.at(section), keys::deepspeed_offload_optimizer, section);
    }
    CHECK(keys::contains(keys::deepspeed_offload_devices, zero.at(section).at("device").get<std::string>()));
  }
  // Under ZeRO-Offload the engine needs its CPU optimizer (named in the config) or permission
  // to step a client torch optimizer on the host (engine.py _configure_optimizer).
  if (p.offload_optimizer) {
    const bool named = cfg.contains("optimizer");
    CHECK((named || (cfg.contains("zero_force_ds_cpu_optimizer") && !cfg.at("zero_force_ds_cpu_optimizer").get<bool>())));
    if (named) {
      check_keys(cfg.at("optimizer"), keys::deepspeed_optimizer, "optimizer");
      std::string type = cfg.at("optimizer").at("type").get<std::string>();
      for (char& ch : type) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
      CHECK(keys::contains(keys::deepspeed_cpu_optimizers, type));
    }
  }
  if (cfg.contains("activation_checkpointing"))
    check_keys(cfg.at("activation_checkpointing"), keys::deepspeed_activation_checkpointing, "activation_checkpointing");
  // config.py _batch_assertion: train_batch_size == micro * accumulation * data-parallel world.
  const auto train = cfg.at("train_batch_size").get<std::uint64_t>();
  const auto micro = cfg.at("train_micro_batch_size_per_gpu").get<std::uint64_t>();
  const auto accum = cfg.at("gradient_accumulation_steps").get<std::uint64_t>();
  CHECK(micro == r.micro_batch);
  CHECK(accum == r.grad_accum);
  CHECK(train == micro * accum * data_parallel_degree(p));
}
}  // namespace

TEST_CASE("ds_config.json: only DeepSpeed's keys, batch sizes that multiply out", "[emit][deepspeed]") {
  std::size_t emitted = 0;
  for (strategy s : {strategy::ddp, strategy::zero1, strategy::zero2, strategy::zero3})
    for (precision pr : {precision::fp32, precision::amp_bf16, precision::pure_fp16})
      for (std::uint64_t gpus : {2UL, 8UL, 16UL})
        for (std::uint64_t micro : {1UL, 3UL})
          for (std::uint64_t accum : {1UL, 5UL})
            for (int offload = 0; offload < 3; ++offload) {
              if (s == strategy::ddp && offload > 0) continue;
              if (offload == 2 && s != strategy::zero3) continue;
              training_spec r{.micro_batch = micro, .seq_len = 1024, .prec = pr, .grad_accum = accum,
                              .ckpt = checkpointing::full};
              parallel_spec p{.engine = s, .gpus_per_node = gpus < 8 ? gpus : 8, .nodes = gpus < 8 ? 1 : gpus / 8,
                              .pp = gpus == 16 ? std::uint64_t{2} : std::uint64_t{1}, .offload_optimizer = offload > 0,
                              .offload_parameters = offload == 2};
              INFO(to_string(s) << " gpus " << gpus << " micro " << micro << " accum " << accum);
              check_deepspeed(json_io::emit_deepspeed_config(r, p), r, p);
              ++emitted;
            }
  CHECK(emitted > 100);
  const auto cfg = json_io::emit_deepspeed_config({.micro_batch = 2, .prec = precision::amp_bf16, .grad_accum = 4},
                                                  {.engine = strategy::zero3, .gpus_per_node = 8, .nodes = 2,
                                                   .offload_optimizer = true, .offload_parameters = true});
  CHECK(cfg.at("train_batch_size") == 2 * 4 * 16);
  CHECK(cfg.at("zero_optimization").at("stage") == 3);
  CHECK(cfg.at("zero_optimization").at("offload_param").at("device") == "cpu");
  CHECK(cfg.at("bf16").at("enabled") == true);
}

TEST_CASE("ds_config.json is refused for layouts DeepSpeed cannot run", "[emit][deepspeed]") {
  CHECK(memscale_test::contains(memscale_test::error_message([] {
    (void)json_io::emit_deepspeed_config({}, {.engine = strategy::fsdp_full, .gpus_per_node = 4});
  }), "emit accelerate-fsdp"));
  CHECK(memscale_test::contains(memscale_test::error_message([] {
    (void)json_io::emit_deepspeed_config({}, {.engine = strategy::zero2, .gpus_per_node = 6, .tp = 4});
  }), "must divide the number of GPUs"));
  CHECK(memscale_test::contains(memscale_test::error_message([] {
    (void)json_io::emit_deepspeed_config({}, {.engine = strategy::zero2, .gpus_per_node = 4, .offload_parameters = true});
  }), "parallel.offload_parameters needs a strategy that shards parameters"));
}

TEST_CASE("Accelerate FSDP YAML: only the keys `accelerate config` writes", "[emit][accelerate]") {
  for (strategy s : {strategy::fsdp_full, strategy::fsdp_grad_op, strategy::hsdp})
    for (fsdp_api api : {fsdp_api::fsdp1, fsdp_api::fsdp2}) {
      const training_spec r{.micro_batch = 1, .prec = precision::amp_bf16, .ckpt = checkpointing::full};
      const parallel_spec p{.engine = s, .gpus_per_node = 8, .nodes = 2, .offload_parameters = s != strategy::fsdp_grad_op,
                            .fsdp = api};
      const std::string yaml = json_io::emit_accelerate_fsdp_config(r, p, "LlamaDecoderLayer");
      std::istringstream in(yaml);
      std::string line;
      int nested = 0;
      while (std::getline(in, line)) {
        INFO(line);
        const bool inner = line.rfind("  ", 0) == 0;
        const auto colon = line.find(':');
        REQUIRE(colon != std::string::npos);
        const std::string key = line.substr(inner ? 2 : 0, colon - (inner ? 2 : 0));
        const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
        if (inner) {
          ++nested;
          CHECK(keys::contains(keys::accelerate_fsdp, key));
          if (key == "fsdp_reshard_after_forward" && api == fsdp_api::fsdp1)
            CHECK(keys::contains(keys::accelerate_sharding_strategies, value));
        } else {
          CHECK(keys::contains(keys::accelerate_top, key));
          if (key == "mixed_precision") CHECK(value == "bf16");
          if (key == "num_processes") CHECK(value == "16");
          if (key == "num_machines") CHECK(value == "2");
        }
      }
      CHECK(nested >= 9);
      if (s == strategy::hsdp) CHECK(memscale_test::contains(yaml, "fsdp_reshard_after_forward: HYBRID_SHARD"));
    }
  CHECK(memscale_test::contains(memscale_test::error_message([] {
    (void)json_io::emit_accelerate_fsdp_config({}, {.engine = strategy::zero3, .gpus_per_node = 2}, "Block");
  }), "emit deepspeed"));
}

TEST_CASE("ds_config.json under ZeRO-Offload names an optimizer the engine runs on the host", "[emit][deepspeed]") {
  const parallel_spec p{.engine = strategy::zero3, .gpus_per_node = 8, .offload_optimizer = true};
  auto emitted = [&](optimizer_kind o) {
    return json_io::emit_deepspeed_config({.prec = precision::amp_bf16, .optimizer = o}, p);
  };
  const json adamw = emitted(optimizer_kind::adamw);
  CHECK(adamw.at("optimizer").at("type") == "AdamW");
  check_deepspeed(adamw, {.prec = precision::amp_bf16}, p);
  // "Adam" runs AdamW's decoupled decay unless adam_w_mode is false.
  CHECK(emitted(optimizer_kind::adam).at("optimizer").at("params").at("adam_w_mode") == false);
  CHECK(emitted(optimizer_kind::lion).at("optimizer").at("type") == "Lion");
  const json sgd = emitted(optimizer_kind::sgd_momentum);
  CHECK_FALSE(sgd.contains("optimizer"));
  CHECK(sgd.at("zero_force_ds_cpu_optimizer") == false);
  CHECK(memscale_test::contains(memscale_test::error_message([&] { (void)emitted(optimizer_kind::adamw_8bit); }),
                                "[memscale.unsupported] run.optimizer adamw_8bit"));
  // Without offload the training script's own optimizer is used as it is.
  const json plain = json_io::emit_deepspeed_config({}, {.engine = strategy::zero3, .gpus_per_node = 8});
  CHECK_FALSE(plain.contains("optimizer"));
  CHECK_FALSE(plain.contains("zero_force_ds_cpu_optimizer"));
}

}  // namespace emit_test
