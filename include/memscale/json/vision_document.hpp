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

// The stack a vision step reads: torch (the cuBLAS workspace in the allocator from 2.0, SDPA's
// kernels, mean's saved input, the optimizer's defaults), bitsandbytes (the 8-bit AdamW's state
// blocks) and how CUDA loads its modules; no transformers.
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

// The stack of a vision run, checked: no transformers release (its step runs no transformers
// code) and, on CUDA, a torch whose cuDNN convolutions the estimate models
// (vision::cudnn_workspace_modelled). `prefix` names where the stack came from ("software.",
// "--stack ").
inline void check_vision_stack(const training_spec& run, const std::string& prefix) {
  if (run.transformers_version != 0)
    bad_field(error_code::unsupported, prefix + "transformers", release_text(run.transformers_version),
              "does not apply to a vision model (its step runs no transformers code)");
  if (!vision::cudnn_workspace_modelled(run))
    bad_field(error_code::unsupported, prefix + "torch", release_text(run.torch_version),
              "must be 2.0 or later for a CUDA vision run: torch 1.x runs cuDNN's convolutions through its v7 API, "
              "whose workspaces the vision estimate does not model (it models the v8 API, the default from 2.0)");
}

// A vision document's "software": read as a transformer document's (json/software_stack.hpp),
// then checked by check_vision_stack.
inline void read_vision_software(const json& sw, training_spec& run) {
  read_software(sw, run);
  check_vision_stack(run, "software.");
}

}  // namespace memscale::json_io
