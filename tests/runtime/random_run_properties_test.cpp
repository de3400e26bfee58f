// Properties of the estimates and plans over random runs of every transformer and vision
// preset (precisions, optimizers, attention kernels, LoRA/QLoRA, checkpointing): the peak
// never falls when the micro-batch, the sequence or the image grows; checkpointing raises it by
// at most one block input (a vision network's by at most the replay of one stage: largest_stage_replay); a
// larger GPU never makes the verdict worse nor the largest micro-batch smaller.
// The runs come from a fixed seed, so a failure names a run that fails again.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>

#include "memscale/gpus.hpp"
#include "memscale/planner.hpp"
#include "memscale/presets.hpp"
#include "memscale/vision/planner.hpp"
#include "memscale/vision/presets.hpp"

namespace random_run_properties_test {
namespace {

using namespace memscale;

// At least this many runs of each kind are checked (invalid random combinations excepted).
constexpr int transformer_runs = 1400;
constexpr int vision_runs = 600;

class random_source {
 public:
  std::uint64_t between(std::uint64_t lo, std::uint64_t hi) {
    return lo + static_cast<std::uint64_t>(engine_() % (hi - lo + 1));  // the modulo bias does not matter here
  }
  template <class T, std::size_t N>
  T one_of(const std::array<T, N>& values) {
    return values[static_cast<std::size_t>(between(0, N - 1))];
  }
  bool coin() { return between(0, 1) == 1; }

