#!/usr/bin/python3
"""CPU traces of training steps as older Hugging Face transformers releases run them.

Each model is a plain-torch re-implementation of a modeling file's eager training path at a
release (which lines follow which release is said next to each piece; the research note
docs/research/transformers-versions.md gives the sources). The mechanisms that changed
between 4.32 and 4.51 are switches, so one case differs from its neighbour by one of them:

- per-layer rotary cos/sin tables registered with max_position_embeddings rows (LLaMA
  4.31-4.37, 4.38.2-4.39 as `_cos_cached`; GPT-NeoX: a (1, 1, max_pos, rotary_ndims) table
  per layer, repeated over the batch before the gather in 4.32);
- causal-mask buffers: GPT-NeoX's per-layer (1, 1, max_pos, max_pos) bool `bias`, LLaMA
  4.38's model-level (max_pos, max_pos) bool `causal_mask` and its (b, 1, max_pos, max_pos)
  float copy made by `_update_causal_mask`;
- the 4.32 mask helpers (`_make_causal_mask` + `_expand_mask` of an all-ones mask);
- OPT's `torch.max(attn_weights, finfo.min)` clamp;
- `use_cache=True` (the config default) in training: each layer's keys and values returned
  in `past_key_values` and alive until the loss has been computed;
- the loss path: logits.float() and the shifted `.contiguous()` copy (<= 4.47) or padded
  labels (4.48+, ForCausalLMLoss without the shift copy).

The step is the harness's (../shared/ground-truth/measure.py): the model returns only the
scalar loss, as Trainer.compute_loss does, so `outputs` (and its cache) die before backward.
fp32 unless the case says pure_bf16; AdamW single-tensor; peak of step 2.

Run from the repository root (about 4 minutes of CPU time; one thread):
    /usr/bin/python3 tools/trace/hf_versions_train.py --out /tmp/train.json
"""
import argparse, math, time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracer

torch.set_num_threads(1)


def vkey(v):  # "4.38.2" -> (4, 38, 2)
    return tuple(int(p) for p in v.split("."))


# ---------------------------------------------------------------------------------------
# pieces shared by the LLaMA-style models
# ---------------------------------------------------------------------------------------
class RMSNorm(nn.Module):  # LlamaRMSNorm (unchanged 4.31-4.51)
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dt)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n):  # modeling_llama.py repeat_kv (4.31+)
    b, kvh, s, d = x.shape
    if n == 1:
        return x
    return x[:, :, None, :, :].expand(b, kvh, n, s, d).reshape(b, kvh * n, s, d)


def inv_freq(d, base=10000.0):
    return 1.0 / (base ** (torch.arange(0, d, 2).float() / d))


class RotaryTable(nn.Module):
    """LlamaRotaryEmbedding with cos/sin tables of max_position_embeddings rows, one per
    attention layer. 4.31-4.35: buffers (1, 1, max_pos, d) `.to(torch.get_default_dtype())`;
    4.36-4.37: (max_pos, d); 4.38.2-4.39: `_cos_cached`/`_sin_cached` (max_pos, d) kept for
    backward compatibility only (forward computes its own). persistent=False throughout."""

    def __init__(self, d, max_pos, layout, base=10000.0):
        super().__init__()
        self.layout = layout
        self.register_buffer("inv_freq", inv_freq(d, base), persistent=False)
        t = torch.arange(max_pos).type_as(self.inv_freq)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        dtype = torch.get_default_dtype()
        if layout == "4d":
            self.register_buffer("cos_cached", emb.cos()[None, None, :, :].to(dtype), persistent=False)
            self.register_buffer("sin_cached", emb.sin()[None, None, :, :].to(dtype), persistent=False)
        elif layout == "2d":
            self.register_buffer("cos_cached", emb.cos().to(dtype), persistent=False)
            self.register_buffer("sin_cached", emb.sin().to(dtype), persistent=False)
        elif layout == "bc":  # 4.38.2-4.39: registered, never read by the forward
            self.register_buffer("_cos_cached", emb.cos().to(dtype), persistent=False)
            self.register_buffer("_sin_cached", emb.sin().to(dtype), persistent=False)

    def table(self, x, seq_len):  # 4.31-4.37 forward(x, seq_len)
        if self.layout == "4d":
            return (self.cos_cached[:, :, :seq_len, ...].to(dtype=x.dtype),
                    self.sin_cached[:, :, :seq_len, ...].to(dtype=x.dtype))
        return self.cos_cached[:seq_len].to(dtype=x.dtype), self.sin_cached[:seq_len].to(dtype=x.dtype)

    def computed(self, x, position_ids):  # 4.38+ forward(x, position_ids): (b, s, d) per call
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv.float() @ pos.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


