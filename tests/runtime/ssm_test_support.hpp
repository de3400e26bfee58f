// What the state-space tests (mamba, mamba2, jamba, falcon_h1) read: the SSM configs, the
// CPU-traced records of docs/data/cpu_traced_ssm.json and the band they are held to, and one
// block's saved bytes.
#pragma once

#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace memscale_test {

inline std::string ssm_config(const std::string& name) {
  return std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/ssm-multimodal/" + name + ".json";
}

inline memscale::json_io::json ssm_records() {
  return memscale::json_io::json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_ssm.json"));
}

inline memscale::json_io::json ssm_record(const std::string& id) {
  for (const memscale::json_io::json& r : ssm_records())
    if (r.at("id") == id) return r;
  FAIL("no record " << id);
  return {};
}

// Checks the CPU-traced records of the given model types against the band of a modelled
// layer kind (each within +-5%, the median within 2%) and returns how many there were.
inline std::size_t check_ssm_records_within_band(std::initializer_list<std::string_view> model_types) {
  std::vector<double> errors;
  for (const memscale::json_io::json& r : ssm_records()) {
    const std::string type = r.at("model").at("hf_config").at("model_type").get<std::string>();
    if (std::find(model_types.begin(), model_types.end(), type) == model_types.end()) continue;
    const memscale::json_io::json e = memscale::json_io::estimate_record(r);
    INFO(r.at("id").get<std::string>() << ": " << e.dump());
    REQUIRE(e.contains("estimated_bytes"));
    const double measured = r.at("measured_bytes").get<double>();
    const double err = (e.at("estimated_bytes").get<double>() - measured) / measured * 100.0;
    CHECK(std::abs(err) <= 5.0);
    errors.push_back(std::abs(err));
  }
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    CHECK(errors[errors.size() / 2] <= 2.0);
  }
  return errors.size();
}

// The saved bytes of one repeated block (op_saved_bytes over the block section).
inline std::uint64_t block_saved_bytes(const memscale::model_spec& m, const memscale::training_spec& run) {
  const auto g = std::make_unique<memscale::graph>(memscale::build(m, run).stack());
  std::uint64_t total = 0;
  for (std::size_t i = g->block_begin; i < g->block_end; ++i) total += memscale::op_saved_bytes(g->ops[i]).value;
  return total;
}

// The saved bytes of one state-space mixer on its own, besides its input: `mixer` (a
// graph_layers mixer, or a lambda calling one) run on a (tokens, hidden) stream tensor.
template <class Mixer>
std::uint64_t mixer_saved_bytes(const memscale::model_spec& m, const memscale::training_spec& run, Mixer mixer) {
  using namespace memscale;
  const auto g = std::make_unique<graph>();
  graph_layers::op_writer ops(*g, precision_policy_of(run), run.device);
  const std::uint64_t tokens = run.micro_batch * run.seq_len;
  const graph_layers::tensor in = ops.emit(op_kind::stream, tokens * m.hidden, ops.stream_dtype());
  mixer(graph_layers::layer_context{.ops = ops, .model = m, .run = run, .adapters = {}, .dropout = {}, .tokens = tokens}, in);
  std::uint64_t total = 0;
  for (std::size_t i = in.op_index + 1; i < g->size; ++i) total += op_saved_bytes(g->ops[i]).value;
  return total;
}

}  // namespace memscale_test
