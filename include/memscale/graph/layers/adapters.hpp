// memscale/graph/layers/adapters.hpp: LoRA adapters on a projection (LoRA, rsLoRA, DoRA,
// lit-gpt's fused-qkv adapter, the output layer's adapter) and what a LoRA or QLoRA run
// changes in the base weights (frozen, 4-bit, bitsandbytes' version rules).
#pragma once

#include <cstddef>
#include <cstdint>

#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/lora.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// A projection's base weight under `run`: LoRA freezes it, QLoRA also stores it in 4 bits.
constexpr base_weight base_weight_of(const training_spec& run) {
  const bool frozen = is_lora(run);
  const bool four_bit = run.target == training_target::qlora;
  // MatMul4Bit kept its input until bitsandbytes 0.43.2 (ctx.tensors = (A, B) in 0.42.0 @ 4870580f;
  // (None, B) from 0.43.2 @ ce53caf3, PR #1270 "delete useless buffered activation").
  const bool bnb_keeps_input = four_bit && run.bitsandbytes_version < bnb_drops_matmul_input;
  // torchtune's qlora_ builders hold torchao NF4Tensors, whose LinearNF4 saves only the weight
  // (FrozenNF4Linear, modules/low_precision/nf4_linear.py @ v0.6.1; nf4tensor.py @ 05980129).
  if (four_bit && run.framework == framework_kind::torchtune)
    return {.frozen = frozen, .four_bit = true, .keeps_input = false, .torchao = true};
  return {.frozen = frozen, .four_bit = four_bit, .keeps_input = !frozen || bnb_keeps_input};
}

// An output layer tied to the embedding uses the embedding's weight: QLoRA quantizes only
// nn.Linear modules, so it is never 4-bit, and frozen it keeps nothing.
constexpr base_weight tied_head_weight(const base_weight& base) {
  return {.frozen = base.frozen, .four_bit = false, .keeps_input = !base.frozen};
}

// An untied output projection under `run`: torchtune's qlora_ builders leave it an nn.Linear in
// 16 bits (lora_llama2: "quantize_base is not applied to final output_proj currently",
// models/llama2/_component_builders.py @ v0.6.1), and so does a transformers load with
// BitsAndBytesConfig (get_keys_to_not_convert keeps the output embedding, integrations/bitsandbytes.py);
// lit-gpt's bitsandbytes precision quantizes it with the rest.
constexpr base_weight untied_head_weight(const model_spec& model, const training_spec& run) {
  const base_weight base = base_weight_of(run);
  if (base.torchao || (base.four_bit && model.impl == implementation::hf_transformers)) return tied_head_weight(base);
  return base;
}

// The run's adapters, read once.
struct adapter_plan {
  bool enabled = false;       // LoRA or QLoRA: adapters train, the base is frozen
  base_weight base{};         // every projection's base weight
  base_weight head{};         // an untied output projection's
  lora_modules targets = 0;
  std::uint64_t rank = 0;
  lora_variant variant = lora_variant::lora;
  bool dropout = false;       // lora_dropout > 0
  bool casts_input = false;   // PEFT casts the adapter's input to the adapters' dtype
  lora_modules unquantized = 0;  // roles the checkpoint keeps in 16 bits (training_spec::unquantized)

  [[nodiscard]] constexpr bool adapts(lora_target t) const { return enabled && has(targets, t); }

  // The base weight of a projection that is `roles`: one the checkpoint keeps in 16 bits stays
  // an nn.Linear under a 4-bit load (frozen, no dequantised copies), as the untied head does.
  [[nodiscard]] constexpr base_weight base_for(lora_modules roles) const {
    if (roles == 0 || (roles & ~unquantized) != 0) return base;
    base_weight kept = tied_head_weight(base);
    kept.unquantized = true;
    return kept;
  }
};

constexpr adapter_plan adapter_plan_of(const model_spec& model, const training_spec& run) {
  return {.enabled = is_lora(run),
          .base = base_weight_of(run),
          .head = untied_head_weight(model, run),
          .targets = run.lora_targets,
          .rank = run.lora_rank,
          .variant = run.lora_kind,
          .dropout = run.lora_dropout,
          .casts_input = model.impl == implementation::hf_transformers,
          .unquantized = run.unquantized};
}