def apply_rotary_table(q, k, cos, sin, position_ids, layout):
    if layout == "4d":  # 4.31-4.35 apply_rotary_pos_emb: squeeze, gather rows, unsqueeze
        cos = cos.squeeze(1).squeeze(0)
        sin = sin.squeeze(1).squeeze(0)
    cos = cos[position_ids].unsqueeze(1)
    sin = sin[position_ids].unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def apply_rotary(q, k, cos, sin):  # 4.38+ apply_rotary_pos_emb(unsqueeze_dim=1)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


# ---- the 4-D masks, per release ------------------------------------------------------
def mask_v432(b, s, dtype):
    """LlamaModel._prepare_decoder_attention_mask (4.31-4.35; OPTDecoder the same) with the
    all-ones bool mask LlamaModel.forward makes when none is given."""
    attention_mask = torch.ones((b, s), dtype=torch.bool)
    # _make_causal_mask: torch.full in the default dtype, then .to(dtype)
    mask = torch.full((s, s), torch.finfo(dtype).min)
    cond = torch.arange(mask.size(-1))
    mask.masked_fill_(cond < (cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    causal = mask[None, None, :, :].expand(b, 1, s, s)
    # _expand_mask
    expanded = attention_mask[:, None, None, :].expand(b, 1, s, s).to(dtype)
    inverted = 1.0 - expanded
    expanded = inverted.masked_fill(inverted.to(torch.bool), torch.finfo(dtype).min)
    return expanded + causal


def mask_v436(b, s, dtype):
    """_prepare_4d_causal_attention_mask (modeling_attn_mask_utils.py, 4.36-4.37) with no
    attention_mask: AttentionMaskConverter.to_causal_4d -> _make_causal_mask, expanded."""
    mask = torch.full((s, s), torch.finfo(dtype).min)
    cond = torch.arange(mask.size(-1))
    mask.masked_fill_(cond < (cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    return mask[None, None, :, :].expand(b, 1, s, s)


def mask_v438(causal_buffer, b, dtype):
    """LlamaModel._update_causal_mask (4.38.x): the model-level (max_pos, max_pos) bool buffer
    repeated over the batch and turned into a float mask of max_pos x max_pos per sequence."""
    min_dtype = torch.finfo(dtype).min
    causal_mask = causal_buffer[None, None, :, :].repeat(b, 1, 1, 1).to(dtype) * min_dtype
    return causal_mask.to(dtype=dtype)


def mask_v440(b, s, dtype, cache_position):
    """LlamaModel._update_causal_mask (4.39-4.44 eager, no attention_mask given)."""
    min_dtype = torch.finfo(dtype).min
    causal_mask = torch.full((s, s), fill_value=min_dtype, dtype=dtype)
    if s != 1:
        causal_mask = torch.triu(causal_mask, diagonal=1)
    causal_mask *= torch.arange(s) > cache_position.reshape(-1, 1)
    return causal_mask[None, None, :, :].expand(b, -1, -1, -1)


def mask_v451(s, dtype):  # the (1, 1, s, s) mask today's readers assume (trace_families.py)
    return torch.full((s, s), torch.finfo(dtype).min, dtype=dtype).triu(1)[None, None]


# ---------------------------------------------------------------------------------------
# LLaMA-style decoder (modeling_llama.py; `fused_qkv` = Phi-3's qkv_proj and gate_up_proj)
# ---------------------------------------------------------------------------------------
class LlamaAttention(nn.Module):
    def __init__(self, c, v):
        super().__init__()
        h, H, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.v, self.H, self.kv, self.d = v, H, kv, h // H
        self.fused = c["model_type"] == "phi3"
        if self.fused:
            self.qkv_proj = nn.Linear(h, (H + 2 * kv) * self.d, bias=False)
        else:
            self.q_proj = nn.Linear(h, H * self.d, bias=False)
            self.k_proj = nn.Linear(h, kv * self.d, bias=False)
            self.v_proj = nn.Linear(h, kv * self.d, bias=False)
        self.o_proj = nn.Linear(H * self.d, h, bias=False)
        V = vkey(v)
        if V < (4, 36):
            self.layout = "4d"
        elif V < (4, 38):
            self.layout = "2d"
        elif (4, 38, 2) <= V < (4, 40):
            self.layout = "bc"
        else:
            self.layout = "none"
        if V < (4, 45):  # one LlamaRotaryEmbedding per attention layer until 4.45 moved it to the model
            self.rotary_emb = RotaryTable(self.d, c["max_position_embeddings"], self.layout, c.get("rope_theta", 1e4))

    def forward(self, x, mask, position_ids, cache_position, pe, use_cache):
        b, s, _ = x.size()
        if self.fused:  # Phi3Attention: q, k, v are slices of one projection
            qkv = self.qkv_proj(x)
            qp = self.H * self.d
            q = qkv[..., :qp]
            k = qkv[..., qp: qp + self.kv * self.d]
            v = qkv[..., qp + self.kv * self.d:]
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = q.view(b, s, self.H, self.d).transpose(1, 2)
        k = k.view(b, s, self.kv, self.d).transpose(1, 2)
        v = v.view(b, s, self.kv, self.d).transpose(1, 2)
        V = vkey(self.v)
        if V < (4, 38):
            cos, sin = self.rotary_emb.table(v, seq_len=s)
            q, k = apply_rotary_table(q, k, cos, sin, position_ids, self.layout)
        else:
            cos, sin = self.rotary_emb.computed(v, position_ids) if V < (4, 45) else pe
            q, k = apply_rotary(q, k, cos, sin)
        # past_key_value = (key_states, value_states) if use_cache (4.31-4.35); from 4.36
        # DynamicCache.update appends the same two tensors on the first call.
        present = (k, v) if use_cache else None
        k = repeat_kv(k, self.H // self.kv)
        v = repeat_kv(v, self.H // self.kv)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.d)
        if V >= (4, 38) and V < (4, 39):  # attention_mask[:, :, cache_position, : key_len]
            causal = mask[:, :, cache_position, : k.shape[-2]]
        else:
            causal = mask[:, :, :, : k.shape[-2]]
        w = w + causal
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        w = F.dropout(w, p=0.0, training=self.training)  # attention_dropout (0.0) from 4.36
        o = torch.matmul(w, v)
        o = o.transpose(1, 2).contiguous().reshape(b, s, -1)
        return self.o_proj(o), present


class LlamaMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, f = c["hidden_size"], c["intermediate_size"]
        self.fused = c["model_type"] == "phi3"
        if self.fused:
            self.gate_up_proj = nn.Linear(h, 2 * f, bias=False)
        else:
            self.gate_proj = nn.Linear(h, f, bias=False)
            self.up_proj = nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)

    def forward(self, x):
        if self.fused:  # Phi3MLP
            up = self.gate_up_proj(x)
            gate, up = up.chunk(2, dim=-1)
            return self.down_proj(up * F.silu(gate))
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, c, v):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"])
        self.self_attn = LlamaAttention(c, v)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"])
        self.mlp = LlamaMLP(c)

    def forward(self, x, *args):
        residual = x
        a, present = self.self_attn(self.input_layernorm(x), *args)
        x = residual + a
        residual = x
        x = residual + self.mlp(self.post_attention_layernorm(x))
        return x, present


class LlamaForCausalLM(nn.Module):
    def __init__(self, c, v):
        super().__init__()
        self.c, self.v = c, v
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = nn.Embedding(V, h)
        self.layers = nn.ModuleList([LlamaLayer(c, v) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(h)
        self.lm_head = nn.Linear(h, V, bias=False)
        M = c["max_position_embeddings"]
        if vkey(v)[:2] == (4, 38):  # LlamaModel.__init__ (4.38.x): causal_mask buffer, max_pos x max_pos bool
            self.register_buffer("causal_mask", torch.triu(torch.full((M, M), fill_value=True, dtype=torch.bool),
                                                           diagonal=1), persistent=False)
        if vkey(v) >= (4, 45):  # LlamaModel.rotary_emb: cos/sin computed once per forward
            self.rotary_emb = RotaryTable(h // c["num_attention_heads"], M, "none", c.get("rope_theta", 1e4))

    def decoder(self, ids, use_cache):  # LlamaModel.forward
        V = vkey(self.v)
        b, s = ids.shape
        x = self.embed_tokens(ids)
        cache_position = torch.arange(0, s)
        position_ids = cache_position.unsqueeze(0) if V >= (4, 38) else torch.arange(0, s, dtype=torch.long).unsqueeze(0).view(-1, s)
        pe = None
        if V < (4, 36):
            mask = mask_v432(b, s, x.dtype)
        elif V < (4, 38):
            mask = mask_v436(b, s, x.dtype)
        elif V < (4, 39):
            mask = mask_v438(self.causal_mask, b, x.dtype)
        elif V < (4, 45):
            mask = mask_v440(b, s, x.dtype, cache_position)
        else:
            mask = mask_v451(s, x.dtype)
            pe = self.rotary_emb.computed(x, position_ids)
        presents = []  # next_decoder_cache (tuple) / DynamicCache.key_cache+value_cache
        for layer in self.layers:
            x, present = layer(x, mask, position_ids, cache_position, pe, use_cache)
            if use_cache:
                presents.append(present)
        return self.norm(x), presents

    def forward(self, ids, labels, use_cache):
        h, presents = self.decoder(ids, use_cache)  # `outputs` of LlamaModel: alive through the loss
        logits = self.lm_head(h)
        return causal_lm_loss(logits, labels, self.v, upcast=True)


def causal_lm_loss(logits, labels, v, upcast):
    """LlamaForCausalLM loss: <= 4.45 logits.float() then the shifted .contiguous() copy;
    4.46-4.47 ForCausalLMLoss (loss_utils.py) the same inside the loss function; from 4.48
    the labels are padded and shifted instead, no copy of the logits (loss_utils.py at
    d0fed636, as include/memscale/json/records.hpp reads it).
    GPT-NeoX and OPT <= 4.45 take CrossEntropyLoss on the shifted copy without upcasting."""
    if vkey(v) >= (4, 48):
        logits = logits.float()
        labels = F.pad(labels, (0, 1), value=-100)
        shift_labels = labels[..., 1:].contiguous()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), shift_labels.view(-1), ignore_index=-100)
    if upcast or vkey(v) >= (4, 46):
        logits = logits.float()
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = labels[..., 1:].contiguous()
    return F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))


# ---------------------------------------------------------------------------------------
# GPT-NeoX (modeling_gpt_neox.py): fused query_key_value, partial rotary, parallel residual
# ---------------------------------------------------------------------------------------
class NeoXRotary(nn.Module):
    """4.32 (and 4.2x-4.31): GPTNeoXRotaryEmbedding keeps cos_cached/sin_cached as plain
    attributes of shape (1, 1, max_pos, rotary_ndims), float32; forward returns
    `cos_cached[:seq_len, ...]` (the slice is on the size-1 dim, so the whole table) and
    apply_rotary_pos_emb repeats it over the batch before torch.gather. 4.36-4.44: buffers
    (max_pos, rotary_ndims), persistent=False, rows picked with cos[position_ids]."""

    def __init__(self, d, max_pos, v, base=10000.0):
        super().__init__()
        self.v = v
        self.register_buffer("inv_freq", inv_freq(d, base), persistent=vkey(v) < (4, 36))
        t = torch.arange(max_pos).type_as(self.inv_freq)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        if vkey(v) < (4, 36):
            self.cos_cached = emb.cos()[None, None, :, :]
            self.sin_cached = emb.sin()[None, None, :, :]
        else:
            self.register_buffer("cos_cached", emb.cos().to(torch.get_default_dtype()), persistent=False)
            self.register_buffer("sin_cached", emb.sin().to(torch.get_default_dtype()), persistent=False)

    def forward(self, x, seq_len):
        if vkey(self.v) < (4, 36):
            return self.cos_cached[:seq_len, ...], self.sin_cached[:seq_len, ...]
        return self.cos_cached[:seq_len], self.sin_cached[:seq_len]


def neox_apply_rotary(q, k, cos, sin, position_ids, v):
    if vkey(v) < (4, 36):  # gather over a batch-sized repeat of the whole table
        gather_indices = position_ids[:, None, :, None]
        gather_indices = gather_indices.repeat(1, cos.shape[1], 1, cos.shape[3])
        cos = torch.gather(cos.repeat(gather_indices.shape[0], 1, 1, 1), 2, gather_indices)
        sin = torch.gather(sin.repeat(gather_indices.shape[0], 1, 1, 1), 2, gather_indices)
    else:
        cos = cos[position_ids].unsqueeze(1)
        sin = sin[position_ids].unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class NeoXAttention(nn.Module):
    def __init__(self, c, v):
        super().__init__()
        h, H = c["hidden_size"], c["num_attention_heads"]
        self.v, self.H, self.d = v, H, h // H
        self.rot = int(self.d * c.get("rotary_pct", 0.25))
        M = c["max_position_embeddings"]
        self.legacy = vkey(v) < (4, 48)
        if self.legacy:  # GPTNeoXAttention._init_bias / masked_bias (kept through 4.4x)
            self.register_buffer("bias", torch.tril(torch.ones((M, M), dtype=torch.bool)).view(1, 1, M, M),
                                 persistent=False)
            self.register_buffer("masked_bias", torch.tensor(-1e9), persistent=False)
            self.register_buffer("norm_factor", torch.sqrt(torch.tensor(self.d, dtype=torch.float32)).to(
                torch.get_default_dtype()), persistent=False)
            self.rotary_emb = NeoXRotary(self.rot, M, v, c.get("rotary_emb_base", 10000.0))
        self.query_key_value = nn.Linear(h, 3 * h)
        self.dense = nn.Linear(h, h)

    def _attn(self, q, k, v):  # GPTNeoXAttention._attn (4.2x-4.4x eager)
        b, H, ql, d = q.size()
        kl = k.size(-2)
        causal_mask = self.bias[:, :, kl - ql: kl, :kl]
        q = q.reshape(b * H, ql, d)
        k = k.reshape(b * H, kl, d)
        scores = torch.zeros(b * H, ql, kl, dtype=q.dtype)
        scores = torch.baddbmm(scores, q, k.transpose(1, 2), beta=1.0,
                               alpha=(torch.tensor(1.0, dtype=self.norm_factor.dtype) / self.norm_factor))
        scores = scores.view(b, H, ql, kl)
        mask_value = torch.tensor(torch.finfo(scores.dtype).min, dtype=scores.dtype)
        scores = torch.where(causal_mask, scores, mask_value)
        w = F.softmax(scores, dim=-1)
        w = w.to(v.dtype)
        w = F.dropout(w, p=0.0, training=self.training)  # attention_dropout 0.0
        return torch.matmul(w, v)

    def forward(self, x, position_ids, pe, mask, use_cache):
        b, s, _ = x.shape
        qkv = self.query_key_value(x)
        qkv = qkv.view(b, s, self.H, 3 * self.d)
        q = qkv[..., : self.d].permute(0, 2, 1, 3)
        k = qkv[..., self.d: 2 * self.d].permute(0, 2, 1, 3)
        v = qkv[..., 2 * self.d:].permute(0, 2, 1, 3)
        qr, qp = q[..., : self.rot], q[..., self.rot:]
        kr, kp = k[..., : self.rot], k[..., self.rot:]
        if self.legacy:
            cos, sin = self.rotary_emb(v, seq_len=s)
            qr, kr = neox_apply_rotary(qr, kr, cos, sin, position_ids, self.v)
        else:
            qr, kr = apply_rotary(qr, kr, *pe)
        q = torch.cat((qr, qp), dim=-1)
        k = torch.cat((kr, kp), dim=-1)
        present = (k, v) if use_cache else None  # v is a view of qkv: the whole projection stays
        if self.legacy:
            o = self._attn(q, k, v)
        else:  # eager_attention_forward (4.48+)
            w = torch.matmul(q, k.transpose(2, 3)) * self.d ** -0.5
            w = w + mask[:, :, :, : k.shape[-2]]
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
            w = F.dropout(w, p=0.0, training=self.training)
            o = torch.matmul(w, v)
        o = o.permute(0, 2, 1, 3).contiguous()
        o = o.view(b, s, self.H * self.d)
        return self.dense(o), present


class NeoXLayer(nn.Module):
    def __init__(self, c, v):
        super().__init__()
        h = c["hidden_size"]
        self.input_layernorm = nn.LayerNorm(h, eps=1e-5)
        self.post_attention_layernorm = nn.LayerNorm(h, eps=1e-5)
        self.attention = NeoXAttention(c, v)
        self.dense_h_to_4h = nn.Linear(h, c["intermediate_size"])
        self.dense_4h_to_h = nn.Linear(c["intermediate_size"], h)

    def forward(self, x, *args):  # use_parallel_residual=True
        a, present = self.attention(self.input_layernorm(x), *args)
        a = F.dropout(a, p=0.0, training=self.training)  # post_attention_dropout (hidden_dropout 0.0)
        m = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(self.post_attention_layernorm(x))))
        m = F.dropout(m, p=0.0, training=self.training)
        return m + a + x, present


class NeoXForCausalLM(nn.Module):
    def __init__(self, c, v):
        super().__init__()
        self.c, self.v = c, v
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed_in = nn.Embedding(V, h)
        self.layers = nn.ModuleList([NeoXLayer(c, v) for _ in range(c["num_hidden_layers"])])
        self.final_layer_norm = nn.LayerNorm(h, eps=1e-5)
        self.embed_out = nn.Linear(h, V, bias=False)
        self.rot = self.layers[0].attention.rot
        if vkey(v) >= (4, 48):
            self.register_buffer("inv_freq", inv_freq(self.rot), persistent=False)

    def forward(self, ids, labels, use_cache):
        b, s = ids.shape
        position_ids = torch.arange(0, s, dtype=torch.long).unsqueeze(0)
        x = self.embed_in(ids)
        x = F.dropout(x, p=0.0, training=self.training)  # emb_dropout
        pe, mask = None, None
        if vkey(self.v) >= (4, 48):  # rotary once per forward, (1, 1, s, s) mask
            inv = self.inv_freq[None, :, None].expand(b, -1, 1)
            freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            pe = (emb.cos(), emb.sin())
            mask = mask_v451(s, x.dtype)
        presents = []
        for layer in self.layers:
            x, present = layer(x, position_ids, pe, mask, use_cache)
            if use_cache:
                presents.append(present)
        logits = self.embed_out(self.final_layer_norm(x))
        return causal_lm_loss(logits, labels, self.v, upcast=False)


# ---------------------------------------------------------------------------------------
# OPT (modeling_opt.py 4.2x-4.4x tuple-cache OPTAttention, eager)
# ---------------------------------------------------------------------------------------
class OPTAttention(nn.Module):
    def __init__(self, c, clamp):
        super().__init__()
        h, H = c["hidden_size"], c["num_attention_heads"]
        self.H, self.d, self.clamp = H, h // H, clamp
        self.scaling = self.d ** -0.5
        self.k_proj, self.v_proj = nn.Linear(h, h), nn.Linear(h, h)
        self.q_proj, self.out_proj = nn.Linear(h, h), nn.Linear(h, h)

    def _shape(self, t, s, b):
        return t.view(b, s, self.H, self.d).transpose(1, 2).contiguous()

    def forward(self, x, mask, use_cache):
        b, tgt, _ = x.size()
        q = self.q_proj(x) * self.scaling
        k = self._shape(self.k_proj(x), -1, b)
        v = self._shape(self.v_proj(x), -1, b)
        present = (k, v) if use_cache else None  # is_decoder: past_key_value = (key_states, value_states)
        proj = (b * self.H, -1, self.d)
        q = self._shape(q, tgt, b).view(*proj)
        k = k.view(*proj)
        v = v.view(*proj)
        src = k.size(1)
        w = torch.bmm(q, k.transpose(1, 2))
        w = w.view(b, self.H, tgt, src) + mask
        if self.clamp:  # keeps its B x H x S x S input for backward (maximum saves both inputs)
            w = torch.max(w, torch.tensor(torch.finfo(w.dtype).min))
        w = w.view(b * self.H, tgt, src)
        if w.dtype == torch.float16:
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(torch.float16)
        else:
            w = F.softmax(w, dim=-1)
        w = F.dropout(w, p=0.0, training=self.training)  # attention_dropout 0.0
        o = torch.bmm(w, v)
        o = o.view(b, self.H, tgt, self.d).transpose(1, 2).reshape(b, tgt, self.H * self.d)
        return self.out_proj(o), present


class OPTLayer(nn.Module):
    def __init__(self, c, clamp):
        super().__init__()
        h = c["hidden_size"]
        self.self_attn = OPTAttention(c, clamp)
        self.self_attn_layer_norm = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, c["ffn_dim"])
        self.fc2 = nn.Linear(c["ffn_dim"], h)
        self.final_layer_norm = nn.LayerNorm(h)
        self.p = c.get("dropout", 0.1)

    def forward(self, x, mask, use_cache):
        residual = x
        x = self.self_attn_layer_norm(x)
        x, present = self.self_attn(x, mask, use_cache)
        x = F.dropout(x, p=self.p, training=self.training)
        x = residual + x
        shape = x.shape
        x = x.reshape(-1, x.size(-1))
        residual = x
        x = self.final_layer_norm(x)
        x = self.fc2(F.relu(self.fc1(x)))
        x = F.dropout(x, p=self.p, training=self.training)
        return (residual + x).view(shape), present


