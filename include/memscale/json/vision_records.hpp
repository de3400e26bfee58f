// memscale/json/vision_records.hpp: torchvision ground-truth records (model.impl
// "torchvision", train.image) as a vision model and a run.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "memscale/json/fields.hpp"
#include "memscale/vision/estimate.hpp"
#include "memscale/vision/presets.hpp"

namespace memscale::json_io {

inline bool is_vision_record(const json& record) {
  return record.is_object() && record.contains("model") && record.at("model").is_object() &&
         record.at("model").value("impl", std::string()) == "torchvision";
}

// "train.image": 224 (square) or "384x320" (height x width).
inline void read_image_size(const json& t, vision::vision_spec& spec) {
  const std::string field = "train.image";
  if (!t.contains("image") || t.at("image").is_null()) return;
  const json& v = t.at("image");
  if (v.is_number_unsigned()) {
    spec.image_height = spec.image_width = v.get<std::uint64_t>();
    return;
  }
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    const auto x = s.find('x');
    std::uint64_t h = 0;
    std::uint64_t w = 0;
    bool ok = x != std::string::npos && x > 0 && x + 1 < s.size() && x <= 5 && s.size() - x - 1 <= 5;
    for (std::size_t i = 0; ok && i < s.size(); ++i) {
      if (i == x) continue;
      if (s[i] < '0' || s[i] > '9') ok = false;
      else if (i < x) h = h * 10 + static_cast<std::uint64_t>(s[i] - '0');
      else w = w * 10 + static_cast<std::uint64_t>(s[i] - '0');
    }
    if (ok) {
      spec.image_height = h;
      spec.image_width = w;
      return;
    }
  }
  bad_field(error_code::invalid_run, field, v, "must be a pixel count like 224 or a size like \"384x320\"");
}

// The torchvision model a record names ("torchvision.models.resnet50" or "resnet50").
inline vision::vision_spec vision_model_from_record(const json& record) {
  const json& m = record.at("model");
  std::string name = m.value("name", std::string());
  if (const auto dot = name.rfind('.'); dot != std::string::npos) name = name.substr(dot + 1);
  const auto preset = vision::presets::find(name);
  if (!preset) bad_field(error_code::unsupported, "model.name", m.value("name", json()), "is not a torchvision model memscale knows");
  vision::vision_spec spec = *preset;
  const json& t = record.at("train");
  read_image_size(t, spec);
  const std::string format = get_string(t, "memory_format", "train", "contiguous", error_code::invalid_run);
  if (format != "contiguous" && format != "channels_last")
    bad_field(error_code::invalid_run, "train.memory_format", format, "must be contiguous or channels_last");
  spec.channels_last = format == "channels_last";
  return vision::validate(spec);
}

// The record as the transformer reader's run_from_record takes it: every shared field
// (precision, optimizer, software stack, device) is read by the same rules, with the
// image in place of a sequence.
inline json vision_run_record(const json& record) {
  json copy = record;
  json& t = copy.at("train");
  if (!t.is_object()) bad_field(error_code::invalid_run, "train", t, "must be an object");
  t.erase("memory_format");
  t.erase("image");
  t["seq"] = 1;
  return copy;
}

}  // namespace memscale::json_io
