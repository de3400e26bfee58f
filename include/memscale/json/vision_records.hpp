// memscale/json/vision_records.hpp: vision ground-truth records (model.impl "torchvision",
// or a timm VisionTransformer's model.timm_args; train.image) as a vision model and a run.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "memscale/json/fields.hpp"
#include "memscale/vision/estimate.hpp"
#include "memscale/vision/presets.hpp"

namespace memscale::json_io {

// A timm VisionTransformer described by its constructor's keyword arguments
// (`model.timm_args`, as timm's model_args and the traces of tools/trace/vision_tower_cases.py
// write them).
inline bool is_timm_record(const json& record) {
  return record.is_object() && record.contains("model") && record.at("model").is_object() &&
         record.at("model").contains("timm_args");
}

inline bool is_vision_record(const json& record) {
  return is_timm_record(record) || (record.is_object() && record.contains("model") && record.at("model").is_object() &&
                                    record.at("model").value("impl", std::string()) == "torchvision");
}

// VisionTransformer(**timm_args) (timm/models/vision_transformer.py@94567641 defaults:
// patch_size 16, embed_dim 768, depth 12, num_heads 12, mlp_ratio 4, class_token True,
// reg_tokens 0, no_embed_class False, pre_norm False, init_values None, drop_path_rate 0,
// global_pool 'token', fc_norm None (= global_pool == 'avg'), num_classes 1000, img_size 224).
// A keyword memscale does not read is refused by name.
// With `eva` (model.timm_class "Eva"): timm's Eva (eva.py@0173a139) with the EVA02 arguments
// (swiglu_mlp and use_rot_pos_emb; qkv_fused, scale_mlp either way; global_pool 'avg') or
// EVA-01's (neither); its class token and fc_norm follow from them.
inline vision::vision_spec timm_vit_from_args(const json& a, bool eva = false) {
  const std::string path = "model.timm_args";
  constexpr auto bad = error_code::invalid_model;
  if (!a.is_object()) bad_field(bad, path, a, "must be an object of VisionTransformer keyword arguments");
  static constexpr std::string_view vit_keys[] = {
      "patch_size",  "embed_dim",   "depth",          "num_heads",   "mlp_ratio",   "class_token", "reg_tokens",
      "no_embed_class", "pre_norm", "init_values",    "drop_path_rate", "global_pool", "fc_norm",  "num_classes",
      "img_size"};
  static constexpr std::string_view eva_keys[] = {"patch_size",     "embed_dim", "depth",     "num_heads",
                                                  "mlp_ratio",      "qkv_fused", "swiglu_mlp", "scale_mlp",
                                                  "use_rot_pos_emb", "ref_feat_shape", "init_values",
                                                  "drop_path_rate", "global_pool", "num_classes", "img_size"};
  for (const auto& [key, value] : a.items()) {
    bool found = false;
    if (eva) {
      for (const auto k : eva_keys) found = found || k == key;
    } else {
      for (const auto k : vit_keys) found = found || k == key;
    }
    if (!found)
      bad_field(error_code::unsupported, path + "." + key, value,
                eva ? "is an Eva argument memscale does not model (it reads patch_size, embed_dim, depth, num_heads, "
                      "mlp_ratio, qkv_fused, swiglu_mlp, scale_mlp, use_rot_pos_emb, ref_feat_shape, init_values, "
                      "drop_path_rate, global_pool, num_classes, img_size)"
                    : "is a VisionTransformer argument memscale does not model (it reads patch_size, embed_dim, depth, "
                      "num_heads, mlp_ratio, class_token, reg_tokens, no_embed_class, pre_norm, init_values, "
                      "drop_path_rate, global_pool, fc_norm, num_classes, img_size)");
  }
  // EVA02 is swiglu_mlp with use_rot_pos_emb; EVA-01 neither (a plain GELU Mlp, no rope: timm's
  // ViT block with Eva's qkv). qkv_fused defaults True (q/v biases), scale_mlp False (GluMlp).
  const bool swiglu = eva && get_bool(a, "swiglu_mlp", path, false, bad);
  const bool rope = eva && get_bool(a, "use_rot_pos_emb", path, false, bad);
  const bool eva02 = swiglu && rope;
  if (eva && swiglu != rope)
    bad_field(error_code::unsupported, path + (swiglu ? ".use_rot_pos_emb" : ".swiglu_mlp"), json(!swiglu),
              "must equal swiglu_mlp / use_rot_pos_emb: memscale models Eva with both (EVA02) or neither (EVA-01)");
  const bool scale_mlp = eva && get_bool(a, "scale_mlp", path, false, bad);
  if (eva && !eva02 && scale_mlp)
    bad_field(error_code::unsupported, path + ".scale_mlp", json(true),
              "must be false for EVA-01: Mlp's hidden norm is not modelled");
  const bool qkv_fused = eva && get_bool(a, "qkv_fused", path, true, bad);
  if (eva && !eva02 && !qkv_fused)
    bad_field(error_code::unsupported, path + ".qkv_fused", json(false),
              "must be true for EVA-01: separate q/k/v projections without rope are not modelled");
  if (eva02 && get_string(a, "global_pool", path, "avg", bad) != "avg")
    bad_field(error_code::unsupported, path + ".global_pool", a.at("global_pool"), "must be avg for an EVA02 model");
  vision::vision_spec v{.name = eva02 ? "timm Eva (EVA02)" : eva ? "timm Eva (EVA-01)" : "timm VisionTransformer",
                        .arch = vision::family::vit,
                        .source = vision::model_source::timm};
  vision::vit_spec& s = v.vit;
  s.code = eva02 ? vision::vit_code::eva02 : vision::vit_code::timm;
  s.qv_bias = qkv_fused;
  s.mlp_norm = scale_mlp;
  s.patch = get_count(a, "patch_size", path, 16, bad);
  s.hidden = get_count(a, "embed_dim", path, 768, bad);
  s.layers = get_count(a, "depth", path, 12, bad);
  s.heads = get_count(a, "num_heads", path, 12, bad);
  double ratio = 4.0;
  if (a.contains("mlp_ratio") && !a.at("mlp_ratio").is_null()) {
    if (!a.at("mlp_ratio").is_number() || a.at("mlp_ratio").get<double>() <= 0)
      bad_field(bad, path + ".mlp_ratio", a.at("mlp_ratio"), "must be a positive number");
    ratio = a.at("mlp_ratio").get<double>();
  }
  s.mlp = static_cast<std::uint64_t>(static_cast<double>(s.hidden) * ratio);  // int(embed_dim * mlp_ratio)
  s.class_token = get_bool(a, "class_token", path, true, bad);
  s.reg_tokens = get_count(a, "reg_tokens", path, 0, bad);
  s.no_embed_class = get_bool(a, "no_embed_class", path, false, bad);
  s.pre_norm = get_bool(a, "pre_norm", path, false, bad);
  s.patch_bias = !s.pre_norm;
  const auto positive = [&](const char* key) {
    if (!a.contains(key) || a.at(key).is_null()) return false;
    if (!a.at(key).is_number() || a.at(key).get<double>() < 0)
      bad_field(bad, path + "." + key, a.at(key), "must be a non-negative number or null");
    return a.at(key).get<double>() > 0;
  };
  s.layer_scale = positive("init_values");
  s.drop_path = positive("drop_path_rate");
  const std::string pool = get_string(a, "global_pool", path, eva ? "avg" : "token", bad);
  if (pool != "token" && pool != "avg")
    bad_field(error_code::unsupported, path + ".global_pool", pool, "must be token or avg (the pools memscale models)");
  s.avg_pool = pool == "avg";
  s.fc_norm = get_bool(a, "fc_norm", path, s.avg_pool, bad);
  v.classes = get_count(a, "num_classes", path, 1000, bad);
  v.image_height = v.image_width = get_count(a, "img_size", path, 224, bad);
  if (eva02) vision::validate_eva02(s);
  else vision::validate(s);
  return v;
}

// "<path>.image" (a record's train.image, a run document's run.image): 224 (square) or
// "384x320" (height x width).
inline void read_image_size(const json& t, vision::vision_spec& spec, const std::string& path = "train") {
  const std::string field = path + ".image";
  if (!t.contains("image") || t.at("image").is_null()) return;
  const json& v = t.at("image");
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0)) {  // json(224) is signed
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

// The vision model a record names ("torchvision.models.resnet50" or "resnet50"), or the timm
// ViT its timm_args describe.
inline vision::vision_spec vision_model_from_record(const json& record) {
  const json& m = record.at("model");
  vision::vision_spec spec{};
  if (is_timm_record(record)) {
    const std::string timm_class = get_string(m, "timm_class", "model", "VisionTransformer", error_code::invalid_model);
    if (timm_class != "VisionTransformer" && timm_class != "Eva")
      bad_field(error_code::unsupported, "model.timm_class", timm_class, "must be VisionTransformer or Eva");
    spec = timm_vit_from_args(m.at("timm_args"), timm_class == "Eva");
  } else {
    std::string name = m.value("name", std::string());
    if (const auto dot = name.rfind('.'); dot != std::string::npos) name = name.substr(dot + 1);
    const auto preset = vision::presets::find(name);
    if (!preset || preset->source != vision::model_source::torchvision)
      bad_field(error_code::unsupported, "model.name", m.value("name", json()), "is not a torchvision model memscale knows");
    spec = *preset;
  }
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