class OPTForCausalLM(nn.Module):
    def __init__(self, c, v, clamp):
        super().__init__()
        self.c, self.v = c, v
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = nn.Embedding(V, h, padding_idx=1)
        self.embed_positions = nn.Embedding(c["max_position_embeddings"] + 2, h)  # offset 2
        self.layers = nn.ModuleList([OPTLayer(c, clamp) for _ in range(c["num_hidden_layers"])])
        self.final_layer_norm = nn.LayerNorm(h)
        self.lm_head = nn.Linear(h, V, bias=False)
        self.lm_head.weight = self.embed_tokens.weight

    def decoder(self, ids, use_cache):  # OPTDecoder.forward (4.32): its masks die when it returns
        b, s = ids.shape
        x = self.embed_tokens(ids)
        attention_mask = torch.ones(b, s)  # made when none is given (float32)
        # _prepare_decoder_attention_mask with the float mask (same helpers as LLaMA 4.32)
        mask = torch.full((s, s), torch.finfo(x.dtype).min)
        cond = torch.arange(s)
        mask.masked_fill_(cond < (cond + 1).view(s, 1), 0)
        causal = mask.to(x.dtype)[None, None].expand(b, 1, s, s)
        expanded = attention_mask[:, None, None, :].expand(b, 1, s, s).to(x.dtype)
        inverted = 1.0 - expanded
        expanded = inverted.masked_fill(inverted.to(torch.bool), torch.finfo(x.dtype).min)
        mask = expanded + causal
        # OPTLearnedPositionalEmbedding.forward
        am = attention_mask.long()
        positions = (torch.cumsum(am, dim=1).type_as(am) * am).long() - 1
        pos = self.embed_positions(positions + 2)
        x = x + pos
        presents = []
        for layer in self.layers:
            x, present = layer(x, mask, use_cache)
            if use_cache:
                presents.append(present)
        return self.final_layer_norm(x), presents

    def forward(self, ids, labels, use_cache):  # OPTForCausalLM.forward: `outputs` alive through the loss
        h, presents = self.decoder(ids, use_cache)
        logits = self.lm_head(h).contiguous()
        return causal_lm_loss(logits, labels, self.v, upcast=False)