// The adapter's input: LoRA dropout when p > 0 (PEFT nn.Dropout, else nn.Identity:
// peft v0.13.0 @ 8f074d75 tuners/lora/layer.py update_layer; lit-gpt lora.py LoRALayer),
// then autocast's own 16-bit copy for lora_A (the base matmul's copy is not shared:
// autocast caches only leaf weights).
constexpr tensor adapter_input(op_writer& ops, const adapter_plan& plan, tensor in) {
  tensor x = in;
  // PEFT first casts x to the adapters' dtype (layer.py Linear.forward: x = x.to(lora_A.weight.dtype)):
  // under autocast a 16-bit input becomes an fp32 copy, and the dropout mask is fp32 too.
  if (plan.casts_input && x.type != ops.precision().trainable) x = ops.elementwise(x.elements, ops.precision().trainable);
  x = ops.dropout(x, plan.dropout);
  return ops.matmul_input(x);
}

// DoRA (Liu et al. 2024, arXiv 2402.09353) as PEFT runs it (peft v0.13.0 @ 8f074d75,
// tuners/lora/dora.py DoraLinearLayer.forward): a trainable magnitude per output row;
// lora_weight = lora_B(lora_A(eye(in))).T and x_eye stay referenced until the
// function returns; ||W + s * lora_weight|| is detached; the base matmul runs again,
// (m/||.|| - 1) * (x W^T) + m/||.|| * lora_out * s: both products keep their tensor factor.
constexpr tensor dora(op_writer& ops, const adapter_plan& plan, tensor x, tensor base, tensor lora_out,
                      const linear_shape& shape) {
  const precision_policy& p = ops.precision();
  const auto in_features = shape.in_features;
  const auto out_features = shape.out_features;
  const auto out_elements = [&] { return detail::checked_mul(shape.rows, out_features); };
  const dtype t = x.type;
  const bytes held = storage(t, detail::checked_add(detail::checked_mul(in_features, in_features),
                                                    detail::checked_mul(in_features, out_features)));  // x_eye, lora_weight
  // The weight norm: lora_A(eye) (in x r), scaling * lora_weight and W + that (out x in each).
  const op norm_op{.kind = op_kind::elementwise,
                   .weight = {out_features, 1, shape.copies},
                   .role = param_role::adapter,
                   .fwd_temp = held + storage(t, detail::checked_add(detail::checked_mul(in_features, plan.rank),
                                                                     detail::checked_mul(in_features, out_features, 2)))};
  const dtype scale_type = p.autocast ? p.trainable : p.matmul;  // magnitude / norm: the adapters' dtype
  ops.emit(norm_op, detail::checked_mul(out_features, shape.copies), scale_type);
  op again{.kind = op_kind::linear, .fwd_temp = held, .grad_in = storage(t, x.elements)};
  // Under autocast the frozen weight is cast again (not cached: it needs no grad) and
  // mm keeps the copy for the input's gradient.
  if (p.casts_weights()) again.extra_saved = storage(p.matmul, detail::checked_mul(in_features, out_features, shape.copies));
  const tensor base_again = ops.emit(again, out_elements(), p.matmul);
  const tensor scaled_base = ops.elementwise(out_elements(), scale_type);  // (m/n - 1) * (x W^T)
  ops.keep(base_again, scaled_base);
  const tensor scaled_lora = ops.elementwise(out_elements(), scale_type);  // m/n * lora_out
  ops.keep(lora_out, scaled_lora);
  ops.elementwise(out_elements(), scale_type);                              // * scaling
  const tensor sum = ops.elementwise(out_elements(), scale_type);           // result_dora
  return ops.elementwise(sum.elements, base.type);                          // result + result_dora (then .to(dtype))
}

// LoRA (Hu et al. 2021, arXiv 2106.09685): y + B(A(dropout(x))) * alpha/r, as PEFT's
// lora.Linear.forward and lit-gpt's LoRALinear.forward write it. Saves the adapter
// input (for A's gradient), A's output (for B's gradient) and the dropout mask.
// rsLoRA changes only the scaling factor: same tensors.
constexpr tensor lora(op_writer& ops, const adapter_plan& plan, tensor in, tensor base, const linear_shape& shape) {
  const precision_policy& p = ops.precision();
  const auto rank = plan.rank;
  const auto out_elements = [&] { return detail::checked_mul(shape.rows, shape.out_features); };
  const tensor dropped = adapter_input(ops, plan, in);
  // fp32 adapters over a 16-bit base compute in fp32 (no autocast casts them down).
  const dtype adapter_out = p.autocast ? p.matmul : p.trainable;
  const tensor a = ops.adapter_matrix({rank, shape.in_features, shape.copies}, detail::checked_mul(shape.rows, rank),
                                      adapter_out);
  ops.keep(dropped, a);
  const tensor b = ops.adapter_matrix({shape.out_features, rank, shape.copies}, out_elements(), adapter_out);
  ops.keep(a, b);
  if (plan.variant == lora_variant::dora) return dora(ops, plan, dropped, base, b, shape);
  ops.elementwise(out_elements(), adapter_out);  // * alpha / r
  if (adapter_out == base.type) return ops.elementwise(out_elements(), base.type);  // base output + adapter output
  // result + fp32 adapter output promotes to fp32; layer.py then casts back (result.to(torch_result_dtype)).
  ops.elementwise(out_elements(), dtype::fp32);
  return ops.elementwise(out_elements(), base.type);
}

