// memscale-plan: the report of a run on a generic model (generic.hpp).
#include "generic.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

#include "memscale/fmt.hpp"
#include "memscale/generic_model.hpp"
#include "option_groups.hpp"
#include "output.hpp"

namespace memscale_plan {

const memscale::json_io::generic_checkpoint* generic_model_in_use(const options& o) {
  const auto* g = o.config.generic.get();
  if (g == nullptr) return nullptr;
  const memscale::model_spec& d = g->model.decoder;
  const bool same = o.model.name == d.name && o.model.layers == d.layers && o.model.hidden == d.hidden &&
                    o.model.vocab == d.vocab && o.model.ffn == d.ffn;
  return same ? g : nullptr;
}

namespace {

std::string checkpoint_line(const memscale::json_io::generic_checkpoint& g) {
  const auto& w = g.checkpoint.inventory;
  std::string by_dtype;
  for (std::size_t d = 0; d < memscale::stored_dtype_count; ++d) {
    const auto& t = w.of(memscale::tensor_role::parameter)[d];
    if (t.tensors == 0) continue;
    by_dtype += fmt::format("{}{} {}", by_dtype.empty() ? "" : ", ", memscale::stored_dtypes[d].name,
                            memscale::format_count(t.elements));
  }
  const auto quantized = memscale::total(w, memscale::tensor_role::quantized);
  const auto buffers = memscale::total(w, memscale::tensor_role::buffer);
  return fmt::format("checkpoint     {} safetensors file(s): {} parameters ({}); quantised storage {} tensors, {} bytes; "
                     "buffers {} tensors, {} bytes\n",
                     g.checkpoint.files.size(), memscale::format_count(memscale::parameter_elements(w)), by_dtype,
                     memscale::format_count(quantized.tensors), memscale::format_count(quantized.stored.value),
                     memscale::format_count(buffers.tensors), memscale::format_count(buffers.stored.value));
}

}  // namespace

std::string generic_report(const options& o, const memscale::json_io::generic_checkpoint& g) {
  if (o.cluster.gpus > 0 || o.inference.enabled || !o.gpu.empty() || o.custom_gpu)
    throw usage_error("--config " + path_in_quotes(o.config.source) + ": model_type " + in_quotes(g.model_type) +
                      " has no family reader; its estimate comes from the checkpoint and a generic decoder, which "
                      "--gpu, --gpu-memory, --gpus and --inference do not take yet");
  memscale::estimate_result r{};
  try {
    r = memscale::estimate(g.model, o.run);
  } catch (const memscale::error& e) {
    throw usage_error("--config " + path_in_quotes(o.config.source) + ": " + e.what());
  }
  if (o.json) {
    nlohmann::json j = json_report(o.model, o.run, r);
    j["generic"] = {{"model_type", g.model_type},
                    {"band", {memscale::band_of(memscale::generic_run_class, memscale::band_quantity::tensor).low, memscale::band_of(memscale::generic_run_class, memscale::band_quantity::tensor).high}},
                    {"notes", g.notes},
                    {"checkpoint", memscale::json_io::checkpoint_summary_json(g.checkpoint)}};
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  std::string out = text_report(o.model, o.run, r);
  out += '\n';
  out += checkpoint_line(g);
  for (std::size_t i = 0; i < g.notes.size(); ++i) out += fmt::format("{:<15}{}\n", i == 0 ? "notes" : "", g.notes[i]);
  return out;
}

}  // namespace memscale_plan
