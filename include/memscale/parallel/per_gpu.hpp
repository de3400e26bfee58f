// memscale/parallel/per_gpu.hpp: the memory of the peak rank of a multi-GPU run, the host
// memory each node needs, and the traffic of one step. Composes the single-GPU estimator
// (which already models ZeRO partitions and FSDP FULL_SHARD residency) with the engine
// rules of ddp.hpp, deepspeed_zero.hpp, tensor_parallel.hpp and pipeline.hpp.
#pragma once

#include <cstdint>
#include <string_view>
#include <tuple>
#include <utility>

#include "memscale/estimate.hpp"
#include "memscale/graph/model_graph.hpp"
#include "memscale/parallel/ddp.hpp"
#include "memscale/parallel/deepspeed_zero.hpp"
#include "memscale/parallel/litgpt_fsdp2.hpp"
#include "memscale/parallel/pipeline.hpp"
#include "memscale/parallel/rank_model.hpp"
#include "memscale/parallel/strategy.hpp"
#include "memscale/parallel/tensor_parallel.hpp"

namespace memscale {

struct host_memory {
  bytes optimizer{};     // per node: offloaded optimizer partitions (fp32 master, state, fp32 gradients)
  bytes parameters{};    // per node: offloaded parameter partitions
  bytes activations{};   // per node: offloaded checkpointed block inputs
  bytes model_load{};    // per node: every process materialising the model before partitioning
  bytes per_node{};      // the larger of the steady figure and the load peak
  bool fits = true;      // per_node <= parallel_spec::host_memory_per_node (true when not checked)
};

struct step_traffic {
  bytes collectives{};  // bytes each GPU sends per optimizer step (ring algorithms)
  bytes host_link{};    // bytes each GPU moves over its host link per step (offload)
  bytes tensor_parallel{};  // the part of collectives inside tensor-parallel groups
};

struct per_gpu_estimate {
  std::uint64_t world = 1;
  std::uint64_t data_parallel = 1;
  std::uint64_t shard = 1;          // ranks one parameter is sharded over
  std::uint64_t global_batch = 0;   // micro_batch * grad_accum * data_parallel
  std::uint64_t peak_rank = 0;      // a global rank holding the peak (Megatron order: tp, dp, pp)
  std::uint64_t peak_stage = 0;     // its pipeline stage
  std::string_view peak_role{};     // "every rank alike", "first pipeline stage", "last pipeline stage"
  peak_estimate peak{};
  // Of peak.breakdown.parameters: what the rank holds gathered from the other ranks beside its
  // own shard (ZeRO-3's working set, FSDP's gathered units; SHARD_GRAD_OP's whole parameters).
  // On one rank nothing is gathered: a sharding engine on one GPU can need less than on two.
  bytes gathered{};
  host_memory host{};
  step_traffic traffic{};
};

namespace detail {

// The single-GPU run one rank executes: the strategy's partitions over its shard group.
constexpr training_spec rank_run(training_spec run, const parallel_spec& p) {
  const std::uint64_t n = shard_degree(p);
  run.shard = n > 1 ? sharding_of(p.engine) : sharding::none;
  run.data_parallel = n > 1 ? n : 1;
  run.offload_optimizer = p.offload_optimizer;
  run.offload_parameters = p.offload_parameters;
  run.offload_activations = p.offload_activations;
  // FSDP2 shards each parameter as a DTensor of its own; DeepSpeed hooks each parameter: neither
  // hands autograd views of one flat parameter.
  run.fsdp_flat_views = run.shard != sharding::none && is_fsdp(p.engine) && p.fsdp == fsdp_api::fsdp1;
  // ZeRO-3 allocates its partitioned gradient buffer once, beside the optimizer, and zeroes it
  // in place: 1/N of every gradient stays allocated through forward and backward
  // (deepspeed/runtime/zero/stage3.py v0.16.5: grad_partitions_flat_buffer = torch.zeros(...)
  // on the optimizer's device, the host under offload_optimizer).
  if (run.shard == sharding::full && p.engine == strategy::zero3) run.zero_grad_to_none = false;
  run.fp32_master = p.deepspeed.precision != engine_precision::none;
  if (p.engine == strategy::zero0) {
    const bool bf16 = p.deepspeed.precision == engine_precision::bf16;
    run.stage0 = bf16 ? stage0_optimizer::bf16_optimizer : stage0_optimizer::fp16_optimizer;
    // FP16_Optimizer keeps the whole fp32 master (and so the state) on every rank
    // (deepspeed/runtime/fp16/fused_optimizer.py v0.16.5: fp32_groups_flat = fp16 flat .clone().float()).
    if (!bf16) run.shard = sharding::none;
  }
  return litgpt_model_parallel_run(run, p);
}

// DeepSpeed's fp16/bf16 engine as modelled: ZeRO stages 1-3 (DeepSpeedZeroOptimizer,
// DeepSpeedZeroOptimizer_Stage3) and stage 0 (BF16_Optimizer, FP16_Optimizer), data parallelism
// alone, full fine-tuning on the device.
constexpr void check_engine_precision(const training_spec& run, const parallel_spec& p) {
  const engine_precision e = p.deepspeed.precision;
  constexpr auto unsupported = error_code::unsupported;
  const auto code = static_cast<std::uint64_t>(e);
  // Without fp16/bf16 the stage-0 engine steps the loop's own optimizer after its bucketed
  // all-reduce (engine.py buffered_allreduce_fallback): not modelled.
  require(p.engine != strategy::zero0 || e != engine_precision::none, unsupported, "parallel.deepspeed.precision",
          "must be fp16 or bf16 with strategy zero0 (DeepSpeed without ZeRO is modelled with its 16-bit optimizer "
          "wrappers only)",
          code);
  if (e == engine_precision::none) return;
  // DDP and FSDP have no fp32 master of their own.
  require(is_deepspeed(p.engine) || p.engine == strategy::zero0, unsupported, "parallel.deepspeed.precision",
          "is modelled with DeepSpeed's engine only (strategy zero0, zero1, zero2, zero3)", code);
  // engine.py v0.16.5 _configure_fp16_optimizer: FP16_Optimizer (one flat fp32 master) wraps only a
  // fused Adam; any other optimizer gets FP16_UnfusedOptimizer (per-parameter masters), not modelled.
  require(p.engine != strategy::zero0 || e != engine_precision::fp16 ||
              (run.optimizer_impl == optimizer_implementation::fused &&
               (run.optimizer == optimizer_kind::adam || run.optimizer == optimizer_kind::adamw)),
          unsupported, "run.optimizer_impl",
          "must be fused with adam or adamw for strategy zero0 with fp16 (FP16_Optimizer wraps DeepSpeed's FusedAdam; "
          "FP16_UnfusedOptimizer is not modelled)",
          run.optimizer_impl);
  // BF16_Optimizer frees the 16-bit gradients at every micro-step's backward after adding them
  // to its fp32 buffer (bf16_optimizer.py backward): accumulation over micro-steps is not modelled.
  require(p.engine != strategy::zero0 || e != engine_precision::bf16 || run.grad_accum == 1, unsupported,
          "run.grad_accum", "must be 1 for strategy zero0 with bf16 (BF16_Optimizer's accumulation is not modelled)",
          run.grad_accum);
  // engine.py v0.16.5 _do_optimizer_sanity_check: amp (autocast) and the 16-bit engine exclude each other;
  // the engine casts the module itself, so activations and gradients are 16-bit.
  const precision wanted = e == engine_precision::bf16 ? precision::pure_bf16 : precision::pure_fp16;
  require(run.prec == wanted, error_code::invalid_run, "run.precision",
          e == engine_precision::bf16 ? "must be pure_bf16 with parallel.deepspeed.precision bf16 (the engine casts the "
                                        "module to bfloat16; autocast amp does not combine with it)"
                                      : "must be pure_fp16 with parallel.deepspeed.precision fp16 (the engine casts the "
                                        "module to half; autocast amp does not combine with it)",
          run.prec);
  require(!p.offload_optimizer && !p.offload_parameters, unsupported, "parallel.offload_optimizer",
          "is not modelled with parallel.deepspeed.precision (the fp32 master partition on the host)", 1);
  require(p.tp == 1 && p.pp == 1, unsupported, "parallel.tp * parallel.pp",
          "must be 1 with parallel.deepspeed.precision: modelled for data parallelism only",
          checked_mul(p.tp, p.pp));
  require(run.target == training_target::full, unsupported, "run.target",
          "must be full with parallel.deepspeed.precision (16-bit adapters with an fp32 master are not modelled)",
          run.target);
  // bitsandbytes keeps 8-bit state of its own parameters; the engine hands it a flat fp32 partition.
  require(run.optimizer != optimizer_kind::adamw_8bit, unsupported, "run.optimizer",
          "adamw_8bit is not modelled with parallel.deepspeed.precision", run.optimizer);
  require(run.framework == framework_kind::hf, unsupported, "run.framework",
          "must be hf with parallel.deepspeed.precision (the engine wraps a Hugging Face model's module)",
          run.framework);
  require(!run.optimizer_in_backward, unsupported, "run.optimizer_in_backward",
          "cannot be combined with parallel.deepspeed.precision (the engine steps its own optimizer wrapper)", 1);
}

// DeepSpeed ZeRO-2/3 partition gradients by reducing them every micro-step; engine.no_sync()
// asserts for them (deepspeed/runtime/engine.py v0.16.5, "incompatible with gradient
// partitioning"), so a loop that skips reduction cannot run on them.
constexpr void check_no_sync(const training_spec& run, const parallel_spec& p) {
  require(!run.no_sync || !(p.engine == strategy::zero2 || p.engine == strategy::zero3), error_code::invalid_run,
          "run.no_sync", "cannot be used with DeepSpeed ZeRO-2/3, which reduce-scatter every micro-step", 1);
}

constexpr bytes saturating_sub(bytes a, bytes b) { return a > b ? a - b : bytes{}; }
// bytes * (n - 1) / n: what one rank sends in a ring all-gather or reduce-scatter of `b`.
constexpr bytes ring_share(bytes b, std::uint64_t n) {
  return n <= 1 ? bytes{} : bytes{checked_mul(b.value / n, n - 1) + (b.value % n) * (n - 1) / n};
}

// DeepSpeed sizes host memory with additional_buffer_factor 1.5 for pinned staging buffers
// and fragmentation (stage3.py v0.16.5 estimate_zero3_model_states_mem_needs).
constexpr bytes with_host_buffers(bytes b) { return b + bytes{b.value / 2}; }

// Host memory per node and traffic per GPU of the rank holding `part` (its share of the model
// before sharding), with `stage_inputs` bytes of checkpointed block inputs per micro-batch and
// `in_flight` micro-batches of them alive at once.
constexpr std::pair<host_memory, step_traffic> host_and_traffic(const parallel_spec& p, const training_spec& rr,
                                                                const section_states& part, bytes stage_inputs,
                                                                std::uint64_t in_flight) {
  const std::uint64_t n = shard_degree(p);
  const std::uint64_t dp = data_parallel_degree(p);
  const std::uint64_t m = rr.grad_accum;
  const bool ckpt = rr.ckpt == checkpointing::full;
  host_memory h{};
  const std::uint64_t ranks = p.gpus_per_node;
  if (p.offload_optimizer)
    h.optimizer = with_host_buffers(host_optimizer_partition(part.state, part.trainable, n)) * ranks;
  if (p.offload_parameters) h.parameters = with_host_buffers(ceil_div(part.params, n)) * ranks;
  if (p.offload_activations && ckpt) h.activations = stage_inputs * in_flight * ranks;
  // Without partitioned construction every process first builds the whole model part on the
  // host (DeepSpeed estimator, zero_init=0: 4 bytes x params x GPUs per node).
  if (!p.zero_init) h.model_load = part.params * ranks;
  h.per_node = max(h.optimizer + h.parameters + h.activations, h.model_load);
  h.fits = p.host_memory_per_node.value == 0 || h.per_node <= p.host_memory_per_node;

  step_traffic tr{};
  const bytes P = part.params;
  const bytes G = part.grads;
  // Gradient reductions per step: one per micro-step, or one at the accumulation boundary when
  // the loop skips them under no_sync (DDP, FSDP) or the engine does (ZeRO-1 reduces only at
  // the boundary: stage_1_and_2.py v0.16.5 reduce_ready_partitions_and_remove_grads).
  const std::uint64_t reductions = rr.no_sync || p.engine == strategy::zero1 ? 1 : m;
  switch (p.engine) {
    // Stage 0 all-reduces once per step, at the accumulation boundary (engine.py allreduce_gradients);
    // BF16_Optimizer then all-gathers the 16-bit parameters from the partitions (update_lp_params).
    case strategy::zero0:
      tr.collectives = ring_share(G, dp) * std::uint64_t{2};
      if (rr.stage0 == stage0_optimizer::bf16_optimizer) tr.collectives += ring_share(P, n);
      break;
    case strategy::ddp: tr.collectives = ring_share(G, dp) * (2 * reductions); break;
    case strategy::zero1:
    case strategy::zero2: tr.collectives = ring_share(G, n) * reductions + ring_share(P, n); break;
    case strategy::zero3: tr.collectives = ring_share(P, n) * (2 * m) + ring_share(G, n) * m; break;
    case strategy::fsdp_full:
    case strategy::hsdp:
      tr.collectives = ring_share(P, n) * (2 * m) + ring_share(G, n) * reductions;
      if (p.engine == strategy::hsdp) tr.collectives += ring_share(ceil_div(G, n), dp / n) * (2 * reductions);
      break;
    case strategy::fsdp_grad_op: tr.collectives = ring_share(P, n) * m + ring_share(G, n) * reductions; break;
  }
  if (p.offload_optimizer)  // 16-bit gradients down, updated 16-bit parameters back
    tr.host_link += ceil_div(G, n) + ceil_div(P, n);
  if (p.offload_parameters) tr.host_link += ceil_div(P, n) * (2 * m);
  if (p.offload_activations && ckpt) tr.host_link += stage_inputs * (2 * m);
  return {h, tr};
}

// Data parallelism alone (tp = pp = 1): the single-GPU estimate of the rank's run (`single`,
// which already holds the partitions and FSDP's residency) with the engine's own buffers.
constexpr per_gpu_estimate data_parallel_estimate(per_gpu_estimate r, const estimate_result& single,
                                                  const rank_model& model, const training_spec& rr,
                                                  const parallel_spec& p) {
  const std::uint64_t n = r.shard;
  const dtype param = precision_policy_of(rr).param;
  peak_estimate pk = single.steady;
  bytes params = pk.breakdown.parameters;
  const bytes extra_grads = p.engine == strategy::ddp ? engines::ddp_bucket_bytes(model.whole.grads, p.ddp) : bytes{};
  const bytes extra_ws = engines::zero_reduce_bucket_bytes(p, storage(param, 1).value);
  if (rr.shard == sharding::full) r.gathered = model.fsdp_gathered;
  if (rr.shard == sharding::full && p.engine == strategy::zero3) {
    // Replace FSDP's gathered units with ZeRO-3's gathered working set.
    const auto& z = model.zero3;
    const bytes ds_ws = storage(param, engines::zero3_gathered_elements(p, z.largest_module, z.persistent, z.total));
    params = saturating_sub(params, model.fsdp_gathered) + ds_ws;
    r.gathered = ds_ws;
  }
  if (rr.shard == sharding::gradients && p.engine == strategy::fsdp_grad_op) {
    params += ceil_div(model.whole.params, n);  // the shards beside the unsharded parameters
    r.gathered = model.whole.params;
  }
  const bytes before = pk.breakdown.total();
  pk.breakdown.parameters = params;
  pk.breakdown.gradients += extra_grads;
  pk.breakdown.workspace += extra_ws;
  const bytes after = pk.breakdown.total();
  pk.tensor = after;
  if (after >= before) {
    pk.reserved += round_up(after - before, cuda_round_large);
    pk.device += round_up(after - before, cuda_round_large);
  } else {
    const bytes less = before - after;
    pk.reserved = saturating_sub(pk.reserved, less);
    pk.device = saturating_sub(pk.device, less);
  }
  r.peak = pk;
  r.peak_role = "every rank alike";
  const auto [h, tr] = host_and_traffic(p, rr, model.whole, model.checkpointed_inputs, 1);
  r.host = h;
  r.traffic = tr;
  return r;
}

// The figures every layout shares, before the rank's memory is worked out.
constexpr per_gpu_estimate layout_figures(const training_spec& run, const parallel_spec& p) {
  per_gpu_estimate r{};
  r.world = world_size(p);
  r.data_parallel = data_parallel_degree(p);
  r.shard = shard_degree(p);
  // FP16_Optimizer partitions nothing (runtime/fp16/fused_optimizer.py v0.16.5).
  if (p.engine == strategy::zero0 && p.deepspeed.precision == engine_precision::fp16) r.shard = 1;
  r.global_batch = checked_mul(run.micro_batch, run.grad_accum, r.data_parallel);
  return r;
}

}  // namespace detail

// Per-GPU estimate of `run` (micro_batch and grad_accum per rank) spread as `p` says.
// `shape` gives the block's hidden size and heads for Korthikanti's per-layer formula (tp > 1).
constexpr per_gpu_estimate estimate_per_gpu(const graph& g, const training_spec& run, const parallel_spec& par,
                                            engines::layer_shape shape = {}) {
  validate(par);
  validate(run);
  detail::check_no_sync(run, par);
  detail::check_engine_precision(run, par);
  using detail::ceil_div;
  const parallel_spec& p = par;
  // A first layer written in the prologue (graph::first_layer_apart) is one of the layers, on stage 0.
  const std::uint64_t apart = g.first_layer_apart ? 1 : 0;
  const std::uint64_t L = g.block_repeats + apart;
  detail::require(L % detail::checked_mul(p.pp, p.virtual_stages) == 0, error_code::invalid_run,
                  "parallel.pp * parallel.virtual_stages", "must divide the number of layers",
                  detail::checked_mul(p.pp, p.virtual_stages));
  per_gpu_estimate r = detail::layout_figures(run, p);
  const std::uint64_t n = r.shard;
  const training_spec rr = detail::rank_run(run, p);
  detail::check_litgpt_model_parallel(rr);
  const auto policy = precision_policy_of(rr);
  const std::uint64_t model_element = storage(policy.param, 1).value;
  const std::uint64_t m = run.grad_accum;
  const std::uint64_t t = p.tp;

  // Single-GPU figures of the rank's run (tp = pp = 1): the starting point.
  const estimate_result single = estimate(g, rr);
  if (t == 1 && p.pp == 1) return detail::data_parallel_estimate(r, single, detail::rank_model_of(g, rr, p), rr, p);

  // Model states by section, before any splitting.
  const auto sp_ = detail::states_of(g, prologue_of(g), rr);
  const auto sb_ = detail::states_of(g, block_of(g), rr);
  const auto se_ = detail::states_of(g, epilogue_of(g), rr);
  const std::uint64_t layers_on_stage = L / p.pp;
  const bytes saved_p = section_saved_bytes(g, prologue_of(g), rr, false);
  const bool ckpt = rr.ckpt == checkpointing::full;
  const bytes saved_b_graph = section_saved_bytes(g, block_of(g), rr, ckpt);
  const bytes zero_bucket = engines::zero_reduce_bucket_bytes(p, model_element);

  // Tensor and/or pipeline parallel: build the rank's memory from its share of the model.
  const bytes per_layer = saved_b_graph;  // replaced below when tp > 1
  // Working memory beside the saved activations: a block's backward (with its recomputation
  // under checkpointing) everywhere, the loss and head (logits) on the last stage.
  const auto block_bwd = section_backward_peak(g, block_of(g), rr, false, g.stream_grad);
  const auto head_bwd = section_backward_peak(g, epilogue_of(g), rr, false, bytes{});
  const bytes working_block = block_bwd.peak - block_bwd.grads_at_peak;
  const bytes working_head = max(section_forward_peak(g, epilogue_of(g), rr, true), head_bwd.peak - head_bwd.grads_at_peak);
  const bytes cublas = rr.device == device_kind::cuda && rr.torch_version >= 200 ? rr.blas_workspace : bytes{};
  const auto whole_model = detail::plus(detail::plus(sp_, detail::scaled(sb_, g.block_repeats)), se_);
  const bytes all_temporaries = optimizer_step_temporaries(g, rr);

  auto stage_estimate = [&](std::uint64_t stage, bytes layer_act) {
    const bool first = stage == 0;
    const bool last = stage + 1 == p.pp;
    // Stage 0's first layer, if written apart, is in the prologue's states and saved bytes.
    const std::uint64_t blocks_on_stage = layers_on_stage - (first ? apart : 0);
    detail::section_states part = detail::scaled(sb_, blocks_on_stage);
    if (first) part = detail::plus(part, sp_);
    if (last) part = detail::plus(part, se_);
    part = detail::split(part, t);  // Megatron splits every matrix; norms (2h per layer) are replicated, ignored here
    memory_breakdown b{};
    const sharding sh = rr.shard;
    const bytes block_params = ceil_div(sb_.params, t);
    b.parameters = sh == sharding::full
                       ? (p.offload_parameters ? bytes{} : ceil_div(part.params, n)) +
                             block_params * (layers_on_stage < 2 ? layers_on_stage : std::uint64_t{2})
                       : part.params;
    if (sh == sharding::gradients && p.engine == strategy::fsdp_grad_op) b.parameters += ceil_div(part.params, n);
    const bytes gathered = sh == sharding::full ? block_params * (layers_on_stage < 2 ? layers_on_stage : std::uint64_t{2})
                           : sh == sharding::gradients && p.engine == strategy::fsdp_grad_op ? part.params
                                                                                             : bytes{};
    b.parameters += g.buffers;
    const bool grads_stream = p.offload_optimizer;
    // Offloaded optimizer: gradients leave for the host block by block (one block's in flight).
    // Sharded gradients: the rank's partition, unless accumulation under no_sync keeps them whole.
    const bool partitioned_grads = sh >= sharding::gradients && !detail::unsharded_accumulation(rr);
    b.gradients = grads_stream ? ceil_div(sb_.grads, t) : (partitioned_grads ? ceil_div(part.grads, n) : part.grads);
    if (p.engine == strategy::ddp) b.gradients += engines::ddp_bucket_bytes(part.grads, p.ddp);
    b.optimizer = p.offload_optimizer ? bytes{} : (sh != sharding::none ? ceil_div(part.state, n) : part.state);
    bytes act = engines::stage_saved_activations(layer_act, blocks_on_stage, stage, p, m);
    if (first) act += saved_p * engines::micro_batches_in_flight(stage, p.pp, m);
    const bytes working = last ? max(working_block, working_head) : working_block;
    b.activations = act + ceil_div(working, t) + g.inputs;
    b.workspace = cublas + zero_bucket;
    // The optimizer step: the rank's share of the step temporaries, no activations.
    memory_breakdown step = b;
    step.activations = g.inputs;
    bytes temporaries = whole_model.trainable == 0
                            ? bytes{}
                            : bytes{detail::ceil_div(detail::checked_mul(all_temporaries.value / 1024 + 1, part.trainable),
                                                     whole_model.trainable) * 1024};
    if (sh != sharding::none && rr.optimizer_impl == optimizer_implementation::foreach) temporaries = ceil_div(temporaries, n);
    step.workspace += temporaries;
    if (sh >= sharding::gradients) step.gradients = ceil_div(part.grads, n);
    return std::tuple{step.total() > b.total() ? step : b, part, gathered};
  };

  bytes layer_act = per_layer;
  if (t > 1 || p.sp) {
    detail::require(shape.hidden > 0 && shape.heads > 0, error_code::invalid_run, "layer_shape.hidden",
                    "must be given (> 0) for tensor or sequence parallelism", shape.hidden);
    // Table 2's split of each term applied to the graph's own per-layer bytes, so t = 1 gives
    // back the single-GPU figure and the graph's dtypes and kernels (flash, fp32 norms) stay.
    const engines::layer_shape ls{.seq = run.seq_len, .batch = run.micro_batch, .hidden = shape.hidden,
                                  .heads = shape.heads};
    const bool scores = rr.attention != attention_impl::flash;
    const bytes split_k = engines::korthikanti_layer_activations(ls, t, p.sp, rr.ckpt, scores);
    const bytes whole_k = engines::korthikanti_layer_activations(ls, 1, false, rr.ckpt, scores);
    layer_act = bytes{detail::ceil_div(detail::checked_mul(per_layer.value / 1024 + 1, split_k.value), whole_k.value) * 1024};
    if (ckpt && p.offload_activations) layer_act = {};
  }
  const auto [b0, part0, gathered0] = stage_estimate(0, layer_act);
  const auto [bl, partl, gatheredl] = stage_estimate(p.pp - 1, layer_act);
  const bool last_wins = p.pp > 1 && bl.total() > b0.total();
  const memory_breakdown b = last_wins ? bl : b0;
  r.gathered = last_wins ? gatheredl : gathered0;
  r.peak_stage = last_wins ? p.pp - 1 : 0;
  r.peak_rank = detail::checked_mul(r.peak_stage, t, r.data_parallel);
  r.peak_role = p.pp == 1 ? "every rank alike" : last_wins ? "last pipeline stage" : "first pipeline stage";
  r.peak.at = phase::backward;
  r.peak.breakdown = b;
  r.peak.tensor = b.total();
  const bytes context = single.steady.device - single.steady.reserved;
  r.peak.reserved = round_up(r.peak.tensor, cuda_round_large);
  r.peak.device = r.peak.reserved + context;
  const auto [h, tr0] = detail::host_and_traffic(p, rr, last_wins ? partl : part0, layer_act * layers_on_stage,
                                                 engines::micro_batches_in_flight(r.peak_stage, p.pp, m));
  r.host = h;
  r.traffic = tr0;
  // Tensor parallelism: 2 all-reduces of s*b*h in forward and 2 in backward per layer and
  // micro-batch (Megatron f/g operators; with sequence parallelism reduce-scatter + all-gather
  // pairs of the same volume, Korthikanti et al. sec. 4.2.2). Pipeline: one activation forward
  // and one gradient back per micro-batch and stage boundary.
  const bytes stream = storage(policy.matmul, detail::checked_mul(run.seq_len, run.micro_batch, shape.hidden));
  r.traffic.tensor_parallel = detail::ring_share(stream, t) * detail::checked_mul(8, layers_on_stage, m);
  r.traffic.collectives += r.traffic.tensor_parallel;
  if (p.pp > 1) r.traffic.collectives += ceil_div(stream, p.sp ? t : 1) * (2 * m);
  return r;
}

constexpr per_gpu_estimate estimate_per_gpu(const model_spec& model, const training_spec& requested,
                                            const parallel_spec& p) {
  // The graph-only estimator reads the kernel from run.attention: sdpa is resolved first
  // (build() resolves the adapter dtype).
  const training_spec run = with_resolved_attention(model, requested);
  // An idle vision tower across GPUs: DDP sizes gradient buckets for every parameter that requires
  // grad, ZeRO-3 and FSDP gather it module by module, tensor parallelism leaves it whole; the graph
  // keeps it as one tensor, so one GPU is what is described.
  detail::require(model.idle_tower_parameters == 0 || world_size(p) == 1, error_code::unsupported, "parallel.gpus_per_node * parallel.nodes",
                  "must be 1 for a model with an idle vision tower (its multi-GPU layout is not modelled yet)",
                  world_size(p));
  if (layout_of(model) == model_layout::encoder_decoder) {
    // Both stacks under data parallelism; Megatron's tensor and pipeline splits of an
    // encoder-decoder (a stage boundary between the stacks) are not modelled.
    validate(p);
    validate(model, run);
    detail::check_no_sync(run, p);
    detail::require(p.deepspeed.precision == engine_precision::none, error_code::unsupported,
                    "parallel.deepspeed.precision", "is not modelled for an encoder-decoder model",
                    static_cast<std::uint64_t>(p.deepspeed.precision));
    detail::require(p.tp == 1 && p.pp == 1, error_code::unsupported, "parallel.tp * parallel.pp",
                    "must be 1 for an encoder-decoder model: the per-GPU estimate covers its data parallelism only",
                    detail::checked_mul(p.tp, p.pp));
    const model_graph g = build(model, detail::rank_run(run, p));
    return detail::data_parallel_estimate(detail::layout_figures(g.run, p), estimate(g),
                                          detail::rank_model_of(g.stacks, g.run, p), g.run, p);
  }
  // Korthikanti's per-layer formula (tp > 1) describes standard attention, and the stage split
  // (pp > 1) the repeated block: DeepSeek's latent attention and leading dense layers are neither,
  // nor Gemma 3n's AltUp stack.
  detail::require((!has_latent_attention(model) && model.leading_dense_layers == 0 && model.altup_inputs == 0) ||
                      (p.tp == 1 && p.pp == 1),
                  error_code::unsupported, "parallel.tp * parallel.pp",
                  "must be 1 for multi-head latent attention, leading dense layers (DeepSeek) or AltUp (Gemma 3n): "
                  "their tensor and pipeline splits are not modelled yet",
                  detail::checked_mul(p.tp, p.pp));
  // Tensor parallelism of a state-space stack (in_proj / out_proj split by channels) is not
  // described here (the tp > 1 path uses attention heads); data, ZeRO and pipeline splits walk the graph.
  if (p.tp > 1)
    require_attention_mixer(model, "parallel.tp must be 1; its tensor-parallel "
                                   "layout is not modelled yet");
  // A hybrid stack's stages would split periods of layers, not layers (a pure Mamba stack's
  // stages split layers: modelled).
  if (p.pp > 1 && is_hybrid(model))
    require_attention_mixer(model, "parallel.pp must be 1; its stages would split periods of layers");
  // Korthikanti's per-layer split and the stream traffic count micro_batch x seq_len rows; a
  // flattened padding-free row is modelled for data parallelism only.
  detail::require(run.packing != batch_packing::padding_free || (p.tp == 1 && !p.sp && p.pp == 1),
                  error_code::unsupported, "run.packing",
                  "padding_free is modelled with data parallelism only (parallel.tp, parallel.sp and parallel.pp off)",
                  run.packing);
  // Liger's fused linear cross-entropy multiplies by the whole head weight (no vocab-parallel form).
  detail::require(p.tp == 1 || run.loss != loss_impl::fused_linear, error_code::unsupported, "parallel.tp",
                  "must be 1 with run.loss fused_linear_ce: Liger's fused head and loss has no tensor-parallel form",
                  p.tp);
  // Megatron splits attention by heads: the degree must divide them (and the key/value heads).
  const std::uint64_t kv = model.kv_heads == 0 ? model.heads : model.kv_heads;
  detail::require(model.heads % p.tp == 0 && (kv % p.tp == 0 || p.tp % kv == 0), error_code::invalid_run, "parallel.tp",
                  "must divide the model's attention heads", p.tp);
  // The graph of the rank's run: what the loop does to the logits depends on its sharding
  // (graph/layers/heads.hpp logits_output_dtype).
  const model_graph g = build(model, detail::rank_run(run, p));
  return estimate_per_gpu(g.stack(), g.run, p, {.seq = run.seq_len, .batch = run.micro_batch,
                                                .hidden = model.hidden, .heads = model.heads});
}

}  // namespace memscale
