// memscale/validate.hpp: the one check that a model and a run agree with each other.
//
// Every path that pairs a model with a run (build_graph, hence estimate and the planner;
// --cases records; --config; the run options) reaches it, so a contradiction such as a
// sequence longer than the model takes is refused with the same message everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "memscale/error.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale {
namespace detail {

// Not constexpr on purpose (see error.hpp): "<field> must be <= <what>, <limit> (got <value>)".
[[noreturn]] inline void fail_above(error_code code, std::string_view field, std::string_view what, std::uint64_t limit,
                                    std::uint64_t got) {
  throw error(code, std::string(field) + " must be <= " + std::string(what) + ", " + std::to_string(limit) + " (got " +
                        std::to_string(got) + ")");
}

}  // namespace detail

constexpr const model_spec& validate(const model_spec& m, const training_spec& t) {
  validate(m);
  validate(t);
  constexpr auto bad = error_code::invalid_run;
  if (m.context_length != 0 && t.seq_len > m.context_length)
    detail::fail_above(bad, "run.seq_len", "the model's max_position_embeddings", m.context_length, t.seq_len);
  // A learned position table has no row for a later position (nn.Embedding index error).
  if (m.positions == position_kind::learned && t.seq_len > m.max_positions)
    detail::fail_above(bad, "run.seq_len", "the model's learned position table", m.max_positions, t.seq_len);
  return m;
}

}  // namespace memscale
