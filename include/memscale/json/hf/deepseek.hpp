// memscale/json/hf/deepseek.hpp: DeepSeek-V2 and DeepSeek-V3 (transformers
// models/deepseek_v3/modeling_deepseek_v3.py@00b676f8, models/deepseek_v2/modeling_deepseek_v2.py@0233e509):
// LLaMA pre-norm blocks whose attention is multi-head latent attention
// (graph/layers/latent_attention.hpp) and whose MLP is, from layer first_k_dense_replace on, the
// DeepSeek MoE: n_routed_experts SwiGLU experts of moe_intermediate_size, num_experts_per_tok per
// token, a router computed in fp32 (V2: softmax, greedy or group-limited top-k; V3: sigmoid,
// group-limited top-k over n_group groups of which topk_group are kept, with the
// e_score_correction_bias buffer), and n_shared_experts as one ungated MLP of
// moe_intermediate_size * n_shared_experts; the first first_k_dense_replace layers have a dense
// MLP of intermediate_size. routed_scaling_factor and norm_topk_prob only rescale the top-k
// weights (no tensor of their own beyond those the routing already keeps). DeepSeek-V3's
// num_nextn_predict_layers (multi-token prediction) are not built by transformers
// (DeepseekV3Model skips `model.layers.61.*` on load): they are not counted, and the report
// states how many the checkpoint holds (model_spec::unbuilt_mtp_layers).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <string>

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

// The sizes the two Config classes default differently.
struct deepseek_defaults {
  decoder_shape_defaults shape{};
  std::uint64_t moe_ffn = 0;
  std::uint64_t routed_experts = 0;
  std::uint64_t shared_experts = 0;
  std::uint64_t per_token = 0;  // 0: the key is required (DeepseekV2Config: None)
  std::uint64_t first_dense = 0;
  std::uint64_t q_lora_rank = 0;
  std::uint64_t kv_lora_rank = 0;
  std::uint64_t qk_nope = 0;
  std::uint64_t qk_rope = 0;
  std::uint64_t v_head = 0;
  bool score_correction = false;  // V3's router registers e_score_correction_bias
};

inline model_spec deepseek(const config& c, const deepseek_defaults& d) {
  model_spec m = llama_like(c, {.shape = d.shape});
  // DeepseekV{2,3}Attention: k and v have num_attention_heads heads (kv_b_proj), and
  // eager_attention_forward repeats them num_attention_heads / num_key_value_heads times: only
  // equal counts give q and k the same heads.
  if (kv_heads_of(m) != m.heads)
    bad_field(error_code::unsupported, "config.num_key_value_heads", c.raw().at("num_key_value_heads"),
              "must equal num_attention_heads: multi-head latent attention makes a key and a value per head");
  // The remote code's moe_layer_freq makes only every moe_layer_freq-th layer sparse;
  // transformers' decoder layer reads first_k_dense_replace alone.
  if (c.count("moe_layer_freq", 1) != 1)
    bad_field(error_code::unsupported, "config.moe_layer_freq", c.raw().at("moe_layer_freq"),
              "must be 1: transformers makes every layer from first_k_dense_replace on sparse");
  // q_lora_rank null: q_proj straight from the hidden states.
  m.q_lora_rank = c.raw().contains("q_lora_rank") ? c.count("q_lora_rank", 0) : d.q_lora_rank;
  m.kv_lora_rank = c.count("kv_lora_rank", d.kv_lora_rank);
  m.qk_nope_head_dim = c.count("qk_nope_head_dim", d.qk_nope);
  m.qk_rope_head_dim = c.count("qk_rope_head_dim", d.qk_rope);
  m.v_head_dim = c.count("v_head_dim", d.v_head);
  m.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;  // qk_head_dim, the width q and k attend with
  m.attn_out_bias = m.qkv_bias;                           // o_proj(bias=attention_bias)
  m.leading_dense_ffn = m.ffn;                            // DeepseekV{2,3}MLP(config): intermediate_size
  m.ffn = c.count("moe_intermediate_size", d.moe_ffn);
  m.experts = c.count({"n_routed_experts", "num_local_experts"}, d.routed_experts);
  m.experts_per_token = count_or_default(c, "num_experts_per_tok", d.per_token);
  m.shared_expert_ffn = c.count("moe_intermediate_size", d.moe_ffn) * c.count("n_shared_experts", d.shared_experts);
  m.leading_dense_layers = c.count("first_k_dense_replace", d.first_dense);
  if (m.leading_dense_layers >= m.layers)
    bad_field(error_code::unsupported, "config.first_k_dense_replace", c.raw().at("first_k_dense_replace"),
              "must be below num_hidden_layers: a model without sparse layers is not modelled");
  m.router_fp32 = true;
  m.router_score_correction = d.score_correction;
  // Not a DeepseekV{2,3}Config key (it stays in kwargs): absent means none.
  m.unbuilt_mtp_layers = c.count("num_nextn_predict_layers", 0);
  return m;
}

// DeepseekV2Config defaults (configuration_deepseek_v2.py@008e5743); the group-limited greedy
// top-k of DeepSeek-V2 ranks groups under the same autograd rules as greedy (values gathered
// from the softmax, indices kept).
inline model_spec deepseek_v2(const config& c) {
  const std::string method = c.text("topk_method", "greedy");
  if (method != "greedy" && method != "group_limited_greedy")
    bad_field(error_code::unsupported, "config.topk_method", c.raw().at("topk_method"),
              "must be greedy or group_limited_greedy (DeepseekV2Moe's routing)");
  return deepseek(c, {.shape = {.layers = 32, .hidden = 4096, .heads = 32, .ffn = 11008, .vocab = 32000, .context = 2048},
                      .moe_ffn = 1407,
                      .routed_experts = 64,
                      .shared_experts = 2,
                      .per_token = 0,
                      .first_dense = 0,
                      .q_lora_rank = 1536,
                      .kv_lora_rank = 512,
                      .qk_nope = 128,
                      .qk_rope = 64,
                      .v_head = 128});
}

// DeepseekV3Config defaults (configuration_deepseek_v3.py@001f85b3): DeepSeek-V3's shape.
inline model_spec deepseek_v3(const config& c) {
  if (c.has("topk_method") && c.text("topk_method", "noaux_tc") != "noaux_tc")
    bad_field(error_code::unsupported, "config.topk_method", c.raw().at("topk_method"),
              "must be noaux_tc (DeepseekV3TopkRouter's routing)");
  return deepseek(c, {.shape = {.layers = 61, .hidden = 7168, .heads = 128, .ffn = 18432, .vocab = 129280, .context = 4096},
                      .moe_ffn = 2048,
                      .routed_experts = 256,
                      .shared_experts = 1,
                      .per_token = 8,
                      .first_dense = 3,
                      .q_lora_rank = 1536,
                      .kv_lora_rank = 512,
                      .qk_nope = 128,
                      .qk_rope = 64,
                      .v_head = 128,
                      .score_correction = true});
}

}  // namespace memscale::json_io::hf
