// memscale/json/hf/mamba2.hpp: Mamba-2 (transformers models/mamba2/configuration_mamba2.py
// @f2a39d49 and modeling_mamba2.py@4711664e): a stack of norm -> Mamba-2 mixer -> residual add
// blocks (graph/layers/mamba2.hpp), no attention, no MLP, no positions; the residual stream in
// fp32 under residual_in_fp32, the logits upcast as Mamba-1's.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <string>

#include "memscale/json/hf/config.hpp"
#include "memscale/model.hpp"

namespace memscale::json_io::hf {

// Mamba2Config's keys and defaults (configuration_mamba2.py@f2a39d49 Mamba2Config.__init__).
inline model_spec mamba2(const config& c) {
  model_spec m{};
  m.arch = architecture::decoder;
  m.mixer = mixer_kind::mamba2;
  m.layers = c.count("num_hidden_layers", 64);
  m.hidden = c.count("hidden_size", 4096);
  m.vocab = c.count("vocab_size", 32768);
  m.positions = position_kind::none;
  m.norm = norm_kind::rmsnorm;  // Mamba2RMSNorm: LlamaRMSNorm's code
  m.norm_bias = false;
  m.tied_embeddings = c.flag("tie_word_embeddings", false);  // Mamba2Config(tie_word_embeddings=False)
  // intermediate_size = int(expand * hidden_size); no config key overrides it (Mamba2Mixer reads
  // config.expand), unlike MambaConfig.
  const double expand = c.number("expand", 2.0);
  if (!(expand > 0.0)) bad_field(error_code::invalid_model, "config.expand", expand, "must be > 0");
  m.ssm_inner = static_cast<std::uint64_t>(expand * static_cast<double>(m.hidden));
  m.ssm_heads = c.count("num_heads", 128);
  const std::uint64_t head_dim = c.count("head_dim", 64);
  // Mamba2Mixer reshapes the inner width into (num_heads, head_dim).
  if (m.ssm_heads * head_dim != m.ssm_inner)
    bad_field(error_code::invalid_model, "config.num_heads", m.ssm_heads,
              "times config.head_dim (" + std::to_string(head_dim) + ") must equal int(expand * hidden_size) (" +
                  std::to_string(m.ssm_inner) + ")");
  m.ssm_groups = c.count("n_groups", 8);
  m.ssm_state = c.count("state_size", 128);
  m.ssm_conv = c.count("conv_kernel", 4);
  m.ssm_chunk = c.count("chunk_size", 256);
  m.ssm_proj_bias = c.flag("use_bias", false);
  m.ssm_conv_bias = c.flag("use_conv_bias", true);
  m.residual_fp32 = c.flag("residual_in_fp32", true);
  // Mamba2ForCausalLM: lm_head(...).float(), then CrossEntropyLoss on a shifted contiguous copy.
  m.upcast_logits = true;
  const std::string act = c.text("hidden_act", "silu");
  if (act != "silu")
    bad_field(error_code::unsupported, "config.hidden_act", act, "must be silu: other mixer activations are not modelled");
  // rms_norm selects the gated RMSNorm after the scan; without it the mixer is not described here.
  if (!c.flag("rms_norm", true))
    bad_field(error_code::unsupported, "config.rms_norm", false, "must be true: a Mamba-2 mixer without its gated RMSNorm is not modelled");
  return m;
}

}  // namespace memscale::json_io::hf