 private:
  std::mt19937_64 engine_{0x6d656d7363616c65ULL};
};

constexpr std::array precisions{precision::fp32, precision::amp_fp16, precision::amp_bf16, precision::pure_bf16,
                                precision::pure_fp16};
constexpr std::array optimizers{optimizer_kind::sgd,   optimizer_kind::sgd_momentum, optimizer_kind::adam,
                                optimizer_kind::adamw, optimizer_kind::adamw_8bit,   optimizer_kind::adafactor,
                                optimizer_kind::lion};
constexpr std::array attentions{attention_impl::eager, attention_impl::sdpa_math, attention_impl::flash};
constexpr std::array targets{training_target::full, training_target::lora, training_target::qlora};

// A peak as compared here: the device total (what a plan compares) and the tensor bytes
// (max_memory_allocated), each the larger of step 1 and the steady state.
struct peak_pair {
  bytes device{};
  bytes tensor{};
};

peak_pair peak_of(const estimate_result& e) {
  return {overall_peak(e).device, e.first_step.tensor > e.steady.tensor ? e.first_step.tensor : e.steady.tensor};
}

// What replaying one checkpointed stage can hold at once: every tensor its forward creates
// plus its largest temporary. torch.utils.checkpoint replays a stage's forward when the
// stage's backward starts (torch/utils/checkpoint.py, _checkpoint_without_reentrant), while
// the gradients of the stages after it are alive; a forward temporary that plain training
// frees before any gradient exists then comes on top of them. So where a network's
// activations are small next to its gradients (a ViT on small images), checkpointing raises
// the peak of the real run, by at most one stage's replay; the property allows that and no more.
bytes largest_stage_replay(const vision::layer_graph& g) {
  std::array<bytes, vision::stage_capacity> created{};
  std::array<bytes, vision::stage_capacity> temporary{};
  for (std::size_t i = 0; i < g.size; ++i) {
    const auto s = g.stage[i];
    if (s == 0) continue;
    created[s] += g.ops[i].out + g.ops[i].extra_saved;
    temporary[s] = temporary[s] > g.ops[i].fwd_temp ? temporary[s] : g.ops[i].fwd_temp;
  }
  bytes largest{};
  for (std::size_t s = 0; s < created.size(); ++s)
    if (created[s] + temporary[s] > largest) largest = created[s] + temporary[s];
  return largest;
}

int rank_of(verdict v) { return v == verdict::fits ? 0 : v == verdict::borderline ? 1 : 2; }

std::string describe(const training_spec& t) {
  std::ostringstream s;
  s << "micro-batch " << t.micro_batch << " seq " << t.seq_len << " " << to_string(t.prec) << " "
    << to_string(t.optimizer) << " ckpt " << to_string(t.ckpt) << " attention " << to_string(t.attention) << " target "
    << static_cast<int>(t.target) << " rank " << t.lora_rank << " dropout " << t.dropout;
  return s.str();
}

training_spec random_run(random_source& r, std::uint64_t max_seq) {
  training_spec t{};
  t.micro_batch = r.between(1, 24);
  t.seq_len = r.between(16, max_seq);
  t.prec = r.one_of(precisions);
  t.optimizer = r.one_of(optimizers);
  t.attention = r.one_of(attentions);
  t.ckpt = r.coin() ? checkpointing::full : checkpointing::none;
  t.dropout = r.coin();
  t.target = r.one_of(targets);
  if (t.target != training_target::full) t.lora_rank = r.between(1, 64);
  return t;
}

// The budget property for one run: VRAM from `small` to twice as much, the plan's verdict
// never worse, its largest micro-batch never smaller.
template <class Plan>
void check_budget(const Plan& plan_on, std::uint64_t small, const std::string& what) {
  const plan_result a = plan_on(custom_gpu(bytes{small}));
  const plan_result b = plan_on(custom_gpu(bytes{small * 2}));
  INFO(what << "; VRAM " << small << " then " << 2 * small);
  CHECK(rank_of(b.v) <= rank_of(a.v));
  CHECK(b.max_micro_batch >= a.max_micro_batch);
}

}  // namespace

TEST_CASE("random transformer runs: peak monotone in micro-batch and sequence, checkpointing raises it by one "
          "block input at most, "
          "a larger GPU never worsens the verdict",
          "[planner][property]") {
  random_source r;
  int checked = 0;
  int attempts = 0;
  while (checked < transformer_runs) {
    REQUIRE(++attempts < 4 * transformer_runs);  // invalid random combinations stay a minority
    const model_spec& model = r.one_of(presets::all);
    const std::uint64_t context = model.max_positions > 0 ? model.max_positions : 4096;
    const std::uint64_t max_seq = context < 2048 ? context : 2048;
    training_spec run = random_run(r, max_seq - 16);
    try {
      static_cast<void>(estimate(model, run));
    } catch (const error&) {
      continue;  // e.g. QLoRA with a precision it cannot run
    }
    ++checked;
    const std::string what = std::string(model.name) + " " + describe(run);
    INFO(what);
    const peak_pair base = peak_of(estimate(model, run));

    training_spec larger_batch = run;
    larger_batch.micro_batch += r.between(1, 8);
    const peak_pair by_batch = peak_of(estimate(model, larger_batch));
    INFO("micro-batch " << larger_batch.micro_batch);
    CHECK(base.device <= by_batch.device);
    CHECK(base.tensor <= by_batch.tensor);

    training_spec longer = run;
    longer.seq_len = std::min<std::uint64_t>(max_seq, run.seq_len + r.between(1, run.seq_len));
    const peak_pair by_seq = peak_of(estimate(model, longer));
    INFO("seq " << longer.seq_len);
    CHECK(base.device <= by_seq.device);
    CHECK(base.tensor <= by_seq.tensor);

    training_spec plain = run;
    plain.ckpt = checkpointing::none;
    training_spec checkpointed = run;
    checkpointed.ckpt = checkpointing::full;
    const peak_pair without = peak_of(estimate(model, plain));
    const peak_pair with = peak_of(estimate(model, checkpointed));
    // Checkpointing can raise the peak by one block input: where the bottom block's backward, with
    // every gradient made, is the peak, its recomputed saves are plain training's, and beside them
    // its checkpoint keeps the input that no op of the block saves (checkpoint_input_unsaved).
    const model_graph built = build(model, checkpointed);
    const bytes kept_input = built.is_encoder_decoder()
                                 ? bytes{}
                                 : checkpoint_input_unsaved(built.stack(), block_of(built.stack()), built.run);
    CHECK(with.device <= without.device + round_up(kept_input, cuda_round_large));
    CHECK(with.tensor <= without.tensor + kept_input);

    if (checked % 12 == 0) {
      // A GPU around the run's own peak, where verdicts change (every twelfth run: a plan replays
      // each run it weighs through the caching allocator).
      const std::uint64_t small = base.device.value / 2 + r.between(0, base.device.value);
      check_budget([&](const gpu_spec& gpu) { return make_plan(model, run, gpu); }, small, what);
    }
  }
}

TEST_CASE("random vision runs: peak monotone in batch and image size, checkpointing saves activations and "
          "raises the peak by at most one stage's replay, a larger GPU never worsens the verdict",
          "[vision][planner][property]") {
  constexpr std::array vision_precisions{precision::fp32, precision::amp_fp16, precision::amp_bf16};
  random_source r;
  for (int i = 0; i < vision_runs; ++i) {
    vision::vision_spec model = r.one_of(vision::presets::all);
    model.image_height = model.image_width = 32 * r.between(2, 12);
    training_spec run{};
    run.micro_batch = r.between(1, 32);
    run.seq_len = 1;
    run.prec = r.one_of(vision_precisions);
    run.optimizer = r.one_of(optimizers);
    run.ckpt = r.coin() ? checkpointing::full : checkpointing::none;
    const std::string what = std::string(model.name) + " " + std::to_string(model.image_height) + " px " + describe(run);
    INFO(what);
    const peak_pair base = peak_of(vision::estimate(model, run));

    training_spec larger_batch = run;
    larger_batch.micro_batch += r.between(1, 8);
    const peak_pair by_batch = peak_of(vision::estimate(model, larger_batch));
    CHECK(base.device <= by_batch.device);
    CHECK(base.tensor <= by_batch.tensor);

    vision::vision_spec larger_image = model;
    larger_image.image_height = larger_image.image_width = model.image_height + 32 * r.between(1, 4);
    const peak_pair by_image = peak_of(vision::estimate(larger_image, run));
    CHECK(base.device <= by_image.device);
    CHECK(base.tensor <= by_image.tensor);

    training_spec plain = run;
    plain.ckpt = checkpointing::none;
    training_spec checkpointed = run;
    checkpointed.ckpt = checkpointing::full;
    const estimate_result without = vision::estimate(model, plain);
    const estimate_result with = vision::estimate(model, checkpointed);
    CHECK(with.saved_activation_bytes <= without.saved_activation_bytes);
    const bytes replay = largest_stage_replay(vision::build_graph(model, checkpointed));
    CHECK(peak_of(with).tensor <= peak_of(without).tensor + replay);
    CHECK(peak_of(with).device <= peak_of(without).device + replay + cuda_round_large);

    if (i % 4 == 0) {
      const std::uint64_t small = base.device.value / 2 + r.between(0, base.device.value);
      check_budget([&](const gpu_spec& gpu) { return vision::make_plan(model, run, gpu); }, small, what);
    }
  }
}

}  // namespace random_run_properties_test
