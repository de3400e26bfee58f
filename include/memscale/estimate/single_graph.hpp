// memscale/estimate/single_graph.hpp: the five estimators composed into a peak and its phase,
// over one graph (a decoder or an encoder stack).
#pragma once

#include <cstdint>
#include <string_view>

#include "memscale/detail/unchecked_bytes.hpp"
#include "memscale/estimate/activations.hpp"
#include "memscale/estimate/fsdp1_padding.hpp"
#include "memscale/estimate/fsdp2.hpp"
#include "memscale/estimate/gradients.hpp"
#include "memscale/estimate/host_bytes.hpp"
#include "memscale/estimate/optimizer.hpp"
#include "memscale/estimate/parameters.hpp"
#include "memscale/estimate/stage0_optimizers.hpp"
#include "memscale/estimate/walk_bound.hpp"
#include "memscale/estimate/workspace.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale {

// validation: a no_grad evaluation pass the training loop runs between steps (graph::validation).
enum class phase : std::uint8_t { forward, backward, optimizer_step, validation };

constexpr std::string_view to_string(phase p) noexcept {
  switch (p) {
    case phase::forward: return "forward";
    case phase::backward: return "backward";
    case phase::optimizer_step: return "optimizer_step";
    case phase::validation: return "validation";
  }
  return "validation";
}

// What is on the device at one moment; total() is the tensor bytes at that moment.
struct memory_breakdown {
  bytes parameters{};   // parameter storage and registered buffers
  bytes gradients{};
  bytes optimizer{};    // optimizer state
  bytes activations{};  // saved tensors, transient activations and their gradients, inputs
  bytes workspace{};    // optimizer step temporaries, cuBLAS workspace

  [[nodiscard]] constexpr bytes total() const { return parameters + gradients + optimizer + activations + workspace; }
};

struct peak_estimate {
  bytes tensor{};    // what torch.cuda.max_memory_allocated reports
  bytes reserved{};  // what torch.cuda.max_memory_reserved reports
  bytes device{};    // what nvidia-smi shows: reserved + CUDA context
  phase at = phase::backward;
  memory_breakdown breakdown{};
};

struct estimate_result {
  std::uint64_t parameter_count = 0;
  std::uint64_t trainable_parameter_count = 0;
  bytes parameter_bytes{};
  bytes gradient_bytes{};
  bytes optimizer_bytes{};
  // A paged optimizer's state in CUDA unified memory: in none of the peaks below (outside
  // PyTorch's allocator; nvidia-smi counts the pages that are resident).
  bytes paged_optimizer_bytes{};
  bytes saved_activation_bytes{};  // live at the end of forward
  // Host memory the run's offloads hold on one rank (estimate/host_bytes.hpp): in none of the peaks below.
  bytes host_bytes{};
  peak_estimate steady{};          // every step after the first
  peak_estimate first_step{};      // step 1: optimizer state is created inside the step
};

namespace detail {

struct phase_candidate {
  phase at = phase::forward;
  memory_breakdown breakdown{};
};

constexpr phase_candidate larger(const phase_candidate& a, const phase_candidate& b) {
  return b.breakdown.total() > a.breakdown.total() ? b : a;
}

// Parameters streamed from the host (offload_parameters) leave the prologue, the
// epilogue and two blocks (the running one and the prefetched next) on the device.
constexpr bytes device_share_of_blocks(bytes per_block, std::uint64_t layers, bool streamed) {
  return streamed ? per_block * (layers < 2 ? layers : std::uint64_t{2}) : per_block * layers;
}

constexpr bytes section_bytes(const graph& g, section s, const training_spec& run, bool gradients) {
  bytes total{};
  for (std::size_t i = s.begin; i < s.end; ++i)
    total += gradients ? op_gradient_bytes(g.ops[i], run) : op_parameter_bytes(g.ops[i], run);
  return total;
}

// Large blocks waste on average half of the allocator's 2 MiB rounding granule in
// reserved memory (CUDACachingAllocator.cpp: kRoundLarge); count the large tensors alive.
constexpr std::uint64_t large_tensor_count(const graph& g, const training_spec& run) {
  std::uint64_t n = 0;
  const auto p = precision_policy_of(run);
  for (std::size_t i = 0; i < g.size; ++i) {
    const op& o = g.ops[i];
    const auto r = repeats_of(g, i);
    if (o.released_by != not_kept && o.out > cuda_small_size) n += r;
    if (storage(p.param, o.weight.largest()) > cuda_small_size) {
      const std::uint64_t per_param = o.frozen ? 1 : 4;  // weight, gradient, two state tensors
      n += checked_mul(r, o.weight.count, per_param);
    }
  }
  return n;
}

// What estimate() needs from the whole op sequence, gathered in one pass (the separate
// walks above and in estimate/*.hpp give the same figures one at a time).
struct graph_totals {
  std::uint64_t parameters = 0;            // parameter_count
  std::uint64_t trainable_parameters = 0;  // trainable_parameter_count
  bytes params_p{}, params_b{}, params_e{};  // parameter bytes by section (block: one layer)
  bytes grads_p{}, grads_b{}, grads_e{};     // gradient bytes by section
  bytes optimizer_state{};                 // optimizer_state_bytes
  bytes paged_state{};                     // paged_optimizer_bytes
  bytes step_temporaries{};                // optimizer_step_temporaries
  std::uint64_t large_tensors = 0;         // large_tensor_count (CUDA runs)
  std::uint64_t largest_trainable = 0;     // elements of the largest trainable tensor

