// memscale web calculator: the WebAssembly side of web/index.html.
//
// The page builds a run document (docs/run-json.md) from its controls and calls
// memscale_report(); the answer is the report memscale-plan --run FILE --json prints for
// that document, built by the same library code (memscale/json/run_report.hpp), plus the
// OOM cliff. Everything runs in the browser; nothing leaves it.
#include <emscripten/emscripten.h>

#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "memscale/error.hpp"
#include "memscale/gpus.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/json/inference_report.hpp"
#include "memscale/json/run_document.hpp"
#include "memscale/json/run_report.hpp"
#include "memscale/json/vision_document.hpp"
#include "memscale/json/vision_report.hpp"
#include "memscale/presets.hpp"
#include "memscale/validate.hpp"
#include "memscale/vision/presets.hpp"
#include "memscale/vision/timm_presets.hpp"

namespace {

using nlohmann::json;

// memscale-plan's dump: two-space indent, invalid UTF-8 replaced, a final newline.
std::string dump(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n"; }

// The answer lives until the next call (the page copies it at once).
std::string answer;

const char* reply(const json& j) {
  answer = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return answer.c_str();
}

const char* failure(const std::string& message) { return reply({{"ok", false}, {"error", message}}); }

// A vision model's entry: its description (json_io::vision_model_json) under the name a run
// document looks it up by.
json vision_entry(const memscale::vision::vision_spec& m) {
  json j = memscale::json_io::vision_model_json(m);
  j["name"] = memscale::json_io::vision_lookup_name(m);
  return j;
}

}  // namespace

extern "C" {

// {"models": [{"name", "parameters", "layers", "hidden", "heads", "max_seq_len" (0: no limit)}],
//  "vision_models": [{"name", "source", "family", "classes", "image", "channels_last", "parameters"}],
//  "gpus": [{"name", "label", "memory", "bf16"}], "headroom": {"min", "max", "default"}}.
EMSCRIPTEN_KEEPALIVE const char* memscale_catalog() {
  json models = json::array();
  for (const auto& m : memscale::presets::all)
    models.push_back({{"name", std::string(m.name)},
                      {"parameters", memscale::parameter_count(m)},
                      {"layers", m.layers},
                      {"hidden", m.hidden},
                      {"heads", m.heads},
                      {"max_seq_len", memscale::sequence_limit_of(m).tokens}});
  json vision_models = json::array();
  for (const auto& m : memscale::vision::presets::all) vision_models.push_back(vision_entry(m));
  for (const auto& m : memscale::vision::timm_presets::all) vision_models.push_back(vision_entry(m));
  json gpus = json::array();
  for (const auto& g : memscale::gpu_catalog)
    gpus.push_back({{"name", std::string(g.name)}, {"label", std::string(g.label)}, {"memory", g.memory.value},
                    {"bf16", g.bf16}});
  return reply({{"models", models},
                {"vision_models", vision_models},
                {"gpus", gpus},
                {"headroom",
                 {{"min", memscale::min_headroom}, {"max", memscale::max_headroom}, {"default", memscale::default_headroom}}}});
}

// `model`: a run document's "model" (a preset name, a model object, {"hf_config": {...}}).
// Answers {"ok": true, "name", "parameters", "layers", "hidden", "max_seq_len"}, for a vision
// model {"ok": true, "vision": {...}} (its catalog entry), or an error.
EMSCRIPTEN_KEEPALIVE const char* memscale_model(const char* model) {
  try {
    const json description = memscale::json_io::parse_document(model, "the model");
    if (description.is_string())
      if (const auto vision = memscale::vision::presets::find(description.get<std::string>()))
        return reply({{"ok", true}, {"vision", vision_entry(*vision)}});
    const json doc = {{"model", description}, {"run", {{"seq_len", 1}}}};
    memscale::json_io::run_input in;
    memscale::json_io::read_run_document(doc, in);
    return reply({{"ok", true},
                  {"name", std::string(in.model.name)},
                  {"parameters", memscale::parameter_count(in.model)},
                  {"layers", in.model.layers},
                  {"hidden", in.model.hidden},
                  {"max_seq_len", memscale::sequence_limit_of(in.model).tokens}});
  } catch (const std::exception& e) {
    return failure(e.what());
  } catch (...) {
    return failure("internal error: unknown exception");
  }
}

// `document`: a run document. Answers {"ok": true, "report": TEXT, "cliff": {...}} where
// TEXT is exactly memscale-plan's --json output for the document (for an "infer" document, one
// describing generate(), the inference report and no cliff; for a vision model on a GPU, its
// report and its cliff, json/vision_report.hpp), or {"ok": false, "error": "one line naming the field"}.
EMSCRIPTEN_KEEPALIVE const char* memscale_report(const char* document) {
  try {
    const json doc = memscale::json_io::parse_document(document, "the run");
    if (memscale::json_io::is_inference_document(doc)) {  // generate(): no cliff (one plan per batch is too slow here)
      memscale::json_io::inference_input call;
      memscale::json_io::read_inference_document(doc, call);
      const memscale::json_io::inference_report report = memscale::json_io::report_inference(call);
      return reply({{"ok", true}, {"report", dump(memscale::json_io::inference_report_json(call.model, report, call.alloc_conf))}});
    }
    memscale::json_io::run_input in;
    memscale::json_io::read_run_document(doc, in);
    // A torchvision or timm model: its report (json/vision_report.hpp), and on a GPU its plan and its cliff.
    if (in.vision) {
      const memscale::json_io::vision_outcome outcome = memscale::json_io::vision_outcome_of(in);
      const json report = memscale::json_io::vision_report_json(in, outcome);
      if (!outcome.plan) return reply({{"ok", true}, {"report", dump(report)}});
      return reply({{"ok", true},
                    {"report", dump(report)},
                    {"cliff", memscale::json_io::vision_cliff_json(in, *memscale::json_io::gpu_of(in), *outcome.plan)}});
    }
    const memscale::estimate_result result = memscale::json_io::estimate_run(in);
    const std::optional<memscale::gpu_spec> gpu = memscale::json_io::gpu_of(in);
    // An FSDP2 run (torchtitan, torchtune over several GPUs) is its own layout and policy: no plan
    // and no cliff, only the replay against the GPU's budget (as memscale-plan's report, examples/plan/main.cpp).
    if (!gpu || memscale::runs_fsdp2(in.run))
      return reply({{"ok", true}, {"report", dump(memscale::json_io::run_report_json(in, result, nullptr))}});
    const memscale::plan_result plan = memscale::json_io::plan_run(in, *gpu);
    return reply({{"ok", true},
                  {"report", dump(memscale::json_io::run_report_json(in, result, &plan))},
                  {"cliff", memscale::json_io::cliff_json(in, *gpu, plan)}});
  } catch (const std::exception& e) {
    return failure(e.what());
  } catch (...) {
    return failure("internal error: unknown exception");
  }
}

}  // extern "C"
