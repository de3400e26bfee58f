// The Mamba-1 layer kind in constant evaluation: mamba-130m-hf's parameter count, one block's
// saved bytes on the torch path against docs/research/ssm-saved-tensors.txt, the fused path
// keeping less, and the model checks of a state-space stack.
#include <memscale/memscale.hpp>

namespace {

using namespace memscale;

// state-spaces/mamba-130m-hf (MambaConfig): 24 layers, hidden 768, inner 1536, state 16,
// conv 4, dt rank 48, no in/out bias, conv bias, tied head.
constexpr model_spec mamba_130m() {
  return {.name = "mamba-130m",
          .layers = 24,
          .hidden = 768,
          .vocab = 50280,
          .positions = position_kind::none,
          .norm = norm_kind::rmsnorm,
          .norm_bias = false,
          .tied_embeddings = true,
          .upcast_logits = true,
          .mixer = mixer_kind::mamba1,
          .ssm_inner = 1536,
          .ssm_state = 16,
          .ssm_conv = 4,
          .ssm_dt_rank = 48,
          .ssm_proj_bias = false,
          .residual_fp32 = true};
}
static_assert(parameter_count(mamba_130m()) == 129'135'360);  // tools/families/ssm_vision_params.py

// The listing's block (hidden 64, inner 128, state 16, dt rank 4) at B 2, L 64 on CPU, torch 1.13.
constexpr model_spec listed() {
  model_spec m = mamba_130m();
  m.layers = 4;
  m.hidden = 64;
  m.vocab = 1024;
  m.ssm_inner = 128;
  m.ssm_dt_rank = 4;
  return m;
}

constexpr std::uint64_t block_saved(const model_spec& m, const training_spec& run) {
  const model_graph g = build(m, run);
  const graph& s = g.stack();
  std::uint64_t total = 0;
  for (std::size_t i = s.block_begin; i < s.block_end; ++i) total += op_saved_bytes(s.ops[i]).value;
  return total;
}

constexpr training_spec cpu_run(precision p, ssm_kernel_choice k) {
  training_spec run{.micro_batch = 2, .seq_len = 64, .prec = p, .device = device_kind::cpu, .torch_version = 113};
  run.ssm_kernels = k;
  return run;
}

// fp32: the listing's 3,888,640 bytes plus the block input the norm keeps (2 x 64 x 64 x 4).
static_assert(block_saved(listed(), cpu_run(precision::fp32, ssm_kernel_choice::framework_default)) ==
              3'888'640 + 32'768);
static_assert(block_saved(listed(), cpu_run(precision::pure_bf16, ssm_kernel_choice::torch)) == 4'156'416);
static_assert(block_saved(listed(), cpu_run(precision::pure_bf16, ssm_kernel_choice::fused)) * 10 <
              block_saved(listed(), cpu_run(precision::pure_bf16, ssm_kernel_choice::torch)));

// A Mamba stack has no attention heads and no MLP.
constexpr bool valid(const model_spec& m) {
  validate(m);
  return true;
}
static_assert(valid(mamba_130m()));

}  // namespace
