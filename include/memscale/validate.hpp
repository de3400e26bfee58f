// memscale/validate.hpp: the one check that a model and a run agree with each other.
//
// Every path that pairs a model with a run (build(), hence estimate and the planner;
// --cases records; --config; --run files; the run options) reaches check_sequence, so a
// contradiction such as a sequence longer than the model takes is refused by the same
// rule, with the same words, naming the field as the user typed it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "memscale/error.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale {

// The longest sequence a model takes: its max_position_embeddings (model_spec::
// context_length) and, with learned positions, its table (nn.Embedding has no row for a
// later position); 0 when neither limits it (ALiBi, T5's relative buckets).
struct sequence_limit {
  std::uint64_t tokens = 0;
  bool learned_table = false;  // the table, not max_position_embeddings, is the limit
};

constexpr sequence_limit sequence_limit_of(const model_spec& m) {
  sequence_limit l{.tokens = m.context_length};
  if (m.positions == position_kind::learned && m.max_positions > 0 && (l.tokens == 0 || m.max_positions < l.tokens))
    l = {.tokens = m.max_positions, .learned_table = true};
  return l;
}

namespace detail {

// Not constexpr on purpose (see error.hpp).
[[noreturn]] inline void fail_sequence(std::string_view field, const model_spec& m, sequence_limit l, std::uint64_t got) {
  throw error(error_code::invalid_run, std::string(field) + " must be <= " + std::to_string(l.tokens) + " (the " +
                                           (l.learned_table ? "learned position table" : "max_position_embeddings") +
                                           " of " + std::string(m.name) + ") (got " + std::to_string(got) + ")");
}

}  // namespace detail

// Refuses `seq_len` tokens for `m`, naming `field` (--seq, train.seq, run.seq_len).
constexpr void check_sequence(const model_spec& m, std::uint64_t seq_len, std::string_view field) {
  const sequence_limit l = sequence_limit_of(m);
  if (l.tokens != 0 && seq_len > l.tokens) detail::fail_sequence(field, m, l, seq_len);
}

// Refuses a prompt and the tokens generated after it when together they exceed what `m`
// takes (or 2^64), naming `field` (--context + --new-tokens).
constexpr void check_sequence(const model_spec& m, std::uint64_t prompt, std::uint64_t generated,
                              const char* field) {
  check_sequence(m, detail::checked_add(prompt, generated, detail::quantity{field}), field);
}

// A framework runs its own model code: lit-gpt's scripts build lit-gpt's GPT (as_litgpt_model),
// torchtune's recipes its builders, which have the Hugging Face layout (separate q, k, v).
constexpr void check_framework(const model_spec& m, const training_spec& t) {
  if (t.framework != framework_kind::hf && (m.arch != architecture::decoder || !has_attention(m)))
    detail::fail(error_code::unsupported, "run.framework",
                 "litgpt and torchtune are modelled for decoder-only transformers (their recipes' GPT and "
                 "TransformerDecoder)");
  if (t.framework == framework_kind::litgpt && m.impl != implementation::litgpt)
    detail::fail(error_code::invalid_run, "run.framework",
                 "litgpt needs the model as lit-gpt builds it (model.impl litgpt; --framework litgpt converts a preset)");
  if (t.framework == framework_kind::torchtune && m.impl != implementation::hf_transformers)
    detail::fail(error_code::invalid_run, "run.framework",
                 "torchtune builds its own models (separate q, k, v projections), not lit-gpt's: model.impl must not be litgpt");
}

constexpr const model_spec& validate(const model_spec& m, const training_spec& t) {
  validate(m);
  validate(t);
  check_sequence(m, t.seq_len, "run.seq_len");
  check_framework(m, t);
  // LoRA targets name attention and MLP projections; a Mamba mixer's (in_proj, x_proj, dt_proj,
  // out_proj) are not among them, so an adapter run would train nothing: refused by name.
  if (is_lora(t))
    require_attention_mixer(m, "is mamba1 (a state-space stack): LoRA on its mixer projections is not modelled yet");
  return m;
}

}  // namespace memscale
