#!/usr/bin/python3
"""CPU traces of Liger-Kernel's RoPE and GEGLU (linkedin/Liger-Kernel v0.5.10 @ 44a8f2fb) and of a padding-free row
under eager attention, on the small family models of docs/research/scripts/trace_families.py (fp32, eager, AdamW
single-tensor: the harness and configs of docs/data/cpu_traced_families.json, whose records are the baselines).

Liger pieces, written from the source (the Triton kernels become torch code with the same buffers; the kernels'
register work is done a head or a block of rows at a time so that its temporaries stay small):
- RoPE (ops/rope.py LigerRopeFunction, patched in as apply_rotary_pos_emb by apply_liger_kernel_to_<family>):
  rope_forward transposes q and k to (b, s, heads, head_dim) and calls .contiguous() (no copy for a projection's
  own output), rotates them in place and returns transposed views; saves cos and sin only. rope_backward
  transposes dq and dk and calls .contiguous() (a copy each: they come from attention in (b, heads, s, head_dim))
  and rotates the copies in place.
- GEGLU (ops/geglu.py LigerGELUMulFunction, transformers/geglu.py LigerGEGLUMLP): c = gelu_tanh(a) * b; saves a
  and b; backward writes da and db into a and b.
- SwiGLU over Phi-3's one gate_up_proj (transformers/swiglu.py LigerPhi3SwiGLUMLP): LigerSiLUMulFunction's
  ensure_contiguous copies each strided half, saves the copies and writes da and db into them; the chunk's
  backward joins the halves' gradients into one (rows, 2F) tensor.
- RMSNorm (ops/rms_norm.py LigerRMSNormFunction) as use_liger_kernel patches a built model
  (monkey_patch.py _apply_liger_kernel_to_instance -> apply_liger_kernel_to_<model_type>(model=...),
  _patch_rms_norm_module on the modules each function names): Y in X's dtype, one fp32 rstd a row; saves X, W and
  rstd; backward writes dX into dY (in_place=True) or into torch.zeros_like(dY) (in_place=False), and reduces a
  (sm_count x H) fp32 partial dW (sm_count 1 off CUDA). Qwen3: input, post-attention and final norms in place, its
  q_norm and k_norm untouched; OLMo2: post-attention and post-feedforward norms out of place, the final norm in
  place, q_norm and k_norm untouched; Gemma 2 / Gemma 3: every norm (Gemma 3's q_norm, k_norm too) out of place.
Padding-free (TRL padding_free / DataCollatorWithFlattening): one row of the examples with position_ids restarting
per example; create_causal_mask builds the (1, 1, T, T) block-diagonal mask from them (masking_utils.py@00c4411c
find_packed_sequence_indices; sdpa_mask's bool mask, then eager_mask's torch.where into the model dtype) and
every layer's eager attention computes all T^2 scores.

Run from the repository root:
  /usr/bin/python3 tools/trace/liger_layers_cases.py --out docs/data/cpu_traced_frameworks.json
"""
import argparse
import copy
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "research", "scripts"))
import trace_families as TF  # noqa: E402
import tracer  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

SOURCE = "tools/trace/liger_layers_cases.py (harness: shared/ground-truth/measure.py)"
IGNORE = -100


def _rotate_(x, cos, sin, sign):
    """Rotates x (b, s, heads, head_dim, contiguous) in place, one head at a time (the kernel's registers)."""
    half = x.shape[-1] // 2
    c1, c2, s1, s2 = cos[..., :half], cos[..., half:], sin[..., :half], sin[..., half:]
    for h in range(x.shape[2]):
        xh = x[:, :, h]
        x1, x2 = xh[..., :half].clone(), xh[..., half:].clone()
        xh[..., :half] = x1 * c1 - sign * x2 * s1
        xh[..., half:] = x2 * c2 + sign * x1 * s2
        del x1, x2


class LigerRope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, cos, sin):
        qt, kt = q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous()
        with torch.no_grad():
            _rotate_(qt, cos, sin, 1.0)
            _rotate_(kt, cos, sin, 1.0)
        ctx.save_for_backward(cos, sin)
        return qt.transpose(1, 2), kt.transpose(1, 2)

    @staticmethod
    def backward(ctx, dq, dk):
        cos, sin = ctx.saved_tensors
        dqt, dkt = dq.transpose(1, 2).contiguous(), dk.transpose(1, 2).contiguous()
        with torch.no_grad():
            _rotate_(dqt, cos, sin, -1.0)
            _rotate_(dkt, cos, sin, -1.0)
        return dqt.transpose(1, 2), dkt.transpose(1, 2), None, None


