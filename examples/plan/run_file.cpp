// memscale-plan --run FILE (see run_file.hpp and docs/run-json.md).
#include "run_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <array>
#include <span>
#include <memory>
#include <string>
#include <string_view>

#include "lora_targets.hpp"
#include "memscale/json.hpp"
#include "memscale/planner.hpp"
#include "option_groups.hpp"
#include "output.hpp"
#include "suggest.hpp"

namespace memscale_plan {
namespace {

using nlohmann::json;
using memscale::error_code;
using memscale::json_io::bad_field;

constexpr auto bad_run = error_code::invalid_run;

// Input fields of the run document, and the result fields --json adds (read back and ignored).
constexpr std::array<std::string_view, 4> document_fields{"model", "run", "gpu", "headroom"};
constexpr std::array<std::string_view, 7> result_fields{"parameters", "trainable_parameters", "breakdown", "peak",
                                                                "first_step", "static", "plan"};
constexpr std::array<std::string_view, 16> run_fields{
    "micro_batch", "seq_len", "grad_accum", "precision", "optimizer", "optimizer_impl", "checkpointing", "attention",
    "target",      "lora_rank", "lora_targets", "lora_alpha", "quant", "dropout", "device", "offload"};
constexpr std::array<std::string_view, 2> gpu_fields{"memory", "bf16"};

// Every key of `obj` must be one of `known` (or `ignored`); an unknown one is an error
// naming it and the nearest known field.
void require_known_keys(const json& obj, std::span<const std::string_view> known, const std::string& path,
                        std::span<const std::string_view> ignored = {}) {
  if (!obj.is_object()) bad_field(bad_run, path, obj, "must be a JSON object");
  for (const auto& item : obj.items()) {
    const std::string& key = item.key();
    bool found = false;
    for (auto k : known) found = found || key == k;
    for (auto k : ignored) found = found || key == k;
    if (found) continue;
    nearest_name nearest(key.size() > 64 ? std::string_view(key).substr(0, 64) : std::string_view(key));
    for (auto k : known) nearest.offer(k);
    const std::string shown_key = key.size() > 64 ? key.substr(0, 64) + "..." : key;
    throw memscale::error(bad_run, (path.empty() ? "" : path + ".") + shown_key + " is not a field of a run document" +
                                       nearest.hint());
  }
}

std::uint64_t positive(const json& obj, const char* key, const std::string& path, std::uint64_t fallback) {
  const std::uint64_t v = memscale::json_io::get_count(obj, key, path, fallback, bad_run);
  if (v == 0) bad_field(bad_run, path + "." + key, obj.at(key), "must be a positive integer");
  return v;
}

memscale::model_spec model_of(const json& m, options& o) {
  if (m.is_string()) {
    const std::string name = m.get<std::string>();
    const auto found = memscale::presets::find(name);
    if (!found) {
      nearest_name nearest(name);
      for (const auto& p : memscale::presets::all) nearest.offer(p.name);
      bad_field(error_code::invalid_model, "model", m, "must be a preset name (see --list-models)" + nearest.hint());
    }
    o.model_description = nullptr;
    return *found;
  }
  if (!m.is_object())
    bad_field(error_code::invalid_model, "model", m, "must be a preset name or a model object (docs/run-json.md)");
  const memscale::model_spec spec = memscale::json_io::model_from_record(m);
  o.model_description = m;
  return spec;
}

void read_run_object(const json& r, options& o) {
  const std::string path = "run";
  require_known_keys(r, run_fields, path);
  namespace io = memscale::json_io;
  memscale::training_spec& run = o.run;
  run.micro_batch = positive(r, "micro_batch", path, run.micro_batch);
  run.seq_len = positive(r, "seq_len", path, run.seq_len);
  run.grad_accum = positive(r, "grad_accum", path, run.grad_accum);
  const auto text = [&](const char* key) { return io::get_string(r, key, path, "", bad_run); };
  if (const auto v = text("precision"); !v.empty()) run.prec = io::parse_precision(v, path + ".precision");
  if (const auto v = text("optimizer"); !v.empty()) run.optimizer = io::parse_optimizer(v, path + ".optimizer");
  if (const auto v = text("optimizer_impl"); !v.empty())
    run.optimizer_impl = io::parse_optimizer_impl(v, path + ".optimizer_impl");
  if (const auto v = text("checkpointing"); !v.empty()) run.ckpt = io::parse_checkpointing(v, path + ".checkpointing");
  if (const auto v = text("attention"); !v.empty()) run.attention = io::parse_attention(v, path + ".attention");
  if (const auto v = text("target"); !v.empty()) {
    if (v == "full") run.target = memscale::training_target::full;
    else if (v == "lora") run.target = memscale::training_target::lora;
    else if (v == "qlora") run.target = memscale::training_target::qlora;
    else bad_field(bad_run, path + ".target", r.at("target"), "must be full, lora or qlora");
  }
  run.lora_rank = io::get_count(r, "lora_rank", path, run.lora_rank, bad_run);
  if (const auto v = text("lora_targets"); !v.empty()) run.lora_targets = parse_lora_targets(v, path + ".lora_targets");
  if (r.contains("lora_alpha") && !r.at("lora_alpha").is_null()) {
    const json& a = r.at("lora_alpha");
    if (!a.is_number() || !(a.get<double>() > 0.0 && a.get<double>() < 1e9))
      bad_field(bad_run, path + ".lora_alpha", a, "must be a positive number");
    o.lora_alpha = a.get<double>();
  }
  if (const auto v = text("quant"); !v.empty()) {
    if (v == "nf4") run.quant = memscale::base_quant::nf4;
    else if (v == "nf4_double_quant") run.quant = memscale::base_quant::nf4_double_quant;
    else bad_field(bad_run, path + ".quant", r.at("quant"), "must be nf4 or nf4_double_quant");
  }
  run.dropout = io::get_bool(r, "dropout", path, run.dropout, bad_run);
  if (const auto v = text("device"); !v.empty()) {
    if (v == "cuda") run.device = memscale::device_kind::cuda;
    else if (v == "cpu") run.device = memscale::device_kind::cpu;
    else bad_field(bad_run, path + ".device", r.at("device"), "must be cuda or cpu");
  }
  if (r.contains("offload") && !r.at("offload").is_null()) {
    const json& list = r.at("offload");
    if (!list.is_array()) bad_field(bad_run, path + ".offload", list, "must be an array of strings");
    for (const json& item : list) {
      if (!item.is_string()) bad_field(bad_run, path + ".offload", item, "must hold strings");
      set_offload(o, item.get<std::string>(), path + ".offload");
    }
  }
}

void read_gpu(const json& g, options& o) {
  if (g.is_string()) {
    const std::string name = g.get<std::string>();
    if (!memscale::find_gpu(name)) {
      nearest_name nearest(name);
      for (const auto& gpu : memscale::gpu_catalog) nearest.offer(gpu.name);
      bad_field(error_code::invalid_gpu, "gpu", g, "must be a GPU from --list-gpus" + nearest.hint());
    }
    o.gpu = name;
    o.custom_gpu.reset();
    return;
  }
  require_known_keys(g, gpu_fields, "gpu");
  if (!g.contains("memory")) bad_field(error_code::invalid_gpu, "gpu.memory", json(), "is missing");
  const json& m = g.at("memory");
  std::uint64_t memory = 0;
  if (m.is_string()) memory = parse_size(m.get<std::string>(), "gpu.memory");
  else if (m.is_number_unsigned() && m.get<std::uint64_t>() > 0) memory = m.get<std::uint64_t>();
  else bad_field(error_code::invalid_gpu, "gpu.memory", m, "must be a byte count > 0 or a size such as \"24GiB\"");
  const bool bf16 = memscale::json_io::get_bool(g, "bf16", "gpu", true, error_code::invalid_gpu);
  o.custom_gpu = memscale::custom_gpu(memscale::bytes{memory}, bf16);
  o.gpu.clear();
}

}  // namespace

std::string read_text_file(const std::string& option, const std::string& path) {
  const auto cannot_read = [&](int err) {
    return usage_error(option + " cannot read " + in_quotes(path) + ": " + std::strerror(err));
  };
  errno = 0;
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw cannot_read(errno);
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, file.get());
    text.append(buffer, n);
    if (n < sizeof buffer) break;
  }
  if (std::ferror(file.get()) != 0) throw cannot_read(errno != 0 ? errno : EIO);  // e.g. a directory: EISDIR
  return text;
}

