#!/usr/bin/python3
"""CPU trace of one FSDP1 unit's backward when its weights are views of a flat parameter.

A plain-torch re-implementation of what FullyShardedDataParallel (torch 2.1) hands autograd in a
unit's forward: FlatParamHandle._use_unsharded_views(as_params=False) replaces every original
parameter by a Tensor view of the unsharded flat parameter (torch/distributed/fsdp/_flat_param.py:
_get_unflat_views_aligned = torch.split(flat, numels) then .view(shape)). With use_orig_params the
flat parameter requires grad as soon as one of its tensors does, so the frozen views require grad
too. No collective runs inside a no_sync() micro-step, so one process is the whole mechanism.

The unit is a LoRA block in miniature: frozen q/k/v, projection and MLP weights, trainable rank-8
LoRA A/B on q and v (lit-gpt's default targets). Two backward passes run (micro-steps 1 and 2 of
an accumulation under no_sync: the second adds into the kept flat gradient). The same block with
ordinary frozen parameters is the reference. Figures: the most bytes live in micro-step 2 above
those live when its forward starts (the kept flat gradient is already there).

A second case is the root unit (embeddings, final norm, head in one flat parameter) of a full
fine-tune, one synchronised backward: the head's view gradients wait through the blocks' backward
for the root's split after the embeddings' backward, and the root's post-backward hook on the flat
parameter's AccumulateGrad then reduce-scatters the flat gradient (torch/distributed/fsdp/
_runtime_utils.py@00ae0bc9 _register_post_backward_hooks, _post_backward_hook: the unsharded
gradient chunked, `new_sharded_grad = torch.empty_like(chunks[0])`; one rank of RANKS here, the
collective as a copy of its chunk). Untied and tied (the head borrows the embeddings' view) heads;
the reference is the same model with the root frozen and the embeddings' output requiring grad.

Run from the repository root:
  /usr/bin/python3 tools/trace/fsdp1_flat_views.py --out docs/data/cpu_traced_fsdp1_flat_views.json
"""
import argparse
import json
import math

import tracer
import torch
import torch.nn.functional as F

H, FFN, RANK, TOKENS = 256, 1024, 8, 64
SHAPES = {  # name: (shape, trainable)
    "attn_qkv": ((3 * H, H), False),
    "attn_proj": ((H, H), False),
    "fc": ((FFN, H), False),
    "proj": ((H, FFN), False),
    "lora_a_q": ((RANK, H), True),
    "lora_b_q": ((H, RANK), True),
    "lora_a_v": ((RANK, H), True),
    "lora_b_v": ((H, RANK), True),
}


def block(w, x):
    qkv = F.linear(x, w["attn_qkv"])
    q, k, v = qkv.split(H, dim=-1)
    q = q + F.linear(F.linear(x, w["lora_a_q"]), w["lora_b_q"])
    v = v + F.linear(F.linear(x, w["lora_a_v"]), w["lora_b_v"])
    att = torch.softmax(q @ k.transpose(-1, -2) / H ** 0.5, dim=-1) @ v
    x = x + F.linear(att, w["attn_proj"])
    return x + F.linear(F.gelu(F.linear(x, w["fc"])), w["proj"])


def split_views(flat):
    """FlatParamHandle._get_unflat_views_aligned without padding: torch.split, then .view per tensor."""
    pieces = torch.split(flat, [math.prod(shape) for shape, _ in SHAPES.values()])
    return {n: p.view(SHAPES[n][0]) for n, p in zip(SHAPES, pieces)}


def weights(flat_views):
    """The unit's weights (ordinary parameters) or its flat parameter (requires grad: LoRA trains)."""
    tracer.reset_seed()
    tensors = {n: torch.randn(shape) * 0.02 for n, (shape, _) in SHAPES.items()}
    if flat_views:
        return None, torch.nn.Parameter(torch.cat([t.reshape(-1) for t in tensors.values()]))
    return {n: t.requires_grad_(SHAPES[n][1]) for n, t in tensors.items()}, None


def run_case(flat_views):
    with tracer.Tracker() as tr:
        x = torch.randn(1, TOKENS, H)
        w, flat = weights(flat_views)
        for step in (1, 2):
            if flat_views:  # FSDP makes the views again in every forward (_use_unsharded_views)
                w = split_views(flat)
            tr.mark(f"s{step}_fwd_start")
            out = block(w, x)
            out.sum().backward()
            tr.mark(f"s{step}_bwd_end")
            del out
        flat_bytes = flat.numel() * flat.element_size() if flat_views else 0
        kept_grad = flat.grad.numel() * flat.grad.element_size() if flat_views else 0
        del w, flat, x
    return {
        "step_peak_over_start": tr.peak("s2_fwd_start", "s2_bwd_end") - tr.live("s2_fwd_start"),
        "flat_parameter_bytes": flat_bytes,
        "kept_flat_gradient_bytes": kept_grad,
    }


VOCAB, ROOT_BLOCKS, RANKS = 4096, 2, 2


def root_shapes(tied):
    """The root unit's tensors in FlatParamHandle order: embeddings, final norm, head unless tied."""
    shapes = {"wte": (VOCAB, H), "ln_f": (H,)}
    if not tied:
        shapes["lm_head"] = (VOCAB, H)
    return shapes


