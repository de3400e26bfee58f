#!/usr/bin/python3
"""What autograd saves in grouped-query attention after Hugging Face's repeat_kv and torchtune's expand.

One attention core in plain torch (no projections): RoPE'd k and a transposed v view as the models
make them, the repeat, then eager attention (QK^T, fp32 softmax cast back, context). Per case: whether
the repeat made a copy or a view (a view has stride 0 over the heads) and every distinct storage the
core saves for backward, in bytes. Cases:

- hf: modeling_llama.py repeat_kv (`[:, :, None].expand(...)` then `.reshape`), on k after RoPE
  (contiguous (b, kv, s, d)) and on `v_proj(x).view(b, s, kv, d).transpose(1, 2)`;
- torchtune: modules/attention.py @ v0.6.1 lines 290-291 (`unsqueeze(2).expand(...).flatten(1, 2)`),
  same inputs.

With kv_heads 1 both repeats merge a size-1 dim with the expand's stride-0 one: a view, so a fused
kernel (which saves its inputs as passed) keeps one head, while QK^T (eager, SDPA's math path) still
copies it whole inside matmul. torch 1.13 has no F.scaled_dot_product_attention.

Run from the repository root:
  /usr/bin/python3 tools/trace/repeat_kv_saved.py --out docs/data/cpu_traced_repeat_kv.json
"""
import argparse
import json

import torch
import torch.nn.functional as F
import tracer

B, S, HEADS, D = 2, 64, 8, 32


def rope_like(k):
    """A new contiguous tensor as RoPE's (k * cos) + (rotate_half(k) * sin) returns."""
    return k * 1.5 + torch.cat((-k[..., D // 2:], k[..., : D // 2]), dim=-1) * 0.5


def hf_repeat(x, n):
    b, kv, s, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, n, s, d).reshape(b, kv * n, s, d)


def torchtune_repeat(x, n):
    b, kv, s, d = x.shape
    return x.unsqueeze(2).expand(b, kv, n, s, d).flatten(1, 2)


def eager_core(q, k, v):
    w = torch.matmul(q, k.transpose(2, 3)) / D ** 0.5
    w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(w, v)


def inputs(kv):
    tracer.reset_seed()
    q = torch.randn(B, S, HEADS * D, requires_grad=True)
    k_proj = torch.randn(B, S, kv * D, requires_grad=True)
    v_proj = torch.randn(B, S, kv * D, requires_grad=True)
    q4 = q.view(B, S, HEADS, D).transpose(1, 2)
    k4 = rope_like(k_proj.view(B, S, kv, D).transpose(1, 2))
    v4 = v_proj.view(B, S, kv, D).transpose(1, 2)
    return q, q4, k4, v4


def case(repeat, kv):
    q, q4, k4, v4 = inputs(kv)
    n = HEADS // kv
    k_rep, v_rep = repeat(k4, n), repeat(v4, n)
    repeat_copies = {
        "k": k_rep.storage().data_ptr() != k4.storage().data_ptr(),
        "v": v_rep.storage().data_ptr() != v4.storage().data_ptr(),
    }
    saved = {}

    def pack(t):
        key, nbytes = tracer.storage_key(t)
        saved.setdefault(key, nbytes)
        return t

    with tracer.saving_tensors(pack):
        out = eager_core(q4, k_rep, v_rep)
    exclude = {tracer.storage_key(t)[0] for t in (q, q4)}
    saved_bytes = sum(b for key, b in saved.items() if key not in exclude)
    del out
    return {
        "kv_heads": kv,
        "repeat_copies": repeat_copies,
        "repeated_head_stride": k_rep.stride(1),
        "eager_saved_bytes_beyond_q": saved_bytes,
        "kv_bytes_repeated": 2 * B * S * HEADS * D * 4,
        "kv_bytes_grouped": 2 * B * S * kv * D * 4,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rows = {}
    for name, repeat in (("hf", hf_repeat), ("torchtune", torchtune_repeat)):
        for kv in (2, 1):
            rows[f"{name}-kv{kv}"] = case(repeat, kv)
    result = {"source": "tools/trace/repeat_kv_saved.py", "torch": torch.__version__,
              "shape": {"batch": B, "seq": S, "heads": HEADS, "head_dim": D, "dtype": "fp32"}, "cases": rows}
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
