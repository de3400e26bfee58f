// memscale/unquantized_modules.hpp: the linear layers a quantised checkpoint keeps in 16 bits,
// from the module names of its quantization_config (modules_to_not_convert,
// llm_int8_skip_modules, compressed-tensors' ignore), as roles of the model graph's linears
// (memscale/lora.hpp lora_target: q, k, v, o, gate, up, down, router, head, latent attention's).
//
// transformers skips an nn.Linear when an entry is its own name, its full dotted path, or an
// ancestor's path followed by "." (integrations/bitsandbytes.py@f6cf875a _replace_with_bnb_linear;
// the fp8, eetq and fbgemm replacements use the same test); AWQ's matches an entry anywhere in the
// path (integrations/awq.py@027f76a8 replace_with_awq_linear: key in ".".join(current_key_name)),
// so an AWQ "gate" also keeps every gate_proj and shared_expert_gate. transformers 5's
// should_convert_module matches a regular expression at the path's start or a path's end, so an
// entry is read by the module it ends in: "model.layers.*.self_attn" is every layer's attention,
// "mlp.gate" every layer's router (memscale's blocks repeat one layer). An entry it cannot place
// is an error naming it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "memscale/detail/printable.hpp"
#include "memscale/error.hpp"
#include "memscale/lora.hpp"
#include "memscale/model.hpp"

