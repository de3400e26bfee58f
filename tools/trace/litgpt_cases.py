#!/usr/bin/python3
"""CPU traces of lit-gpt fine-tuning steps as the 2023 resource tables ran them.

A plain-torch re-implementation written from Lightning-AI/lit-gpt @ 8641822 (lit_gpt/model.py,
lit_gpt/lora.py, lit_gpt/rmsnorm.py, lit_gpt/utils.py chunked_cross_entropy, finetune/lora.py and
finetune/full.py fit loops) and the Lightning Fabric wrapper it runs under
(Lightning-AI/pytorch-lightning @ 71aed751, the commit lit-gpt's requirements.txt pins):
- _FabricModule.forward (src/lightning/fabric/wrappers.py) calls precision.convert_output on the
  model's output; HalfPrecision / BitsandbytesPrecision / FSDPPrecision convert floating outputs to
  torch.get_default_dtype() (fp32) after the forward context is left
  (src/lightning/fabric/plugins/precision/half.py, bitsandbytes.py, fsdp.py). With
  lm_head_chunk_size=128 every logits chunk becomes an fp32 copy; cross_entropy then keeps fp32
  log-probabilities. `output_cast=none` turns the conversion off to isolate it.
- RMSNorm (2023): x * rsqrt(mean(x * x) + eps) * weight. mean.dim's backward keeps its input x*x on
  torch 1.13 (measured here) and on torch 2.1 (pytorch issue #109876, fixed by PR #109935 after the
  2.1 branch cut); the trace shows it because the harness runs torch 1.13.
- GPT.__init__ builds the rope cache under the bf16 default dtype (fp16 cos/sin), but fit() sets
  model.max_seq_length = longest, whose setter rebuilds cos/sin outside any dtype context: fp32.
  bf16 q/k times fp32 cos promote to fp32 temporaries, cast back by type_as.
- Loop: logits = model(x, lm_head_chunk_size=128); logits[-1] = logits[-1][..., :-1, :];
  loss = chunked_cross_entropy(logits, y[..., 1:]); backward; AdamW step; zero_grad. `logits` stays
  bound until the next step's forward returns. full.py: logits = model(x) (one tensor) and
  chunked_cross_entropy(logits[..., :-1, :], y[..., 1:], chunk_size=0).
  v0.4.9's full.py (litgpt/finetune/full.py line 256 @ b0ea1772) leaves chunk_size at its default 128:
  chunked_cross_entropy (litgpt/utils.py lines 310-322) splits the flattened (B*(T-1), V) logits into
  128-row views, one cross_entropy(reduction="none") each, and torch.cat's the losses (its
  sum / non-masked count is taken here as .mean(): scalars).
litgpt v0.4.9 (`version="0.4.9"` cases, Lightning-AI/litgpt @ b0ea1772, lightning 2.4.0 whose
HalfPrecision.convert_output still casts to the default dtype): the same LoRA loop
(litgpt/finetune/lora.py lines 304-307), RMSNorm in fp32 (litgpt/model.py lines 483-490: x.float(),
mean(x * x), x * rsqrt, (x_normed * weight.float()).to(dtype)) and LoRAQKVLinear.zero_pad writing the
conv1d output into new zeros with index_copy_ (litgpt/lora.py lines 288-342), no reshape copy.
Its CausalSelfAttention.forward (litgpt/model.py lines 227-292, `forward_v0_4`): the interleaved qkv viewed
per query group, permuted and split; with grouped queries k and v expanded to every query head and q, k, v
reshaped into copies before RoPE; LoRAQKVLinear's interleaved lora_ind (litgpt/lora.py lines 264-286: the property).
Its fit() also validates (lines 282, 349, 368-383): the 0.4.9 cases run validate() over two batches
before step 1 and after step 1 (eval.interval 1): the whole logits under no_grad, Fabric's cast, and
chunked_cross_entropy(logits[..., :-1, :], ..., chunk_size=0); measured_bytes covers both.
litgpt main (`version="0.5.13"` cases, Lightning-AI/litgpt @ 26857050 = v0.5.13, lightning >= 2.6.1 whose
HalfPrecision.convert_output still casts to the default dtype): the 0.4.9 loops, norm, loss and validate() with
CausalSelfAttention.forward as restructured in fabf765b (litgpt/model.py lines 430-560 @ 26857050): q, k, v
split from a non-interleaved qkv as views, transposed views, RoPE on the query groups, torch.cat, then
repeat_interleave of k and v to every query head when n_query_groups != n_head; LoRAQKVLinear's indices in
that order and, for grouped queries, one conv1d per enabled part joined by torch.cat (litgpt/lora.py
LoRAQKVLinear.conv1d, zero_pad @ 26857050).
Differences from the GPU runs: attention is eager math (torch 1.13 has no scaled_dot_product_attention),
CPU dropout keeps a noise tensor of the input dtype instead of a bool mask, AdamW is the single-tensor loop.
Run from the repository root:  /usr/bin/python3 tools/trace/litgpt_cases.py --out docs/data/cpu_traced_frameworks.json
"""
import math