  [[nodiscard]] constexpr bytes parameter_bytes(std::uint64_t layers) const { return params_p + params_b * layers + params_e; }
  [[nodiscard]] constexpr bytes gradient_bytes(std::uint64_t layers) const { return grads_p + grads_b * layers + grads_e; }
};

constexpr graph_totals totals_of(const graph& g, const training_spec& run) {
  graph_totals t{};
  const auto p = precision_policy_of(run);
  std::uint64_t largest_trainable = 0;  // elements of the largest trainable tensor
  std::uint64_t trainable_elements = 0;
  // Section by section: `r` runs of each op, its bytes added to the section's figures.
  struct part {
    section ops;
    std::uint64_t r;
    bytes& params;
    bytes& grads;
  };
  for (const part& s : {part{prologue_of(g), 1, t.params_p, t.grads_p},
                        part{block_of(g), g.block_repeats, t.params_b, t.grads_b},
                        part{epilogue_of(g), 1, t.params_e, t.grads_e}}) {
    const std::uint64_t r = s.r;
    for (std::size_t i = s.ops.begin; i < s.ops.end; ++i) {
      const op& o = g.ops[i];
      if (o.released_by != not_kept && o.out > cuda_small_size) t.large_tensors = checked_add(t.large_tensors, r);
      if (o.weight.rows == 0 && o.bias.rows == 0) continue;  // most ops own no parameter
      const op_elements n = elements_of(o);
      const std::uint64_t stored = checked_mul(stored_elements(o, n), r, parameter_quantity);
      t.parameters = checked_add(t.parameters, stored, parameter_quantity);
      s.params += op_parameter_bytes(o, n, run, p);
      s.grads += op_gradient_bytes(o, n, p.trainable);
      const std::uint64_t weight_matrix = o.weight.largest();  // one copy
      if (storage(p.param, weight_matrix) > cuda_small_size)
        t.large_tensors = checked_add(t.large_tensors, checked_mul(r, o.weight.count, o.frozen ? 1 : 4));
      if (o.frozen) continue;
      t.trainable_parameters = checked_add(t.trainable_parameters, stored, parameter_quantity);
      // The trainable tensors of for_each_trainable_tensor: the weight (unless borrowed) and the bias.
      const auto tensor = [&](std::uint64_t rows, std::uint64_t cols, std::uint64_t one_copy, std::uint64_t copies) {
        t.optimizer_state += tensor_state_bytes(rows, cols, one_copy, run, p.trainable) * copies;
        if (run.paged_optimizer) t.paged_state += paged_state_bytes(one_copy, run) * copies;
        largest_trainable = max(largest_trainable, one_copy);
        trainable_elements = checked_add(trainable_elements, checked_mul(one_copy, copies));
      };
      if (!o.borrows_weight && o.weight.rows != 0)
        tensor(o.weight.rows, o.weight.cols, weight_matrix, checked_mul(r, o.weight.count));
      if (o.bias.rows != 0) tensor(o.bias.rows, 1, o.bias.rows, checked_mul(r, o.bias.count));
    }
  }
  t.step_temporaries = step_temporaries_of(largest_trainable, trainable_elements, adam_loop_elements(g, run), run);
  t.largest_trainable = largest_trainable;
  return t;
}

// The step of an fp32-master engine over the rank's flat partition of `trainable` elements,
// the 16-bit gradients included (deepspeed/runtime/zero/stage_1_and_2.py @38327e07 step): first
// the partition's 16-bit gradients, their flattened copy and its fp32 conversion
// (self.flatten(averaged_gradients).to(fp32)) are alive at once; then the 16-bit ones are freed
// and the optimizer steps with the fp32 gradient and its own temporaries on one flat tensor (its
// parameter group holds the partition as one tensor).
constexpr bytes master_step_temporaries(std::uint64_t trainable, const training_spec& run) {
  if (run.offload_optimizer) return {};
  const std::uint64_t part = ceil_div(trainable, run.shard == sharding::none ? 1 : run.data_parallel);
  const bytes fp32_grad = storage(dtype::fp32, part);
  const bytes conversion = storage(precision_policy_of(run).trainable, part) * std::uint64_t{2} + fp32_grad;
  return max(conversion, fp32_grad + step_temporaries_of(part, part, run));
}

// Gradients sharded over the ranks but kept whole between micro-steps: accumulation inside
// the engine's no_sync(), which skips the reduce-scatter until the last micro-step.
constexpr bool unsharded_accumulation(const training_spec& run) {
  return run.shard >= sharding::gradients && run.no_sync && run.grad_accum > 1;
}

// How the gradients of one micro-step live on the device.
struct gradient_residency {
  // Accumulated in place in .grad tensors that stay allocated (accumulation without sharding or
  // under no_sync; gradients zeroed in place): every gradient is present from the start.
  bool in_place = false;
  // Reduce-scattered every micro-step into a partitioned accumulation buffer that stays
  // allocated: 1/N of every gradient is present from the start, and each micro-step's
  // gradients exist whole only until their reduce-scatter. FSDP accumulates the reduced shard
  // into its sharded .grad (torch 2.x torch/distributed/fsdp/_runtime_utils.py _accumulate_sharded_grad);
  // DeepSpeed ZeRO-2 adds each micro-step's partition to averaged_gradients
  // (deepspeed/runtime/zero/stage_1_and_2.py v0.16.5 independent_gradient_partition_epilogue),
  // ZeRO-3 to its grad_partitions_flat_buffer (stage3.py partition_grads).
  bool partitioned = false;
};

constexpr gradient_residency gradient_residency_of(const training_spec& run) {
  const bool persist = !run.offload_optimizer && (run.grad_accum > 1 || !run.zero_grad_to_none);
  const bool partitioned = persist && run.shard >= sharding::gradients && !unsharded_accumulation(run);
  return {.in_place = persist && !partitioned, .partitioned = partitioned};
}

// Whether FSDP1's root unit has any gradient: the prologue's less a first layer written in it (a
// unit of its own, graph::first_layer_apart), and the epilogue's.
constexpr bool root_trains(const graph& g, bytes grads_p, bytes grads_b, bytes grads_e) {
  return (g.first_layer_apart ? grads_p - grads_b : grads_p).value != 0 || grads_e.value != 0;
}

// FSDP1's root unit (prologue and epilogue: embeddings, final norm, head) is one flat parameter.
// When it trains (root_trains) its weights are views of it too, and the split that
// gathers their gradients follows the embeddings' backward, the last of the step: the epilogue's
// view gradients wait through every block's backward, and only then does AccumulateGrad run the
// root's post-backward hook, which reduce-scatters the flat gradient
// (torch/distributed/fsdp/_runtime_utils.py@00ae0bc9 _register_post_backward_hooks: the hook sits
// on the flat parameter's AccumulateGrad; _post_backward_hook). The prologue's part of the unit;
// views is false when the root does not train (training_spec::fsdp_flat_views).
constexpr flat_view_unit root_flat_view_unit(const graph& g, const training_spec& run, bool trains) {
  if (!run.fsdp_flat_views || !trains) return {};
  const bytes epilogue_computed = section_view_gradient_bytes(g, epilogue_of(g), run, view_gradients::computed);
  const bytes epilogue_stored = section_view_gradient_bytes(g, epilogue_of(g), run, view_gradients::stored);
  // Under use_orig_params every tensor of the unit, frozen ones included (flat_view_gradient_elements).
  return {.views = true,
          .split_after = true,
          .waiting = epilogue_computed,
          .flat = section_view_gradient_bytes(g, prologue_of(g), run, view_gradients::stored) + epilogue_stored,
          .borrowed = epilogue_computed - epilogue_stored};
}

// What one rank holds under sharding; zero fields mean "as without sharding".
struct sharded_residency {
  bytes params{};  // parameter bytes resident
  bytes grads{};   // gradient bytes once backward is done (before the optimizer step)
  bytes grad_padding{};  // FSDP1's flat gradients' padding (fsdp1_padding.hpp), in every gradient figure
  // FULL_SHARD: the resident shard with the gathered root, and one gathered block.
  bytes shard_and_root{};
  bytes block_unit{};
};

constexpr sharded_residency sharded_residency_of(const graph& g, const training_spec& run, bytes params_p,
                                                 bytes params_b, bytes params_e, bytes grads_p, bytes grads_b,
                                                 bytes grads_e) {
  sharded_residency r{};
  if (run.shard == sharding::none) return r;
  const auto n = run.data_parallel;
  const auto L = g.block_repeats;
  // FSDP1 (its flat views) of a full fine-tune: each unit's flat parameter and gradient carry
  // padding. Adapters' and quantized weights' places in the flat parameter are not walked.
  const bool flat_padding = run.fsdp_flat_views && run.target == training_target::full;
  const auto policy = precision_policy_of(run);
  const std::uint64_t root_pad = flat_padding ? fsdp1_unit_padding(g, prologue_of(g), epilogue_of(g), run) : 0;
  const std::uint64_t block_pad = flat_padding ? fsdp1_unit_padding(g, block_of(g), section{}, run) : 0;
  const std::uint64_t pad = checked_add(root_pad, checked_mul(block_pad, L));
  const bytes all_params = params_p + params_b * L + params_e + storage(policy.param, pad);
  r.grad_padding = storage(policy.trainable, pad);
  if (run.shard == sharding::full) {
    // FSDP FULL_SHARD: each rank stores 1/N; the root unit (embeddings, head) stays
    // gathered through forward and backward, and limit_all_gathers allows the running
    // block plus one prefetched block (torch/distributed/fsdp/_runtime_utils.py).
    // With offload_parameters (ZeRO-3 offload_param, FSDP CPUOffload(offload_params=True))
    // the rank's shard lives in host memory and only the gathered working set is on the device
    // (deepspeed/runtime/zero/partition_parameters.py v0.16.5: partitions on the offload device).
    const bytes resident_shard = run.offload_parameters ? bytes{} : ceil_div(all_params, n);
    r.shard_and_root = resident_shard + params_p + params_e + storage(policy.param, root_pad);
    r.block_unit = params_b + storage(policy.param, block_pad);
    r.params = r.shard_and_root + r.block_unit * (L < 2 ? L : std::uint64_t{2});
  }
  if (unsharded_accumulation(run)) {
    // Accumulating under no_sync keeps unsharded gradients until the last micro-step
    // (FSDP no_sync docs); with use_orig_params every tensor of a block's flat parameter
    // gets one when any of them trains.
    const auto& p = policy;
    bytes block = grads_b;
    if (run.fsdp_use_orig_params && grads_b.value != 0) {
      std::uint64_t elements = 0;
      for (std::size_t i = g.block_begin; i < g.block_end; ++i) elements = checked_add(elements, stored_elements(g.ops[i]));
      block = storage(p.param, elements);
    }
    // The root's kept gradient is its whole flat gradient likewise.
    const flat_view_unit root_unit = root_flat_view_unit(g, run, root_trains(g, grads_p, grads_b, grads_e));
    r.grads = (root_unit.views ? root_unit.flat : grads_p + grads_e) + block * L;
  }
  return r;
}

// One optimizer per parameter (optimizer_in_bwd): the step temporaries of the largest trainable
// tensor of section `s`, the group being that one tensor.
constexpr bytes section_step_temporaries(const graph& g, section s, const training_spec& run) {
  std::uint64_t largest = 0;
  for (std::size_t i = s.begin; i < s.end; ++i) {
    const op& o = g.ops[i];
    if (o.frozen) continue;
    if (!o.borrows_weight && o.weight.rows != 0) largest = max(largest, o.weight.largest());
    if (o.bias.rows != 0) largest = max(largest, o.bias.rows);
  }
  return step_temporaries_of(largest, largest, run);
}

// The peak's tensor, reserved and device totals. Reserved: large blocks waste on average
// half of the allocator's 2 MiB rounding granule (`large_tensors` of them); device: the CUDA
// context and, before PyTorch 2.0, the cuBLAS workspace cuBLAS allocated itself (pytorch PR
// #86167 moved it into the caching allocator).
constexpr peak_estimate finish_peak(const phase_candidate& best, const training_spec& run,
                                    std::uint64_t large_tensors) {
  peak_estimate result{};
  result.at = best.at;
  result.breakdown = best.breakdown;
  result.tensor = best.breakdown.total();
  if (run.device != device_kind::cuda) {
    result.reserved = result.tensor;
    result.device = result.tensor;
    return result;
  }
  const bytes rounding = bytes{checked_mul(large_tensors, cuda_round_large.value / 2)};
  result.reserved = round_up(result.tensor + rounding, cuda_round_large);
  const bytes cublas_outside = run.torch_version >= 200 ? bytes{} : run.blas_workspace;
  result.device = result.reserved + cuda_context_bytes(run.cuda_lazy_loading) + cublas_outside;
  return result;
}

// The peaks of step 1 (optimizer state created inside the step) and of every later step. The
// two differ only by the state present through forward and backward, so the moments are
// compared once, without it.
struct step_peaks {
  peak_estimate steady{};
  peak_estimate first_step{};
  bytes saved_activations{};  // live at the end of forward (estimate_result::saved_activation_bytes)
};

// torchtune's custom_sharded_layers (only its bf16 recipes take them, so the reduce dtype is the
// gradients'): the embedding (the prologue's parameters) and the output projection (the
// epilogue's weights other than the final norm's) leave the root for units of their own.
constexpr void split_custom_units(const graph& g, const training_spec& run, const graph_totals& t, fsdp2_units& u) {
  if (run.custom_sharded.tok_embeddings) {
    // The prologue's parameters less a first layer written in it (a unit of its own).
    const bytes params = g.first_layer_apart ? t.params_p - t.params_b : t.params_p;
    const bytes grads = g.first_layer_apart ? t.grads_p - t.grads_b : t.grads_p;
    u.embedding_unit = params;
    u.embedding_grads = grads;
    u.root -= params;
    u.root_grads -= grads;
    u.root_grads_fp32 -= grads;
  }
  if (!run.custom_sharded.output) return;
  const auto p = precision_policy_of(run);
  for (std::size_t i = g.block_end; i < g.size; ++i) {
    const op& o = g.ops[i];
    if ((o.weight.rows == 0 && o.bias.rows == 0) || o.role == param_role::vector) continue;
    const op_elements e = elements_of(o);
    u.output_unit += op_parameter_bytes(o, e, run, p);
    u.output_grads += op_gradient_bytes(o, e, p.trainable);
  }
  u.root -= u.output_unit;
  u.root_grads -= u.output_grads;
  u.root_grads_fp32 -= u.output_grads;
  u.head_grads = u.head_grads - u.output_grads + (u.host_shards ? bytes{} : ceil_div(u.output_grads, u.ranks));
}

// One rank's FSDP2 step (estimate/fsdp2.hpp): shards of every parameter, gradient and AdamW
// state at 1/N beside the largest forward or backward moment; the optimizer steps the shards.
// torchtitan's are fp32 with bf16 compute (MixedPrecisionPolicy(param_dtype=bfloat16,
// reduce_dtype=float32), apply_fsdp, infra/parallelize.py @ f7084fc7); torchtune's are the model's
// own bf16, reduced in bf16 (no MixedPrecisionPolicy: training/_distributed.py shard_model, v0.6.1).
constexpr step_peaks fsdp2_step_peaks(const graph& g, const training_spec& run, const graph_totals& t) {
  const auto L = g.block_repeats;
  // torchtitan's CP ranks join FSDP2's mesh: apply_fsdp shards over dp_shard_cp, the flattened
  // (dp_shard, cp) mesh (models/llama3/infra/parallelize.py, distributed/parallel_dims.py @ f7084fc7).
  const auto n = detail::checked_mul(run.data_parallel, run.context_parallel);
  const bool titan = run.framework == framework_kind::torchtitan;
  training_spec fp32_run = run;
  fp32_run.prec = precision::fp32;
  const graph_totals t32 = titan ? totals_of(g, fp32_run) : t;
  fsdp2_units units{.block = t.params_b,
                    .root = t.params_p + t.params_e,
                    .block_grads = t.grads_b,
                    .block_grads_fp32 = t32.grads_b,
                    .head_grads = t.grads_e,
                    .root_grads = t.grads_p + t.grads_e,
                    .root_grads_fp32 = t32.grads_p + t32.grads_e,
                    .ranks = n,
                    .last_block_kept = titan,
                    .host_shards = run.offload_parameters,
                    .stepped_in_backward = run.optimizer_in_backward,
                    // One AdamW per parameter: one shard's temporaries, foreach's included; under
                    // fsdp_cpu_offload the hook steps a host shard with its host gradient (foreach_reduce
                    // copies it before the hook, _fsdp_collectives.py @ v2.6.0): nothing on the device.
                    .hook_step = run.optimizer_in_backward && !run.offload_parameters
                                     ? step_temporaries_of(ceil_div(t.largest_trainable, n),
                                                           ceil_div(t.largest_trainable, n), run)
                                     : bytes{},
                    // torch's default prefetch: no framework sets one of its own (apply_fsdp,
                    // infra/parallelize.py @ f7084fc7; shard_model, training/_distributed.py @ v0.6.1;
                    // litgpt's parallelize_fn, finetune/lora.py @ 26857050).
                    .overlapped_all_gathers = true};
  if (run.framework == framework_kind::litgpt) {
    units.carried = g.carried;
    units.bound_in_backward = g.validation_after_step;  // the step's logits list, in Fabric's output dtype
  }
  if (g.first_layer_apart) {
    // The first layer, written in the prologue, is a block unit (fully_shard per layer), not the root's.
    units.root -= t.params_b;
    units.root_grads -= t.grads_b;
    units.root_grads_fp32 -= t32.grads_b;
  }
  split_custom_units(g, run, t, units);
  // Under fsdp_cpu_offload the shards, their gradients and the AdamW state are host tensors and
  // the optimizer steps there (the optimizer is built on the sharded parameters, recipes'
  // _setup_optimizer @ v0.6.1): the device keeps none of them.
  const bool host = run.offload_parameters;
  const bytes shards = host ? bytes{} : ceil_div(t32.parameter_bytes(L), n);
  const bytes state = host ? bytes{} : ceil_div(t32.optimizer_state, n);
  const bytes step_grads = host ? bytes{} : ceil_div(t32.gradient_bytes(L), n);
  const bytes step_temporaries = host ? bytes{} : ceil_div(t32.step_temporaries, n);
  const bool cuda = run.device == device_kind::cuda;
  const bytes workspace = cuda && run.torch_version >= 200 ? run.blas_workspace : bytes{};
  const fsdp2_moment m = fsdp2_largest_moment(g, run, units);
  const phase at = m.backward ? phase::backward : phase::forward;
  const phase_candidate best{
      at, {shards + m.gathered + g.buffers, m.grads, bytes{}, m.activations + g.inputs, workspace + m.step}};
  phase_candidate steady = best;
  steady.breakdown.optimizer = state;
  // optimizer_in_bwd has no step after backward: its candidate is the end of the first backward,
  // every shard's state made and every gradient dropped (as the single-device walk's).
  const bool in_backward = run.optimizer_in_backward;
  // litgpt's loop still binds the step's logits at optimizer.step() (estimate_peaks' step candidate).
  const phase_candidate step{phase::optimizer_step,
                             {shards + g.buffers, in_backward ? bytes{} : step_grads, state,
                              g.inputs + units.bound_in_backward,
                              workspace + (in_backward ? units.hook_step : step_temporaries)}};
  const std::uint64_t large = cuda ? t.large_tensors : 0;
  const forward_pass block = forward_walk(g, block_of(g), run, false);
  const bytes policy_saved = run.sac == selective_ac::op_save_list ? op_save_list_bytes(g) : block.saved;
  bytes saved_blocks{};
  for (std::uint64_t i = 0; i < L; ++i)
    saved_blocks += fsdp2_block_checkpointed(run, i) ? block.checkpoint_saved : policy_saved;
  const bytes saved_all = section_saved_bytes(g, prologue_of(g), run, false) + saved_blocks +
                          section_saved_bytes(g, epilogue_of(g), run, false);
  phase_candidate steady_peak = larger(steady, step);
  phase_candidate first_peak = larger(best, step);
  // litgpt's validate() (graph::validation), under FSDP2: the root stays gathered after its
  // forward (its post_forward_mesh_info is None, _fsdp_state.py _lazy_init, torch 2.4-2.6), so the
  // loss code's peak sees the shards and the root. Each block is gathered in turn and runs under
  // no_grad beside the previous batch's logits (as many bytes as a step's bound logits,
  // graph::validation_after_step): with long rows and a small vocabulary, the larger moment. After
  // a step, the state and that step's logits are there too.
  if (g.validation.value != 0) {
    // Each block runs beside its own flat all-gather output, kept until the next copy-out.
    const bytes gathered = units.block * (units.overlapped_all_gathers ? 2U : 1U);
    const bytes block_moment = gathered + g.validation_after_step + g.stream_grad +
                               section_forward_peak(g, block_of(g), run, false, false);
    const bytes loss_moment = g.validation;
    const bool in_block = block_moment > loss_moment;
    const phase_candidate before{phase::validation,
                                 {shards + units.root + (in_block ? gathered : bytes{}) + g.buffers, bytes{}, bytes{},
                                  g.inputs + (in_block ? block_moment - gathered : loss_moment), workspace}};
    phase_candidate after = before;
    after.breakdown.optimizer = state;
    after.breakdown.activations += g.validation_after_step;
    first_peak = larger(first_peak, before);
    steady_peak = larger(steady_peak, after);
  }
  return {finish_peak(steady_peak, run, large), finish_peak(first_peak, run, large), saved_all};
}

constexpr step_peaks estimate_peaks(const graph& g, const training_spec& run, const graph_totals& t) {
  if (runs_fsdp2(run)) return fsdp2_step_peaks(g, run, t);
  const auto L = g.block_repeats;
  const bool ckpt = run.ckpt == checkpointing::full;
  // ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840 sec. 4) moves each gradient to the
  // host as backward produces it and steps the optimizer there: the device holds only
  // the gradients of the section in flight.
  // An optimizer stepped inside backward frees each gradient as soon as it exists (torchtune
  // training/memory.py register_optim_in_bwd_hooks @ v0.6.1): the same residency, on the device.
  const bool grads_to_host = run.offload_optimizer || run.optimizer_in_backward;
  const gradient_residency residency = gradient_residency_of(run);
  const bool persist = residency.in_place;
  // Sharded gradients are reduce-scattered block by block, leaving 1/N of the earlier ones
  // (inside the partitioned accumulation buffer when there is one).
  const bool reduced_elsewhere = persist || grads_to_host || residency.partitioned;
  const std::uint64_t grad_share = (run.shard >= sharding::gradients && !persist) ? run.data_parallel : 1;
  const bool cuda = run.device == device_kind::cuda;

  // Parameters and gradients by section (block figures are per layer).
  const bytes params_p = t.params_p;
  const bytes params_b = t.params_b;
  const bytes params_e = t.params_e;
  const bytes grads_p = t.grads_p;
  const bytes grads_b = t.grads_b;
  const bytes grads_e = t.grads_e;
  const bool streamed = run.offload_parameters;
  const sharded_residency shards = sharded_residency_of(g, run, params_p, params_b, params_e, grads_p, grads_b, grads_e);
  const bytes params = shards.params.value != 0
                           ? shards.params + g.buffers
                           : params_p + params_e + device_share_of_blocks(params_b, L, streamed) + g.buffers;
  const bytes all_grads =
      (shards.grads.value != 0 ? shards.grads : grads_p + grads_e + device_share_of_blocks(grads_b, L, streamed)) +
      shards.grad_padding;
  const bytes device_state =
      run.shard != sharding::none ? ceil_div(t.optimizer_state, run.data_parallel) : t.optimizer_state;
  // From PyTorch 2.0 the cuBLAS workspace comes from the caching allocator (pytorch PR
  // #86167); before, cuBLAS allocated it itself, visible only in the device total.
  const bool workspace_in_allocator = run.torch_version >= 200;
  const bytes cublas = cuda ? run.blas_workspace : bytes{};
  const bytes workspace = workspace_in_allocator ? cublas : bytes{};
  // DeepSpeed's BF16_Optimizer keeps a whole fp32 gradient buffer from start to end (stage0_optimizers.hpp).
  const bytes grad_buffer = stage0_gradient_buffer(t.trainable_parameters, run);
  const bytes persistent_grads =
      (persist ? all_grads : residency.partitioned ? ceil_div(all_grads, run.data_parallel) : bytes{}) + grad_buffer;
  const bytes carried = g.carried + stage0_carried_gradients(all_grads, run);

  // The walks below add unchecked when a bound on the graph proves their sums fit (walk_bound.hpp).
  const bool unchecked = walk_sums_fit(g, run);
  const auto forward = [&](section s, bool held, bool saving) {
    return unchecked ? forward_walk<unchecked_bytes>(g, s, run, held, saving) : forward_walk(g, s, run, held, saving);
  };
  const auto backward = [&](section s, bytes carried_grad, const flat_view_unit& unit) {
    return unchecked ? section_backward_peak<unchecked_bytes>(g, s, run, persist, carried_grad, unit)
                     : section_backward_peak(g, s, run, persist, carried_grad, unit);
  };

  // Each section's forward walked once: its saved bytes, cache and forward peaks.
  const forward_pass prologue = forward(prologue_of(g), false, true);
  // A checkpointed block's forward saves nothing for backward (its rerun does, below).
  const forward_pass block = forward(block_of(g), false, !ckpt);
  // The loss code holds its outputs until forward returns (forward_walk's `held`).
  const forward_pass epilogue = forward(epilogue_of(g), true, true);
  // Saved activations per section pass.
  const bytes saved_p = prologue.saved;
  const bytes saved_b_on_device = ckpt ? block.checkpoint_saved : block.saved;
  // Checkpointed inputs offloaded wait on the host.
  const bytes saved_b = ckpt && run.offload_activations ? bytes{} : saved_b_on_device;
  const bytes below_blocks = saved_p + saved_b * (L - 1);
  const std::uint64_t stashed_blocks = offload_stashed_blocks(run, L - 1);
  const bytes below_block_forward = below_blocks + saved_b_on_device * stashed_blocks;
  // The base model's masks live through its blocks; checkpointed blocks saved them as inputs.
  const bytes held_after_blocks = ckpt ? g.held : bytes{};
  // A KV cache built while training (use_cache) lives from each layer's attention until the loss
  // code returns: the lower blocks' part while a block runs, every block's through the epilogue.
  const bytes cache_below_block = prologue.cache + block.cache * (L - 1);
  const bytes cache_at_loss = cache_below_block + block.cache;

  // The moments below differ only in activations and gradients (parameters, persistent
  // gradients, inputs and workspace are common), so they are ranked by those two alone and
  // the winner's breakdown is written once.
  // A moment may also see fewer gathered units than `params` counts (`ungathered`: FSDP1's bottom
  // block, below).
  struct leading_moment {
    phase at = phase::forward;
    bytes activations{};
    bytes grads{};
    bytes ranked{};  // activations + grads
    bytes ungathered{};
  } lead{};
  bool first_moment = true;
  auto consider = [&](phase at, bytes activations, bytes grads, bytes ungathered = bytes{}) {
    const bytes ranked = activations + grads;
    if (first_moment || ranked + lead.ungathered > lead.ranked + ungathered)
      lead = {at, activations, grads, ranked, ungathered};
    first_moment = false;
  };

  // Forward: the last block and the epilogue see the most saved tensors; the loop may
  // still hold tensors of the previous step (graph::carried).
  consider(phase::forward, carried + prologue.peak, {});
  // A frozen vision tower's forward on the images, between the embeddings and the blocks, beside
  // what the ops before it saved.
  if (g.tower_forward.value != 0)
    consider(phase::forward, carried + section_saved_bytes(g, {0, g.tower_after}, run, false) + g.tower_forward, {});
  consider(phase::forward,
           carried + g.held + below_block_forward + cache_below_block + block.peak,
           {});
  // The loop rebinds its logits when the model returns, before the loss is computed
  // (lit-gpt finetune/lora.py fit(): `logits = model(...)`, then chunked_cross_entropy),
  // so the previous step's tensors are live only up to the first loss op.
  consider(phase::forward,
           carried + held_after_blocks + saved_p + saved_b * L + cache_at_loss + epilogue.peak_before_loss,
           {});
  consider(phase::forward,
           stage0_carried_gradients(all_grads, run) + held_after_blocks + saved_p + saved_b * L + cache_at_loss +
               epilogue.peak,
           {});

  // An optimizer stepped inside backward runs each parameter's step in its post-accumulate-grad
  // hook (one optimizer per parameter: the temporaries of one tensor), once the gradient is whole
  // (training/memory.py register_optim_in_bwd_hooks @ v0.6.1). Inside a block that is while the
  // block's backward runs (its largest tensor's step counted at the block's moments); the head's
  // and the embeddings' gradients are whole only after their section's backward is done (the
  // chunked output projection's after the last chunk), beside the gradient flowing on.
  const bool in_backward = run.optimizer_in_backward;
  const bytes step_in_block = in_backward ? section_step_temporaries(g, block_of(g), run) : bytes{};

  // FSDP1's root unit when it trains: the epilogue's view gradients wait for the root's split.
  const flat_view_unit root_unit = root_flat_view_unit(g, run, root_trains(g, grads_p, grads_b, grads_e));
  const bool root_flat_views = root_unit.views;
  const bytes root_waiting = root_unit.waiting;
  const bytes grads_e_reduced = root_flat_views ? bytes{} : grads_e;  // held whole in root_waiting instead
  // A first layer written in the prologue is a unit of its own, whose ops the root's walk would take.
  detail::require(!root_flat_views || !g.first_layer_apart, error_code::unsupported, "run.target",
                  "must leave the embeddings and the head frozen under FSDP1 when the first layer is written apart "
                  "(a trainable root unit beside it is not modelled)",
                  run.target);

  // Backward of the epilogue (loss, head): every block's tensors are still saved.
  const auto e = backward(epilogue_of(g), bytes{}, {.views = root_flat_views});
  consider(phase::backward, held_after_blocks + saved_p + saved_b * L + (e.peak - e.grads_at_peak), e.grads_at_peak);
  if (in_backward)
    consider(phase::backward,
             held_after_blocks + saved_p + saved_b * L + g.stream_grad +
                 section_step_temporaries(g, epilogue_of(g), run),
             grads_e);

  // litgpt's fit() (0.4 and main, the loops that validate) binds `logits = model(...)` and runs
  // fabric.backward(loss) in the same scope (finetune/full.py lines 282-285, lora.py lines 355-359
  // @ 26857050): the step's logits stay referenced through the blocks' and the embeddings' backward.
  // The 2023 scripts bind them alike; their rows' placement (docs/research/frameworks.md 1.5) is left.
  const bytes bound_logits = g.validation_after_step.value != 0 ? g.carried : bytes{};

  // Backward of a block: the top block (all lower blocks saved, no block gradients yet)
  // or the bottom block (nothing below, all other block gradients created), and under FSDP1
  // block 1 (below).
  // Under FSDP1 a block is a unit of its own (auto_wrap_policy): its weights' gradients meet in
  // its flat parameter when any of them trains (estimate/activations.hpp section_backward_peak).
  const bool block_flat_views = run.fsdp_flat_views && grads_b.value != 0;
  // The flat gradient is read only with views: without them its walk over the block is skipped.
  const bytes block_flat =
      block_flat_views ? section_view_gradient_bytes(g, block_of(g), run, view_gradients::stored) : bytes{};
  const auto bp = backward(block_of(g), g.stream_grad, {.views = block_flat_views, .split_after = true, .flat = block_flat});
  // The reentrant checkpoint keeps its rerun's output referenced while autograd.backward runs
  // through the block (torch/utils/checkpoint.py @ 0008d771, CheckpointFunction.backward: `outputs`).
  const bytes rerun_output = reentrant_checkpoint(run) ? g.ops[block_of(g).end - 1].out : bytes{};
  const bytes local_act = bp.peak - bp.grads_at_peak + rerun_output;
  // The gradients present while block i runs its backward: the blocks above it are reduced.
  const auto grads_before_block = [&](std::uint64_t i) {
    return root_waiting +
           (reduced_elsewhere
                ? bytes{}
                : ceil_div(grads_e_reduced + device_share_of_blocks(grads_b, L - 1 - i, streamed), grad_share));
  };
  // FSDP1 FULL_SHARD: a block's pre-backward hook prefetches the unit before it in post-forward order
  // (BACKWARD_PRE, the default), so block i > 0 runs beside block i - 1 gathered and block 0 beside
  // none (torch/distributed/fsdp/_exec_order_utils.py@008ec6b1 get_handle_to_backward_prefetch:
  // current index - 1, nothing below 0): block 1 can outweigh the bottom block.
  const bool fsdp1_prefetch = run.fsdp_flat_views && run.shard == sharding::full && L > 1;
  // A checkpointed block's own input, where no op of the block saves it (checkpoint_input_unsaved).
  const bytes own_input = ckpt && !run.offload_activations ? checkpoint_input_unsaved(g, block_of(g), run) : bytes{};
  // Backward of a checkpointed block first runs its forward again, saving as it goes, with the
  // gradient of its output waiting (torch/utils/checkpoint.py).
  const bytes rerun = ckpt ? g.stream_grad + section_forward_peak(g, block_of(g), run, false, true) : bytes{};
  for (const std::uint64_t i : {L - 1, fsdp1_prefetch ? std::uint64_t{1} : L - 1, std::uint64_t{0}}) {
    const bytes below = bound_logits + held_after_blocks + saved_p + saved_b * i + own_input;
    const bytes ungathered = fsdp1_prefetch && i == 0 ? shards.block_unit : bytes{};
    consider(phase::backward, below + local_act + step_in_block, grads_before_block(i) + bp.grads_at_peak,
             ungathered);
    if (ckpt) consider(phase::backward, below + rerun, grads_before_block(i), ungathered);
  }

  // Backward of the prologue (embeddings), with enable_input_require_grads' leaf and its .grad
  // (graph/layers/input_require_grads.hpp).
  const auto pp = backward(prologue_of(g), bytes{}, root_unit);
  const bytes grads_before_prologue =
      reduced_elsewhere ? bytes{} : ceil_div(grads_e_reduced + device_share_of_blocks(grads_b, L, streamed), grad_share);
  consider(phase::backward, bound_logits + g.kept_input_embeddings + pp.peak - pp.grads_at_peak,
           grads_before_prologue + pp.grads_at_peak);
  if (in_backward) consider(phase::backward, section_step_temporaries(g, prologue_of(g), run), grads_p);

  // Optimizer step: all gradients, the state (created now in step 1) and temporaries.
  {
    const bytes step_state = run.offload_optimizer ? bytes{} : device_state;
    // With an fp32 master (DeepSpeed fp16/bf16) the step's gradients are in master_step_temporaries.
    // DeepSpeed's stage-0 wrappers step beside the 16-bit gradients (and BF16_Optimizer's fp32 buffer).
    const bytes step_grads = run.stage0 != stage0_optimizer::none ? all_grads + grad_buffer
                             : run.fp32_master                     ? bytes{}
                             : run.shard >= sharding::gradients ? ceil_div(all_grads, run.data_parallel)
                                                                : all_grads;
    // A sharded optimizer steps only the rank's partition, so foreach's group-sized
    // temporaries cover 1/N of the parameters (ZeRO: the flat fp32 partition; FSDP: the shards).
    const bytes all_temporaries = t.step_temporaries;
    const bytes step_temporaries =
        run.stage0 != stage0_optimizer::none ? stage0_step_temporaries(t.largest_trainable, t.trainable_parameters, run)
        : run.fp32_master ? master_step_temporaries(t.trainable_parameters, run)
        : run.shard != sharding::none && run.optimizer_impl == optimizer_implementation::foreach
            ? ceil_div(all_temporaries, run.data_parallel)
            : all_temporaries;
    // Every litgpt loop calls optimizer.step() in the scope that bound `logits = model(...)`
    // (finetune/full.py lines 254-262, lora.py lines 304-313 @ b0ea1772; full.py lines 169-175,
    // lora.py lines 216-223 @ 8641822): the step's logits are alive through it (graph::carried).
    // The HF Trainer's training_step returns loss.detach(); torchtune's _loss_step does `del logits`
    // (recipes/lora_finetune_single_device.py line 659 @ a6290a5b), torchtitan `del pred` before
    // backward (train.py line 412 @ f7084fc7).
    phase_candidate step{phase::optimizer_step,
                         {params, grads_to_host ? bytes{} : step_grads, step_state, g.inputs + g.carried,
                          workspace + step_temporaries}};
    // Steady state: the state is on the device through forward and backward too.
    const phase_candidate best{lead.at, {params - lead.ungathered, lead.grads + persistent_grads, bytes{},
                                         lead.activations + g.inputs, workspace}};
    phase_candidate steady = best;
    if (!run.offload_optimizer) steady.breakdown.optimizer = device_state;
    // Validation runs before step 1 on the bare model (no state, no gradients) and after later
    // steps with the state made, the gradients freed by zero_grad(set_to_none=True) and the last
    // step's logits still bound (graph::validation_after_step).
    phase_candidate steady_peak = larger(steady, step);
    phase_candidate first_peak = larger(best, step);
    if (g.validation.value != 0) {
      phase_candidate before{phase::validation, {params, bytes{}, bytes{}, g.inputs + g.validation, workspace}};
      // Under FSDP1 FULL_SHARD (litgpt's FSDPStrategy) validate()'s no_grad forward gathers one
      // block at a time (forward_prefetch off, no backward to prefetch for) and the root stays
      // gathered after its forward (_post_forward_reshard frees no root unit,
      // torch/distributed/fsdp/_runtime_utils.py@00ae0bc9): the loss code's peak sees the shards
      // and the root; a block's moment, beside the previous batch's logits, one block more.
      if (run.fsdp_flat_views && shards.shard_and_root.value != 0) {
        const bytes block_moment = g.validation_after_step + g.stream_grad +
                                   section_forward_peak(g, block_of(g), run, false, false);
        const bool in_block = shards.block_unit + block_moment > g.validation;
        before.breakdown.parameters = shards.shard_and_root + (in_block ? shards.block_unit : bytes{}) + g.buffers;
        before.breakdown.activations = g.inputs + (in_block ? block_moment : g.validation);
      }
      phase_candidate after = before;
      after.breakdown.optimizer = steady.breakdown.optimizer;
      after.breakdown.activations += g.validation_after_step;
      first_peak = larger(first_peak, before);
      steady_peak = larger(steady_peak, after);
    }
    const std::uint64_t large = cuda ? t.large_tensors : 0;
    const bytes saved_all = saved_p + saved_b_on_device * L + epilogue.saved;
    return {finish_peak(steady_peak, run, large), finish_peak(first_peak, run, large), saved_all};
  }
}

// The estimate of `g` from its totals `t` (which a caller may have replaced, as the generic
// checkpoint's exact parameter bytes do).
// The host bytes of the estimate `r` of graph `g` (a graph or an encoder-decoder's two): its
// checkpointed block inputs and pinned FSDP2 shards are walked only when the run offloads them.
template <class Graph>
constexpr bytes host_bytes_of(const estimate_result& r, const Graph& g, const training_spec& run) {
  return host_resident_bytes({.parameters = r.parameter_bytes,
                              .optimizer_state = r.optimizer_bytes,
                              .trainable = r.trainable_parameter_count,
                              .checkpointed_inputs = offloads_block_inputs(run) ? offloaded_block_inputs_on_host(g, run) : bytes{},
                              .fsdp2_shards = runs_fsdp2(run) && run.offload_parameters ? pinned_fsdp2_shards(g, run)
                                                                                        : pinned_shards{}},
                             run);
}

constexpr estimate_result estimate_from_totals(const graph& g, const training_spec& run, const graph_totals& t) {
  estimate_result r{};
  r.parameter_count = t.parameters;
  r.trainable_parameter_count = t.trainable_parameters;
  r.parameter_bytes = t.parameter_bytes(g.block_repeats);
  r.gradient_bytes = t.gradient_bytes(g.block_repeats);
  r.optimizer_bytes = t.optimizer_state;
  r.paged_optimizer_bytes = t.paged_state;
  const step_peaks peaks = estimate_peaks(g, run, t);
  r.saved_activation_bytes = peaks.saved_activations;
  r.steady = peaks.steady;
  r.first_step = peaks.first_step;
  r.host_bytes = host_bytes_of(r, g, run);
  return r;
}

}  // namespace detail

constexpr estimate_result estimate(const graph& g, const training_spec& run) {
  return detail::estimate_from_totals(g, run, detail::totals_of(g, run));
}

}  // namespace memscale
