// memscale/json/emit_torchtitan.hpp: a torchtitan job config (the TOML `--job.config_file`
// reads) for a torchtitan run memscale estimated: its llama3 flavor, batch, precision, FSDP2
// degree and activation checkpointing, with the sections and keys of torchtitan v0.1.0's
// JobConfig (torchtitan/config_manager.py @ f7084fc7).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "memscale/error.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"
#include "memscale/validate.hpp"

namespace memscale::json_io {

namespace engine_keys {

// One key of a JobConfig dataclass and the TOML type its annotation takes.
enum class toml_type : std::uint8_t { integer, string, boolean };
struct toml_key {
  std::string_view section;
  std::string_view key;
  toml_type type;
};

// The keys an emitted job config writes, each a field of config_manager.py @ f7084fc7 with its
// annotation: Job.description str; Model.name, flavor str; Optimizer.name str, implementation
// Literal["for-loop", "foreach", "fused"]; Training.local_batch_size, global_batch_size, seq_len
// int, mixed_precision_param Literal["bfloat16", "float32"], mixed_precision_reduce
// Literal["float32"], compile bool; Parallelism.data_parallel_replicate_degree,
// data_parallel_shard_degree, tensor_parallel_degree, pipeline_parallel_degree,
// context_parallel_degree int, context_parallel_rotate_method Literal["allgather", "alltoall"],
// fsdp_reshard_after_forward Literal["default", "always", "never"];
// ActivationCheckpoint.mode Literal["selective", "full", "none"], selective_ac_option str.
inline constexpr std::array<toml_key, 20> torchtitan_job{{
    {"job", "description", toml_type::string},
    {"model", "name", toml_type::string},
    {"model", "flavor", toml_type::string},
    {"optimizer", "name", toml_type::string},
    {"optimizer", "implementation", toml_type::string},
    {"training", "local_batch_size", toml_type::integer},
    {"training", "global_batch_size", toml_type::integer},
    {"training", "seq_len", toml_type::integer},
    {"training", "mixed_precision_param", toml_type::string},
    {"training", "mixed_precision_reduce", toml_type::string},
    {"training", "compile", toml_type::boolean},
    {"parallelism", "data_parallel_replicate_degree", toml_type::integer},
    {"parallelism", "data_parallel_shard_degree", toml_type::integer},
    {"parallelism", "fsdp_reshard_after_forward", toml_type::string},
    {"parallelism", "tensor_parallel_degree", toml_type::integer},
    {"parallelism", "pipeline_parallel_degree", toml_type::integer},
    {"parallelism", "context_parallel_degree", toml_type::integer},
    {"parallelism", "context_parallel_rotate_method", toml_type::string},
    {"activation_checkpoint", "mode", toml_type::string},
    {"activation_checkpoint", "selective_ac_option", toml_type::string},
}};

}  // namespace engine_keys

namespace detail {

// torchtitan's llama3 flavors (models/llama3/__init__.py llama3_configs @ f7084fc7): dim,
// n_layers, n_heads, n_kv_heads, and the FFN width its ffn_dim_multiplier / multiple_of give
// (8B: 1.3 / 1024 -> 14336; 70B: 1.3 / 4096 -> 28672; 405B: 1.2 / 4096 -> 53248); the
// vocabulary is the Llama 3 tokenizer's 128256.
struct titan_flavor {
  std::string_view name;
  std::uint64_t layers, hidden, heads, kv_heads, ffn;
};
inline constexpr std::array<titan_flavor, 3> titan_flavors{{
    {"8B", 32, 4096, 32, 8, 14336},
    {"70B", 80, 8192, 64, 8, 28672},
    {"405B", 126, 16384, 128, 8, 53248},
}};

inline std::string_view titan_flavor_of(const model_spec& m) {
  for (const auto& f : titan_flavors)
    if (m.layers == f.layers && m.hidden == f.hidden && m.heads == f.heads && m.kv_heads == f.kv_heads &&
        m.ffn == f.ffn && m.vocab == 128256 && !m.tied_embeddings)
      return f.name;
  memscale::detail::fail(error_code::unsupported, "model",
                         "has no torchtitan llama3 flavor: --emit torchtitan writes 8B, 70B or 405B "
                         "(models/llama3/__init__.py @ f7084fc7), matched by layers, hidden, heads, kv heads, FFN and "
                         "vocabulary");
}

}  // namespace detail

// The job config for `run` (framework torchtitan, FSDP2 over run.data_parallel ranks). The
// global batch is local_batch_size x data_parallel_shard_degree (no gradient accumulation).
inline std::string emit_torchtitan_job(const model_spec& model, const training_spec& run, std::string_view label) {
  validate(run);
  memscale::detail::require(run.framework == framework_kind::torchtitan, error_code::unsupported, "run.framework",
                            "must be torchtitan for a torchtitan job config", run.framework);
  const std::string_view flavor = detail::titan_flavor_of(model);
  if (run.optimizer != optimizer_kind::adamw && run.optimizer != optimizer_kind::adam)
    memscale::detail::fail(error_code::unsupported, "run.optimizer",
                           "has no torchtitan name: its build_optimizers takes Adam or AdamW (components/optimizer.py)");
  const std::string_view impl = run.optimizer_impl == optimizer_implementation::for_loop ? "for-loop"
                                : run.optimizer_impl == optimizer_implementation::fused  ? "fused"
                                                                                        : "foreach";
  const std::string_view mode = run.ckpt == checkpointing::full ? "full"
                                : run.sac != selective_ac::none ? "selective"
                                                                : "none";
  const auto q = [](std::string_view s) {
    std::string quoted(1, '"');
    quoted.append(s);
    quoted.push_back('"');
    return quoted;
  };
  const auto n = [](std::uint64_t v) { return std::to_string(v); };
  std::string t;
  t += "# torchtitan v0.1.0 job config (torchtitan/config_manager.py @ f7084fc7), written by memscale-plan\n";
  t += "[job]\ndescription = " + q(std::string("memscale: ") + std::string(label)) + "\n\n";
  t += "[model]\nname = \"llama3\"\nflavor = " + q(flavor) + "\n\n";
  t += "[optimizer]\nname = " + q(run.optimizer == optimizer_kind::adam ? "Adam" : "AdamW") +
       "\nimplementation = " + q(impl) + "\n\n";
  t += "[training]\nlocal_batch_size = " + n(run.micro_batch) +
       "\nglobal_batch_size = " + n(memscale::detail::checked_mul(run.micro_batch, run.data_parallel)) +
       "\nseq_len = " + n(run.seq_len) +
       "\nmixed_precision_param = \"bfloat16\"\nmixed_precision_reduce = \"float32\"\ncompile = false\n\n";
  t += "[parallelism]\ndata_parallel_replicate_degree = 1\ndata_parallel_shard_degree = " + n(run.data_parallel) +
       "\nfsdp_reshard_after_forward = \"default\"\ntensor_parallel_degree = " + n(run.tensor_parallel) +
       "\npipeline_parallel_degree = 1\ncontext_parallel_degree = " + n(run.context_parallel) +
       "\ncontext_parallel_rotate_method = \"allgather\"\n\n";
  t += "[activation_checkpoint]\nmode = " + q(mode) + "\n";
  if (run.sac == selective_ac::op_save_list) t += "selective_ac_option = \"op\"\n";
  if (run.sac == selective_ac::every_kth_block) t += "selective_ac_option = " + q(n(run.sac_every)) + "\n";
  return t;
}

}  // namespace memscale::json_io
