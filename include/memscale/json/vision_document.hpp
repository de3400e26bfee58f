// memscale/json/vision_document.hpp: the vision parts of a run document (docs/run-json.md):
// a torchvision or timm model named in "model", the run fields a vision step reads
// ("image", "channels_last" beside the shared training settings), and how they are written
// back. run_document.hpp reads and writes the whole document with these.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "memscale/json/fields.hpp"
#include "memscale/json/run_settings.hpp"
#include "memscale/json/software_stack.hpp"
#include "memscale/training.hpp"
#include "memscale/vision/estimate.hpp"

namespace memscale::json_io {

// The run fields of a vision document: the training settings the vision estimate reads
// (vision/estimate.hpp, vision/planner.hpp) and the input's size and memory format.
inline constexpr std::array<std::string_view, 10> vision_run_fields{
    "micro_batch",     "grad_accum",    "precision", "optimizer", "optimizer_impl",
    "paged_optimizer", "checkpointing", "device",    "image",     "channels_last"};

inline std::string_view vision_family_name(vision::family f) {
  switch (f) {
    case vision::family::resnet: return "resnet";
    case vision::family::mobilenet_v3: return "mobilenet_v3";
    case vision::family::efficientnet: return "efficientnet";
    case vision::family::vit: return "vit";
    case vision::family::convnext: return "convnext";
  }
  return "resnet";
}

inline bool from_timm(const vision::vision_spec& m) { return m.source == vision::model_source::timm; }

// The name that finds `m` again: a timm model is prefixed, since torchvision has some of the same names.
inline std::string vision_lookup_name(const vision::vision_spec& m) {
  return (from_timm(m) ? "timm/" : "") + std::string(m.name);
}

// "HxW", as run.image is read back (read_image_size).
inline std::string vision_image_text(const vision::vision_spec& m) {
  return std::to_string(m.image_height) + "x" + std::to_string(m.image_width);
}

// {"name", "source", "family", "classes", "image": "HxW", "channels_last", "parameters"}.
inline json vision_model_json(const vision::vision_spec& m) {
  return {{"name", std::string(m.name)},
          {"source", from_timm(m) ? "timm" : "torchvision"},
          {"family", std::string(vision_family_name(m.arch))},
          {"classes", m.classes},
          {"image", vision_image_text(m)},
          {"channels_last", m.channels_last},
          {"parameters", vision::parameter_count(m)}};
}

// The stack a vision step reads: torch (the allocator, cuBLAS in it from 2.0), bitsandbytes (the
// 8-bit AdamW of AGGRESSIVE) and how CUDA loads its modules; no transformers.
inline json vision_software_json(const training_spec& run) {
  json j = software_json(run);
  j.erase("transformers");
  return j;
}

// The run object of a vision document: the settings of vision_run_fields.
inline json vision_run_json(const training_spec& run, const vision::vision_spec& m) {
  const json all = run_to_json(run);
  json j = json::object();
  for (const auto key : vision_run_fields)
    if (all.contains(key)) j[std::string(key)] = all.at(std::string(key));
  j["image"] = vision_image_text(m);
  j["channels_last"] = m.channels_last;
  return j;
}

// A vision document's "software" must be what the vision report assumes (it has no --stack):
// an item that differs is an error naming it.
inline void check_vision_software(const json& sw, const training_spec& run) {
  if (sw.is_object() && sw.contains("transformers"))
    bad_field(error_code::unsupported, "software.transformers", sw.at("transformers"),
              "does not apply to a vision model (its step runs no transformers code)");
  training_spec given = run;
  read_software(sw, given);
  const json assumed = vision_software_json(run);
  const json asked = vision_software_json(given);
  for (const auto& item : asked.items()) {
    const std::string field = "software." + item.key();
    const json& value = sw.contains(item.key()) ? sw.at(item.key()) : item.value();
    if (!assumed.contains(item.key()))
      bad_field(error_code::unsupported, field, value,
                "does not apply: the vision estimate assumes the current releases " + assumed.dump());
    if (assumed.at(item.key()) != item.value())
      bad_field(error_code::unsupported, field, value,
                "must be " + assumed.at(item.key()).get<std::string>() + ": the vision estimate assumes the current releases");
  }
}

}  // namespace memscale::json_io
