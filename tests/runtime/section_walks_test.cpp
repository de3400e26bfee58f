// The estimate walks each section forward once (forward_walk: saved bytes, the checkpoint's
// input, the cache, the peak and the peak before the loss) and backward once with one count of
// the alive tensors (section_backward_peak). Property: on many runs every figure equals the
// separate walk that defines it (section_saved_bytes, section_cache_bytes, section_forward_peak;
// the backward walk as it was before, written here), so the folded walks cannot drift; and the
// unchecked walks (detail::unchecked_bytes, taken where estimate/walk_bound.hpp's bound holds, as it
// does on every run here) give the checked ones' figures.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <array>
#include <cstdint>
#include <iterator>
#include <random>

#include "memscale/memscale.hpp"

namespace section_walks_test {
namespace {

using namespace memscale;

// Outputs and extra saved tensors counted apart, each op's gradient computed where it is used.
backward_profile backward_peak_alone(const graph& g, section s, const training_spec& run, bool grads_persist,
                                     bytes carried_grad) {
  const std::size_t n = s.end - s.begin;
  const dtype trainable = precision_policy_of(run).trainable;
  std::array<std::uint64_t, graph_capacity> out_released_at{};
  bytes alive_outputs{};
  bytes alive_extra{};
  for (std::size_t i = s.begin; i < s.end; ++i) {
    const op& o = g.ops[i];
    alive_extra += o.extra_saved;
    if (o.released_by == not_kept || dropped_by_selective(o, run)) continue;
    const auto k = o.released_by.index() - s.begin;
    if (k >= n) continue;
    out_released_at[k] += o.out.value;
    alive_outputs += o.out;
  }
  std::array<std::uint64_t, graph_capacity> waiting_from{};
  std::array<std::uint64_t, graph_capacity> waiting_until{};
  for (std::size_t w = 0; w < g.waiting_count; ++w) {
    const waiting_gradient& wg = g.waiting[w];
    if (wg.used_by < s.begin || wg.made_by >= s.end) continue;
    waiting_from[wg.made_by - 1 - s.begin] += wg.size.value;
    waiting_until[wg.used_by - s.begin] += wg.size.value;
  }
  bytes waiting{};
  backward_profile result{};
  bytes grads_after{};
  for (std::size_t k = n; k-- > 0;) {
    const op& o = g.ops[s.begin + k];
    const bytes own_grad = op_gradient_bytes(o, trainable);
    const bytes grad_out = o.grad_out.value != 0 ? o.grad_out : o.out;
    const bytes created = grads_persist ? own_grad : grads_after + own_grad;
    waiting += bytes{waiting_from[k]};
    const bytes live = alive_outputs + alive_extra + grad_out + o.grad_in + o.bwd_temp + waiting + carried_grad + created;
    if (live > result.peak) result = {live, created};
    grads_after += own_grad;
    alive_outputs -= bytes{out_released_at[k]};
    alive_extra -= o.extra_saved;
    waiting -= bytes{waiting_until[k]};
  }
  return result;
}

training_spec random_run(std::mt19937_64& rng) {
  auto pick = [&](std::uint64_t n) { return rng() % n; };
  training_spec r{};
  r.micro_batch = 1 + pick(8);
  r.seq_len = 16 * (1 + pick(32));  // bert-base-uncased: at most 512
  r.prec = static_cast<precision>(pick(5));
  r.ckpt = static_cast<checkpointing>(pick(3));
  r.attention = static_cast<attention_impl>(pick(3));
  if (pick(3) == 0) {
    r.target = training_target::lora;
    r.lora_rank = 1 + pick(64);
    r.lora_targets = static_cast<lora_modules>(1 + pick(127));
  }
  r.use_cache = static_cast<cache_setting>(pick(3));
  return r;
}

}  // namespace

TEST_CASE("the folded section walks equal the walks of one figure each", "[estimate][property]") {
  const model_spec models[] = {presets::gpt2,      presets::bert_base_uncased, presets::llama_2_7b,
                               presets::llama_3_8b, presets::mixtral_8x7b,     presets::qwen2_5_7b};
  std::mt19937_64 rng(20261129);
  int with_loss = 0;
  int with_selective = 0;
  for (int i = 0; i < 600; ++i) {
    const model_spec& model = models[static_cast<std::size_t>(i) % std::size(models)];
    const model_graph built = build(model, random_run(rng));
    const training_spec& run = built.run;
    const graph& g = built.stack();
    INFO(model.name << " run " << i);
    REQUIRE(detail::walk_sums_fit(g, run));
    with_selective += run.ckpt == checkpointing::selective ? 1 : 0;
    for (const section s : {prologue_of(g), block_of(g), epilogue_of(g)}) {
      const section head = until_loss(g, s);
      with_loss += head.end != s.end ? 1 : 0;
      for (const bool held : {false, true}) {
        for (const bool saving : {false, true}) {
          const forward_pass f = forward_walk(g, s, run, held, saving);
          CHECK(f.peak == section_forward_peak(g, s, run, held, saving));
          CHECK(f.peak_before_loss == section_forward_peak(g, head, run, held, saving));
          CHECK(f.saved == section_saved_bytes(g, s, run, false));
          CHECK(f.checkpoint_saved == section_saved_bytes(g, s, run, true));
          CHECK(f.cache == section_cache_bytes(g, s));
          const forward_pass unchecked = forward_walk<detail::unchecked_bytes>(g, s, run, held, saving);
          CHECK(unchecked.saved == f.saved);
          CHECK(unchecked.checkpoint_saved == f.checkpoint_saved);
          CHECK(unchecked.cache == f.cache);
          CHECK(unchecked.peak == f.peak);
          CHECK(unchecked.peak_before_loss == f.peak_before_loss);
        }
      }
      for (const bool persist : {false, true}) {
        const backward_profile folded = section_backward_peak(g, s, run, persist, g.stream_grad);
        const backward_profile alone = backward_peak_alone(g, s, run, persist, g.stream_grad);
        CHECK(folded.peak == alone.peak);
        CHECK(folded.grads_at_peak == alone.grads_at_peak);
        const backward_profile unchecked =
            section_backward_peak<detail::unchecked_bytes>(g, s, run, persist, g.stream_grad);
        CHECK(unchecked.peak == folded.peak);
        CHECK(unchecked.grads_at_peak == folded.grads_at_peak);
      }
    }
  }
  // The runs reach a loss op (the epilogue's, where the model has one) and selective
  // checkpointing's dropped tensors.
  CHECK(with_loss > 0);
  CHECK(with_selective > 0);
}

}  // namespace section_walks_test
