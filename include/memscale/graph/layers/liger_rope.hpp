// memscale/graph/layers/liger_rope.hpp: Liger's RoPE (liger_rotary_pos_emb, LigerRopeFunction;
// Liger-Kernel v0.5.10 @ 44a8f2fb, src/liger_kernel/ops/rope.py) in place of the modeling file's
// apply_rotary_pos_emb (q * cos + rotate_half(q) * sin: new q and k tensors and their temporaries).
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"

namespace memscale::graph_layers {

struct liger_rotated {
  tensor q;
  tensor k;
  bytes backward_copies;  // dq and dk made contiguous by rope_backward, beside the gradients they copy
};

// rope_forward transposes q and k back to (batch, seq, heads, head_dim) and calls .contiguous():
// nothing to copy for a projection's own output viewed per head, so the Triton kernel rotates the
// projection's storage in place and the function returns views of it, which attention then saves;
// a fused projection's q and k are slices with its row stride, so .contiguous() copies them first
// and the copies are rotated (`fused_projection`). ctx.save_for_backward(cos, sin) keeps only the
// rotary embedding's tables, made once per forward. rope_backward gets dq and dk from attention in
// (batch, heads, seq, head_dim) and transposes them: .contiguous() copies each before the kernel
// rotates the copy in place, so both copies exist beside dq and dk while it runs.
constexpr liger_rotated liger_rope(op_writer& ops, tensor q, tensor k, std::uint64_t q_elements,
                                   std::uint64_t k_elements, dtype type, bool fused_projection) {
  const bytes copies = storage(type, q_elements) + storage(type, k_elements);
  if (!fused_projection) return {.q = q, .k = k, .backward_copies = copies};
  return {.q = ops.elementwise(q, q_elements, type), .k = ops.elementwise(k, k_elements, type), .backward_copies = copies};
}

}  // namespace memscale::graph_layers
