// memscale-plan --run FILE (see run_file.hpp and docs/run-json.md). The reader and writer
// are the library's (memscale/json/run_document.hpp), shared with the web calculator.
#include "run_file.hpp"

#include <string>
#include <utility>

#include "memscale/json.hpp"
#include "memscale/json/inference_report.hpp"
#include "option_groups.hpp"

namespace memscale_plan {

using nlohmann::json;

memscale::json_io::run_input run_input_of(const options& o) {
  return {.model = o.model,
          .run = o.run,
          .model_description = o.model_description,
          .vision = o.vision.model,
          .gpu = o.gpu,
          .custom_gpu = o.custom_gpu,
          .headroom = o.headroom,
          .lora_alpha = o.lora_alpha,
          .alloc_conf = o.alloc_conf,
          .context_memory = o.context_memory};
}

std::string read_text_file(const std::string& option, const std::string& path) {
  // The library's reader: a regular file only, at most 64 MiB, errors naming the file.
  return memscale::json_io::read_input_file(path, option + " " + path_in_quotes(path));
}

namespace {

// A document's "infer" as the --inference flags would give it: inference_command builds the same
// call from them, and options after --run override it.
void read_inference_run(const json& doc, const std::string& source, options& out) {
  memscale::json_io::inference_input in{.model = out.model,
                                        .model_description = out.model_description,
                                        .spec = out.inference.spec,
                                        .gpu = out.gpu,
                                        .custom_gpu = out.custom_gpu,
                                        .headroom = out.headroom,
                                        .alloc_conf = out.alloc_conf,
                                        .context_memory = out.context_memory};
  try {
    memscale::json_io::read_inference_document(doc, in);
  } catch (const memscale::error& e) {
    throw usage_error(source + ": " + e.what());
  } catch (const json::exception& e) {
    throw usage_error(source + ": " + e.what());
  }
  const memscale::inference_spec& spec = in.spec;
  out.model = in.model;
  out.model_description = std::move(in.model_description);
  out.inference.enabled = true;
  out.inference.spec = spec;
  out.stack.clear();  // a --stack before the document is replaced by its software
  out.inference.weights_given = true;
  out.inference.gpt_fast = spec.loop == memscale::generate_loop::gpt_fast;
  const bool quantized = spec.cache == memscale::kv_cache_kind::quantized;
  out.inference.kv_dtype_given = quantized || spec.kv != spec.compute;
  out.inference.kv_dtype = quantized ? "int" + std::to_string(spec.kv_bits) : std::string(memscale::to_string(spec.kv));
  out.run.micro_batch = spec.batch;
  out.run.attention = spec.attention;
  out.run.flash_attention_2 = spec.flash_attention_2;
  out.gpu = std::move(in.gpu);
  out.custom_gpu = in.custom_gpu;
  out.headroom = in.headroom;
  out.alloc_conf = std::move(in.alloc_conf);
  out.context_memory = in.context_memory;
  out.vision.model.reset();
  out.run_source = source;
}

}  // namespace

void read_run_document(const json& doc, const std::string& source, options& out) {
  bool inference = false;
  try {
    inference = memscale::json_io::is_inference_document(doc);  // refuses "run" beside "infer"
  } catch (const memscale::error& e) {
    throw usage_error(source + ": " + e.what());
  }
  if (inference) {
    read_inference_run(doc, source, out);
    return;
  }
  memscale::json_io::run_input in = run_input_of(out);
  try {
    memscale::json_io::read_run_document(doc, in);  // `in` changes only when the whole document is valid
  } catch (const memscale::error& e) {
    throw usage_error(source + ": " + e.what());
  } catch (const usage_error& e) {
    throw usage_error(source + ": " + e.what());
  } catch (const json::exception& e) {
    throw usage_error(source + ": " + e.what());
  }
  out.model = in.model;
  out.run = in.run;
  out.loss_given = doc.contains("run") && memscale::json_io::states_loss(doc.at("run"), "loss");
  out.loss.reset();  // a --loss, --loss-chunk or --loss-chunks before the document is replaced by it
  out.loss_chunk = 0;
  out.loss_chunks = 0;
  out.gpu = std::move(in.gpu);
  out.custom_gpu = in.custom_gpu;
  out.headroom = in.headroom;
  out.lora_alpha = in.lora_alpha;
  out.alloc_conf = in.alloc_conf;
  out.context_memory = in.context_memory;
  // The document's model replaces a --model given before it; a vision document's image and
  // memory format replace --image and --channels-last given before it (options after it override).
  out.vision = {};
  if (in.vision) {
    out.vision.model = in.vision;
    out.vision.name = in.model_description.get<std::string>();
  } else {
    out.model_description = std::move(in.model_description);
  }
  out.run_source = source;
}

void read_run_file(const std::string& path, options& o) {
  const std::string source = "--run " + path_in_quotes(path);
  const std::string text = read_text_file("--run", path);
  json doc;
  try {
    doc = memscale::json_io::parse_document(text, source);
  } catch (const memscale::error& e) {
    throw usage_error(e.what());
  }
  read_run_document(doc, source, o);
}

json run_document(const options& o) { return memscale::json_io::run_document_json(run_input_of(o)); }

}  // namespace memscale_plan
