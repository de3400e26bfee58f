// Static checks for the five estimators (memscale/estimate/*.hpp) and their composition
// in memscale/estimate.hpp. Each value is derived by hand in the comment next to it;
// building this translation unit is the test.
//
// P = 124,439,808 is GPT-2's parameter count (presets_static.cpp). GPT-2 has 148
// parameter tensors: wte, wpe, 12 blocks x {ln_1 w/b, c_attn w/b, attn c_proj w/b,
// ln_2 w/b, c_fc w/b, mlp c_proj w/b}, ln_f w/b (the lm_head is tied to wte).
#include "memscale/estimate.hpp"
#include "memscale/presets.hpp"
#include "memscale/graph/model_graph.hpp"

#include <cstdint>
#include <type_traits>

namespace {

using namespace memscale;
using namespace memscale::literals;

constexpr std::uint64_t P = 124'439'808;
constexpr std::uint64_t gpt2_tensors = 148;
constexpr std::uint64_t gpt2_wte = 50'257ULL * 768;  // 38,597,376: the largest GPT-2 tensor

// ============================================================================
// 1. GPT-2, fp32, AdamW, on the CPU (the cpu-gpt2-b1-s128-adamw record of
//    shared/ground-truth/cpu_traced_dev.json: torch 1.13 single-tensor AdamW).
// ============================================================================
constexpr training_spec gpt2_cpu{.micro_batch = 1,
                                 .seq_len = 128,
                                 .optimizer_impl = optimizer_implementation::for_loop,
                                 .attention = attention_impl::eager,
                                 .device = device_kind::cpu,
                                 .torch_version = 113};
constexpr graph g_cpu = build(presets::gpt2, gpt2_cpu).stack();

static_assert(parameter_count(g_cpu) == P);
static_assert(trainable_parameter_count(g_cpu) == P);
// fp32 parameters: 4 B each. Measured params_enum: 497,759,232.
static_assert(parameter_bytes(g_cpu, gpt2_cpu) == bytes{4 * P});
static_assert(parameter_bytes(g_cpu, gpt2_cpu) == bytes{497'759'232});
// Gradients: same dtype and shape as the parameters; the tied wte/lm_head gets one.
static_assert(gradient_bytes(g_cpu, gpt2_cpu) == bytes{4 * P});
// AdamW: exp_avg + exp_avg_sq (2 x 4 B per parameter) + one 4 B fp32 `step` tensor per
// parameter tensor on the CPU: 8P + 4*148 = 995,518,464 + 592 = 995,519,056 (= measured opt_enum).
static_assert(optimizer_state_bytes(g_cpu, gpt2_cpu) == bytes{8 * P + 4 * gpt2_tensors});
static_assert(optimizer_state_bytes(g_cpu, gpt2_cpu) == bytes{995'519'056});
// _single_tensor_adamw holds two temporaries the size of the largest tensor (wte):
// 2 * 4 B * 38,597,376 = 308,779,008.
static_assert(optimizer_step_temporaries(g_cpu, gpt2_cpu) == bytes{2 * 4 * gpt2_wte});
static_assert(optimizer_step_temporaries(g_cpu, gpt2_cpu) == bytes{308'779'008});
// Buffers: one 1024 x 1024 bool causal mask per block: 12 MiB (= measured buffers_enum 12,582,912).
static_assert(g_cpu.buffers == 12_MiB);
// Inputs: input_ids + labels, int64, 1 x 128 each: 2 * 128 * 8 = 2,048 (= measured inputs_bytes).
static_assert(g_cpu.inputs == bytes{2048});

constexpr estimate_result r_cpu = estimate(presets::gpt2, gpt2_cpu);
static_assert(r_cpu.parameter_count == P);
static_assert(r_cpu.parameter_bytes == bytes{4 * P});
static_assert(r_cpu.gradient_bytes == bytes{4 * P});
static_assert(r_cpu.optimizer_bytes == bytes{995'519'056});
// The peak is inside optimizer.step(): params + buffers + grads + state + inputs + temporaries
// = 497,759,232 + 12,582,912 + 497,759,232 + 995,519,056 + 2,048 + 308,779,008 = 2,312,401,488
// (measured: 2,312,401,504, 16 B more). No cuBLAS workspace or CUDA context on the CPU.
static_assert(r_cpu.steady.at == phase::optimizer_step);
static_assert(r_cpu.steady.tensor == bytes{2'312'401'488});
static_assert(r_cpu.steady.breakdown.parameters == bytes{4 * P} + 12_MiB);
static_assert(r_cpu.steady.breakdown.gradients == bytes{4 * P});
static_assert(r_cpu.steady.breakdown.optimizer == bytes{995'519'056});
static_assert(r_cpu.steady.breakdown.activations == bytes{2048});
static_assert(r_cpu.steady.breakdown.workspace == bytes{308'779'008});
static_assert(r_cpu.steady.reserved == r_cpu.steady.tensor);
static_assert(r_cpu.steady.device == r_cpu.steady.tensor);
// Step 1 creates the state inside the step, so the step-1 peak is the same moment.
static_assert(r_cpu.first_step.tensor == r_cpu.steady.tensor);

// ============================================================================
// 2. Optimizer state and step temporaries on CUDA (graph built once per run).
// ============================================================================
constexpr training_spec cuda_run(optimizer_kind o, optimizer_implementation impl, precision p = precision::fp32,
                                 std::uint32_t torch = 205) {
  return {.micro_batch = 1, .seq_len = 128, .prec = p, .optimizer = o, .optimizer_impl = impl, .torch_version = torch};
}
constexpr bytes state_of(const training_spec& t) { return optimizer_state_bytes(build(presets::gpt2, t).stack(), t); }
constexpr bytes temps_of(const training_spec& t) { return optimizer_step_temporaries(build(presets::gpt2, t).stack(), t); }

using oi = optimizer_implementation;
using ok = optimizer_kind;

// foreach AdamW on CUDA: the step counters stay on the host, so exactly 8P.
static_assert(state_of(cuda_run(ok::adamw, oi::foreach)) == bytes{8 * P});
static_assert(state_of(cuda_run(ok::adam, oi::foreach)) == bytes{8 * P});
// fused keeps `step` on the device: 8P + 4*148.
static_assert(state_of(cuda_run(ok::adamw, oi::fused)) == bytes{8 * P + 4 * gpt2_tensors});
// _multi_tensor_adamw, torch >= 2.1: one list the size of the group: 4P.
static_assert(temps_of(cuda_run(ok::adamw, oi::foreach)) == bytes{4 * P});
// torch 2.0: exp_avg_sq_sqrt and denom: two lists, 8P.
static_assert(temps_of(cuda_run(ok::adamw, oi::foreach, precision::fp32, 200)) == bytes{8 * P});
// Fused: no temporaries.
static_assert(temps_of(cuda_run(ok::adamw, oi::fused)) == bytes{});
// SGD without momentum: no state, no temporaries, whatever the implementation.
static_assert(state_of(cuda_run(ok::sgd, oi::foreach)) == bytes{});
static_assert(temps_of(cuda_run(ok::sgd, oi::foreach)) == bytes{});
static_assert(temps_of(cuda_run(ok::sgd, oi::for_loop)) == bytes{});
// SGD with momentum: one momentum_buffer per parameter: 4P.
static_assert(state_of(cuda_run(ok::sgd_momentum, oi::foreach)) == bytes{4 * P});
// Lion: exp_avg only: 4P.
static_assert(state_of(cuda_run(ok::lion, oi::foreach)) == bytes{4 * P});
// Adafactor (beta1 = None): a matrix keeps row + column second-moment vectors, a vector a full copy.
//   wte 50257+768 = 51,025; wpe 1024+768 = 1,792; ln_f 2*768 = 1,536;
//   per block: ln_1 1,536; c_attn 2304+768 + 2304 (bias); attn c_proj 768+768 + 768;
//              ln_2 1,536; c_fc 3072+768 + 3072; mlp c_proj 3072+768 + 768 = 22,272;
//   (51,025 + 1,792 + 12 * 22,272 + 1,536) * 4 B = 321,617 * 4 = 1,286,468.
static_assert(state_of(cuda_run(ok::adafactor, oi::foreach)) == bytes{1'286'468});
// bitsandbytes AdamW8bit: tensors >= 4096 elements keep two int8 states + one fp32 absmax
// per 256 values per state; smaller tensors keep fp32 states (8 B per element).
//   wte: 2 * 38,597,376 + 8 * 150,771 = 78,400,920; wpe: 2 * 786,432 + 8 * 3,072 = 1,597,440;
//   per block matrices (1,769,472 + 589,824 + 2,359,296 + 2,359,296 = 7,077,888):
//     2 * 7,077,888 + 8 * 27,648 = 14,376,960; per block vectors 9,984 * 8 = 79,872;
//   ln_f 1,536 * 8 = 12,288.
//   78,400,920 + 1,597,440 + 12 * (14,376,960 + 79,872) + 12,288 = 253,492,632.
static_assert(state_of(cuda_run(ok::adamw_8bit, oi::foreach)) == bytes{253'492'632});

// Per tensor: below 4096 elements AdamW8bit is fp32, 2 x 4 B per element.
constexpr training_spec adam8 = cuda_run(ok::adamw_8bit, oi::foreach);
static_assert(tensor_state_bytes(1, 4095, adam8) == bytes{2 * 4 * 4095});   // 32,760
static_assert(tensor_state_bytes(768, 1, adam8) == bytes{6144});            // a LayerNorm weight
// At 4096: 2 * 4096 int8 + 2 * (4096 / 256) fp32 absmax = 8,192 + 128.
static_assert(tensor_state_bytes(1, 4096, adam8) == bytes{8320});
// 4096 x 4096: 2 * 16,777,216 + 2 * 65,536 * 4 = 33,554,432 + 524,288.
static_assert(tensor_state_bytes(4096, 4096, adam8) == bytes{34'078'720});
// A partial last block still gets an absmax: 4097 elements -> 17 blocks per state.
static_assert(tensor_state_bytes(1, 4097, adam8) == bytes{2 * 4097 + 2 * 17 * 4});
// fp32 AdamW for comparison: 8 B per element, no step tensor on CUDA foreach.
static_assert(tensor_state_bytes(4096, 4096, cuda_run(ok::adamw, oi::foreach)) == bytes{8ULL * 4096 * 4096});
// Before bitsandbytes 0.44 a block was 2048 values: 4096 x 4096 keeps 8,192 absmax per state.
constexpr training_spec adam8_043 = [] {
  training_spec r = adam8;
  r.bitsandbytes_version = 4302;
  return r;
}();
static_assert(tensor_state_bytes(4096, 4096, adam8_043) == bytes{33'554'432 + 2 * 8192 * 4});
// Paged: the uint8 moments of a tensor from 1e5 elements live in unified memory, the absmax stay.
constexpr training_spec paged8 = [] {
  training_spec r = adam8;
  r.paged_optimizer = true;
  return r;
}();
static_assert(tensor_state_bytes(4096, 4096, paged8) == bytes{524'288});
static_assert(paged_state_bytes(4096 * 4096, paged8) == bytes{33'554'432});
static_assert(tensor_state_bytes(1, 99'999, paged8) == bytes{2 * 99'999 + 2 * 391 * 4});

// ============================================================================
// 3. Precision: pure_bf16 halves parameters, gradients and state; amp keeps fp32 masters.
// ============================================================================
constexpr training_spec bf16_run = cuda_run(ok::adamw, oi::foreach, precision::pure_bf16);
constexpr graph g_bf16 = build(presets::gpt2, bf16_run).stack();
static_assert(parameter_bytes(g_bf16, bf16_run) == bytes{2 * P});   // 248,879,616
static_assert(gradient_bytes(g_bf16, bf16_run) == bytes{2 * P});
static_assert(optimizer_state_bytes(g_bf16, bf16_run) == bytes{4 * P});
static_assert(optimizer_step_temporaries(g_bf16, bf16_run) == bytes{2 * P});
// On the CPU the fp32 step counters stay 4 B: 4P + 4*148.
constexpr training_spec bf16_cpu = [] {
  training_spec t = bf16_run;
  t.device = device_kind::cpu;
  return t;
}();
static_assert(state_of(bf16_cpu) == bytes{4 * P + 4 * gpt2_tensors});
// autocast: fp32 parameters, gradients and state.
constexpr training_spec amp_run = cuda_run(ok::adamw, oi::foreach, precision::amp_bf16);
constexpr graph g_amp = build(presets::gpt2, amp_run).stack();
static_assert(parameter_bytes(g_amp, amp_run) == bytes{4 * P});
static_assert(gradient_bytes(g_amp, amp_run) == bytes{4 * P});
static_assert(optimizer_state_bytes(g_amp, amp_run) == bytes{8 * P});

// ============================================================================
// 4. LoRA and QLoRA (Hu et al. 2021; Dettmers et al. 2023).
// ============================================================================
constexpr training_spec lora_run{.micro_batch = 1,
                                 .seq_len = 512,
                                 .prec = precision::pure_bf16,
                                 .target = training_target::lora,
                                 .lora_rank = 8};  // default targets: q and v
// llama-2-7b, r = 8 on q and v: A is r x in, B is out x r:
//   32 layers * 2 projections * 8 * (4096 + 4096) = 4,194,304 trainable.
constexpr estimate_result r_lora = estimate(presets::llama_2_7b, lora_run);
static_assert(r_lora.trainable_parameter_count == 4'194'304);
static_assert(r_lora.parameter_count == 6'738'415'616 + 4'194'304);  // base + adapters
// PEFT keeps adapters over a bf16 base in fp32 (get_peft_model autocast_adapter_dtype=True).
static_assert(r_lora.gradient_bytes == bytes{4 * 4'194'304});        // fp32, adapters only
static_assert(r_lora.optimizer_bytes == bytes{8 * 4'194'304});       // AdamW: 2 x fp32
// Frozen bf16 base (2 B) + fp32 adapters (4 B).
static_assert(r_lora.parameter_bytes == bytes{2 * 6'738'415'616 + 4 * 4'194'304});
// Adapters in the base dtype when asked for (lit-gpt's way): 2 B each.
constexpr training_spec lora_bf16_adapters = [] {
  training_spec t = lora_run;
  t.adapters = adapter_dtype::as_base;
  return t;
}();
static_assert(estimate(presets::llama_2_7b, lora_bf16_adapters).parameter_bytes ==
              bytes{2 * (6'738'415'616 + 4'194'304)});

// Every projection (q, k, v, o, gate, up, down):
//   32 * 8 * (4 * (4096 + 4096) + 3 * (4096 + 11008)) = 32 * 8 * 78,080 = 19,988,480.
constexpr lora_modules every_projection =
    lora_target::q | lora_target::k | lora_target::v | lora_target::o | lora_target::mlp;
constexpr training_spec lora_all = [] {
  training_spec t = lora_run;
  t.lora_targets = every_projection;
  return t;
}();
static_assert(trainable_parameter_count(build(presets::llama_2_7b, lora_all).stack()) == 19'988'480);
// llama-3-8b (GQA, 8 kv heads of 128): v projects to 1024:
//   32 * 8 * ((4096 + 4096) + (4096 + 1024)) = 32 * 8 * 13,312 = 3,407,872.
static_assert(trainable_parameter_count(build(presets::llama_3_8b, lora_run).stack()) == 3'407'872);

// QLoRA NF4: 4-bit codes + one fp32 absmax per 64 weights. A 4096 x 4096 weight:
//   16,777,216 / 2 = 8,388,608 B codes + 4 B * 262,144 blocks = 9,437,184.
static_assert(nf4_weight_bytes(4096ULL * 4096, base_quant::nf4) == bytes{8'388'608 + 4 * 262'144});
// Double quantisation: int8 absmax + one fp32 per 256 blocks: 8,388,608 + 262,144 + 4 * 1,024.
static_assert(nf4_weight_bytes(4096ULL * 4096, base_quant::nf4_double_quant) == bytes{8'654'848});
// 100 weights: 50 B of codes, 2 blocks (the last partial) -> 8 B of absmax.
static_assert(nf4_weight_bytes(100, base_quant::nf4) == bytes{58});

constexpr training_spec qlora_run = [] {
  training_spec t = lora_run;
  t.target = training_target::qlora;
  return t;
}();
constexpr training_spec qlora_dq_run = [] {
  training_spec t = qlora_run;
  t.quant = base_quant::nf4_double_quant;
  return t;
}();
constexpr op frozen_projection{.kind = op_kind::linear, .weight = {4096, 4096, 1}, .role = param_role::matmul,
                               .frozen = true};
constexpr op frozen_embedding{.kind = op_kind::embedding, .weight = {32000, 4096, 1}, .role = param_role::embedding,
                              .frozen = true};
static_assert(op_parameter_bytes(frozen_projection, qlora_run) == bytes{9'437'184});
static_assert(op_parameter_bytes(frozen_projection, qlora_dq_run) == bytes{8'654'848});
static_assert(op_parameter_bytes(frozen_projection, lora_run) == bytes{2ULL * 4096 * 4096});  // bf16 under LoRA
static_assert(op_parameter_bytes(frozen_embedding, qlora_run) == bytes{2ULL * 32000 * 4096});  // not quantised

// One llama-2-7b block under QLoRA (bf16 compute):
//   q, k, v, o: 4 * 9,437,184 = 37,748,736;
//   gate, up, down (4096 x 11008 = 45,088,768 each): 22,544,384 + 4 * 704,512 = 25,362,432 each
//     -> 76,087,296;
//   two RMSNorm weights in bf16: 2 * 4096 * 2 = 16,384;
//   adapters on q and v in bf16: 2 * 8 * (4096 + 4096) * 2 = 262,144.
//   Total 114,114,560 B.
consteval bytes qlora_block_bytes() {
  const graph g = build(presets::llama_2_7b, qlora_run).stack();
  bytes total{};
  for (std::size_t i = g.block_begin; i < g.block_end; ++i) total += op_parameter_bytes(g.ops[i], qlora_run);
  return total;
}
static_assert(qlora_block_bytes() == bytes{114'114'560});
static_assert(trainable_parameter_count(build(presets::llama_2_7b, qlora_run).stack()) == 4'194'304);

// ============================================================================
// 5. Workspace (workspace.hpp).
// ============================================================================
// Pre-Hopper ":4096:2:16:8": 2 x 4096 KiB + 8 x 16 KiB = 8,388,608 + 131,072.
static_assert(cublas_workspace_bytes(80) == bytes{8'519'680});
static_assert(cublas_workspace_bytes(70) == bytes{8'519'680});
static_assert(cublas_workspace_bytes(89) == bytes{8'519'680});  // Ada is not Hopper
// Hopper ":4096:8": 8 x 4096 KiB = 32 MiB.
static_assert(cublas_workspace_bytes(90) == 32_MiB);
static_assert(cuda_context_bytes(true) == 400_MiB);    // 419,430,400
static_assert(cuda_context_bytes(false) == 1343_MiB);  // 1,408,237,568

// GPT-2 fp32 fused AdamW on CUDA, b=1, s=128. Step 1's peak is in optimizer.step():
//   params 4P + buffers 12 MiB + grads 4P + state (8P + 4*148) + inputs 2,048 + cuBLAS 8,519,680
//   = 497,759,232 + 12,582,912 + 497,759,232 + 995,519,056 + 2,048 + 8,519,680 = 2,012,142,160.
constexpr training_spec fused_run = cuda_run(ok::adamw, oi::fused);
constexpr estimate_result r_fused = estimate(presets::gpt2, fused_run);
static_assert(r_fused.first_step.at == phase::optimizer_step);
static_assert(r_fused.first_step.tensor == bytes{2'012'142'160});
static_assert(r_fused.first_step.breakdown.workspace == bytes{8'519'680});
// From step 2 the state exists during backward, which becomes the peak.
static_assert(r_fused.steady.at == phase::backward);
static_assert(r_fused.steady.tensor > r_fused.first_step.tensor);
static_assert(r_fused.steady.breakdown.optimizer == r_fused.optimizer_bytes);
// reserved: the tensor peak rounded up to the allocator's 2 MiB granule (plus rounding waste);
// device: reserved + a 400 MiB lazily loaded CUDA context.
static_assert(r_fused.steady.reserved >= r_fused.steady.tensor);
static_assert(r_fused.steady.reserved.value % (2ULL << 20) == 0);
static_assert(r_fused.steady.device == r_fused.steady.reserved + 400_MiB);
static_assert(r_fused.first_step.device == r_fused.first_step.reserved + 400_MiB);

// sm_90: the cuBLAS workspace is 32 MiB, 25,034,752 B more at the same moment.
constexpr estimate_result r_fused_h100 = estimate(presets::gpt2, [] {
  training_spec t = fused_run;
  t.blas_workspace = cublas_workspace_bytes(90);
  return t;
}());
static_assert(r_fused_h100.first_step.tensor == bytes{2'012'142'160 + 25'034'752});
// Without lazy loading the context is 1343 MiB.
constexpr estimate_result r_fused_eager_load = estimate(presets::gpt2, [] {
  training_spec t = fused_run;
  t.cuda_lazy_loading = false;
  return t;
}());
static_assert(r_fused_eager_load.steady.tensor == r_fused.steady.tensor);
static_assert(r_fused_eager_load.steady.device == r_fused.steady.reserved + 1343_MiB);

// Gradient accumulation keeps .grad alive across micro-batches, as does zero_grad(set_to_none=False).
constexpr estimate_result r_fused_accum = estimate(presets::gpt2, [] {
  training_spec t = fused_run;
  t.grad_accum = 4;
  return t;
}());
constexpr estimate_result r_fused_zero_in_place = estimate(presets::gpt2, [] {
  training_spec t = fused_run;
  t.zero_grad_to_none = false;
  return t;
}());
static_assert(r_fused_accum.steady.tensor > r_fused.steady.tensor);
static_assert(r_fused_zero_in_place.steady.tensor == r_fused_accum.steady.tensor);
// Offloading the optimizer leaves no state on the device (the static count is unchanged).
constexpr estimate_result r_fused_offload = estimate(presets::gpt2, [] {
  training_spec t = fused_run;
  t.offload_optimizer = true;
  return t;
}());
static_assert(r_fused_offload.optimizer_bytes == r_fused.optimizer_bytes);
static_assert(r_fused_offload.steady.breakdown.optimizer == bytes{});
static_assert(r_fused_offload.steady.tensor < r_fused.steady.tensor);

// ============================================================================
// 6. Saved activations, derived op by op for a tiny model.
// ============================================================================
// 2 layers, hidden 64, 4 heads (head_dim 16), ffn 256 (GELU, fused: keeps its input),
// vocab 1000, no position embedding, LayerNorm without bias, no biases, untied, no dropout.
// Run: fp32, b = 2, s = 16 -> T = 32 tokens; a T x 64 fp32 tensor is 8,192 B, T x 256 is 32,768 B.
constexpr model_spec tiny{.name = "tiny",
                          .layers = 2,
                          .hidden = 64,
                          .heads = 4,
                          .ffn = 256,
                          .vocab = 1000,
                          .positions = position_kind::none,
                          .mlp = mlp_kind::gelu,
                          .norm_bias = false,
                          .dropout = false};
constexpr training_spec tiny_run{.micro_batch = 2, .seq_len = 16, .attention = attention_impl::flash};
constexpr training_spec tiny_with(attention_impl a, checkpointing c, std::uint64_t batch = 2) {
  return {.micro_batch = batch, .seq_len = 16, .ckpt = c, .attention = a};
}

// Parameters: wte 64,000 + 2 * (2 norms 128 + q,k,v,o 4 * 4,096 + up 16,384 + down 16,384)
//             + final norm 64 + lm_head 64,000 = 64,000 + 2 * 49,280 + 64 + 64,000 = 226,624.
static_assert(parameter_count(tiny) == 226'624);

// Flash attention, per block (what autograd keeps until backward):
//   block input x (LayerNorm input)                        8,192
//   ln_1: output (input of q, k, v) 8,192 + mean/rstd 2 * 32 * 4 = 256
//   q, k, v outputs (SDPA inputs)                          3 * 8,192
//   SDPA output (o_proj input: its heads merge as a view) 8,192
//     + log-sum-exp b*heads*s fp32 = 128 * 4 = 512
//   residual sum (ln_2 input)                              8,192
//   ln_2: output (up input) 8,192 + 256
//   up output (GELU input)                                 32,768
//   GELU output (down input)                               32,768
//   = 132,096 per block.
// Epilogue: stream (ln_f input) 8,192 + ln_f stats 256 + ln_f output (lm_head input) 8,192
//   + log_softmax output over the shifted (s - 1) positions: 2 * 15 * 1000 * 4 = 120,000
//   = 136,640. The embedding keeps only the token ids (counted as inputs).
// Total: 2 * 132,096 + 136,640 = 400,832.
constexpr estimate_result r_tiny = estimate(tiny, tiny_run);
static_assert(r_tiny.saved_activation_bytes == bytes{400'832});
static_assert(build(tiny, tiny_run).stack().inputs == bytes{2 * 2 * 16 * 8});  // ids + labels, int64

// Eager attention keeps no q, k, v projections but the contiguous copies bmm saves:
//   q copy, k copy, softmax output (b*heads*s*s = 2,048 fp32 = 8,192), v copy,
//   merged heads: per block 8,192 * 9 + 512 (two LayerNorm stats) + 65,536 = 139,776.
// Total: 2 * 139,776 + 136,640 = 416,192.
constexpr estimate_result r_tiny_eager = estimate(tiny, tiny_with(attention_impl::eager, checkpointing::none));
static_assert(r_tiny_eager.saved_activation_bytes == bytes{416'192});
// Selective checkpointing recomputes the attention core: the softmax output (8,192 per block) goes.
constexpr estimate_result r_tiny_selective = estimate(tiny, tiny_with(attention_impl::eager, checkpointing::selective));
static_assert(r_tiny_selective.saved_activation_bytes == bytes{416'192 - 2 * 8'192});
// Full checkpointing keeps each block's input only: 2 * 8,192 + 136,640 = 153,024.
constexpr estimate_result r_tiny_ckpt = estimate(tiny, tiny_with(attention_impl::flash, checkpointing::full));
static_assert(r_tiny_ckpt.saved_activation_bytes == bytes{153'024});
// Every saved tensor is proportional to the micro-batch: b = 4 saves exactly twice b = 2.
constexpr estimate_result r_tiny_b4 = estimate(tiny, tiny_with(attention_impl::flash, checkpointing::none, 4));
static_assert(r_tiny_b4.saved_activation_bytes == bytes{2 * 400'832});
// Parameters, gradients and state do not depend on the run's shape.
static_assert(r_tiny_b4.parameter_bytes == r_tiny.parameter_bytes);
static_assert(r_tiny.parameter_bytes == bytes{4 * 226'624});
static_assert(r_tiny.optimizer_bytes == bytes{8 * 226'624});

// ============================================================================
// 7. Monotonic properties on GPT-2 (CUDA, AdamW foreach).
// ============================================================================
constexpr training_spec g2(std::uint64_t batch, std::uint64_t seq, attention_impl a = attention_impl::eager,
                           precision p = precision::fp32, checkpointing c = checkpointing::none) {
  return {.micro_batch = batch, .seq_len = seq, .prec = p, .ckpt = c, .attention = a};
}
constexpr bytes saved(const training_spec& t) { return estimate(presets::gpt2, t).saved_activation_bytes; }

constexpr estimate_result r_base = estimate(presets::gpt2, g2(2, 1024));  // eager, fp32
constexpr bytes base_saved = r_base.saved_activation_bytes;

// Batch: exactly linear (every saved tensor has a factor b).
static_assert(saved(g2(1, 1024)) * 2U == base_saved);
// Sequence: more than linear with eager attention (the b*heads*s*s scores and probabilities).
constexpr bytes saved_s512 = saved(g2(2, 512));
static_assert(saved_s512 < base_saved);
static_assert(saved_s512 * 2U < base_saved);
// Flash attention keeps no s x s matrix: less than eager at s = 1024, and still growing with s.
constexpr bytes flash_1024 = saved(g2(2, 1024, attention_impl::flash));
static_assert(flash_1024 < base_saved);
static_assert(saved(g2(2, 512, attention_impl::flash)) < flash_1024);
// The SDPA math backend keeps the same tensors as eager.
static_assert(saved(g2(2, 1024, attention_impl::sdpa_math)) == base_saved);
// Checkpointing: full < selective < none.
constexpr bytes selective_saved = saved(g2(2, 1024, attention_impl::eager, precision::fp32, checkpointing::selective));
constexpr bytes full_saved = saved(g2(2, 1024, attention_impl::eager, precision::fp32, checkpointing::full));
static_assert(full_saved < selective_saved);
static_assert(selective_saved < base_saved);
// Precision: fp32 > amp (16-bit matmul outputs, fp32 norms/softmax) > pure 16-bit.
constexpr bytes amp_bf16_saved = saved(g2(2, 1024, attention_impl::eager, precision::amp_bf16));
constexpr bytes pure_bf16_saved = saved(g2(2, 1024, attention_impl::eager, precision::pure_bf16));
static_assert(base_saved > amp_bf16_saved);
static_assert(amp_bf16_saved > pure_bf16_saved);
// fp16 and bf16 have the same width.
static_assert(saved(g2(2, 1024, attention_impl::eager, precision::amp_fp16)) == amp_bf16_saved);
static_assert(saved(g2(2, 1024, attention_impl::eager, precision::pure_fp16)) == pure_bf16_saved);

// Steady state vs step 1 when both peaks are in forward: the difference is exactly the
// optimizer state, which exists from step 2 on.
static_assert(r_base.steady.at == phase::forward);
static_assert(r_base.first_step.at == phase::forward);
static_assert(r_base.steady.tensor - r_base.first_step.tensor == r_base.optimizer_bytes);
static_assert(r_base.optimizer_bytes == bytes{8 * P});
// The saved activations are part of the peak.
static_assert(r_base.steady.breakdown.activations >= base_saved);

// ============================================================================
// 8. Invalid input is not a constant expression (detail::fail is not constexpr).
// ============================================================================
template <class T>
concept folds = requires { typename std::integral_constant<std::uint64_t, T::run()>; };

constexpr model_spec with_layers(std::uint64_t layers) {
  model_spec m = presets::gpt2;
  m.layers = layers;
  return m;
}
struct valid_model { static constexpr std::uint64_t run() { return validate(with_layers(1)).layers; } };
struct zero_layers { static constexpr std::uint64_t run() { return validate(with_layers(0)).layers; } };
struct kv_heads_not_dividing {
  static constexpr std::uint64_t run() {
    model_spec m = presets::llama_2_7b;
    m.kv_heads = 5;
    return validate(m).kv_heads;
  }
};
struct heads_not_dividing_hidden {
  static constexpr std::uint64_t run() {
    model_spec m = presets::gpt2;
    m.heads = 7;  // 768 % 7 != 0
    return validate(m).heads;
  }
};
struct zero_batch {
  static constexpr std::uint64_t run() { return validate(training_spec{.micro_batch = 0}).micro_batch; }
};
struct lora_without_rank {
  static constexpr std::uint64_t run() {
    return validate(training_spec{.target = training_target::lora}).lora_rank;
  }
};
static_assert(folds<valid_model>);
static_assert(!folds<zero_layers>);
static_assert(!folds<kv_heads_not_dividing>);
static_assert(!folds<heads_not_dividing_hidden>);
static_assert(!folds<zero_batch>);
static_assert(!folds<lora_without_rank>);
struct paged_sgd {
  static constexpr std::uint64_t run() {
    return validate(training_spec{.optimizer = optimizer_kind::sgd, .paged_optimizer = true}).micro_batch;
  }
};
static_assert(!folds<paged_sgd>);

// A graph's waiting gradients (graph.hpp waiting_slots) are written one by one and read back; a
// graph holding one is a complete constant, its unused slots holding the empty marker.
constexpr memscale::graph graph_with_a_waiting_gradient() {
  memscale::graph g;
  memscale::graph_builder b(g);
  b.append(memscale::op_kind::elementwise);
  b.append(memscale::op_kind::elementwise);
  b.wait(1, 0, memscale::bytes{8});
  return g;
}
constexpr memscale::graph waiting_graph = graph_with_a_waiting_gradient();
static_assert(waiting_graph.waiting_count == 1);
static_assert(waiting_graph.waiting[0].made_by == 1 && waiting_graph.waiting[0].used_by == 0);
static_assert(waiting_graph.waiting[0].size == memscale::bytes{8});

// A period of 1 (no layer pattern) leaves the other: no division taken, the same multiple.
static_assert(memscale::graph_layers::least_common_multiple(1, 1) == 1);
static_assert(memscale::graph_layers::least_common_multiple(1, 6) == 6);
static_assert(memscale::graph_layers::least_common_multiple(4, 1) == 4);
static_assert(memscale::graph_layers::least_common_multiple(4, 6) == 12);

}  // namespace
