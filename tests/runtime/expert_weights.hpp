// What a generate() run holds for a MoE model's experts, for the tests of quantised experts:
// a served run at a transformers release, Scout's language model, and the expert matrices' bytes
// as served against the same in the compute dtype.
#pragma once

#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>

#include "memscale/inference.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "test_inputs.hpp"

namespace memscale_test {

inline memscale::inference_spec served(memscale::weight_format format, std::uint32_t transformers_version) {
  memscale::inference_spec r{.batch = 1, .context = 128, .new_tokens = 2, .compute = memscale::dtype::bf16,
                             .weights = format};
  r.transformers_version = transformers_version;
  return r;
}

// Scout's language model alone (Llama4ForCausalLM).
inline memscale::model_spec scout_text() {
  std::ifstream file(config_path("meta-llama--Llama-4-Scout-17B-16E"));
  REQUIRE(file.good());
  memscale::json_io::json text = memscale::json_io::json::parse(file).at("text_config");
  text["model_type"] = "llama4_text";
  return memscale::json_io::model_from_hf_config(text);
}

struct expert_bytes {
  memscale::bytes stored{};   // the expert matrices as served
  memscale::bytes sixteen{};  // the same and their biases in the compute dtype
  std::size_t matrices = 0;
};

inline expert_bytes served_experts(const memscale::model_spec& m, const memscale::inference_spec& r) {
  const auto g = std::make_unique<memscale::model_graph>(memscale::detail::inference_weights_graph(m, r));
  const memscale::graph& s = g->stack();
  expert_bytes out;
  for (std::size_t i = s.block_begin; i < s.block_end; ++i) {
    const memscale::op& o = s.ops[i];
    if (o.kind != memscale::op_kind::linear || o.role != memscale::param_role::matmul || o.weight.count <= 1) continue;
    out.stored += memscale::inference_op_weight_bytes(s, i, r) * memscale::repeats_of(s, i);
    out.sixteen += memscale::storage(r.compute, o.weight.elements() + o.bias.elements()) * memscale::repeats_of(s, i);
    ++out.matrices;
  }
  return out;
}

}  // namespace memscale_test
