// Parity with DeepSpeed's own model-states estimators: every record of
// tests/data/deepspeed_estimator_outputs.json (a copy of ground-truth/deepspeed_estimator_outputs.json)
// is reproduced to the precision DeepSpeed printed it.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "memscale/estimate.hpp"
#include "memscale/parallel/deepspeed_estimator.hpp"
#include "memscale/presets.hpp"

namespace deepspeed_parity_test {
namespace {

using memscale::deepspeed::estimator_version;
using memscale::deepspeed::model_states_inputs;
using nlohmann::json;

// What DeepSpeed's model_to_params finds in a Hugging Face T5Model (encoder + decoder, shared
// embedding counted once, no lm_head), from transformers modeling_t5.py (v4.x): per encoder
// block self-attention q/k/v/o, a dense or gated FFN and two T5LayerNorms; per decoder block
// also cross-attention and a third norm; relative_attention_bias in the first block of each stack;
// a final norm per stack. The largest module (recurse=False) is the embedding or a Linear.
struct t5_config {
  std::uint64_t vocab, d_model, d_kv, heads, d_ff, layers;
  bool gated_ffn;
  std::uint64_t buckets = 32;
};
struct t5_counts {
  std::uint64_t total, largest_layer;
};
constexpr t5_counts t5_model_params(const t5_config& c) {
  const std::uint64_t inner = c.heads * c.d_kv;
  const std::uint64_t attention = 4 * c.d_model * inner;
  const std::uint64_t ffn = (c.gated_ffn ? 3 : 2) * c.d_model * c.d_ff;
  const std::uint64_t encoder_block = attention + ffn + 2 * c.d_model;
  const std::uint64_t decoder_block = 2 * attention + ffn + 3 * c.d_model;
  const std::uint64_t embedding = c.vocab * c.d_model;
  const std::uint64_t total = embedding + c.layers * (encoder_block + decoder_block) + 2 * c.buckets * c.heads +
                              2 * c.d_model;
  std::uint64_t largest = embedding;
  for (std::uint64_t m : {c.d_model * inner, c.d_model * c.d_ff})
    if (m > largest) largest = m;
  return {total, largest};
}
// Hub config.json: t5-3b (d_model 1024, d_kv 128, 32 heads, d_ff 16384, 24 layers, relu FFN),
// t5-large (1024, 64, 16, 4096, 24), bigscience/T0_3B (t5-v1.1 xl: 2048, 64, 32, 5120, 24, gated-gelu).
constexpr t5_counts t5_3b = t5_model_params({32128, 1024, 128, 32, 16384, 24, false});
constexpr t5_counts t5_large = t5_model_params({32128, 1024, 64, 16, 4096, 24, false});
constexpr t5_counts t0_3b = t5_model_params({32128, 2048, 64, 32, 5120, 24, true});
static_assert(t0_3b.total == 2'783'959'040 && t0_3b.largest_layer == 65'798'144);  // the record's notes
// memscale's own T5 graphs (tied head: T5ForConditionalGeneration has T5Model's parameters) agree.
static_assert(memscale::parameter_count(memscale::presets::t5_large) == t5_large.total);
constexpr memscale::model_spec t5_3b_spec = [] {
  auto m = memscale::presets::t5_family("t5-3b", 24, 1024, 32, 16384, false);
  m.head_dim = 128;
  return m;
}();
static_assert(memscale::parameter_count(t5_3b_spec) == t5_3b.total);

json load_records() {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/deepspeed_estimator_outputs.json");
  REQUIRE(in.good());
  return json::parse(in);
}

// The model counts a record's inputs describe: numbers for the *_cold functions, a named
// checkpoint for *_live ones (checked against the counts DeepSpeed printed).
t5_counts counts_of(const json& inputs) {
  if (inputs.contains("total_params"))
    return {static_cast<std::uint64_t>(inputs.at("total_params").get<double>()),
            static_cast<std::uint64_t>(inputs.value("largest_layer_params", 0.0))};
  const auto model = inputs.at("model").get<std::string>();
  const t5_counts c = model.find("T0_3B") != std::string::npos ? t0_3b
                      : model.find("t5-large") != std::string::npos ? t5_large
                                                                      : t5_3b;
  // "{int(total_params/1e6)}M", or the docs snippet's "{total/1e6:6.2f}M".
  const auto printed = inputs.at("total_params_printed").get<std::string>();
  if (printed.find('.') != std::string::npos) {
    CHECK(std::lround(static_cast<double>(c.total) / 1e4) == std::lround(std::stod(printed) * 100));
    CHECK(std::lround(static_cast<double>(c.largest_layer) / 1e4) ==
          std::lround(std::stod(inputs.at("largest_layer_params_printed").get<std::string>()) * 100));
  } else {
    CHECK(std::to_string(c.total / 1'000'000) + "M" == printed);
    if (inputs.contains("largest_layer_params_printed"))
      CHECK(std::to_string(c.largest_layer / 1'000'000) + "M" ==
            inputs.at("largest_layer_params_printed").get<std::string>());
  }
  return c;
}

bool option(const std::string& options, const std::string& old_name, const std::string& new_name) {
  if (options.find(old_name + "=1") != std::string::npos) return true;
  return !new_name.empty() && options.find(new_name + "=cpu") != std::string::npos;
}

std::uint64_t hundredths(const json& v) { return static_cast<std::uint64_t>(std::llround(v.get<double>() * 100)); }

}  // namespace

TEST_CASE("DeepSpeed estimator parity: every printed row of every record", "[deepspeed][parity]") {
  const json records = load_records();
  REQUIRE(records.size() == 7);
  std::size_t rows_checked = 0;
  for (const auto& r : records) {
    INFO("record " << r.at("id").get<std::string>());
    const auto& in = r.at("inputs");
    const t5_counts c = counts_of(in);
    const auto function = r.at("function").get<std::string>();
    if (function.find("manual") != std::string::npos) {
      // memory.rst's hand-written ZeRO-3 cases: the estimator's GPU column, printed >> 20.
      const std::uint64_t gpus = in.at("total_gpus").get<std::uint64_t>();
      for (const auto& row : r.at("rows")) {
        const auto which = row.at("case").get<std::string>();
        model_states_inputs mi{.total_params = c.total, .largest_layer_params = c.largest_layer,
                               .num_gpus_per_node = gpus, .num_nodes = 1,
                               .cpu_offload = which.rfind("case1", 0) != 0,
                               .cpu_offload_params = which.rfind("case2", 0) == 0};
        const auto need = memscale::deepspeed::zero3_model_states_mem_needs(mi);
        CHECK(memscale::deepspeed::printed_mib_floor(need.gpu) == row.at("gpu_MiB").get<std::uint64_t>());
        ++rows_checked;
      }
      continue;
    }
    const bool zero3 = function.find("zero3") != std::string::npos;
    for (const auto& row : r.at("rows")) {
      const auto options = row.at("options").get<std::string>();
      INFO("options " << options);
      const model_states_inputs mi{
          .total_params = c.total,
          .largest_layer_params = c.largest_layer,
          .num_gpus_per_node = in.at("num_gpus_per_node").get<std::uint64_t>(),
          .num_nodes = in.at("num_nodes").get<std::uint64_t>(),
          .cpu_offload = option(options, "cpu_offload", "offload_optimizer"),
          .cpu_offload_params = option(options, "cpu_offload_params", "offload_param"),
          .zero_init = options.find("zero_init=1") != std::string::npos,
          .additional_buffer_factor = 1.5,
          // The records were printed by DeepSpeed before v0.14.3 (docs commit 077e6740).
          .version = estimator_version::v0_4_to_0_14_2};
      const auto need = zero3 ? memscale::deepspeed::zero3_model_states_mem_needs(mi)
                              : memscale::deepspeed::zero2_model_states_mem_needs(mi);
      CHECK(memscale::deepspeed::printed_gib_hundredths(need.cpu) == hundredths(row.at("per_cpu_GiB")));
      CHECK(memscale::deepspeed::printed_gib_hundredths(need.gpu) == hundredths(row.at("per_gpu_GiB")));
      ++rows_checked;
    }
  }
  CHECK(rows_checked == 31);
}

TEST_CASE("DeepSpeed estimator: the v0.14.3 ZeRO-2 formula counts 2 + 18/N bytes per parameter",
          "[deepspeed][parity]") {
  using namespace memscale::deepspeed;
  model_states_inputs in{.total_params = 1'000'000'000, .num_gpus_per_node = 8, .cpu_offload = false};
  CHECK(zero2_model_states_mem_needs(in).gpu.value == 2'000'000'000 + 2'250'000'000);
  in.version = estimator_version::v0_4_to_0_14_2;
  CHECK(zero2_model_states_mem_needs(in).gpu.value == 4'000'000'000 + 2'000'000'000);
  // Ties print half to even, as Python's format does.
  CHECK(printed_gib_hundredths(memscale::bytes{std::uint64_t{1} << 27}) == 12);      // 0.125 -> "0.12"
  CHECK(printed_gib_hundredths(memscale::bytes{3 * (std::uint64_t{1} << 27)}) == 38);  // 0.375 -> "0.38"
}

}  // namespace deepspeed_parity_test
