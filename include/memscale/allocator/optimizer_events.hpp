// memscale/allocator/optimizer_events.hpp: the optimizer's tensors in the order step() makes
// them: state created tensor by tensor in the first step (torch/optim/adamw.py _init_group,
// sgd.py: momentum_buffer = clone(grad)), then the step's temporaries (estimate/optimizer.hpp
// step_temporaries_of, made literal).
//
// `each(fn)` calls fn(rows, cols, stack) once per trainable tensor: `stack` matrices of rows x
// cols in one tensor (stacked experts, [stack, rows, cols]; 1 otherwise); `ids` makes and drops
// the tensors (alloc(size) -> id, free(id)).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/allocator/events.hpp"
#include "memscale/dtype.hpp"
#include "memscale/error.hpp"
#include "memscale/estimate/optimizer.hpp"
#include "memscale/training.hpp"

namespace memscale::allocator::detail {

// The state of one parameter tensor (tensor_state_bytes, tensor by tensor).
template <class Ids>
constexpr void create_state(std::uint64_t rows, std::uint64_t cols, std::uint64_t stack, const training_spec& run,
                            dtype t, Ids& ids) {
  const std::uint64_t n = memscale::detail::checked_mul(rows, cols, stack);
  if (run.paged_optimizer) {
    // bitsandbytes: state1 and state2 through the allocator unless paged (then cudaMallocManaged,
    // outside it); then the 8-bit state's two absmax vectors.
    const bool eight_bit = run.optimizer == optimizer_kind::adamw_8bit && n >= bnb_min_8bit_size;
    if (!state_is_paged(run, n)) {
      const std::uint64_t moment = storage(eight_bit ? dtype::int8 : dtype::fp32, n).value;
      ids.alloc(moment);
      if (run.optimizer != optimizer_kind::lion) ids.alloc(moment);
    }
    if (eight_bit)
      for (int i = 0; i < 2; ++i)
        ids.alloc(storage(dtype::fp32, memscale::detail::ceil_div(n, bnb_state_block_of(run))).value);
    return;
  }
  const bool step_on_device = run.device == device_kind::cpu || run.optimizer_impl == optimizer_implementation::fused;
  switch (run.optimizer) {
    case optimizer_kind::sgd: return;
    case optimizer_kind::sgd_momentum:
    case optimizer_kind::lion: ids.alloc(storage(t, n).value); return;
    case optimizer_kind::adam:
    case optimizer_kind::adamw:
      if (step_on_device) ids.alloc(storage(dtype::fp32, 1).value);
      ids.alloc(storage(t, n).value);
      ids.alloc(storage(t, n).value);
      return;
    case optimizer_kind::adamw_8bit:
      if (n < bnb_min_8bit_size) {
        ids.alloc(storage(dtype::fp32, n).value);
        ids.alloc(storage(dtype::fp32, n).value);
        return;
      }
      ids.alloc(storage(dtype::int8, n).value);
      ids.alloc(storage(dtype::int8, n).value);
      ids.alloc(storage(dtype::fp32, memscale::detail::ceil_div(n, bnb_state_block_of(run))).value);
      ids.alloc(storage(dtype::fp32, memscale::detail::ceil_div(n, bnb_state_block_of(run))).value);
      return;
    case optimizer_kind::adafactor:
      // A 3-D tensor's factors keep the leading dimension: shape[:-1] and shape[:-2] + shape[-1:]
      // (transformers optimization.py Adafactor.step, exp_avg_sq_row / exp_avg_sq_col).
      if (cols > 1) {
        ids.alloc(storage(t, memscale::detail::checked_mul(rows, stack)).value);
        ids.alloc(storage(t, memscale::detail::checked_mul(cols, stack)).value);
      } else {
        ids.alloc(storage(t, n).value);
      }
      return;
  }
}

// optimizer.step(): the state in the first step, then the temporaries. `temps` holds the ids
// of a foreach list while it lives. `each_stepped` walks the tensors in the order the for-loop
// steps them (estimate/optimizer.hpp for_each_op_in_parameter_order).
template <class Each, class EachStepped, class Ids, std::size_t N>
constexpr void optimizer_step_events(const training_spec& run, dtype trainable, bool first, Each&& each,
                                     EachStepped&& each_stepped, Ids& ids, std::array<std::uint32_t, N>& temps) {
  if (run.offload_optimizer) return;
  if (run.paged_optimizer) {  // bitsandbytes' kernels step in place: no temporaries
    if (first)
      each([&](std::uint64_t rows, std::uint64_t cols, std::uint64_t stack) {
        create_state(rows, cols, stack, run, trainable, ids);
      });
    return;
  }
  if (first)
    each([&](std::uint64_t rows, std::uint64_t cols, std::uint64_t stack) {
      create_state(rows, cols, stack, run, trainable, ids);
    });
  const bool adam_like = run.optimizer == optimizer_kind::adam || run.optimizer == optimizer_kind::adamw;
  const bool two_of_largest = run.optimizer == optimizer_kind::lion || run.optimizer == optimizer_kind::adafactor;
  auto two_at_a_time = [&](std::uint64_t rows, std::uint64_t cols, std::uint64_t stack) {
    const std::uint64_t b = storage(trainable, memscale::detail::checked_mul(rows, cols, stack)).value;
    std::uint32_t a = ids.alloc(b);
    std::uint32_t c = ids.alloc(b);
    ids.free(a);
    ids.free(c);
  };
  switch (run.optimizer_impl) {
    case optimizer_implementation::fused: return;
    case optimizer_implementation::for_loop:
      if (adam_like) {
        // _single_tensor_adam: exp_avg_sq.sqrt(), its quotient (then `denom`, the sqrt dropped), the
        // previous tensor's denom dropped only when the name is rebound (adam_loop_live).
        std::uint32_t denom = no_tensor;
        each_stepped([&](std::uint64_t rows, std::uint64_t cols, std::uint64_t stack) {
          const std::uint64_t b = storage(trainable, memscale::detail::checked_mul(rows, cols, stack)).value;
          std::uint32_t root = ids.alloc(b);
          std::uint32_t quotient = ids.alloc(b);
          ids.free(root);
          ids.free(denom);
          denom = quotient;
        });
        ids.free(denom);
      } else if (two_of_largest) {
        each(two_at_a_time);
      }
      return;
    case optimizer_implementation::foreach:
      if (adam_like) {
        // _multi_tensor_adam: torch._foreach_sqrt(exp_avg_sqs) makes one list over the group
        // (two before torch 2.1), alive until the update is applied.
        const std::uint32_t per_tensor = run.torch_version < 201 ? 2 : 1;
        std::size_t count = 0;
        each([&](std::uint64_t rows, std::uint64_t cols, std::uint64_t stack) {
          const std::uint64_t b = storage(trainable, memscale::detail::checked_mul(rows, cols, stack)).value;
          for (std::uint32_t t = 0; t < per_tensor; ++t) {
            if (count >= N)
              memscale::detail::fail(error_code::unsupported, "event stream",
                                     "has more optimizer temporaries than its capacity", count);
            temps[count++] = ids.alloc(b);
          }
        });
        for (std::size_t t = 0; t < count; ++t) ids.free(temps[t]);
      } else if (two_of_largest) {
        each(two_at_a_time);
      }
      return;
  }
}

// A walk whose tensors are created and stepped in one order.
template <class Each, class Ids, std::size_t N>
constexpr void optimizer_step_events(const training_spec& run, dtype trainable, bool first, Each&& each, Ids& ids,
                                     std::array<std::uint32_t, N>& temps) {
  optimizer_step_events(run, trainable, first, each, each, ids, temps);
}

}  // namespace memscale::allocator::detail