# ---------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------
LLAMA = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=256, num_hidden_layers=4,
             num_attention_heads=8, num_key_value_heads=8, intermediate_size=688, vocab_size=8192,
             max_position_embeddings=4096, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
             hidden_act="silu")
LLAMA_GQA = dict(LLAMA, num_key_value_heads=2)
PHI3 = dict(LLAMA, model_type="phi3", architectures=["Phi3ForCausalLM"], num_key_value_heads=2)
NEOX = dict(model_type="gpt_neox", architectures=["GPTNeoXForCausalLM"], hidden_size=256, num_hidden_layers=4,
            num_attention_heads=8, intermediate_size=1024, vocab_size=8192, max_position_embeddings=2048,
            rotary_pct=0.25, rotary_emb_base=10000, use_parallel_residual=True, hidden_act="gelu",
            layer_norm_eps=1e-5, tie_word_embeddings=False, attention_dropout=0.0, hidden_dropout=0.0)
OPT = dict(model_type="opt", architectures=["OPTForCausalLM"], hidden_size=256, num_hidden_layers=4,
           num_attention_heads=8, ffn_dim=1024, vocab_size=8192, max_position_embeddings=2048,
           do_layer_norm_before=True, word_embed_proj_dim=256, activation_function="relu", dropout=0.1,
           attention_dropout=0.0, enable_bias=True, tie_word_embeddings=True)