import step_trace as T
import tracer
import torch
import torch.nn as nn
import torch.nn.functional as F

SOURCE = "tools/trace/litgpt_cases.py (Tracker of shared/ground-truth/measure.py)"
MODELS = {
    # LLaMA-style lit-gpt config: RMSNorm, LLaMAMLP (SwiGLU), sequential residual, full rotary, no bias.
    "llama": dict(family="llama", layers=2, hidden=256, heads=4, kv_heads=4, ffn=688, vocab=16000, norm="rmsnorm",
                  activation="swiglu", parallel=False, shared_norm=False, bias=False, lm_head_bias=False,
                  rotary_pct=1.0),
    # The same with a 32,000-token vocabulary (Llama 2's): the logits dominate.
    "llama-v32k": dict(family="llama", layers=2, hidden=256, heads=4, kv_heads=4, ffn=688, vocab=32000,
                       norm="rmsnorm", activation="swiglu", parallel=False, shared_norm=False, bias=False,
                       lm_head_bias=False, rotary_pct=1.0),
    # Grouped queries: 8 query heads over 2 key/value groups, with a 4,000-token vocabulary so that
    # the training step (where the attention's saved tensors are) outgrows validation's logits.
    "llama-gqa-v4k": dict(family="llama", layers=2, hidden=256, heads=8, kv_heads=2, ffn=688, vocab=4000,
                          norm="rmsnorm", activation="swiglu", parallel=False, shared_norm=False, bias=False,
                          lm_head_bias=False, rotary_pct=1.0),
    # The same with a 4,000-token vocabulary: the training step outgrows validation's logits.
    "llama-v4k": dict(family="llama", layers=2, hidden=256, heads=4, kv_heads=4, ffn=688, vocab=4000,
                      norm="rmsnorm", activation="swiglu", parallel=False, shared_norm=False, bias=False,
                      lm_head_bias=False, rotary_pct=1.0),
    # A wide MLP and a 1,000-token vocabulary: the largest tensors (fc_1, fc_2) are neither first nor
    # alone in the for-loop AdamW's order, which steps lm_head first.
    "llama-wide-v1k": dict(family="llama", layers=2, hidden=256, heads=8, kv_heads=2, ffn=2048, vocab=1000,
                           norm="rmsnorm", activation="swiglu", parallel=False, shared_norm=False, bias=False,
                           lm_head_bias=False, rotary_pct=1.0),
    # phi-1.5-style: LayerNorm shared by attention and MLP, parallel residual, half rotary, biases, tanh GELU.
    "phi": dict(family="phi", layers=2, hidden=256, heads=4, kv_heads=4, ffn=1024, vocab=16000, norm="layernorm",
                activation="gelu_tanh", parallel=True, shared_norm=True, bias=True, lm_head_bias=True, rotary_pct=0.5),
}


