#!/usr/bin/python3
"""CPU traces of packed and padding-free batches on an HF-LLaMA step (the liger_cases.py baseline model, bf16, its
transformers ~4.51 loss: ForCausalLMLoss over pad-shifted labels, no logits copy).

- padding-free (TRL SFTConfig padding_free / transformers DataCollatorWithFlattening): the micro-batch's examples
  flattened into one row, input_ids, labels and position_ids of shape (1, tokens), position_ids restarting at 0 per
  example. flash_attention_2 reads the boundaries from the position_ids and makes one varlen call
  (transformers modeling_flash_attention_utils.py@7713be1e _flash_attention_forward -> prepare_fa2_from_position_ids):
  q, k, v transposed to (1, tokens, heads, head_dim), q.view(-1, heads, head_dim) (a view), k.contiguous() (a copy
  of the rotated keys), v.contiguous() (v_proj's own layout: no copy), cu_seqlens from position_ids == 0, and
  flash_attn_varlen_func with kv_heads keys and values (no repeat_kv). The kernel is emulated as
  llama_blocks.FlashEmulation is: it saves q, k, v, the output and an fp32 (heads, tokens) log-sum-exp and computes
  one (example, head) slice at a time under no_grad. Rotary cos/sin come from the position_ids: (1, tokens, head_dim).
- packed (TRL packing with strategy "wrapped"): examples concatenated into full rows of max_length, position_ids
  0..max_length-1, the eager causal attention over the whole row (it crosses example boundaries).
The HF loss (ForCausalLMLoss) shifts the labels of the one row. Run from the repository root:
  /usr/bin/python3 tools/trace/packing_cases.py --out docs/data/cpu_traced_frameworks.json
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import liger_cases as LC
import llama_blocks as LB
import step_trace as T
import tracer

SOURCE = "tools/trace/packing_cases.py (Tracker of shared/ground-truth/measure.py)"


class FlashVarlen(torch.autograd.Function):
    """flash_attn_varlen_func(q, k, v, cu_seqlens, causal=True) for q (tokens, heads, d) and k, v
    (tokens, kv_heads, d): saves q, k, v, out and the fp32 (heads, tokens) log-sum-exp."""

    @staticmethod
    def forward(ctx, q, k, v, bounds):
        t, h, d = q.shape
        rep = h // k.shape[1]
        out = torch.empty_like(q)
        lse = torch.empty(h, t, dtype=torch.float32)
        with torch.no_grad():
            for s, e in bounds:
                n = e - s
                mask = torch.ones(n, n, dtype=torch.bool).triu(1)
                for j in range(h):
                    sc = (q[s:e, j].float() @ k[s:e, j // rep].float().t()) / math.sqrt(d)
                    sc.masked_fill_(mask, float("-inf"))
                    lse[j, s:e] = torch.logsumexp(sc, dim=-1)
                    out[s:e, j] = (torch.exp(sc - lse[j, s:e, None]) @ v[s:e, j // rep].float()).to(q.dtype)
                    del sc
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.bounds = bounds
        return out

    @staticmethod
    def backward(ctx, g):
        q, k, v, out, lse = ctx.saved_tensors
        t, h, d = q.shape
        rep = h // k.shape[1]
        gq, gk, gv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for s, e in ctx.bounds:
            n = e - s
            mask = torch.ones(n, n, dtype=torch.bool).triu(1)
            for j in range(h):
                kv = j // rep
                qf, kf, vf, gf = q[s:e, j].float(), k[s:e, kv].float(), v[s:e, kv].float(), g[s:e, j].float()
                p = torch.exp(((qf @ kf.t()) / math.sqrt(d)).masked_fill(mask, float("-inf")) - lse[j, s:e, None])
                gv[s:e, kv] += (p.t() @ gf).to(v.dtype)
                ds = p * (gf @ vf.t() - (gf * out[s:e, j].float()).sum(-1, keepdim=True)) / math.sqrt(d)
                gq[s:e, j] = (ds @ kf).to(q.dtype)
                gk[s:e, kv] += (ds.t() @ qf).to(k.dtype)
                del p, ds
        return gq, gk, gv, None


class FlatLayer(LC.Layer):
    """LlamaDecoderLayer with flash_attention_2's varlen path (prepare_fa2_from_position_ids @ 7713be1e)."""

    def attn(self, x, cos, sin, bounds):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, -1, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, s, -1, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, self.hd).transpose(1, 2)
        q = q * cos + LC.rotate_half(q) * sin
        k = k * cos + LC.rotate_half(k) * sin
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        # prepare_fa2_from_position_ids: query.view, key.contiguous().view, value.contiguous().view
        q = q.view(-1, q.size(-2), q.size(-1))
        k = k.contiguous().view(-1, k.size(-2), k.size(-1))
        v = v.contiguous().view(-1, v.size(-2), v.size(-1))
        o = FlashVarlen.apply(q, k, v, bounds)
        return self.o_proj(o.view(b, s, -1))

    def forward(self, x, cos, sin, bounds):
        h = x + self.attn(self.input_layernorm(x), cos, sin, bounds)
        return h + self.mlp(self.post_attention_layernorm(h))