def liger_rotary_pos_emb(q, k, cos, sin):
    return LigerRope.apply(q, k, cos, sin)


ROWS = 64  # rows of the GEGLU backward's register work at a time


def _gelu_tanh_parts(a):
    k = math.sqrt(2.0 / math.pi)
    t = torch.tanh(k * (a + 0.044715 * a ** 3))
    gelu = 0.5 * a * (1.0 + t)
    dgelu = 0.5 * (1.0 + t) + 0.5 * a * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * a * a)
    return gelu, dgelu


class LigerGELUMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        with torch.no_grad():
            c = F.gelu(a, approximate="tanh") * b
        ctx.save_for_backward(a, b)
        return c

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        a2, b2, d2 = a.view(-1, a.shape[-1]), b.view(-1, b.shape[-1]), dc.reshape(-1, dc.shape[-1])
        with torch.no_grad():
            for s in range(0, a2.shape[0], ROWS):
                ar, br, dr = a2[s: s + ROWS], b2[s: s + ROWS], d2[s: s + ROWS]
                gelu, dgelu = _gelu_tanh_parts(ar)
                db = dr * gelu
                da = dr * br * dgelu
                ar.copy_(da)  # the kernel writes the gradients into the saved inputs
                br.copy_(db)
                del gelu, dgelu, da, db
        return a, b


class LigerRMSNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, eps, offset, in_place):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        y = torch.empty_like(x2)
        rstd = torch.empty(x2.shape[0], dtype=torch.float32)
        with torch.no_grad():
            for s in range(0, x2.shape[0], ROWS):  # the kernel's registers, a block of rows at a time
                xr = x2[s: s + ROWS].float()
                r = torch.rsqrt(xr.pow(2).mean(-1) + eps)
                rstd[s: s + ROWS] = r
                y[s: s + ROWS] = (xr * r[:, None] * (offset + w.float())).to(x.dtype)
                del xr, r
        ctx.save_for_backward(x2, w, rstd)
        ctx.offset, ctx.in_place = offset, in_place
        return y.view(shape)

    @staticmethod
    def backward(ctx, dy):
        x2, w, rstd = ctx.saved_tensors
        shape = dy.shape
        dy2 = dy.reshape(-1, shape[-1])
        dw_partial = torch.zeros((1, shape[-1]), dtype=torch.float32)  # sm_count rows; 1 off CUDA
        dx = dy2 if ctx.in_place else torch.zeros_like(dy2)
        with torch.no_grad():
            wf = ctx.offset + w.float()
            for s in range(0, dy2.shape[0], ROWS):
                xn = x2[s: s + ROWS].float() * rstd[s: s + ROWS, None]
                g = dy2[s: s + ROWS].float()
                dw_partial += (g * xn).sum(0, keepdim=True)
                gw = g * wf
                dx[s: s + ROWS] = (rstd[s: s + ROWS, None] * (gw - xn * (gw * xn).mean(-1, keepdim=True))).to(dx.dtype)
                del xn, g, gw
        dw = dw_partial.sum(0).to(w.dtype)
        return dx.view(shape), dw, None, None, None


def patch_rms_norm_module(module, offset, in_place):
    """_patch_rms_norm_module: the module's forward becomes LigerRMSNorm.forward (its weight, its eps)."""
    module.forward = lambda x: LigerRMSNormFn.apply(x, module.weight, module.eps, offset, in_place)


def liger_rms_norm_instance(model, family):
    """apply_liger_kernel_to_<family>(rms_norm=True, model=model): the modules each function names."""
    gemma = family.startswith("gemma")
    offset = 1.0 if gemma else 0.0
    out_of_place = gemma or family == "glm4"
    patch_rms_norm_module(model.norm, offset, in_place=not out_of_place)
    for layer in model.layers:
        if family == "olmo2":
            names = ("post_attention_layernorm", "post_feedforward_layernorm")
        elif gemma:
            names = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm")
        else:
            names = ("input_layernorm", "post_attention_layernorm")
        for n in names:
            patch_rms_norm_module(getattr(layer, n), offset, in_place=not (out_of_place or family == "olmo2"))
        if family == "gemma3_text":
            patch_rms_norm_module(layer.self_attn.q_norm, offset, in_place=False)
            patch_rms_norm_module(layer.self_attn.k_norm, offset, in_place=False)


