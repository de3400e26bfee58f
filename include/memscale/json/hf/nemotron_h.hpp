// memscale/json/hf/nemotron_h.hpp: Nemotron-H / Nemotron Nano 2 (transformers
// models/nemotron_h/configuration_nemotron_h.py@13923c63 and modeling_nemotron_h.py@897753a0): a
// stack of single-mixer blocks, norm -> one mixer -> residual add, each layer's mixer named by
// hybrid_override_pattern ('M' a Mamba-2 mixer with a grouped gated RMSNorm, '*' attention without
// positional encoding, '-' an up/down MLP with relu2, 'E' the MoE block NemotronHMoE). The layers
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
  if (kind == 'E') return layer_block_kind::moe;
  bad_field(error_code::invalid_model, field, pattern,
            std::string("must list one of 'M' (Mamba-2), '*' (attention), '-' (MLP), 'E' (MoE) per layer, not '") +
                kind + "'");
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

// The per-layer pattern: hybrid_override_pattern, else layers_block_type, else NemotronHConfig's
// default list (configuration_nemotron_h.py@cfeb552e: mamba, moe, attention, moe).
inline std::string nemotron_h_pattern(const config& c, std::string& field) {
  if (c.has("hybrid_override_pattern")) {
    field = c.field("hybrid_override_pattern");
    return c.text("hybrid_override_pattern", "");
  }
  field = c.field("layers_block_type");
  if (!c.has("layers_block_type")) return "ME*E";
  const json& list = c.raw().at("layers_block_type");
  if (!list.is_array()) bad_field(error_code::invalid_model, field, list, "must be a list of layer types");
  std::string pattern;
  for (const json& name : list) pattern += nemotron_h_block_char(name, field);
  return pattern;
}

// NemotronHMoE (modeling_nemotron_h.py@897753a0), when the pattern has 'E' layers: the fp32 router
// of n_routed_experts (NemotronHTopkRouter: F.linear of fp32 copies, an e_score_correction_bias
// buffer), a sigmoid over the group-limited top num_experts_per_tok, NemotronHExperts (3-D up_proj
// [E, F, H] and down_proj [E, H, F], relu2, no gate: use_experts_implementation(has_gate=False)) of
// moe_intermediate_size, then shared_experts(residuals) added: one NemotronHMLP of
// moe_shared_expert_intermediate_size (n_shared_experts does not change it). The MLP layers keep
// intermediate_size. Defaults: configuration_nemotron_h.py@cfeb552e.
inline void nemotron_h_experts(const config& c, model_spec& m) {
  bool moe = false;
  for (std::size_t i = 0; i < static_cast<std::size_t>(m.layers); ++i) moe = moe || m.layer_blocks[i] == layer_block_kind::moe;
  if (!moe) return;
  if (c.has("moe_latent_size") && !c.raw().at("moe_latent_size").is_null())
    bad_field(error_code::unsupported, c.field("moe_latent_size"), c.raw().at("moe_latent_size"),
              "must be null: the experts' latent projections (fc1_latent_proj, fc2_latent_proj) are not modelled");
  m.dense_ffn = m.ffn;
  m.experts = c.count("n_routed_experts", 8);
  m.experts_per_token = c.count("num_experts_per_tok", 2);
  m.ffn = c.count("moe_intermediate_size", 7688);
  m.shared_expert_ffn = c.count("moe_shared_expert_intermediate_size", 7688);
  m.shared_expert_gate = false;
  m.router_fp32 = true;
  m.router_score_correction = true;
  if (m.experts_per_token == 0 || m.experts_per_token > m.experts)
    bad_field(error_code::invalid_model, c.field("num_experts_per_tok"), m.experts_per_token,
              "must be between 1 and n_routed_experts (" + std::to_string(m.experts) + ")");
  const std::uint64_t groups = c.count("n_group", 1);
  if (groups == 0 || m.experts % groups != 0 || c.count("topk_group", 1) > groups)
    bad_field(error_code::invalid_model, c.field("n_group"), groups,
              "must divide n_routed_experts and be at least topk_group (route_tokens_to_experts' group view)");
  // Scalars of the routing, and keys the model does not build from: routed_scaling_factor and
  // norm_topk_prob scale tokens x top-k weights (not written, as for DeepSeek-V3); the mtp.* weights
  // of num_nextn_predict_layers are ignored on load (_keys_to_ignore_on_load_unexpected).
  static_cast<void>(c.number("routed_scaling_factor", 1.0));
  static_cast<void>(c.flag("norm_topk_prob", true));
  static_cast<void>(c.count("n_shared_experts", 1));
  static_cast<void>(c.flag("moe_shared_expert_overlap", true));
  m.unbuilt_mtp_layers = c.count("num_nextn_predict_layers", 0);
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
  nemotron_h_experts(c, m);
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