class RMSNorm(nn.Module):  # lit_gpt/rmsnorm.py @ 8641822
    def __init__(self, n, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        norm_x = torch.mean(x * x, dim=-1, keepdim=True)
        x_normed = x * torch.rsqrt(norm_x + self.eps)
        return self.weight * x_normed


class RMSNormFP32(RMSNorm):  # litgpt/model.py RMSNorm.forward @ b0ea1772 (v0.4.9)
    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        norm_x = torch.mean(x * x, dim=-1, keepdim=True)
        x_normed = x * torch.rsqrt(norm_x + self.eps)
        return (x_normed * self.weight.float()).to(dtype=dtype)


class LoRALinear(nn.Module):  # lit_gpt/lora.py LoRALinear.forward @ 8641822
    def __init__(self, inf, outf, bias, r, alpha, p):
        super().__init__()
        self.linear = nn.Linear(inf, outf, bias=bias)
        self.r = r
        if r > 0:
            self.lora_A = nn.Parameter(torch.empty(r, inf))
            self.lora_B = nn.Parameter(torch.empty(outf, r))
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.normal_(self.lora_B, std=0.02)  # lit-gpt starts B at zero; the tensors are the same
            self.scaling = alpha / r
        self.lora_dropout = nn.Dropout(p) if p > 0 else (lambda x: x)

    def forward(self, x):
        pretrained = self.linear(x)
        if self.r == 0:
            return pretrained
        lora = (self.lora_dropout(x) @ self.lora_A.transpose(0, 1) @ self.lora_B.transpose(0, 1)) * self.scaling
        return pretrained + lora


class LoRAQKVLinear(nn.Module):  # lit_gpt/lora.py LoRAQKVLinear @ 8641822 (main: grouped queries too)
    def __init__(self, inf, out, bias, r, alpha, p, enable, version, kv_width=None):
        super().__init__()
        self.version = version
        self.linear = nn.Linear(inf, out, bias=bias)
        self.out, self.enable = out, enable
        kv = inf if kv_width is None else kv_width
        widths = (inf, kv, kv)
        self.qkv_shapes = [w for w, e in zip(widths, enable) if e]
        self.lora_A = nn.Parameter(torch.empty(r * sum(enable), inf))
        self.lora_B = nn.Parameter(torch.empty(sum(self.qkv_shapes), r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.normal_(self.lora_B, std=0.02)
        self.scaling = alpha / r
        self.lora_dropout = nn.Dropout(p) if p > 0 else (lambda x: x)
        starts = (0, inf, inf + kv)  # q, k, v one after another (main's non-interleaved qkv)
        self.lora_ind = [i for k, e in enumerate(enable) if e for i in range(starts[k], starts[k] + widths[k])]

    def zero_pad(self, x):
        if all(self.enable):
            return x
        if self.version != "8641822":  # litgpt/lora.py zero_pad @ b0ea1772, the same @ 26857050
            result = x.new_zeros(*x.shape[:-1], self.out)
            return result.index_copy_(-1, torch.tensor(self.lora_ind), x)
        x = x.transpose(0, 1)
        result = x.new_zeros((*x.shape[:-1], self.out)).view(-1, self.out)
        result = result.index_copy(1, torch.tensor(self.lora_ind), x.reshape(-1, sum(self.qkv_shapes)))
        return result.view((*x.shape[:-1], self.out)).transpose(0, 1)

    def conv1d(self, a, w):  # litgpt/lora.py LoRAQKVLinear.conv1d @ 26857050: parts of unequal width
        if len(set(self.qkv_shapes)) == 1:
            return F.conv1d(a, w, groups=sum(self.enable))
        return torch.cat([F.conv1d(x, y) for x, y in zip(a.chunk(sum(self.enable), dim=1), w.split(self.qkv_shapes))],
                         dim=1)

    def forward(self, x):
        pretrained = self.linear(x)
        after_A = F.linear(self.lora_dropout(x), self.lora_A)
        after_B = self.conv1d(after_A.transpose(-2, -1), self.lora_B.unsqueeze(-1)).transpose(-2, -1)
        return pretrained + self.zero_pad(after_B) * self.scaling


def interleaved_lora_ind(enable, hs, q_per_kv, out):  # litgpt/lora.py LoRAQKVLinear.lora_ind lines 264-286 @ b0ea1772
    group = q_per_kv + 2  # each group's q_per_kv query heads, then its key head and its value head
    picks = (lambda h: h % group < group - 2, lambda h: h % group == group - 2, lambda h: h % group == group - 1)
    return [i for e, pick in zip(enable, picks) if e for i in range(out) if pick(i // hs)]


def apply_rope(x, cos, sin):  # lit_gpt/model.py @ 8641822
    hs = x.size(-1)
    x1, x2 = x[..., : hs // 2], x[..., hs // 2:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return ((x * cos) + (rotated * sin)).type_as(x)


class Attention(nn.Module):
    def __init__(self, c, m):
        super().__init__()
        H, nh = m["hidden"], m["heads"]
        self.hs, self.nh, self.groups = H // nh, nh, m["kv_heads"]
        self.rope_n = int(m["rotary_pct"] * self.hs)
        self.main = c["version"] == "0.5.13"
        self.v0_4 = c["version"] == "0.4.9"
        # The 2023 attention is 0.4.9's with another expand condition; its multi-head path below.
        self.v2023_grouped = c["version"] == "8641822" and self.groups != self.nh
        assert self.main or self.v0_4 or self.groups == nh or not c["lora"], "the 2023 LoRA stand-in is multi-head only"
        kv = self.groups * self.hs
        out = H + 2 * kv
        en = tuple(t in c["targets"] for t in ("q", "k", "v"))
        if c["lora"] and any(en):
            self.attn = LoRAQKVLinear(H, out, m["bias"], c["r"], c["alpha"], c["dropout"], en, c["version"], kv)
            if self.v0_4 and self.groups != nh:
                self.attn.lora_ind = interleaved_lora_ind(en, self.hs, nh // self.groups, out)
        else:
            self.attn = nn.Linear(H, out, bias=m["bias"])
        r = c["r"] if c["lora"] and "proj" in c["targets"] else 0
        self.proj = LoRALinear(H, H, m["bias"], r, c["alpha"], c["dropout"])

    def forward_main(self, x, cos, sin, mask):  # CausalSelfAttention.forward @ 26857050 (no kv cache)
        B, Tn, C = x.shape
        qkv = self.attn(x)
        q, k, v = qkv.split((C, self.groups * self.hs, self.groups * self.hs), dim=-1)
        q = q.view(B, Tn, self.nh, self.hs).transpose(1, 2)
        k = k.view(B, Tn, self.groups, self.hs).transpose(1, 2)
        v = v.view(B, Tn, self.groups, self.hs).transpose(1, 2)
        n = self.rope_n
        q = torch.cat((apply_rope(q[..., :n], cos, sin), q[..., n:]), dim=-1)
        k = torch.cat((apply_rope(k[..., :n], cos, sin), k[..., n:]), dim=-1)
        if self.groups != self.nh:
            k = k.repeat_interleave(self.nh // self.groups, dim=1)
            v = v.repeat_interleave(self.nh // self.groups, dim=1)
        # Stand-in for F.scaled_dot_product_attention(is_causal=True): eager math (torch 1.13).
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hs))
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, Tn, C)
        return self.proj(y)

    def forward_v0_4(self, x, cos, sin, mask):  # CausalSelfAttention.forward lines 227-292 @ b0ea1772 (no kv cache)
        B, Tn, C = x.shape
        qkv = self.attn(x)
        q_per_kv = self.nh // self.groups
        qkv = qkv.view(B, Tn, self.groups, q_per_kv + 2, self.hs)
        qkv = qkv.permute(0, 2, 3, 1, 4)  # (B, groups, q_per_kv + 2, T, hs)
        q, k, v = qkv.split((q_per_kv, 1, 1), dim=2)
        # input_pos is None in training: k and v to every query head; the 2023 scripts (lit_gpt/model.py
        # lines 203-209 @ 8641822) only with more than one group.
        expands = self.groups != 1 if self.v2023_grouped else self.groups != self.nh
        if expands:
            k = k.expand(B, self.groups, q_per_kv, Tn, self.hs)
            v = v.expand(B, self.groups, q_per_kv, Tn, self.hs)
        q = q.reshape(B, -1, Tn, self.hs)
        k = k.reshape(B, -1, Tn, self.hs)
        v = v.reshape(B, -1, Tn, self.hs)
        n = self.rope_n
        q_roped = apply_rope(q[..., :n], cos, sin)
        k_roped = apply_rope(k[..., :n], cos, sin)
        q = torch.cat((q_roped, q[..., n:]), dim=-1)
        k = torch.cat((k_roped, k[..., n:]), dim=-1)
        # Stand-in for F.scaled_dot_product_attention(is_causal=True): eager math (torch 1.13).
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hs))
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, Tn, C)
        return self.proj(y)

    def forward(self, x, cos, sin, mask):
        if self.main:
            return self.forward_main(x, cos, sin, mask)
        if self.v0_4 or self.v2023_grouped:
            return self.forward_v0_4(x, cos, sin, mask)
        B, Tn, C = x.shape
        qkv = self.attn(x)
        qkv = qkv.view(B, Tn, self.nh, 3, self.hs).permute(0, 2, 3, 1, 4)
        q, k, v = qkv.split((1, 1, 1), dim=2)
        q = q.reshape(B, -1, Tn, self.hs)
        k = k.reshape(B, -1, Tn, self.hs)
        v = v.reshape(B, -1, Tn, self.hs)
        n = self.rope_n
        q = torch.cat((apply_rope(q[..., :n], cos, sin), q[..., n:]), dim=-1)
        k = torch.cat((apply_rope(k[..., :n], cos, sin), k[..., n:]), dim=-1)
        # Stand-in for F.scaled_dot_product_attention(is_causal=True): eager math (torch 1.13).
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hs))
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, Tn, C)
        return self.proj(y)