# (name, config, transformers version, use_cache, batch, seq, precision, extra switch)
CASES = [
    ("llama-mha", LLAMA, "4.32.1", True, 2, 256, "fp32", None),
    ("llama-mha", LLAMA, "4.32.1", False, 2, 256, "fp32", None),
    ("llama-mha", LLAMA, "4.36.2", True, 2, 256, "fp32", None),
    ("llama-mha", LLAMA, "4.38.2", True, 2, 256, "fp32", None),
    ("llama-mha", LLAMA, "4.40.2", True, 2, 256, "fp32", None),
    ("llama-mha", LLAMA, "4.51.3", True, 2, 256, "fp32", None),
    ("llama-mha", LLAMA, "4.32.1", True, 4, 512, "fp32", None),
    ("llama-mha", LLAMA, "4.40.2", True, 4, 512, "fp32", None),
    ("llama-mha", LLAMA, "4.51.3", True, 4, 512, "fp32", None),
    ("llama-gqa", LLAMA_GQA, "4.32.1", True, 4, 512, "fp32", None),
    ("llama-gqa", LLAMA_GQA, "4.32.1", False, 4, 512, "fp32", None),
    ("llama-gqa", LLAMA_GQA, "4.40.2", True, 4, 512, "fp32", None),
    ("llama-gqa", LLAMA_GQA, "4.40.2", False, 4, 512, "fp32", None),
    ("llama-gqa", LLAMA_GQA, "4.51.3", True, 4, 512, "fp32", None),
    ("llama-gqa", LLAMA_GQA, "4.51.3", False, 4, 512, "fp32", None),
    ("phi3-gqa", PHI3, "4.40.2", True, 4, 512, "fp32", None),
    ("phi3-gqa", PHI3, "4.40.2", False, 4, 512, "fp32", None),
    ("llama-mha", LLAMA, "4.40.2", True, 4, 512, "pure_bf16", None),
    ("llama-mha", LLAMA, "4.51.3", True, 4, 512, "pure_bf16", None),
    ("neox", NEOX, "4.32.1", True, 2, 256, "fp32", None),
    ("neox", NEOX, "4.32.1", False, 2, 256, "fp32", None),
    ("neox", NEOX, "4.36.2", True, 2, 256, "fp32", None),
    ("neox", NEOX, "4.51.3", True, 2, 256, "fp32", None),
    ("neox", NEOX, "4.32.1", True, 4, 512, "fp32", None),
    ("neox", NEOX, "4.36.2", True, 4, 512, "fp32", None),
    ("neox", NEOX, "4.51.3", True, 4, 512, "fp32", None),
    ("opt", OPT, "4.32.1", True, 2, 256, "fp32", "clamp"),
    ("opt", OPT, "4.32.1", True, 2, 256, "fp32", "no-clamp"),
    ("opt", OPT, "4.32.1", True, 4, 512, "fp32", "clamp"),
    ("opt", OPT, "4.32.1", True, 4, 512, "fp32", "no-clamp"),
]


