// memscale/validate.hpp: the one check that a model and a run agree with each other.
//
// Every path that pairs a model with a run (build_graph, hence estimate and the planner;
// --cases records; --config; the run options) reaches it, so a contradiction such as a
// sequence longer than the model takes is refused the same way everywhere.
#pragma once

#include "memscale/error.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale {

constexpr const model_spec& validate(const model_spec& m, const training_spec& t) {
  using detail::require;
  validate(m);
  validate(t);
  constexpr auto bad = error_code::invalid_run;
  require(m.context_length == 0 || t.seq_len <= m.context_length, bad, "run.seq_len",
          "must be <= the model's max_position_embeddings (model.context_length)", t.seq_len);
  // A learned position table has no row for a later position (nn.Embedding index error).
  require(m.positions != position_kind::learned || t.seq_len <= m.max_positions, bad, "run.seq_len",
          "must be <= the model's learned position table (model.max_positions)", t.seq_len);
  return m;
}

}  // namespace memscale
