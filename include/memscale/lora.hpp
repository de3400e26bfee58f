// memscale/lora.hpp: which layers LoRA adapts, named as PEFT and lit-gpt name them.
//
// A set of bit flags over the linear layers of a transformer (each MLP matrix on its
// own), and a constexpr parser for module-name lists: "q_proj,v_proj", "all-linear",
// lit-gpt's "q,v,proj,mlp,head", or a family's own names (GPT-2 c_attn, GPT-NeoX
// query_key_value).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "memscale/detail/printable.hpp"
#include "memscale/error.hpp"

namespace memscale {

enum class lora_target : std::uint16_t {
  q = 1,
  k = 2,
  v = 4,
  o = 8,         // attention output projection
  gate = 16,     // gated MLPs only (SwiGLU/GeGLU gate_proj, lit-gpt fc_1)
  up = 32,       // the MLP's input matrix (up_proj, c_fc, fc1, dense_h_to_4h)
  down = 64,     // the MLP's output matrix (down_proj, c_proj, fc2, dense_4h_to_h)
  head = 128,    // the LM output layer (lm_head)
  router = 256,  // a mixture-of-experts router (Mixtral `gate`): an nn.Linear too
  mlp = 112,     // gate | up | down (lit-gpt lora_mlp); has(set, mlp) asks for any of them
  // Multi-head latent attention's own projections (DeepSeek-V2/V3, modeling_deepseek_v2.py@0233e509
  // DeepseekV2Attention.__init__); its q_proj (no q_lora_rank) and o_proj are q and o above.
  q_a = 512,     // q_a_proj: hidden -> q_lora_rank
  q_b = 1024,    // q_b_proj: q_lora_rank -> heads x qk_head_dim
  kv_a = 2048,   // kv_a_proj_with_mqa: hidden -> kv_lora_rank + qk_rope_head_dim
  kv_b = 4096,   // kv_b_proj: kv_lora_rank -> heads x (qk_nope_head_dim + v_head_dim)
  // Qwen2-MoE's shared_expert_gate (Linear(hidden, 1)): a role a checkpoint's
  // modules_to_not_convert may name (unquantized_modules.hpp); no LoRA target name reads it.
  shared_expert_gate = 8192,
};

// A set of lora_target flags.
using lora_modules = std::uint16_t;

constexpr lora_modules operator|(lora_target a, lora_target b) {
  return static_cast<lora_modules>(static_cast<lora_modules>(a) | static_cast<lora_modules>(b));
}
constexpr lora_modules operator|(lora_modules a, lora_target b) {
  return static_cast<lora_modules>(a | static_cast<lora_modules>(b));
}
constexpr bool has(lora_modules set, lora_target t) { return (set & static_cast<lora_modules>(t)) != 0; }

inline constexpr lora_modules lora_attention = lora_target::q | lora_target::k | lora_target::v | lora_target::o;
inline constexpr lora_modules lora_mlp = lora_target::gate | lora_target::up | lora_target::down;
inline constexpr lora_modules lora_latent_attention = lora_target::q_a | lora_target::q_b | lora_target::kv_a | lora_target::kv_b;
// PEFT "all-linear": every nn.Linear / Conv1D except the output embedding
// (peft v0.13.0 @ 8f074d75, src/peft/tuners/tuners_utils.py _maybe_include_all_linear_layers,
// INCLUDE_LINEAR_LAYERS_SHORTHAND); the Mixtral router is an nn.Linear, so it is included, and so
// are multi-head latent attention's projections. A model adapts those of the set it has.
inline constexpr lora_modules lora_all_linear = static_cast<lora_modules>(
    lora_attention | lora_mlp | static_cast<lora_modules>(lora_target::router) | lora_latent_attention);

// Whether `set` is PEFT's "all-linear" (every linear the model has), not a list of names.
constexpr bool is_all_linear(lora_modules set) { return (set & lora_all_linear) == lora_all_linear; }

// Every module name lora_module reads (for "did you mean" hints and documentation).
inline constexpr std::array<std::string_view, 56> lora_module_names{
    "all-linear", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head",
    "q", "k", "v", "proj", "mlp", "head", "lora_query", "lora_key", "lora_value", "lora_projection", "lora_mlp",
    "lora_head", "query", "key", "value", "q_lin", "k_lin", "v_lin", "c_attn", "query_key_value", "qkv_proj",
    "Wqkv", "out_proj", "dense", "out_lin", "c_proj", "w1", "fc_1", "w3", "fc_2", "c_fc", "fc1", "fc_in", "fc",
    "dense_h_to_4h", "lin1", "w2", "fc2", "fc_out", "dense_4h_to_h", "lin2", "gate", "output_proj",
    "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj"};

namespace detail {

[[noreturn]] inline void fail_lora_module(std::string_view name) {
  fail(error_code::invalid_run, "lora_targets",
       "names an unknown module " + detail::quoted(name) +
           ": expected PEFT names (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head, "
           "\"all-linear\"), lit-gpt names (q, k, v, proj, mlp, head) or a family's own (c_attn, c_fc, c_proj, "
           "query_key_value, dense, dense_h_to_4h, dense_4h_to_h, fc_in, fc_out, fc1, fc2, out_proj, w1, w2, w3, gate; "
           "DeepSeek's q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj; torchtune's output_proj)");
}

constexpr std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace detail

// The layers one module name adapts. PEFT matches a name against the end of each
// module's path, so GPT-2's "c_proj" adapts the attention and the MLP output both.
constexpr lora_modules lora_module(std::string_view name) {
  using enum lora_target;
  constexpr lora_modules qkv = q | k | v;
  const std::string_view n = detail::trim(name);
  if (n == "all-linear") return lora_all_linear;
  // lit-gpt's Config flags, spelled out (lit_gpt/lora.py Config: lora_query ... lora_head).
  if (n == "lora_query") return static_cast<lora_modules>(q);
  if (n == "lora_key") return static_cast<lora_modules>(k);
  if (n == "lora_value") return static_cast<lora_modules>(v);
  if (n == "lora_projection") return static_cast<lora_modules>(o);
  if (n == "lora_mlp") return lora_mlp;
  if (n == "lora_head") return static_cast<lora_modules>(head);
  // PEFT on Hugging Face LLaMA-family models, and lit-gpt's lora_query/key/value flags.
  if (n == "q_proj" || n == "q" || n == "query" || n == "q_lin") return static_cast<lora_modules>(q);
  if (n == "k_proj" || n == "k" || n == "key" || n == "k_lin") return static_cast<lora_modules>(k);
  if (n == "v_proj" || n == "v" || n == "value" || n == "v_lin") return static_cast<lora_modules>(v);
  // Fused projections: GPT-2 c_attn, GPT-NeoX/Falcon/BLOOM query_key_value, Phi-3 qkv_proj, MPT Wqkv.
  if (n == "c_attn" || n == "query_key_value" || n == "qkv_proj" || n == "Wqkv") return qkv;
  // Attention output: lit-gpt `proj` (lora_projection), OPT out_proj, GPT-NeoX/Phi `dense`, DistilBERT out_lin.
  // torchtune's `output_proj` (lora_attn_modules, torchtune/modules/peft/_utils.py @ v0.6.1).
  if (n == "o_proj" || n == "proj" || n == "out_proj" || n == "dense" || n == "out_lin" || n == "output_proj")
    return static_cast<lora_modules>(o);
  if (n == "c_proj") return o | down;  // GPT-2: attn.c_proj and mlp.c_proj
  if (n == "mlp") return lora_mlp;     // lit-gpt lora_mlp: every MLP matrix
  if (n == "gate_proj" || n == "w1" || n == "fc_1") return static_cast<lora_modules>(gate);
  if (n == "up_proj" || n == "w3" || n == "fc_2" || n == "c_fc" || n == "fc1" || n == "fc_in" || n == "fc" ||
      n == "dense_h_to_4h" || n == "lin1")
    return static_cast<lora_modules>(up);
  if (n == "down_proj" || n == "w2" || n == "fc2" || n == "fc_out" || n == "dense_4h_to_h" || n == "lin2")
    return static_cast<lora_modules>(down);
  if (n == "lm_head" || n == "head") return static_cast<lora_modules>(head);
  if (n == "gate") return static_cast<lora_modules>(router);  // Mixtral block_sparse_moe.gate
  if (n == "q_a_proj") return static_cast<lora_modules>(q_a);
  if (n == "q_b_proj") return static_cast<lora_modules>(q_b);
  if (n == "kv_a_proj_with_mqa") return static_cast<lora_modules>(kv_a);
  if (n == "kv_b_proj") return static_cast<lora_modules>(kv_b);
  detail::fail_lora_module(n);
}

// A comma-separated list of module names ("q_proj,v_proj", "q, v, mlp", "all-linear").
constexpr lora_modules parse_lora_targets(std::string_view list) {
  lora_modules set = 0;
  while (true) {
    const auto comma = list.find(',');
    const std::string_view name = detail::trim(list.substr(0, comma));
    if (name.empty()) detail::fail_lora_module(name);
    set = static_cast<lora_modules>(set | lora_module(name));
    if (comma == std::string_view::npos) return set;
    list.remove_prefix(comma + 1);
  }
}

}  // namespace memscale