def build(c, v, extra):
    t = c["model_type"]
    if t in ("llama", "phi3"):
        return LlamaForCausalLM(c, v)
    if t == "gpt_neox":
        return NeoXForCausalLM(c, v)
    return OPTForCausalLM(c, v, clamp=extra == "clamp")


def constant_tables(model):
    """Buffers plus the 4.32 GPT-NeoX cos/sin attributes (tensors that are not buffers)."""
    ts = list(model.buffers())
    for m in model.modules():
        if isinstance(m, NeoXRotary) and not isinstance(m._buffers.get("cos_cached"), torch.Tensor):
            ts += [m.cos_cached, m.sin_cached]
    return tracer.tensor_bytes(ts)


def run_case(c, v, use_cache, B, S, prec, extra):
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        model = build(c, v, extra)
        if prec == "pure_bf16":
            model = model.to(torch.bfloat16)
        model.train()
        tr.mark("built")
        opt = tracer.make_opt("adamw", model.parameters(), None)
        x = torch.randint(0, c["vocab_size"], (B, S))
        y = x.clone()
        tr.mark("inputs")
        tracer.train_two_steps(tr, lambda: model(x, y, use_cache), opt)
        nparams = tracer.parameter_count(model)
        params_enum = tracer.tensor_bytes(list(model.parameters()))
        tables = constant_tables(model)
        opt_enum = tracer.optimizer_state_bytes([opt])
        del model, opt, x, y
    r = dict(nparams=nparams, params_enum=params_enum, opt_enum=opt_enum, tables=tables, built=tr.live("built"))
    r.update(tracer.step_readings(tr))
    return r