def rms_norm(c, n):
    return RMSNorm(n) if c["version"] == "8641822" else RMSNormFP32(n)  # fp32 from 0.4.9, the same @ 26857050


class Block(nn.Module):
    def __init__(self, c, m):
        super().__init__()
        H, f = m["hidden"], m["ffn"]
        norm = (lambda: rms_norm(c, H)) if m["norm"] == "rmsnorm" else (lambda: nn.LayerNorm(H))
        self.norm_1 = norm()
        self.norm_2 = None if m["shared_norm"] else norm()
        self.attn = Attention(c, m)
        r = c["r"] if c["lora"] and "mlp" in c["targets"] else 0
        if m["activation"] == "swiglu":
            self.fc_1 = LoRALinear(H, f, m["bias"], r, c["alpha"], c["dropout"])
            self.fc_2 = LoRALinear(H, f, m["bias"], r, c["alpha"], c["dropout"])
        else:
            self.fc = LoRALinear(H, f, m["bias"], r, c["alpha"], c["dropout"])
        self.mproj = LoRALinear(f, H, m["bias"], r, c["alpha"], c["dropout"])
        self.m = m
        self.main = c["version"] == "0.5.13"

    def mlp(self, x):
        if self.m["activation"] == "swiglu":  # LLaMAMLP
            return self.mproj(F.silu(self.fc_1(x)) * self.fc_2(x))
        return self.mproj(F.gelu(self.fc(x), approximate="tanh"))  # GptNeoxMLP, phi: gelu_approximate="tanh"

    def forward(self, x, cos, sin, mask):
        n_1 = self.norm_1(x)
        h = self.attn(n_1, cos, sin, mask)
        if self.main and not self.m["parallel"]:
            # Block.forward @ 26857050 rebinds x_normed = self.norm_2(x) after the residual add: norm_1's
            # output is dropped before the MLP, attention_output and x stay bound through it (lines 375-387).
            x = h + x
            n_1 = self.norm_2(x)
            return self.mlp(n_1) + x
        if self.m["parallel"]:
            n_2 = n_1 if self.m["shared_norm"] else self.norm_2(x)
            return x + h + self.mlp(n_2)
        x = x + h
        return x + self.mlp(self.norm_2(x))


