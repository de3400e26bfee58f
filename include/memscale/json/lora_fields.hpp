// memscale/json/lora_fields.hpp: a record's adapter fields (train.lora_*, quant,
// trainable_dtype, software.bitsandbytes) and the cross-check of its stated
// parameter counts against the model memscale builds.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "memscale/estimate.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/lora.hpp"
#include "memscale/model.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale::json_io::detail {

// train.lora_targets: a list of module names or one comma-separated string.
inline lora_modules read_lora_targets(const json& t, const std::string& path) {
  const std::string field = path + ".lora_targets";
  if (!t.contains("lora_targets") || t.at("lora_targets").is_null()) return lora_target::q | lora_target::v;
  const json& v = t.at("lora_targets");
  try {
    if (v.is_string()) return parse_lora_targets(v.get<std::string>());
    if (!v.is_array() || v.empty()) bad_field(error_code::invalid_run, field, v, "must be a module-name list or string");
    lora_modules set = 0;
    for (const json& name : v) {
      if (!name.is_string()) bad_field(error_code::invalid_run, field, v, "must list module names as strings");
      const std::string n = name.get<std::string>();
      // PEFT expands "all-linear" only when it is the whole target_modules string.
      if (n == "all-linear" && v.size() > 1)
        bad_field(error_code::invalid_run, field, v, "may use \"all-linear\" only on its own");
      set = static_cast<lora_modules>(set | lora_module(n));
    }
    return set;
  } catch (const error& e) {
    // lora_module reports "lora_targets names an unknown module ...": name the record's field.
    const std::string message = e.what();
    if (message.find(field) != std::string::npos) throw;
    throw error(e.code(), path + "." + message.substr(message.find("lora_targets")) + " (got " + shown(v) + ")");
  }
}

// "0.42.0" -> 4200, "0.43.2" -> 4302 (major * 10000 + minor * 100 + patch).
inline std::uint32_t read_bitsandbytes_version(const json& record) {
  const json* software = record.contains("software") && record.at("software").is_object() ? &record.at("software")
                                                                                          : nullptr;
  if (software == nullptr || !software->contains("bitsandbytes") || software->at("bitsandbytes").is_null())
    return training_spec{}.bitsandbytes_version;
  const json& value = software->at("bitsandbytes");
  const auto bad = [&] {
    bad_field(error_code::invalid_run, "software.bitsandbytes", value, "must be a version string like \"0.42.0\"");
  };
  if (!value.is_string()) bad();
  const std::string v = value.get<std::string>();
  std::uint32_t parts[3] = {0, 0, 0};
  std::size_t part = 0;
  std::size_t digits = 0;
  for (const char c : v) {
    if (c >= '0' && c <= '9') {
      parts[part] = parts[part] * 10 + static_cast<std::uint32_t>(c - '0');
      if (++digits > 2) bad();
    } else if (c == '.' && digits > 0 && part < 2) {
      ++part;
      digits = 0;
    } else {
      break;  // a suffix such as ".dev0" or "+cuda": the numbers before it count
    }
  }
  if (part == 0 || digits == 0) bad();
  return parts[0] * 10000 + parts[1] * 100 + parts[2];
}

// The dtype a precision stores trainable tensors in (training.hpp: amp keeps fp32 state).
inline std::string parameter_dtype_name(precision p) {
  switch (precision_policy_of(training_spec{.prec = p}).param) {
    case dtype::bf16: return "bf16";
    case dtype::fp16: return "fp16";
    default: return "fp32";
  }
}