def case_id(name, v, use_cache, B, S, prec, extra):
    return f"cpu-tf{v.replace('.', '')}-{name}-b{B}-s{S}-{prec}" + ("" if use_cache else "-nocache") + \
        (f"-{extra}" if extra else "")


def record(name, c, v, use_cache, B, S, prec, extra, r):
    rid = case_id(name, v, use_cache, B, S, prec, extra)
    hf = {k: c[k] for k in c}
    hf["use_cache"] = use_cache
    return {
        **tracer.record_head(rid, "tools/trace/hf_versions_train.py (harness: shared/ground-truth/measure.py)"),
        "model": {"hf_config": hf, "params": r["nparams"],
                  "impl": "hf-transformers"},
        "train": dict(batch=B, seq=S, precision=prec, optimizer="adamw",
                      optimizer_impl="single_tensor (torch 1.13 CPU default)", checkpointing="none",
                      attention="eager", grad_accum=1, use_cache=use_cache),
        "software": {"torch": torch.__version__, "transformers": v},
        **tracer.peak_fields(r),
        "components": tracer.components(r),
        "detail": {"built": r["built"], "buffers_and_tables": r["tables"], "s2_start": r["s2_start"],
                   "s2_peak_fwd": r["s2_peak_fwd"], "s2_peak_bwd": r["s2_peak_bwd"], "s2_peak_opt": r["s2_peak_opt"]},
        "notes": ("plain-torch re-implementation of the release's eager training path"
                  + (f"; OPT attention {'with' if extra == 'clamp' else 'without'} the torch.max(finfo.min) clamp"
                     if extra else "")
                  + ("; use_cache=True: every layer's keys/values stay referenced until the loss"
                     if use_cache else "; use_cache=False")),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=None, help="comma-separated substrings of case ids")
    a = ap.parse_args()
    out = []
    for name, c, v, use_cache, B, S, prec, extra in CASES:
        if a.only and not any(s in case_id(name, v, use_cache, B, S, prec, extra) for s in a.only.split(",")):
            continue
        t0 = time.time()
        r = run_case(c, v, use_cache, B, S, prec, extra)
        rec = record(name, c, v, use_cache, B, S, prec, extra, r)
        out.append(rec)
        print(f"{rec['id']}: peak={r['s2_peak']} built={r['built']} tables={r['tables']} "
              f"act={r['s2_fwd'] - r['s2_start']} fwd/bwd/opt={r['s2_peak_fwd']}/{r['s2_peak_bwd']}/{r['s2_peak_opt']} "
              f"({time.time() - t0:.1f}s)", flush=True)
    tracer.write_records(a.out, out)


if __name__ == "__main__":
    main()