def root_forward(views, blocks, ids, tied, mark):
    """Embeddings, blocks with ordinary trainable weights, final norm and head; the loss."""
    x = F.embedding(ids, views["wte"])
    if not x.requires_grad:  # a frozen root (the reference): the blocks' input still needs a gradient
        x.requires_grad_()
    x.register_hook(lambda g: mark("emb_bwd"))  # the embeddings' output gradient: the blocks are done
    for i, (w_in, w_out) in enumerate(blocks):
        h = F.linear(x, w_in)
        if i == 0:  # inside the bottom block's backward
            h.register_hook(lambda g: mark("bottom_block_bwd"))
        x = x + F.linear(F.gelu(h), w_out)
    x = F.layer_norm(x, (H,), views["ln_f"])
    logits = F.linear(x, views["wte"] if tied else views["lm_head"])
    return F.cross_entropy(logits.view(-1, VOCAB), ids.view(-1))


def run_root_case(tied, root_trains):
    shapes = root_shapes(tied)
    with tracer.Tracker() as tr:
        tracer.reset_seed()
        ids = torch.randint(0, VOCAB, (1, TOKENS))
        blocks = [(torch.randn(FFN, H).mul_(0.02).requires_grad_(), torch.randn(H, FFN).mul_(0.02).requires_grad_())
                  for _ in range(ROOT_BLOCKS)]
        flat = torch.nn.Parameter(torch.cat([torch.randn(shape).mul_(0.02).reshape(-1) for shape in shapes.values()]),
                                  requires_grad=root_trains)
        shard = {}

        def post_backward(*_):
            """_post_backward_hook for FULL_SHARD: reduce-scatter the unsharded flat gradient, keep the shard."""
            unsharded = flat.grad
            flat.grad = None
            chunks = unsharded.chunk(RANKS)
            shard["grad"] = torch.empty_like(chunks[0]).copy_(chunks[0])

        # FSDP keeps the AccumulateGrad node referenced (_post_backward_hook_state), else it is remade.
        acc_grad = flat.expand_as(flat).grad_fn.next_functions[0][0] if root_trains else None
        if root_trains:
            acc_grad.register_hook(post_backward)
        tr.mark("start")
        pieces = torch.split(flat, [math.prod(shape) for shape in shapes.values()])
        views = {n: p.view(shapes[n]) for n, p in zip(shapes, pieces)}
        loss = root_forward(views, blocks, ids, tied, tr.mark)
        tr.mark("fwd_end")
        loss.backward()
        tr.mark("bwd_end")
        shard_bytes = shard["grad"].numel() * 4 if shard else 0
        del loss, views, pieces, shard, acc_grad, flat, blocks, ids
    reading = {name: tr.live(name) for name in ("start", "fwd_end", "bottom_block_bwd", "bwd_end")}
    reading["peak_after_blocks"] = tr.peak("emb_bwd", "bwd_end")
    reading["shard_bytes"] = shard_bytes
    return reading


def root_record(tied):
    trained = run_root_case(tied, True)
    frozen = run_root_case(tied, False)
    shapes = root_shapes(tied)
    flat_bytes = sum(math.prod(shape) for shape in shapes.values()) * 4
    epilogue_view_bytes = (VOCAB * H + H) * 4  # head (the tied one a whole gradient too) and final norm
    waiting = trained["bottom_block_bwd"] - frozen["bottom_block_bwd"]
    # At bwd_end the root holds its shard only; the split's moment above it.
    at_peak = trained["peak_after_blocks"] - trained["bwd_end"] + trained["shard_bytes"]
    return {
        "id": f"cpu-fsdp1-trained-root-{'tied' if tied else 'untied'}",
        "source": "tools/trace/fsdp1_flat_views.py (Tracker of shared/ground-truth/measure.py)",
        "torch": torch.__version__,
        "unit": {"hidden": H, "ffn": FFN, "vocab": VOCAB, "blocks": ROOT_BLOCKS, "tokens": TOKENS, "ranks": RANKS,
                 "tied": tied, "dtype": "fp32"},
        "root_flat_gradient_bytes": flat_bytes,
        "epilogue_view_gradient_bytes": epilogue_view_bytes,
        "trained_root": trained,
        "frozen_root": {"bottom_block_bwd": frozen["bottom_block_bwd"]},
        # Traced: the root's gradients live in the bottom block's backward (trained less frozen root),
        # and at their peak after the blocks (the split, or a tied weight's sum; above the rest at bwd_end).
        "waiting_in_blocks_bytes": waiting,
        "root_gradients_at_peak_bytes": at_peak,
        "waiting_in_epilogue_view_gradients": waiting / epilogue_view_bytes,
        "peak_in_flat_gradients": at_peak / flat_bytes,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    views = run_case(True)
    plain = run_case(False)
    record = {
        "id": "cpu-fsdp1-flat-views-lora-block",
        "source": "tools/trace/fsdp1_flat_views.py (Tracker of shared/ground-truth/measure.py)",
        "torch": torch.__version__,
        "unit": {"hidden": H, "ffn": FFN, "lora_rank": RANK, "tokens": TOKENS, "dtype": "fp32"},
        "flat_views": views,
        "plain_frozen": {"step_peak_over_start": plain["step_peak_over_start"]},
        # The split's backward: every weight gradient beside their concatenation, activations freed.
        "flat_views_peak_in_flat_parameters": views["step_peak_over_start"] / views["flat_parameter_bytes"],
    }
    records = [record, root_record(False), root_record(True)]
    with open(a.out, "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")
    print(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
