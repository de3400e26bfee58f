// memscale/json/hf/gpt_oss.hpp: gpt-oss (transformers models/gpt_oss/modeling_gpt_oss.py@00d4b3d2,
// configuration_gpt_oss.py@02b8f42b): LLaMA pre-norm blocks with biased q/k/v/o, one learned
// sink logit per head in eager attention (`attention_sinks`; `_supports_sdpa = False`, so an
// sdpa request runs eager), and a mixture of experts whose router has a bias (`router_bias`)
// and whose experts are 3-D parameters indexed by a 1-element tensor (`expert_weight_copies`:
// each hit expert's weights are copied and saved; from transformers 5.0 grouped_mm multiplies by
// the parameters whole, graph/layers/mlp.hpp grouped_mm_experts) running the clamped SwiGLU
// (`mlp_kind::clamped_swiglu`, biases on gate_up and down). `layer_types` alternates sliding
// and full attention: in eager training the window only masks scores (same sizes), so every
// layer is modelled alike; generate()'s cache keeps the window on the sliding layers. Not modelled: the norm weights `_keep_in_fp32_modules` keeps in fp32
// under a 16-bit load, and the second (sliding) mask.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

inline model_spec gpt_oss(const config& c) {
  // GptOssConfig: vocab 201088, hidden 2880, intermediate 2880 (per expert), 36 layers, 64 heads,
  // 8 kv heads, head_dim 64, 131072 positions, attention_bias True, untied.
  model_spec m = llama_like(c, {.head_dim = 64,
                                .shape = {.layers = 36, .hidden = 2880, .heads = 64, .ffn = 2880, .vocab = 201088,
                                          .context = 131072}});
  m.kv_heads = c.raw().contains("num_key_value_heads") ? c.count("num_key_value_heads", m.heads) : 8;
  m.qkv_bias = c.flag("attention_bias", true);  // q/k/v/o_proj(bias=config.attention_bias)
  m.attn_out_bias = m.qkv_bias;
  m.mlp_bias = false;  // no dense MLP; GptOssExperts always has gate_up and down biases
  // GptOssExperts hard-codes its activation (alpha 1.702, swiglu_limit): hidden_act is not read.
  m.mlp = mlp_kind::clamped_swiglu;
  static_cast<void>(c.number("swiglu_limit", 7.0));  // any limit clamps the same tensors; read to refuse a non-number
  m.softmax_fp32 = false;         // softmax(combined_logits, dtype=combined_logits.dtype)
  m.attention_sinks = true;
  m.rotary_chunked_halves = true;  // _apply_rotary_emb: chunk, first_half * cos - second_half * sin, ..., cat
  m.expert_weight_copies = true;
  m.router_bias = true;  // GptOssTopKRouter: F.linear(x, weight, bias)
  m.experts = c.count("num_local_experts", 128);
  m.experts_per_token = c.count("num_experts_per_tok", 4);
  if (c.flag("output_router_logits", false))
    bad_field(error_code::unsupported, "config.output_router_logits", true,
              "must be false: the load-balancing loss over every layer's router logits is not modelled");
  // layer_types (None: even layers sliding, odd full; configuration_gpt_oss.py@02b8f42b) chooses
  // each layer's mask in training and, in generate(), which layers keep a bounded cache.
  check_layer_types(c, m.layers);
  m.sliding_window = c.count("sliding_window", 128);
  std::uint64_t sliding = 0;
  bool last_sliding = false;
  bool alternates = true;  // even layers sliding, odd full: a period of 2
  for (std::uint64_t i = 0; i < m.layers; ++i) {
    last_sliding = c.has("layer_types") ? c.raw().at("layer_types").at(static_cast<std::size_t>(i)) == "sliding_attention" : i % 2 == 0;
    if (last_sliding) ++sliding;
    alternates = alternates && last_sliding == (i % 2 == 0);
  }
  // generate() is described with a full-attention last layer (its cache's torch.cat moment).
  if (last_sliding && sliding < m.layers) {
    if (!c.has("layer_types"))  // the default alternation over an odd count ends on a sliding layer
      bad_field(error_code::unsupported, c.field("num_hidden_layers"), m.layers,
                "must be even without layer_types (even layers sliding, odd full): a sliding last layer after "
                "full ones is not modelled");
    bad_field(error_code::unsupported, c.field("layer_types"), c.raw().at("layer_types").back(),
              "must end with full_attention when some layer is full attention: a sliding last layer after full "
              "ones is not modelled");
  }
  m.sliding_layers = m.sliding_window == 0 ? 0 : sliding;
  if (m.sliding_layers == 0) m.sliding_window = 0;
  // The alternation places each sliding layer for the allocator's generate() walk (model_spec::
  // sliding_period); other layer_types state no period, and that walk refuses them.
  if (m.sliding_layers > 0 && alternates) m.sliding_period = 2;
  return m;
}

}  // namespace memscale::json_io::hf