class GPT(nn.Module):
    def __init__(self, c, m):
        super().__init__()
        H = m["hidden"]
        r = c["r"] if c["lora"] and "head" in c["targets"] else 0
        self.lm_head = LoRALinear(H, m["vocab"], m["lm_head_bias"], r, c["alpha"], c["dropout"])
        self.wte = nn.Embedding(m["vocab"], H)
        self.h = nn.ModuleList([Block(c, m) for _ in range(m["layers"])])
        self.ln_f = rms_norm(c, H) if m["norm"] == "rmsnorm" else nn.LayerNorm(H)
        hs = H // m["heads"]
        n = int(m["rotary_pct"] * hs)
        # model.max_seq_length = longest (finetune/lora.py fit) rebuilds the cache in the default dtype: fp32.
        theta = 1.0 / (10000 ** (torch.arange(0, n, 2).float() / n))
        idx = torch.outer(torch.arange(c["seq"]).float(), theta).repeat(1, 2)
        self.register_buffer("cos", idx.cos(), persistent=False)
        self.register_buffer("sin", idx.sin(), persistent=False)
        # Stand-in for SDPA's is_causal (not a buffer of lit-gpt): 1 B per element, counted as a buffer.
        self.register_buffer("causal", torch.ones(c["seq"], c["seq"], dtype=torch.bool).triu(1), persistent=False)

    def forward(self, idx, lm_head_chunk_size=0):
        Tn = idx.size(1)
        cos, sin, mask = self.cos[:Tn], self.sin[:Tn], self.causal[:Tn, :Tn]
        x = self.wte(idx)
        for b in self.h:
            x = b(x, cos, sin, mask)
        x = self.ln_f(x)
        if lm_head_chunk_size > 0:
            return [self.lm_head(x_i) for x_i in x.split(lm_head_chunk_size, dim=1)]
        return self.lm_head(x)