// The adapter fields of a record's "train" object. A field that changes memory is either
// modelled or refused by name.
inline void read_adapters(const json& t, training_spec& run) {
  const std::string path = "train";
  constexpr auto bad = error_code::invalid_run;
  const auto rank = get_count(t, "lora_rank", path, 0, bad);
  const std::string frozen = get_string(t, "frozen", path, rank > 0 ? "base" : "none", bad);
  if (frozen != "none" && frozen != "base" && frozen != "vision_tower")
    bad_field(bad, path + ".frozen", frozen, "must be none, base or vision_tower");
  if (frozen == "vision_tower" && rank > 0)
    bad_field(bad, path + ".frozen", frozen, "must be base with train.lora_rank > 0 (LoRA freezes the base, tower included)");
  // A frozen tower has requires_grad False; PEFT freezes it with the rest of the base.
  run.images.tower_frozen = frozen != "none";
  if (frozen == "base" && rank == 0)
    bad_field(error_code::unsupported, path + ".frozen", frozen,
              "freezes the base without LoRA adapters (train.lora_rank 0): not modelled yet");
  if (frozen == "none" && rank > 0)
    bad_field(bad, path + ".frozen", frozen, "must be base with train.lora_rank > 0 (LoRA freezes the base)");
  const std::string quant = get_string(t, "quant", path, "", bad);
  for (const char* key : {"lora_targets", "lora_variant", "lora_dropout"})
    if (rank == 0 && t.contains(key) && !t.at(key).is_null())
      bad_field(bad, path + "." + key, t.at(key), "needs train.lora_rank > 0");
  if (!quant.empty() && rank == 0)
    bad_field(error_code::unsupported, path + ".quant", quant, "a quantised base is modelled only under LoRA (QLoRA)");
  if (rank == 0) return;
  run.target = quant.empty() ? training_target::lora : training_target::qlora;
  run.lora_rank = rank;
  // bitsandbytes fp4 stores the same bytes as nf4 (4-bit codes + one absmax per 64
  // weights, bitsandbytes functional.py quantize_4bit); only the code table differs.
  if (quant == "bnb.nf4" || quant == "bnb.fp4") run.quant = base_quant::nf4;
  else if (quant == "bnb.nf4-dq" || quant == "bnb.fp4-dq") run.quant = base_quant::nf4_double_quant;
  // torchao's NF4Tensor (torchtune's qlora_ builders) quantizes its scalers again: double_quantize_scalers.
  else if (quant == "torchao.nf4") run.quant = base_quant::nf4_double_quant;
  else if (!quant.empty())
    bad_field(error_code::unsupported, path + ".quant", quant,
              "is not modelled (bnb.nf4, bnb.nf4-dq, bnb.fp4, bnb.fp4-dq, torchao.nf4 are; 8-bit bases are not yet)");
  run.lora_targets = read_lora_targets(t, path);
  const std::string variant = get_string(t, "lora_variant", path, "lora", bad);
  if (variant == "lora") run.lora_kind = lora_variant::lora;
  else if (variant == "rslora") run.lora_kind = lora_variant::rslora;
  else if (variant == "dora") run.lora_kind = lora_variant::dora;
  else bad_field(bad, path + ".lora_variant", variant, "must be one of lora, rslora, dora");
  if (t.contains("lora_dropout") && !t.at("lora_dropout").is_null()) {
    const json& p = t.at("lora_dropout");
    if (!p.is_number() || p.get<double>() < 0.0 || p.get<double>() >= 1.0)
      bad_field(bad, path + ".lora_dropout", p, "must be a probability in [0, 1)");
    run.lora_dropout = p.get<double>() > 0.0;
  }
  // lora_alpha only scales the adapter output: no tensor changes size.
  if (t.contains("lora_alpha") && !t.at("lora_alpha").is_null() && !t.at("lora_alpha").is_number())
    bad_field(bad, path + ".lora_alpha", t.at("lora_alpha"), "must be a number");
  // The adapters' dtype as the record states it: the base's, fp32 over a 16-bit base (PEFT's
  // autocast_adapter_dtype), or under autocast the autocast dtype (a model loaded in it whose adapters
  // stay there: PEFT's autocast_adapter_dtype=False under TRL's --bf16); absent: the framework's default
  // (resolved by build()).
  const std::string trainable_dtype = get_string(t, "trainable_dtype", path, "", bad);
  if (trainable_dtype.empty()) return;
  const std::string autocast_dtype(to_string(precision_policy_of(run).matmul));
  if (trainable_dtype == parameter_dtype_name(run.prec)) {
    run.adapters = adapter_dtype::as_base;
  } else if (trainable_dtype == "fp32" && is_lora(run)) {
    run.adapters = adapter_dtype::fp32;
  } else if (uses_autocast(run.prec) && run.target == training_target::qlora && trainable_dtype == autocast_dtype) {
    bad_field(error_code::unsupported, path + ".trainable_dtype", trainable_dtype,
              "is not modelled for QLoRA under autocast: 16-bit adapters under autocast are modelled over a model "
              "loaded in that dtype, and a 4-bit load leaves its other weights' dtype unstated");
  } else if (uses_autocast(run.prec) && is_lora(run) && trainable_dtype == autocast_dtype) {
    run.adapters = adapter_dtype::autocast_dtype;
  } else {
    bad_field(error_code::unsupported, path + ".trainable_dtype", trainable_dtype,
              "must be the precision's parameter dtype (" + parameter_dtype_name(run.prec) +
                  "), fp32 for LoRA adapters over a 16-bit base, or the autocast dtype for LoRA under autocast");
  }
}

// The model's own dropout as a record states it (SCHEMA.md "dropout"): read, not ignored.
// (The multi-GPU fields are read by json/parallel_record.hpp.)
inline void read_dropout_field(const json& t, training_spec& run) {
  const std::string path = "train";
  const auto present = [&](const char* key) { return t.contains(key) && !t.at(key).is_null(); };
  // The model's own dropout: the CPU harness states "train mode (HF/torchvision defaults)".
  if (present("dropout")) {
    const json& d = t.at("dropout");
    if (d.is_boolean()) run.dropout = d.get<bool>();
    else if (!(d.is_string() && d.get<std::string>().rfind("train mode", 0) == 0))
      bad_field(error_code::invalid_run, path + ".dropout", d,
                "must be true, false or \"train mode (HF/torchvision defaults)\"");
  }
}

// A record's stated counts against the model's own: train.trainable_params (what the
// framework reports as trainable, `trainable` from the estimate) and model.params (the
// published total of the base model, adapters excluded). A mismatch beyond 0.5% means the
// record describes another network.
inline void check_parameter_counts(const json& record, const model_spec& model, std::uint64_t trainable) {
  constexpr double tolerance = 0.005;
  const auto check = [](const json& obj, const char* key, const std::string& field, std::uint64_t ours) {
    if (!obj.is_object() || !obj.contains(key) || obj.at(key).is_null()) return;
    const json& stated = obj.at(key);
    if (!stated.is_number_integer() || stated.get<std::int64_t>() < 0)
      bad_field(error_code::invalid_run, field, stated, "must be a non-negative integer");
    const auto n = stated.get<std::uint64_t>();
    const double diff = static_cast<double>(n > ours ? n - ours : ours - n);
    if (diff > tolerance * static_cast<double>(n))
      throw error(error_code::invalid_run, field + " is " + std::to_string(n) + " but the model memscale builds has " +
                                               std::to_string(ours) + " (more than 0.5% apart)");
  };
  if (record.contains("train")) check(record.at("train"), "trainable_params", "train.trainable_params", trainable);
  if (record.contains("model")) check(record.at("model"), "params", "model.params", parameter_count(model));
}

}  // namespace memscale::json_io::detail
