// memscale/json/hf/mamba.hpp: Mamba and FalconMamba (transformers models/mamba/
// configuration_mamba.py@00328d4e and modeling_mamba.py@1160c0f3; models/falcon_mamba/
// configuration_falcon_mamba.py@8f578db5 and modeling_falcon_mamba.py@11065c9b): a stack of
// norm -> Mamba-1 mixer -> residual add blocks (graph/layers/mamba.hpp), no attention, no MLP,
// no positions; the residual stream in fp32 under residual_in_fp32. FalconMamba adds weightless
// RMS norms on the mixer's dt, B and C (non-persistent buffers: no parameters).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <string>

#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/record_rules.hpp"
#include "memscale/model.hpp"

namespace memscale::json_io::hf {

// `time_step_rank`: "auto" (MambaConfig: math.ceil(hidden_size / 16)) or a count.
inline std::uint64_t mamba_dt_rank(const config& c, std::uint64_t hidden) {
  if (c.has("time_step_rank") && c.raw().at("time_step_rank").is_string()) {
    const std::string rank = c.text("time_step_rank", "auto");
    if (rank != "auto") bad_field(error_code::invalid_model, "config.time_step_rank", rank, "must be \"auto\" or a count");
    return (hidden + 15) / 16;
  }
  return c.has("time_step_rank") ? c.count("time_step_rank", 0) : (hidden + 15) / 16;
}

// MambaConfig's keys and defaults; `use_bias` differs between the two families.
inline model_spec mamba_like(const config& c, bool use_bias_default) {
  model_spec m{};
  m.arch = architecture::decoder;
  m.mixer = mixer_kind::mamba1;
  m.layers = c.count("num_hidden_layers", 32);
  m.hidden = c.count("hidden_size", 768);
  m.vocab = c.count("vocab_size", 50280);
  m.positions = position_kind::none;
  m.norm = norm_kind::rmsnorm;  // MambaRMSNorm: LlamaRMSNorm's code
  m.norm_bias = false;
  m.tied_embeddings = c.flag("tie_word_embeddings", true);  // PretrainedConfig default
  // __init__ sets intermediate_size = int(expand * hidden_size), but a config.json key of that
  // name reaches PretrainedConfig.__init__ through **kwargs, which sets it last: the key wins.
  const double expand = c.number("expand", 2.0);
  if (!(expand > 0.0)) bad_field(error_code::invalid_model, "config.expand", expand, "must be > 0");
  m.ssm_inner = c.has("intermediate_size") ? c.count("intermediate_size", 0)
                                           : static_cast<std::uint64_t>(expand * static_cast<double>(m.hidden));
  m.ssm_state = c.count("state_size", 16);
  m.ssm_conv = c.count("conv_kernel", 4);
  m.ssm_dt_rank = mamba_dt_rank(c, m.hidden);
  m.ssm_proj_bias = c.flag("use_bias", use_bias_default);
  m.ssm_conv_bias = c.flag("use_conv_bias", true);
  m.residual_fp32 = c.flag("residual_in_fp32", true);
  // MambaForCausalLM: lm_head(...).float(), then CrossEntropyLoss on a shifted contiguous copy.
  m.upcast_logits = true;
  const std::string act = c.text("hidden_act", "silu");
  if (act != "silu")
    bad_field(error_code::unsupported, "config.hidden_act", act, "must be silu: other mixer activations are not modelled");
  // use_mambapy selects the mamba.py parallel scan on the torch path: not modelled.
  if (c.flag("use_mambapy", false))
    bad_field(error_code::unsupported, "config.use_mambapy", true,
              "must be false: the mamba.py parallel scan (pscan) is not modelled; the torch and fused paths are");
  return m;
}

inline model_spec mamba(const config& c) { return mamba_like(c, true); }  // MambaConfig(use_bias=True)

inline model_spec falcon_mamba(const config& c) {
  model_spec m = mamba_like(c, false);  // FalconMambaConfig(use_bias=False)
  m.ssm_dt_norms = ssm_dt_norm_kind::weightless;
  static_cast<void>(c.number("mixer_rms_eps", 1e-6));  // read to refuse a non-number
  return m;
}

}  // namespace memscale::json_io::hf