void read_run_document(const json& doc, const std::string& source, options& o) {
  try {
    if (!doc.is_object()) bad_field(bad_run, "the document", doc, "must be a JSON object (docs/run-json.md)");
    if (doc.contains("train")) {  // a ground-truth record
      o.model = memscale::json_io::model_from_record(doc.at("model"));
      o.model_description = doc.at("model");
      o.run = memscale::json_io::run_from_record(doc);
      memscale::json_io::check_sequence_fits(o.model, o.run.seq_len, "train.seq");
      o.run_source = source;
      return;
    }
    require_known_keys(doc, document_fields, "", result_fields);
    if (!doc.contains("model")) bad_field(error_code::invalid_model, "model", json(), "is missing");
    o.model = model_of(doc.at("model"), o);
    if (doc.contains("run")) read_run_object(doc.at("run"), o);
    if (doc.contains("gpu")) read_gpu(doc.at("gpu"), o);
    if (doc.contains("headroom")) {
      const json& h = doc.at("headroom");
      if (!h.is_number() || !(h.get<double>() >= memscale::min_headroom && h.get<double>() <= memscale::max_headroom))
        bad_field(error_code::invalid_plan_option, "headroom", h, "must be a number within 0.10-0.15");
      o.headroom = h.get<double>();
    }
    memscale::validate(o.model);
    memscale::validate(o.run);
    memscale::json_io::check_sequence_fits(o.model, o.run.seq_len, "run.seq_len");
    o.run_source = source;
  } catch (const memscale::error& e) {
    throw usage_error(source + ": " + e.what());
  } catch (const usage_error& e) {
    throw usage_error(source + ": " + e.what());
  } catch (const json::exception& e) {
    throw usage_error(source + ": " + e.what());
  }
}

