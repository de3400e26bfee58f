// memscale/json/hf/nemotron_h.hpp: Nemotron-H / Nemotron Nano 2 (transformers
// models/nemotron_h/configuration_nemotron_h.py@13923c63 and modeling_nemotron_h.py@897753a0): a
// stack of single-mixer blocks, norm -> one mixer -> residual add, each layer's mixer named by
// hybrid_override_pattern ('M' a Mamba-2 mixer with a grouped gated RMSNorm, '*' attention without
// positional encoding, '-' an up/down MLP with relu2; 'E', the MoE block, is refused). The layers
// are grouped by kind into a repeated unit and the remainders (graph/layers/layer_pattern.hpp
// group_single_mixer_layers; graph/recipes/decoder_stack.hpp single_mixer_layer).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memscale/json/hf/config.hpp"
#include "memscale/model.hpp"

namespace memscale::json_io::hf {

// One layer's block from its pattern character (NemotronHConfig._pattern_to_list).
inline layer_block_kind nemotron_h_block(char kind, const std::string& field, const std::string& pattern) {
  if (kind == 'M') return layer_block_kind::mamba2;
  if (kind == '*') return layer_block_kind::attention;
  if (kind == '-') return layer_block_kind::mlp;
  if (kind == 'E')
    bad_field(error_code::unsupported, field, pattern,
              "must not name 'E' layers: the MoE block (NemotronHMoE: sigmoid router, routed and shared relu2 "
              "experts) is not modelled");
  bad_field(error_code::invalid_model, field, pattern,
            std::string("must list one of 'M' (Mamba-2), '*' (attention), '-' (MLP) per layer, not '") + kind + "'");
}

// layers_block_type's names (current and legacy: remap_legacy_layer_types) as pattern characters.
inline char nemotron_h_block_char(const json& name, const std::string& field) {
  const std::string s = name.is_string() ? name.get<std::string>() : std::string{};
  if (s == "mamba" || s == "linear_attention") return 'M';
  if (s == "attention" || s == "full_attention") return '*';
  if (s == "mlp") return '-';
  if (s == "moe") return 'E';
  bad_field(error_code::invalid_model, field, name, "must name mamba, attention, mlp or moe layers");
}

// The per-layer pattern: hybrid_override_pattern, else layers_block_type; NemotronHConfig's
// default list (linear_attention, moe, full_attention, mlp) has an MoE layer and is refused.
inline std::string nemotron_h_pattern(const config& c, std::string& field) {
  if (c.has("hybrid_override_pattern")) {
    field = c.field("hybrid_override_pattern");
    return c.text("hybrid_override_pattern", "");
  }
  field = c.field("layers_block_type");
  if (!c.has("layers_block_type"))
    bad_field(error_code::unsupported, c.field("hybrid_override_pattern"), json(),
              "is required: NemotronHConfig's default layers (linear_attention, moe, full_attention, mlp) include "
              "an MoE layer, which is not modelled");
  const json& list = c.raw().at("layers_block_type");
  if (!list.is_array()) bad_field(error_code::invalid_model, field, list, "must be a list of layer types");
  std::string pattern;
  for (const json& name : list) pattern += nemotron_h_block_char(name, field);
  return pattern;
}

// NemotronHConfig's keys and defaults (configuration_nemotron_h.py@13923c63); the legacy
// mamba_* spellings win where present (NemotronHConfig.__post_init__).
inline model_spec nemotron_h(const config& c) {
  model_spec m{};
  m.arch = architecture::decoder;
  std::string field;
  const std::string pattern = nemotron_h_pattern(c, field);
  if (pattern.empty()) bad_field(error_code::invalid_model, field, pattern, "must list at least one layer");
  if (pattern.size() > max_block_pattern_layers)
    bad_field(error_code::unsupported, field, pattern,
              "must list at most " + std::to_string(max_block_pattern_layers) + " layers");
  for (std::size_t i = 0; i < pattern.size(); ++i) m.layer_blocks[i] = nemotron_h_block(pattern[i], field, pattern);
  m.layers = pattern.size();
  // num_hidden_layers is the pattern's length; a config.json that says otherwise is refused.
  if (c.has("num_hidden_layers") && c.count("num_hidden_layers", 0) != m.layers)
    bad_field(error_code::invalid_model, c.field("num_hidden_layers"), c.count("num_hidden_layers", 0),
              "must equal the number of layers " + field + " lists (" + std::to_string(m.layers) + ")");
  m.hidden = c.count("hidden_size", 4096);
  m.vocab = c.count("vocab_size", 131072);
  m.context_length = c.count("max_position_embeddings", 4096);
  m.norm = norm_kind::rmsnorm;  // NemotronHRMSNorm: LlamaRMSNorm's code, on every block and norm_f
  m.norm_bias = false;
  m.tied_embeddings = c.flag("tie_word_embeddings", false);
  // NemotronHForCausalLM: lm_head(...).float(), then loss_function.
  m.upcast_logits = true;
  // NemotronHAttention: q/k/v/o_proj(bias=False), no rotary, eager softmax in fp32.
  m.positions = position_kind::none;
  const bool kv_none = c.raw().contains("num_key_value_heads") && c.raw().at("num_key_value_heads").is_null();
  m.heads = c.count("num_attention_heads", 32);
  m.kv_heads = kv_none ? m.heads : c.count("num_key_value_heads", 8);
  m.head_dim = c.count("head_dim", 128);
  m.softmax_fp32 = true;
  if (c.flag("attention_bias", false))
    bad_field(error_code::unsupported, "config.attention_bias", true,
              "must be false: NemotronHAttention's projections have no bias");
  apply_dropout(c, m, {.attention = {"attention_dropout", 0.0}});
  if (c.has("sliding_window"))
    bad_field(error_code::unsupported, c.field("sliding_window"), c.raw().at("sliding_window"),
              "must be null: sliding-window attention is not modelled");
  // NemotronHMLP: down_proj(relu2(up_proj(x))), bias=mlp_bias.
  m.ffn = c.count("intermediate_size", 21504);
  m.mlp = mlp_kind::relu_squared;
  m.mlp_bias = c.flag("mlp_bias", false);
  const std::string mlp_act = c.text("mlp_hidden_act", "relu2");
  if (mlp_act != "relu2")
    bad_field(error_code::unsupported, "config.mlp_hidden_act", mlp_act, "must be relu2: other MLP activations are not modelled");
  // NemotronHMamba2Mixer: intermediate_size = mamba_num_heads * mamba_head_dim (expand unused).
  m.hybrid_mixer = mixer_kind::mamba2;
  m.single_mixer_blocks = true;
  m.ssm_heads = c.count("mamba_num_heads", 128);
  m.ssm_inner = m.ssm_heads * c.count("mamba_head_dim", 64);
  m.ssm_groups = c.count({"mamba_n_groups", "n_groups"}, 8);
  m.ssm_state = c.count("ssm_state_size", 128);
  m.ssm_conv = c.count({"mamba_d_conv", "conv_kernel"}, 4);
  m.ssm_chunk = c.count({"mamba_chunk_size", "chunk_size"}, 128);
  m.ssm_conv_bias = c.has("mamba_conv_bias") ? c.flag("mamba_conv_bias", true) : c.flag("use_conv_bias", true);
  // in_proj and out_proj(bias=config.use_bias); an older config's mamba_proj_bias, read by
  // earlier modeling files, is modelled when it agrees.
  m.ssm_proj_bias = c.flag("use_bias", false);
  if (c.flag("mamba_proj_bias", m.ssm_proj_bias) != m.ssm_proj_bias)
    bad_field(error_code::unsupported, "config.mamba_proj_bias", !m.ssm_proj_bias,
              "must equal config.use_bias: the in_proj and out_proj biases follow use_bias");
  // Zamba2RMSNormGated(group_size = intermediate / n_groups): Mamba-2's gated norm, the
  // per-group variance a (tokens x groups) tensor instead of (tokens x 1).
  m.ssm_gated_norm = true;
  const std::string ssm_act = c.text("mamba_hidden_act", "silu");
  if (ssm_act != "silu")
    bad_field(error_code::unsupported, "config.mamba_hidden_act", ssm_act, "must be silu: the Mamba-2 mixer's activation");
  static_cast<void>(c.flag("use_mamba_kernels", true));  // the path is the run's (run.ssm_kernels)
  return m;
}

}  // namespace memscale::json_io::hf