namespace memscale {

// What a family calls the linears whose names differ between families: Mixtral and PhiMoE name
// their experts' matrices w1 (gate), w3 (up) and w2 (down) (modeling_mixtral.py@v4.36.2
// MixtralBlockSparseTop2MLP, modeling_phimoe.py@008f5c8c); gpt-oss calls its router `router`
// (modeling_gpt_oss.py@00d4b3d2 GptOssMLP).
struct linear_names {
  std::string_view gate = "gate_proj";
  std::string_view up = "up_proj";
  std::string_view down = "down_proj";
  std::string_view router = "gate";
};

// How a list's entries meet module paths.
enum class module_match : std::uint8_t {
  name_or_path,  // the module's name, its path or an ancestor's path (bitsandbytes, fp8, compressed-tensors)
  substring,     // anywhere in the path (AWQ)
};

// The roles a checkpoint's list keeps in 16 bits, and whether it names the vision tower.
struct unquantized_modules {
  lora_modules roles = 0;
  bool vision_tower = false;      // vision_tower, vision_model or visual
  bool vision_projector = false;  // multi_modal_projector, or visual (Qwen-VL's merger is inside it)
};

namespace detail {

[[noreturn]] inline void fail_unquantized(std::string_view field, std::string_view entry, std::string_view why) {
  fail(error_code::unsupported, field, "names " + quoted(entry) + ", " + std::string(why));
}

constexpr bool is_layer_index(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The last dotted segment of `entry`; a layer index in it is refused (every layer is built alike).
constexpr std::string_view module_leaf(std::string_view entry, std::string_view field) {
  std::string_view leaf = entry;
  for (std::string_view rest = entry; !rest.empty();) {
    const auto dot = rest.find('.');
    leaf = rest.substr(0, dot);
    if (is_layer_index(leaf))
      fail_unquantized(field, entry,
                       "one layer's modules: memscale builds every layer alike, so name the module of all layers "
                       "(model.layers.*.NAME or NAME)");
    rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
  }
  return leaf;
}

// The roles of the linears named `leaf` (AWQ: whose names hold it).
constexpr lora_modules roles_named(std::string_view leaf, const model_spec& model, const linear_names& names,
                                   module_match match) {
  using enum lora_target;
  const auto one = [](lora_target t) { return static_cast<lora_modules>(t); };
  // Fused projections: Phi-3's qkv_proj, Phi-3's and gpt-oss's gate_up_proj.
  const bool fused_gate_up = model.fused_gate_up || model.mlp == mlp_kind::clamped_swiglu;
  const std::array<std::pair<std::string_view, lora_modules>, 15> table{{
      {"q_proj", one(q)}, {"k_proj", one(k)}, {"v_proj", one(v)}, {"o_proj", one(o)},
      {names.gate, one(gate)}, {names.up, one(up)}, {names.down, one(down)}, {names.router, one(router)},
      {"lm_head", one(head)},
      {"q_a_proj", one(q_a)}, {"q_b_proj", one(q_b)}, {"kv_a_proj_with_mqa", one(kv_a)}, {"kv_b_proj", one(kv_b)},
      {model.shared_expert_gate ? "shared_expert_gate" : "", one(shared_expert_gate)},
      {fused_gate_up ? "gate_up_proj" : "", gate | up},
  }};
  lora_modules r = 0;
  for (const auto& [name, roles] : table) {
    if (name.empty()) continue;
    if (leaf == name || (match == module_match::substring && name.find(leaf) != std::string_view::npos))
      r = static_cast<lora_modules>(r | roles);
  }
  if (model.fused_qkv && (leaf == "qkv_proj" || (match == module_match::substring &&
                                                  std::string_view("qkv_proj").find(leaf) != std::string_view::npos)))
    r = static_cast<lora_modules>(r | (q | k | v));
  return r;
}

}  // namespace detail

// Adds what one entry of `field` keeps in 16 bits to `kept`, for `model` and its names.
constexpr void add_unquantized_module(unquantized_modules& kept, std::string_view entry, const model_spec& model,
                                      const linear_names& names, module_match match, std::string_view field) {
  using enum lora_target;
  const std::string_view leaf = detail::module_leaf(entry, field);
  const auto add = [&kept](lora_modules r) { kept.roles = static_cast<lora_modules>(kept.roles | r); };
  if (leaf == "vision_tower" || leaf == "vision_model") {
    kept.vision_tower = true;
    return;
  }
  if (leaf == "multi_modal_projector") {
    kept.vision_projector = true;
    return;
  }
  if (leaf == "visual") {
    kept.vision_tower = true;
    kept.vision_projector = true;
    return;
  }
  if (leaf == "self_attn" || leaf == "attn" || leaf == "attention")
    return add(static_cast<lora_modules>(lora_attention | lora_latent_attention));
  // Every linear of the MLP: the router, the experts and the shared expert with its gate.
  const lora_modules whole_mlp = lora_mlp | router | shared_expert_gate;
  if (leaf == "mlp" || leaf == "block_sparse_moe" || leaf == "feed_forward") return add(whole_mlp);
  // Expert matrices share the roles gate, up and down with a dense MLP's and the shared expert's.
  const bool experts_alone = model.experts > 0 && model.shared_expert_ffn == 0 && model.leading_dense_layers == 0;
  if (leaf == "experts") {
    if (!experts_alone)
      detail::fail_unquantized(field, entry,
                               "the experts beside other MLPs (a shared expert or dense layers) whose matrices memscale "
                               "does not tell apart from theirs: not modelled");
    return add(lora_mlp);
  }
  // Modules that are no nn.Linear: every format leaves them in 16 bits already.
  if (leaf == "embed_tokens" || leaf == "wte" || leaf == "wpe" || leaf == "embed_positions" || leaf == "norm" ||
      leaf == "input_layernorm" || leaf == "post_attention_layernorm" || leaf == "ln_f" || leaf == "rotary_emb")
    return;
  // A dotted AWQ entry is met as a substring of whole paths, which depends on how the family nests
  // its modules; memscale reads it by its last name, as the other methods do.
  const bool bare = entry.find('.') == std::string_view::npos;
  const lora_modules r = detail::roles_named(leaf, model, names, bare ? match : module_match::name_or_path);
  if (r == 0)
    detail::fail_unquantized(
        field, entry,
        "a module memscale cannot place in this model: expected one of its linears (q_proj, k_proj, v_proj, o_proj, " +
            std::string(names.gate) + ", " + std::string(names.up) + ", " + std::string(names.down) + ", the router " +
            std::string(names.router) + ", lm_head), a layer part (self_attn, mlp, experts), the vision tower "
            "(vision_tower, vision_model, visual, multi_modal_projector) or a module that is no Linear "
            "(embed_tokens, norm)");
  if ((r & lora_mlp) != 0 && entry.find("expert") != std::string_view::npos && !experts_alone)
    detail::fail_unquantized(field, entry,
                             "a matrix of the experts (or the shared expert) beside other MLPs whose matrices memscale "
                             "does not tell apart from theirs: not modelled");
  add(r);
}

}  // namespace memscale
