// memscale/graph/layers/context_parallel.hpp: one rank of torchtitan's context parallelism
// (train.py @ f7084fc7: the step runs inside context_parallel(cp_mesh, buffers=[inputs, labels,
// freqs_cis], buffer_seq_dims=[1, 1, 0]) with rotate method allgather), as torch's ring
// attention runs it (torch/distributed/tensor/experimental/_attention.py, read at pytorch
// @ 0123248a: _templated_ring_attention and its backward). The rank holds 2 of the sequence's
// 2 x cp round-robin chunks, so every layer outside the attention sees seq_len / cp positions;
// the attention core adds the ring's buffers around the fused kernel.
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// The run one CP rank's layers see: its seq_len / cp positions (the sharded inputs and labels
// give S/cp tokens to the embedding, every block, the output and the loss).
constexpr training_spec context_parallel_local(const training_spec& run) {
  training_spec local = run;
  local.seq_len = run.seq_len / run.context_parallel;
  return local;
}

// What ring attention holds around the fused SDPA kernel of one layer, for the rank whose every
// step is a full-query merge (the last: `i <= rank` for all i), in the kernel's dtype `t`:
// forward: the all-gathered keys and values (_AllGatherRotater: cp x the flat cat of the local k
// and v, held through the loop) and _SDPAMerger's fp32 merge (convert_to_f32: the running fp32
// output, the step's kernel output and its fp32 copy, the sigmoid-weighted difference and the
// new output: 4 fp32 output-sized tensors beside the step's kernel-dtype output, which stands
// for the merged output the op counts);
// backward: the keys and values all-gathered again with the local cat (bound until the next
// step), the fp32 grad_query accumulator, and at each step's send the fp32 key/value gradients
// travelling the ring: the _AllToAllRotater's previous receive buffer (held until exchange_buffers
// replaces it), the pair _partial_update made, their cat, and the permute's new receive buffer;
// and the previous step's kernel gradients (grad_query_, and the half-length grad_key_ and
// grad_value_ of a step i >= 1), bound until the next kernel call returns.
// On CPU the first step can be higher: `grad_query += grad_query_` adds a 16-bit tensor into an
// fp32 one, and CPU TensorIterators promote such an input into an fp32 temporary first
// (compute_types, "Creates temporaries for CPU operations": aten/src/ATen/TensorIterator.cpp;
// CUDA kernels cast as they load). At that moment step 0 holds the fp32 accumulators, key and
// value's contiguous copies (`key.contiguous()`, their transposed layout) and the local cat, the
// gathered set, its full-length kernel gradients, the cat of the key/value gradients and its
// receive buffer.
constexpr void add_ring_attention_buffers(op& core, const training_spec& run, std::uint64_t q_elements,
                                          std::uint64_t k_elements, dtype t) {
  const std::uint64_t cp = run.context_parallel;
  if (cp <= 1) return;
  const std::uint64_t kv_local = detail::checked_mul(2, k_elements);
  const bytes gathered = storage(t, detail::checked_mul(cp, kv_local));
  const bytes output_fp32 = storage(dtype::fp32, q_elements);
  core.fwd_temp += gathered + output_fp32 * 4U;
  const bytes kv_fp32 = storage(dtype::fp32, kv_local);
  const bytes step_grads = storage(t, detail::checked_add(q_elements, k_elements));
  const bytes later_step = gathered + storage(t, kv_local) + output_fp32 + kv_fp32 * 4U + step_grads;
  const bytes first_step_on_cpu = output_fp32 * 2U + kv_fp32 * 3U + storage(t, kv_local) * 2U + gathered +
                                  storage(t, detail::checked_add(q_elements, kv_local));
  core.bwd_temp += run.device == device_kind::cpu ? max(later_step, first_step_on_cpu) : later_step;
}

}  // namespace memscale::graph_layers