// A projection: the linear core over its base weight, plus the run's adapter when `adapted`.
// On an input that needs no gradient a frozen base is recorded by nothing (ops.hpp untracked_from);
// the adapter still is, its weights being trainable.
constexpr tensor projection(op_writer& ops, const adapter_plan& plan, tensor in, const linear_shape& shape,
                            bool adapted, bool input_needs_grad = true) {
  const bool untracked = !input_needs_grad && plan.base.frozen;
  const std::size_t first = untracked ? ops.untracked_from() : 0;
  const tensor y = ops.linear(in, shape, plan.base_for(shape.role));
  if (untracked) ops.track_from(first);
  if (adapted) return lora(ops, plan, in, y, shape);
  return y;
}

// lit-gpt's fused qkv adapter (lit-gpt lora.py LoRAQKVLinear.forward, Lightning-AI/lit-gpt
// @ 3cf6493c, 2024): lora_A has r rows per enabled part, lora_B only the enabled widths,
// applied as a grouped conv1d; zero_pad copies the result (x.reshape: a copy of the
// transposed view, which index_copy keeps for its backward: derivatives.yaml
// index_copy, source) into new zeros of the full qkv width.
struct fused_qkv_widths {
  std::uint64_t parts = 0;          // adapted parts among q, k and v
  std::uint64_t enabled_width = 0;  // their widths together
  std::uint64_t full_width = 0;     // q + k + v
};

constexpr tensor litgpt_qkv_lora(op_writer& ops, const adapter_plan& plan, tensor in, tensor base, std::uint64_t rows,
                                 std::uint64_t in_features, const fused_qkv_widths& widths) {
  const dtype compute = ops.precision().matmul;
  const auto rank = detail::checked_mul(plan.rank, widths.parts);
  const tensor dropped = adapter_input(ops, plan, in);
  const tensor a = ops.adapter_matrix({rank, in_features, 1}, detail::checked_mul(rows, rank), compute);
  ops.keep(dropped, a);
  const tensor conv =
      ops.adapter_matrix({widths.enabled_width, plan.rank, 1}, detail::checked_mul(rows, widths.enabled_width), compute);
  ops.keep(a, conv);
  // With q, k and v all adapted zero_pad returns its input as it is (`if all(self.enable_lora):
  // return x`: lit_gpt/lora.py @ 8641822, litgpt/lora.py @ b0ea1772 and @ 26857050): no copy, no pad.
  if (widths.parts < 3) {
    const tensor source = ops.elementwise(detail::checked_mul(rows, widths.enabled_width), compute);  // x.reshape(-1, sum(qkv_shapes))
    const op pad{.kind = op_kind::elementwise, .fwd_temp = storage(compute, detail::checked_mul(rows, widths.full_width))};  // new_zeros
    const tensor padded = ops.emit(pad, detail::checked_mul(rows, widths.full_width), compute);
    ops.keep(source, padded);
  }
  ops.elementwise(detail::checked_mul(rows, widths.full_width), compute);          // * scaling
  return ops.elementwise(detail::checked_mul(rows, widths.full_width), base.type);  // pretrained + lora
}

// An adapter on the output layer (PEFT lm_head, lit-gpt lora_head): its input and A's
// output are kept; B's output and the scaled copy are as wide as the logits (one chunk at
// a time under lit-gpt's lm_head_chunk_size), beside the base output. Returns those
// logits-wide bytes, which belong to the head op's forward temporaries.
constexpr bytes lm_head_lora(op_writer& ops, const adapter_plan& plan, tensor in, std::uint64_t rows,
                             std::uint64_t hidden, std::uint64_t vocab, std::uint64_t chunk_rows) {
  const dtype compute = ops.precision().matmul;
  const tensor dropped = adapter_input(ops, plan, in);
  const tensor a = ops.adapter_matrix({plan.rank, hidden, 1}, detail::checked_mul(rows, plan.rank), compute);
  ops.keep(dropped, a);
  // B's output is a temporary of the head's forward (not held by the loss code), so its
  // logits-wide bytes sit in the head op's temporaries.
  const tensor b = ops.adapter_matrix({vocab, plan.rank, 1}, detail::checked_mul(rows, plan.rank), compute);
  ops.keep(a, b);
  return storage(compute, detail::checked_mul(chunk_rows, vocab, 2));
}

}  // namespace memscale::graph_layers