def chunked_cross_entropy(logits, targets, chunk_size=128):  # lit_gpt/utils.py @ 8641822
    if isinstance(logits, list):
        if chunk_size == 0:
            logits = torch.cat(logits, dim=1)
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        logit_chunks = [lc.reshape(-1, lc.size(-1)) for lc in logits]
        target_chunks = [tc.reshape(-1) for tc in targets.split(logits[0].size(1), dim=1)]
        loss_chunks = [F.cross_entropy(lc, tc, ignore_index=-1, reduction="none")
                       for lc, tc in zip(logit_chunks, target_chunks)]
        return torch.cat(loss_chunks).mean()
    logits = logits.reshape(-1, logits.size(-1))
    targets = targets.reshape(-1)
    if chunk_size == 0:
        return F.cross_entropy(logits, targets, ignore_index=-1)
    loss_chunks = [F.cross_entropy(lc, tc, ignore_index=-1, reduction="none")
                   for lc, tc in zip(logits.split(chunk_size), targets.split(chunk_size))]
    return torch.cat(loss_chunks).mean()


class FabricModule(nn.Module):
    """_FabricModule.forward @ 71aed751: convert_input, forward under the precision's dtype context,
    then convert_output (floating outputs to torch.get_default_dtype())."""

    def __init__(self, module, output_cast):
        super().__init__()
        self.module = module
        self.output_cast = output_cast

    def forward(self, *args, **kwargs):
        out = self.module(*args, **kwargs)
        if self.output_cast == "none":
            return out
        to = torch.get_default_dtype()  # fp32 once the forward context is left
        if isinstance(out, list):
            return [t.to(to) if t.is_floating_point() else t for t in out]
        return out.to(to) if out.is_floating_point() else out


VALIDATION_WINDOWS = (("validation_before_step1_peak", "v0_start", "v0_end"),
                      ("validation_after_step1_peak", "v1_start", "v1_end"))


def validate(ctx, tr, mark):
    """validate(): two batches of the sanity check (finetune/lora.py lines 368-383 @ b0ea1772, lines
    443-462 @ 26857050), the val dataloader's batch of micro_batch_size, padded alike."""
    tr.mark(f"{mark}_start")
    x_val, y_val = ctx["make_inputs"]()
    ctx["model"].eval()
    with torch.no_grad():
        for _ in range(2):
            logits = ctx["fabric"](x_val)
            chunked_cross_entropy(logits[..., :-1, :], y_val[..., 1:], chunk_size=0).item()
    del logits, x_val, y_val
    ctx["model"].train()
    tr.mark(f"{mark}_end")


def fit_step(ctx, tr, n, forward, grads_of_step2, backward=None):
    """fit() of 0.4.9 and main: the sanity check before step 1 (lines 282 @ b0ea1772, 315 @ 26857050) and,
    with eval.interval 1, a validation after step 1's optimizer step (lines 349, 406) while the step's
    logits are bound. fabric.backward adds nothing in bf16-true, and zero_grad(set_to_none=True) is the
    torch 2.x default: the harness's step as it is."""
    if n == 1:
        validate(ctx, tr, "v0")
    value = tracer.train_step(tr, n, forward, ctx["optimizers"][0], grads_of_step2, backward)
    if n == 1:
        validate(ctx, tr, "v1")
    return value