void read_run_file(const std::string& path, options& o) {
  const std::string source = "--run " + in_quotes(path);
  const std::string text = read_text_file("--run", path);
  json doc;
  try {
    doc = memscale::json_io::parse_document(text, source);
  } catch (const memscale::error& e) {
    throw usage_error(e.what());
  }
  read_run_document(doc, source, o);
}

json run_document(const options& o) {
  json j;
  j["model"] = o.model_description.is_null() ? json(std::string(o.model.name)) : o.model_description;
  json run = run_to_json(o.run);
  if (!memscale::is_lora(o.run)) run.erase("lora_targets");
  if (memscale::is_lora(o.run)) run["lora_targets"] = lora_targets_text(o.run.lora_targets);
  if (o.lora_alpha) run["lora_alpha"] = *o.lora_alpha;
  json offload = json::array();
  if (o.run.offload_optimizer) offload.push_back("optimizer");
  if (o.run.offload_parameters) offload.push_back("parameters");
  if (o.run.offload_activations) offload.push_back("activations");
  if (!offload.empty()) run["offload"] = offload;
  j["run"] = run;
  if (!o.gpu.empty()) j["gpu"] = o.gpu;
  if (o.custom_gpu) j["gpu"] = {{"memory", o.custom_gpu->memory.value}, {"bf16", o.custom_gpu->bf16}};
  if (!o.gpu.empty() || o.custom_gpu) j["headroom"] = o.headroom.value_or(memscale::default_headroom);
  return j;
}

}  // namespace memscale_plan