class FlatCausalLM(LC.CausalLM):
    def __init__(self, m):
        super().__init__(m, {})
        self.layers = nn.ModuleList([FlatLayer(m, {}) for _ in range(m["layers"])])

    def forward(self, ids, labels, position_ids):
        x = self.embed_tokens(ids)
        # LlamaRotaryEmbedding.forward: inv_freq x position_ids, (1, tokens, head_dim) in the model dtype
        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype)[:, None], emb.sin().to(x.dtype)[:, None]
        starts = (position_ids[0] == 0).nonzero().flatten().tolist() + [ids.size(1)]
        bounds = list(zip(starts[:-1], starts[1:]))
        for layer in self.layers:
            x = layer(x, cos, sin, bounds)
        x = self.norm(x)
        padded = F.pad(labels, (0, 1), value=LC.IGNORE)[..., 1:].contiguous()
        logits = self.lm_head(x)
        return F.cross_entropy(logits.float().view(-1, self.vocab), padded.view(-1), ignore_index=LC.IGNORE)


def run_case(c):
    m = dict(LB.LLAMA)
    lengths = c.get("lengths")
    B, S = c["batch"], c["seq"]
    flat = c["packing"] == "padding_free"

    def make_inputs():
        if not flat:
            return (torch.randint(0, m["vocab"], (B, S)), torch.randint(0, m["vocab"], (B, S)))
        tokens = sum(lengths)
        pos = torch.cat([torch.arange(n) for n in lengths])[None]
        return (torch.randint(0, m["vocab"], (1, tokens)), torch.randint(0, m["vocab"], (1, tokens)), pos)

    def build():
        model = (FlatCausalLM(m) if flat else LC.CausalLM(m, {})).to(torch.bfloat16)
        model.inv_freq.data = model.inv_freq.data.float()
        trainable = list(model.parameters())
        opt = torch.optim.AdamW(trainable, lr=1e-5)
        return dict(model=model, optimizers=[opt], trainable=trainable, make_inputs=make_inputs)

    def step(ctx, tr, n):
        inputs = ctx["inputs"]

        def grads_of_step2(n):
            if n == 2:
                ctx["grads_step2"] = tracer.tensor_bytes([p.grad for p in ctx["trainable"]])

        return tracer.train_step(tr, n, lambda: ctx["model"](*inputs), ctx["optimizers"][0], grads_of_step2)

    r = T.run_two_steps(build, step)
    train = dict(batch=B, seq=S, precision="pure_bf16", optimizer="adamw", optimizer_impl="for_loop",
                 checkpointing="none", attention="flash" if flat else "eager", grad_accum=1, lora_rank=0,
                 frozen="none", zero_stage=0, dp=1, tp=1, use_cache=False, packing=c["packing"])
    if flat:
        train["example_tokens"] = sum(lengths) // B
    framework = dict(name="hf", version="4.51 (re-implemented)", collator="DataCollatorWithFlattening" if flat
                     else "packed rows (TRL packing_strategy wrapped)")
    notes = ("measured_bytes = max live CPU tensor bytes in training step 2; HF-LLaMA step re-implemented in plain "
             "torch. " + ("One flattened row of examples of " + ", ".join(map(str, lengths)) + " tokens; "
                          "flash_attention_2's varlen call emulated (saves q, k, v, out, fp32 lse)." if flat else
                          "Full rows of concatenated examples; eager causal attention over each row."))
    model = LB.model_fields(m, "hf-transformers", r["nparams"])
    return T.record(c["id"], SOURCE, model, train, framework, r, notes, software={"transformers": "4.51 (emulated)"})


def cases():
    return [
        # 4 examples (max_length 256) flattened into 512 tokens; 8 into 1024.
        dict(id="cpu-padding-free-llama-e4-t512", packing="padding_free", batch=4, seq=256,
             lengths=[200, 120, 56, 136]),
        dict(id="cpu-padding-free-llama-e8-t1024", packing="padding_free", batch=8, seq=256,
             lengths=[256, 64, 160, 96, 192, 32, 128, 96]),
        dict(id="cpu-packed-llama-b2-s256", packing="packed", batch=2, seq=256),
    ]


if __name__ == "__main__":
    T.main_loop(cases, run_case, "/tmp/packing_cases.json")