def run_case(c):
    m = MODELS[c["model"]]
    B, S = c["batch"], c["seq"]

    def build():
        model = GPT(c, m)
        for n, p in model.named_parameters():
            p.requires_grad_(("lora_" in n) if c["lora"] else True)
        model = model.to(torch.bfloat16)  # precision="bf16-true": HalfPrecision.convert_module
        model.cos.data = model.cos.data.float()  # the setter's fp32 cache, rebuilt after the cast
        model.sin.data = model.sin.data.float()
        model.train()
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.01)
        return dict(model=model, fabric=FabricModule(model, c["output_cast"]), optimizers=[opt], trainable=trainable,
                    make_inputs=lambda: (torch.randint(0, m["vocab"], (B, S)), torch.randint(0, m["vocab"], (B, S))),
                    logits=None)

    def step(ctx, tr, n):
        x, y = ctx["inputs"]

        def forward():
            if c["script"] == "lora":  # finetune/lora.py fit()
                ctx["logits"] = ctx["fabric"](x, lm_head_chunk_size=128)
                ctx["logits"][-1] = ctx["logits"][-1][..., :-1, :]
                return chunked_cross_entropy(ctx["logits"], y[..., 1:])
            # finetune/full.py fit(): the 2023 script's whole-logits loss; v0.4.9's default
            # chunk_size=128 over the flattened rows (litgpt/finetune/full.py line 256 @ b0ea1772)
            ctx["logits"] = ctx["fabric"](x)
            chunk_size = 0 if c["version"] == "8641822" else 128  # the same @ 26857050 (full.py line 284)
            return chunked_cross_entropy(ctx["logits"][..., :-1, :], y[..., 1:], chunk_size=chunk_size)

        def grads_of_step2(n):
            if n == 2:
                ctx["grads_step2"] = tracer.tensor_bytes([p.grad for p in ctx["trainable"]])

        if not validates:  # the 2023 scripts: no validation around the traced steps
            return tracer.train_step(tr, n, forward, ctx["optimizers"][0], grads_of_step2)
        return fit_step(ctx, tr, n, forward, grads_of_step2)

    validates = c["version"] != "8641822"
    windows = VALIDATION_WINDOWS if validates else ()
    r = T.run_two_steps(build, step, windows)
    model = {k: m[k] for k in ("family", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "norm")}
    model.update(activation="gelu" if m["activation"] == "gelu_tanh" else m["activation"], tied_embeddings=False,
                 params=r["nparams"] - (r["trainable"] if c["lora"] else 0), impl="litgpt",
                 rotary_pct=m["rotary_pct"], parallel_residual=m["parallel"], qkv_bias=m["bias"])
    train = dict(batch=B, seq=S, precision="pure_bf16", optimizer="adamw", optimizer_impl="for_loop",
                 checkpointing="none", attention="eager", grad_accum=1, zero_stage=0, dp=1, tp=1,
                 loss_impl="chunked" if c["script"] == "lora" else "standard",
                 loss_chunk=128 if c["script"] == "lora" else 0,  # full.py's chunk_size: framework.version's
                 output_cast="fp32" if c["output_cast"] == "fp32" else "none")
    if c["lora"]:
        train.update(lora_rank=c["r"], lora_alpha=c["alpha"], lora_dropout=c["dropout"],
                     lora_targets=",".join(c["targets"]), frozen="base", trainable_params=r["trainable"])
    else:
        train.update(lora_rank=0, frozen="none")
    if c["version"] == "0.5.13":
        framework = dict(name="litgpt", version="0.5.13", script=f"litgpt/finetune/{c['script']}.py",
                         source="Lightning-AI/litgpt@26857050 (v0.5.13) + Lightning-AI/pytorch-lightning 2.6")
    elif c["version"] == "0.4.9":
        framework = dict(name="litgpt", version="0.4.9", script=f"litgpt/finetune/{c['script']}.py",
                         source="Lightning-AI/litgpt@b0ea1772 + Lightning-AI/pytorch-lightning 2.4.0")
    else:
        framework = dict(name="litgpt", version="8641822", script=f"finetune/{c['script']}.py",
                         source="Lightning-AI/lit-gpt@8641822 + Lightning-AI/pytorch-lightning@71aed751")
    notes = ("measured_bytes = max live CPU tensor bytes in training step 2 (the step-1 logits list is still bound "
             "until step 2's forward returns, as in lit-gpt's loop); plain-torch re-implementation, eager attention.")
    lightning = {"0.4.9": "2.4.0 (emulated)", "0.5.13": "2.6.1 (emulated)"}.get(c["version"], "71aed751 (emulated)")
    rec = T.record(c["id"], SOURCE, model, train, framework, r, notes, software={"lightning": lightning})
    if validates:  # what max_memory_allocated over fit() covers: the validations beside the steps
        rec["measured_bytes"] = max(r["s2_peak"], r["validation_after_step1_peak"])
        rec["first_step_peak_bytes"] = max(r["s1_peak"], r["validation_before_step1_peak"])
        rec["notes"] = ("measured_bytes = max live CPU tensor bytes over training step 2 and the validation after "
                        "step 1 (two batches of the micro-batch's shape, the step-1 logits list still bound); "
                        "first_step_peak_bytes over the sanity validation before step 1 and step 1; "
                        "plain-torch re-implementation, eager attention.")
    return rec


