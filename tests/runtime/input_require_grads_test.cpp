// enable_input_require_grads() under frozen embeddings (graph/layers/input_require_grads.hpp): when
// its hook runs, what it keeps to the end of backward, and the LoRA traces of
// docs/data/cpu_traced_checkpoint_variants.json.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "memscale/allocator/replay.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace input_require_grads_test {
namespace {

using namespace memscale;

constexpr training_spec lora_checkpointed(checkpoint_variant v) {
  return {.micro_batch = 4, .seq_len = 512, .prec = precision::pure_bf16, .ckpt = checkpointing::full,
          .ckpt_variant = v, .target = training_target::lora, .lora_rank = 8};
}

static_assert(graph_layers::embedding_output_requires_grad(lora_checkpointed(checkpoint_variant::reentrant)));
static_assert(!graph_layers::embedding_output_requires_grad(lora_checkpointed(checkpoint_variant::non_reentrant)));

// The most live bytes the allocator's stream of step 2 holds in one moment.
class moment_peak {
 public:
  constexpr explicit moment_peak(allocator::moment at) : at_(at) {}
  constexpr void alloc(std::uint32_t id, std::uint64_t size) {
    size_of_[id] = size;
    live_ += size;
    if (inside_ && live_ > peak_) peak_ = live_;
  }
  constexpr void free(std::uint32_t id) { live_ -= size_of_[id]; }
  constexpr void enter(std::uint32_t step, allocator::moment m) {
    inside_ = step == 2 && m == at_;
    if (inside_ && live_ > peak_) peak_ = live_;
  }
  [[nodiscard]] constexpr std::uint64_t peak() const { return peak_; }

 private:
  allocator::moment at_;
  std::array<std::uint64_t, 32768> size_of_{};
  std::uint64_t live_ = 0;
  std::uint64_t peak_ = 0;
  bool inside_ = false;
};

std::uint64_t prologue_backward_peak(const model_graph& built) {
  auto sink = std::make_unique<moment_peak>(allocator::moment::prologue_backward);
  constexpr allocator::step_stream_options estimate_like{.blas_handles = 1, .tie_weights_copy = false,
                                                         .cast_weight_grads = false};
  allocator::emit_training_steps<32768, 8192>(built.stack(), built.run, estimate_like, *sink);
  return sink->peak();
}

}  // namespace

TEST_CASE("input require grads: the hook runs where a LoRA run checkpoints reentrantly", "[checkpoint][lora]") {
  training_spec run = lora_checkpointed(checkpoint_variant::framework_default);
  run.transformers_version = 446;  // use_reentrant=True by default (PR #28538 to PR #43203)
  CHECK(graph_layers::embedding_output_requires_grad(run));
  run.transformers_version = 517;  // use_reentrant=False by default
  CHECK_FALSE(graph_layers::embedding_output_requires_grad(run));
  run = lora_checkpointed(checkpoint_variant::reentrant);
  run.target = training_target::full;
  run.lora_rank = 0;
  CHECK_FALSE(graph_layers::embedding_output_requires_grad(run));  // the embeddings train: nothing to hook
}

TEST_CASE("input require grads: the embeddings' output and its gradient live to the end of backward",
          "[checkpoint][lora]") {
  const auto hooked = std::make_unique<model_graph>(build(presets::llama_2_7b, lora_checkpointed(checkpoint_variant::reentrant)));
  const auto plain =
      std::make_unique<model_graph>(build(presets::llama_2_7b, lora_checkpointed(checkpoint_variant::non_reentrant)));
  const std::uint64_t lookup = 4ull * 512 * 4096 * 2;  // the token lookup's output, bf16
  CHECK(hooked->stack().kept_input_embeddings.value == 2 * lookup);
  CHECK(plain->stack().kept_input_embeddings.value == 0);
  CHECK(prologue_backward_peak(*hooked) - prologue_backward_peak(*plain) == 2 * lookup);
}

TEST_CASE("input require grads: a lookup summed into the stream stays with the graph", "[checkpoint][lora]") {
  // GPT-2 adds learned positions to the lookup: the hook's leaf is no checkpoint's input, and the
  // AccumulateGrad node keeps it through the step's forward and the blocks' backward.
  const auto hooked = std::make_unique<model_graph>(build(presets::gpt2, lora_checkpointed(checkpoint_variant::reentrant)));
  const auto plain =
      std::make_unique<model_graph>(build(presets::gpt2, lora_checkpointed(checkpoint_variant::non_reentrant)));
  const std::uint64_t lookup = 4ull * 512 * 768 * 2;  // the token lookup's output, bf16
  CHECK(hooked->stack().held.value - plain->stack().held.value == lookup);
  CHECK(hooked->stack().kept_input_embeddings.value == 2 * lookup);
  // LLaMA's first block reads the lookup itself: nothing more is held.
  const auto llama_hooked =
      std::make_unique<model_graph>(build(presets::llama_2_7b, lora_checkpointed(checkpoint_variant::reentrant)));
  const auto llama_plain =
      std::make_unique<model_graph>(build(presets::llama_2_7b, lora_checkpointed(checkpoint_variant::non_reentrant)));
  CHECK(llama_hooked->stack().held == llama_plain->stack().held);
}

TEST_CASE("input require grads: the LoRA checkpoint traces", "[checkpoint][lora][records]") {
  std::ifstream in(MEMSCALE_SOURCE_DIR "/docs/data/cpu_traced_checkpoint_variants.json");
  REQUIRE(in);
  struct reading {
    double end_of_backward = 0;  // live bytes after backward, while the loss still holds the graph
    double kept = 0;             // graph::kept_input_embeddings of the record's run
  };
  std::map<std::string, reading> by_id;
  for (const auto& record : json_io::json::parse(in)) {
    if (record.at("train").at("lora_rank").get<int>() == 0) continue;
    const std::string id = record.at("id").get<std::string>();
    INFO(id);
    const auto answer = json_io::estimate_record(record);
    REQUIRE(answer.contains("estimated_bytes"));
    const double measured = record.at("measured_bytes").get<double>();
    const double estimated = answer.at("estimated_bytes").get<double>();
    CHECK(estimated > 0.99 * measured);
    CHECK(estimated < 1.01 * measured);
    const auto built = std::make_unique<model_graph>(
        build(json_io::model_for_record(record), json_io::run_from_record(record)));
    by_id[id] = {record.at("detail").at("s2_graph").get<double>(),
                 static_cast<double>(built->stack().kept_input_embeddings.value)};
  }
  REQUIRE(by_id.size() == 4);
  for (const char* shape : {"-b2-s256", "-b4-s512"}) {
    INFO(shape);
    const reading& hooked = by_id.at(std::string("cpu-llama-lora-ckpt-reentrant-input-grads") + shape);
    const reading& plain = by_id.at(std::string("cpu-llama-lora-ckpt-non-reentrant") + shape);
    const double measured = hooked.end_of_backward - plain.end_of_backward;
    const double modelled = hooked.kept - plain.kept;
    // The leaf and its .grad (B x S x 256 fp32 each), and 20,224 B that do not scale with the batch.
    CHECK(modelled > 0.98 * measured);
    CHECK(modelled <= measured);
  }
}

}  // namespace input_require_grads_test