class LigerSiLUMulContiguous(torch.autograd.Function):
    """LigerSiLUMulFunction under ensure_contiguous: strided halves are copied before the kernel."""
    @staticmethod
    def forward(ctx, a, b):
        a, b = a.contiguous(), b.contiguous()
        c = torch.empty_like(a)
        a2, b2, c2 = a.view(-1, a.shape[-1]), b.view(-1, b.shape[-1]), c.view(-1, c.shape[-1])
        with torch.no_grad():
            for s in range(0, a2.shape[0], ROWS):
                c2[s: s + ROWS] = F.silu(a2[s: s + ROWS]) * b2[s: s + ROWS]
        ctx.save_for_backward(a, b)
        return c

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        dc = dc.contiguous()
        a2, b2, d2 = a.view(-1, a.shape[-1]), b.view(-1, b.shape[-1]), dc.view(-1, dc.shape[-1])
        with torch.no_grad():
            for s in range(0, a2.shape[0], ROWS):
                ar, br, dr = a2[s: s + ROWS], b2[s: s + ROWS], d2[s: s + ROWS]
                sig = torch.sigmoid(ar)
                silu = ar * sig
                db = dr * silu
                da = dr * br * (sig + silu * (1 - sig))
                ar.copy_(da)  # the kernel writes the gradients into the saved inputs
                br.copy_(db)
                del sig, silu, da, db
        return a, b


def liger_phi3_swiglu_forward(self, x):  # LigerPhi3SwiGLUMLP.forward
    up_states = self.gate_up_proj(x)
    gate, up_states = up_states.chunk(2, dim=-1)
    return self.down_proj(LigerSiLUMulContiguous.apply(gate, up_states))


def liger_geglu_forward(self, x):  # LigerGEGLUMLP.forward
    return self.down_proj(LigerGELUMul.apply(self.gate_proj(x), self.up_proj(x)))


def patch_liger(rope, geglu, phi3_swiglu=False):
    """apply_liger_kernel_to_<family>: module-level swaps, as monkey_patch.py does."""
    saved = (TF.apply_rotary, TF.GatedMLP.forward, TF.Phi3MLP.forward)
    if rope:
        TF.apply_rotary = liger_rotary_pos_emb
    if geglu:
        TF.GatedMLP.forward = liger_geglu_forward
    if phi3_swiglu:
        TF.Phi3MLP.forward = liger_phi3_swiglu_forward
    return saved


def unpatch(saved):
    TF.apply_rotary, TF.GatedMLP.forward, TF.Phi3MLP.forward = saved