def cases():
    L = []

    def add(model, script, output_cast="fp32", targets=("q", "v"), r=8, batch=2, seq=256, dropout=0.05,
            version="8641822"):
        lora = script == "lora"
        prefix = "cpu-litgpt" if version == "8641822" else f"cpu-litgpt-{version}"
        cid = f"{prefix}-{script}-{model}-b{batch}-s{seq}" + (f"-r{r}-{'-'.join(targets)}" if lora else "") + \
              ("" if output_cast == "fp32" else "-no-output-cast")
        L.append(dict(id=cid, model=model, script=script, output_cast=output_cast, lora=lora, targets=targets, r=r,
                      alpha=2 * r, batch=batch, seq=seq, dropout=dropout, version=version))
    for model in ("llama", "phi"):
        add(model, "lora")
        add(model, "lora", output_cast="none")
        add(model, "lora", batch=4)
        add(model, "full")
    add("llama", "lora", targets=("q", "k", "v", "proj", "mlp", "head"), r=16)
    add("llama", "full", output_cast="none")
    # litgpt v0.4.9's LoRA step: the default q,v adapters, all targets, and a larger vocabulary.
    add("llama", "lora", version="0.4.9")
    add("llama", "lora", targets=("q", "k", "v", "proj", "mlp", "head"), r=16, version="0.4.9")
    add("llama-v32k", "lora", batch=4, version="0.4.9")
    # One sequence: no reshape copy, validation peaks at the second batch's output cast.
    add("llama-v32k", "lora", batch=1, version="0.4.9")
    # A small vocabulary: the step is the peak.
    add("llama-v4k", "lora", version="0.4.9")
    # litgpt v0.4.9's full fine-tune: the loss chunked by 128 rows over the whole fp32 logits.
    add("llama", "full", version="0.4.9")
    add("llama-v32k", "full", batch=4, version="0.4.9")
    # litgpt v0.4.9's grouped queries: k and v expanded to every query head before RoPE, one and
    # two sequences, LoRA on q and v (the default) and on q, k and v, and a full fine-tune.
    add("llama-gqa-v4k", "lora", batch=1, version="0.4.9")
    add("llama-gqa-v4k", "lora", version="0.4.9")
    add("llama-gqa-v4k", "lora", targets=("q", "k", "v"), version="0.4.9")
    add("llama-gqa-v4k", "full", batch=1, version="0.4.9")
    add("llama-gqa-v4k", "full", version="0.4.9")
    # The 2023 full fine-tune with grouped queries: k and v expanded before RoPE as in 0.4.9.
    add("llama-gqa-v4k", "full", batch=1)
    add("llama-gqa-v4k", "full")
    # Short steps whose peak is inside optimizer.step(): the previous tensor's denom beside the
    # current one's two temporaries, and the step's bound logits (lm_head, wte: the head first; fc_1, fc_2).
    add("llama-wide-v1k", "full", batch=1, seq=64, version="0.4.9")
    add("llama-wide-v1k", "full", batch=1, seq=64)
    # litgpt main (v0.5.13): the restructured attention under LoRA and a full fine-tune, grouped
    # queries (repeat_interleave after RoPE), and a larger vocabulary.
    add("llama", "lora", version="0.5.13")
    add("llama", "full", version="0.5.13")
    add("llama-gqa-v4k", "lora", targets=("q", "k", "v"), version="0.5.13")
    add("llama-gqa-v4k", "full", version="0.5.13")
    add("llama-v32k", "lora", batch=4, version="0.5.13")
    return L


if __name__ == "__main__":
    T.main_loop(cases, run_case, "/tmp/litgpt_cases.json")