def packed_model(self, ids, position_ids):
    """LlamaModel.forward over one flattened row: rotary tables of the restarting positions, the block-diagonal mask."""
    c = self.c
    x = self.embed_tokens(ids)
    if self.t.startswith("gemma"):
        x = x * torch.tensor(c["hidden_size"] ** 0.5, dtype=x.dtype)
    hd = self.hd
    inv = 1.0 / (c.get("rope_theta", 10000.0) ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    freqs = position_ids[:, :, None].float() * inv[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    del freqs, emb
    # find_packed_sequence_indices: a new example wherever position_ids does not step by one
    starts = torch.cat([torch.ones_like(position_ids[:, :1]), (position_ids[:, 1:] - position_ids[:, :-1] != 1).long()], -1)
    seq_idx = starts.cumsum(-1) - 1
    T = ids.shape[1]
    q_i, kv_i = torch.arange(T)[None, None, :, None], torch.arange(T)[None, None, None, :]
    allowed = (kv_i <= q_i) & (seq_idx[:, None, :, None] == seq_idx[:, None, None, :])  # sdpa_mask: bool (1, 1, T, T)
    mask = torch.where(allowed, torch.tensor(0.0, dtype=x.dtype), torch.finfo(x.dtype).min)  # eager_mask
    del allowed, q_i, kv_i, starts, seq_idx
    for layer in self.layers:
        x = layer(x, cos, sin, mask)
    return self.norm(x)


def packed_forward(self, ids, labels, position_ids):
    logits = self.lm_head(packed_model(self, ids, position_ids))
    logits = logits.float()
    sl = logits[..., :-1, :].contiguous()
    lb = labels[..., 1:].contiguous()
    return F.cross_entropy(sl.view(-1, sl.size(-1)), lb.view(-1), ignore_index=IGNORE)


def run(c, B, S, lengths=None, instance_rms_norm=False):
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        model = TF.build(c)
        if instance_rms_norm:
            liger_rms_norm_instance(model, c["model_type"])
        model.train()
        tr.mark("built")
        opt = tracer.make_opt("adamw", model.parameters(), None)
        if lengths:
            T = sum(lengths)
            x = torch.randint(0, c["vocab_size"], (1, T))
            y = x.clone()
            pos = torch.cat([torch.arange(n) for n in lengths])[None]
            firsts = torch.cumsum(torch.tensor([0] + lengths[:-1]), 0)
            y[0, firsts] = IGNORE  # DataCollatorWithFlattening: -100 at each example's first label
            tr.mark("inputs")
            tracer.train_two_steps(tr, lambda: packed_forward(model, x, y, pos), opt)
            del pos
        else:
            x = torch.randint(0, c["vocab_size"], (B, S))
            y = x.clone()
            tr.mark("inputs")
            tracer.train_two_steps(tr, lambda: model(x, y), opt)
        nparams = tracer.parameter_count(model)
        params_enum = tracer.tensor_bytes(list(model.parameters()))
        opt_enum = tracer.optimizer_state_bytes([opt])
        del model, opt, x, y
    r = dict(nparams=nparams, params_enum=params_enum, opt_enum=opt_enum)
    r.update(tracer.step_readings(tr))
    return r


# (id, family config, liger kernels, batch, seq, example lengths of a padding-free row)
CASES = (
    ("cpu-liger-rope-mistral-small-b2-s256", "mistral", dict(rope=True), 2, 256, None),
    ("cpu-liger-rope-geglu-gemma-small-b2-s256", "gemma", dict(rope=True, geglu=True), 2, 256, None),
    ("cpu-liger-geglu-gemma-small-b2-s256", "gemma", dict(geglu=True), 2, 256, None),
    ("cpu-padding-free-eager-mistral-small-e4-t512", "mistral", {}, 4, 256, [200, 120, 56, 136]),
    ("cpu-liger-rmsnorm-instance-qwen3-small-b2-s256", "qwen3", dict(rms_norm="instance"), 2, 256, None),
    ("cpu-liger-rmsnorm-instance-olmo2-small-b2-s256", "olmo2", dict(rms_norm="instance"), 2, 256, None),
    ("cpu-liger-rmsnorm-instance-gemma2-small-b2-s256", "gemma2", dict(rms_norm="instance"), 2, 256, None),
    ("cpu-liger-rmsnorm-instance-gemma3_text-small-b2-s256", "gemma3_text", dict(rms_norm="instance"), 2, 256, None),
    ("cpu-liger-swiglu-phi3-small-b2-s256", "phi3", dict(swiglu=True), 2, 256, None),
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/liger_layers_cases.json")
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    out = tracer.read_records(a.out)
    for cid, family, kernels, B, S, lengths in CASES:
        if a.only and a.only not in cid:
            continue
        c = copy.deepcopy(TF.CONFIGS[family])
        saved = patch_liger(kernels.get("rope"), kernels.get("geglu"), kernels.get("swiglu"))
        t0 = time.time()
        try:
            r = run(c, B, S, lengths, instance_rms_norm=kernels.get("rms_norm") == "instance")
        finally:
            unpatch(saved)
        train = dict(batch=B, seq=S, precision="fp32", optimizer="adamw",
                     optimizer_impl="single_tensor (torch 1.13 CPU default)", checkpointing="none",
                     attention="eager", grad_accum=1)
        rec = {"id": cid, "source": SOURCE, "measure": "cpu-tensor-peak", "device": "cpu",
               "model": {"hf_config": c, "params": r["nparams"]}, "train": train}
        notes = "measured_bytes = max live CPU tensor bytes in training step 2; " + family + " of trace_families.py"
        if kernels:
            train.update(fused_rope=bool(kernels.get("rope")), fused_geglu=bool(kernels.get("geglu")))
            if kernels.get("rms_norm"):
                train.update(fused_rmsnorm=True, liger_patching=kernels["rms_norm"])
            if kernels.get("swiglu"):
                train.update(fused_swiglu=True)
            rec["framework"] = {"name": "hf", "kernels": {"liger": "0.5.10", "source": "linkedin/Liger-Kernel@44a8f2fb"}}
            notes += " with Liger's " + " and ".join(k for k in ("rope", "geglu", "rms_norm", "swiglu") if kernels.get(k)) + \
                " written as torch code with the kernels' saved tensors (register work a head or 64 rows at a time)."
        if lengths:
            train.update(packing="padding_free", example_tokens=sum(lengths) // len(lengths))
            rec["framework"] = {"name": "hf", "collator": "DataCollatorWithFlattening"}
            notes += (" One flattened row of examples of " + ", ".join(map(str, lengths)) +
                      " tokens; eager attention over the row with masking_utils' (1, 1, T, T) block-diagonal float mask.")
        rec.update(tracer.peak_fields(r))
        rec["components"] = tracer.components(r)
        rec["notes"] = notes
        rec["torch"] = torch.__version__
        out = [x for x in out if x["id"] != cid] + [rec]
        tracer.write_records(a.out, out)
        print(f"{cid}: peak2 {r['s2_peak']:,} ({time.time() - t0:.0f}s)", flush=True)


if __name__ == "__main__":
    main()
