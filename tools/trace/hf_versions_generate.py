#!/usr/bin/python3
"""CPU traces of greedy generate() as transformers releases (and gpt-fast) run it.

Plain-torch re-implementations of the LLaMA eager forward and of the generation loop:

- 4.32.1: LlamaAttention grows the cache with torch.cat and returns new (key, value) tuples;
  greedy_search keeps `outputs` (fp32 logits of every position, the previous tuples) and
  `model_kwargs["past_key_values"]` until the next forward has returned, so the old and the
  new cache coexist at the end of every step; per-layer (1, 1, max_pos, d) cos/sin buffers;
  _prepare_decoder_attention_mask.
- 4.41.2: the model wraps the tuples in DynamicCache.from_legacy_cache, torch.cat's each
  layer inside DynamicCache.update and hands generate() `to_legacy_cache()` tuples again:
  the same two caches as 4.32 (generate only passes a DynamicCache itself from 4.42, PR
  #30536). Rotary computed per layer; _update_causal_mask with the 2-D mask (cloned).
- 4.44.2: generate() passes one DynamicCache (old tensors freed by each torch.cat);
  `cache_implementation="static"`: StaticCache of max_length per layer, index_copy_,
  attention over the whole length; `cache_implementation="quantized"`: QuantizedCache
  (residual_length 32 here, the default is 128; every step dequantises the layer and
  torch.cat's it, re-quantising when the residual is full) with the
  quantiser emulated in torch (4-bit codes two per byte, one scale and one zero point per
  64 values, as quanto's packed int4; the storage layout is the emulation's, the transients
  around it are transformers').
- gpt-fast (pytorch-labs/gpt-fast model.py/generate.py @ 32971d3): KVCache buffers of
  (batch, kv_heads, max_seq_length rounded to 8, head_dim), a (max_seq, max_seq) bool mask,
  freqs_cis of block_size rows, repeat_interleave over the whole cache, logits of every
  prompt position in the model dtype; `int8-kv`: torchao _models/llama/model.py
  AffineQuantizedKVCache (int8 cache + per-token scale; each update multiplies the whole
  cache back to the model dtype). SDPA is written as its math path (torch 1.13 has none),
  eager (no torch.compile).

Run from the repository root (a few minutes of CPU time; one thread):
    /usr/bin/python3 tools/trace/hf_versions_generate.py --out /tmp/generate.json
    /usr/bin/python3 tools/trace/hf_versions_generate.py --gptfast-weights --out docs/data/cpu_traced_gptfast_weights.json
"""
import argparse, math, time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracer

torch.set_num_threads(1)


def vkey(v):
    return tuple(int(p) for p in v.split("."))


class RMSNorm(nn.Module):
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
    return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)


def repeat_kv(x, n):
    b, kvh, s, d = x.shape
    if n == 1:
        return x
    return x[:, :, None, :, :].expand(b, kvh, n, s, d).reshape(b, kvh * n, s, d)


def inv_freq(d, base=10000.0):
    return 1.0 / (base ** (torch.arange(0, d, 2).float() / d))


# ---- caches ---------------------------------------------------------------------------
class DynamicCache:  # cache_utils.py DynamicCache (4.36+)
    def __init__(self):
        self.k, self.v = [], []

    @classmethod
    def from_legacy_cache(cls, past):
        c = cls()
        if past is not None:
            for k, v in past:
                c.k.append(k)
                c.v.append(v)
        return c

    def to_legacy_cache(self):
        return tuple((self.k[i], self.v[i]) for i in range(len(self.k)))

    def seq_len(self):
        return self.k[0].shape[-2] if self.k else 0

    def update(self, k, v, i, cache_position):
        if len(self.k) <= i:
            self.k.append(k)
            self.v.append(v)
        else:
            self.k[i] = torch.cat([self.k[i], k], dim=-2)
            self.v[i] = torch.cat([self.v[i], v], dim=-2)
        return self.k[i], self.v[i]


class StaticCache:  # cache_utils.py StaticCache (4.42-4.44: zeros per layer, index_copy_)
    def __init__(self, b, kv, max_len, d, layers, dtype):
        self.max_len = max_len
        self.k = [torch.zeros((b, kv, max_len, d), dtype=dtype) for _ in range(layers)]
        self.v = [torch.zeros((b, kv, max_len, d), dtype=dtype) for _ in range(layers)]
        self.seen = 0

    def seq_len(self):
        return self.seen

    def update(self, k, v, i, cache_position):
        if i == 0:
            self.seen += k.shape[-2]
        self.k[i].index_copy_(2, cache_position, k)
        self.v[i].index_copy_(2, cache_position, v)
        return self.k[i], self.v[i]


def quantize4(x, group=64):
    """Emulated packed 4-bit quantiser (quanto qint4 layout: uint8 holding two codes, one
    scale and one zero point per `group` values, in the input dtype)."""
    x = x.contiguous()
    g = x.view(-1, group)
    lo = g.amin(dim=-1, keepdim=True)
    hi = g.amax(dim=-1, keepdim=True)
    scale = ((hi - lo) / 15).clamp(min=1e-8)
    codes = ((g - lo) / scale).round().clamp(0, 15).to(torch.uint8)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    return (packed, scale.to(x.dtype), lo.to(x.dtype), x.shape)


def dequantize4(q):
    packed, scale, lo, shape = q
    codes = torch.stack((packed & 15, packed >> 4), dim=-1).view(packed.shape[0], -1)
    return (codes.to(scale.dtype) * scale + lo).view(shape)


class QuantizedCache:  # cache_utils.py QuantizedCache.update (4.42-4.45), residual_length 128
    def __init__(self, residual_length=128):
        self.R = residual_length
        self.qk, self.qv, self.k, self.v = [], [], [], []
        self.seen = 0

    def seq_len(self):
        return self.seen

    def update(self, k, v, i, cache_position):
        if i == 0:
            self.seen += k.shape[-2]
        if len(self.k) <= i:
            self.qk.append(quantize4(k.contiguous()))
            self.qv.append(quantize4(v.contiguous()))
            self.k.append(torch.zeros(0, dtype=k.dtype))
            self.v.append(torch.zeros(0, dtype=k.dtype))
            return k, v
        dk = dequantize4(self.qk[i])
        dv = dequantize4(self.qv[i])
        keys = torch.cat([dk, self.k[i], k], dim=-2)
        values = torch.cat([dv, self.v[i], v], dim=-2)
        if self.k[i].dim() == 4 and self.k[i].shape[-2] + 1 >= self.R:
            self.qk[i] = quantize4(keys.contiguous())
            self.qv[i] = quantize4(values.contiguous())
            self.k[i] = torch.zeros(0, dtype=k.dtype)
            self.v[i] = torch.zeros(0, dtype=k.dtype)
        else:
            self.k[i] = torch.cat([self.k[i], k], dim=-2)
            self.v[i] = torch.cat([self.v[i], v], dim=-2)
        return keys, values


# ---- the LLaMA model -----------------------------------------------------------------
class Attention(nn.Module):
    def __init__(self, c, i, v):
        super().__init__()
        h, H, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.H, self.kv, self.d, self.i, self.v = H, kv, h // H, i, v
        self.q_proj = nn.Linear(h, H * self.d, bias=False)
        self.k_proj = nn.Linear(h, kv * self.d, bias=False)
        self.v_proj = nn.Linear(h, kv * self.d, bias=False)
        self.o_proj = nn.Linear(H * self.d, h, bias=False)
        self.register_buffer("inv_freq", inv_freq(self.d), persistent=False)
        if vkey(v) < (4, 36):  # LlamaRotaryEmbedding 4.31-4.35: (1, 1, max_pos, d) tables per layer
            M = c["max_position_embeddings"]
            t = torch.arange(M).type_as(self.inv_freq)
            emb = torch.cat((torch.einsum("i,j->ij", t, self.inv_freq),) * 2, dim=-1)
            self.register_buffer("cos_cached", emb.cos()[None, None].to(torch.get_default_dtype()), persistent=False)
            self.register_buffer("sin_cached", emb.sin()[None, None].to(torch.get_default_dtype()), persistent=False)

    def rotary(self, x, position_ids):  # LlamaRotaryEmbedding.forward (4.38+), per layer before 4.43
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def forward(self, x, mask, position_ids, cache_position, past, pe):
        b, s, _ = x.size()
        q = self.q_proj(x).view(b, s, self.H, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv, self.d).transpose(1, 2)
        present = None
        if vkey(self.v) < (4, 36):  # 4.32: tuple cache
            kv_len = s + (past[0].shape[-2] if past is not None else 0)
            cos = self.cos_cached[:, :, :kv_len, ...].to(dtype=v.dtype).squeeze(1).squeeze(0)
            sin = self.sin_cached[:, :, :kv_len, ...].to(dtype=v.dtype).squeeze(1).squeeze(0)
            cos, sin = cos[position_ids].unsqueeze(1), sin[position_ids].unsqueeze(1)
            q, k = (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)
            if past is not None:
                k = torch.cat([past[0], k], dim=2)
                v = torch.cat([past[1], v], dim=2)
            present = (k, v)
        else:
            cos, sin = pe if pe is not None else self.rotary(v, position_ids)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            q, k = (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)
            k, v = past.update(k, v, self.i, cache_position)
        k = repeat_kv(k, self.H // self.kv)
        v = repeat_kv(v, self.H // self.kv)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.d)
        w = w + mask[:, :, :, : k.shape[-2]]
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(w, v)
        o = o.transpose(1, 2).contiguous().reshape(b, s, -1)
        return self.o_proj(o), present


class Layer(nn.Module):
    def __init__(self, c, i, v):
        super().__init__()
        h, f = c["hidden_size"], c["intermediate_size"]
        self.input_layernorm = RMSNorm(h)
        self.self_attn = Attention(c, i, v)
        self.post_attention_layernorm = RMSNorm(h)
        self.gate_proj = nn.Linear(h, f, bias=False)
        self.up_proj = nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)

    def forward(self, x, *args):
        residual = x
        a, present = self.self_attn(self.input_layernorm(x), *args)
        x = residual + a
        residual = x
        y = self.post_attention_layernorm(x)
        return residual + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y)), present


def mask_v432(attention_mask, b, q, past_len, dtype):  # _prepare_decoder_attention_mask (4.31-4.35)
    combined = None
    if q > 1:
        mask = torch.full((q, q), torch.finfo(dtype).min)
        cond = torch.arange(q)
        mask.masked_fill_(cond < (cond + 1).view(q, 1), 0)
        mask = mask.to(dtype)
        if past_len > 0:
            mask = torch.cat([torch.zeros(q, past_len, dtype=dtype), mask], dim=-1)
        combined = mask[None, None, :, :].expand(b, 1, q, q + past_len)
    src = attention_mask.shape[-1]
    expanded = attention_mask[:, None, None, :].expand(b, 1, q, src).to(dtype)
    inverted = 1.0 - expanded
    expanded = inverted.masked_fill(inverted.to(torch.bool), torch.finfo(dtype).min)
    return expanded if combined is None else expanded + combined


def mask_v441(attention_mask, x, cache_position, target):  # LlamaModel._update_causal_mask (4.40-4.44, eager)
    dtype, s, b = x.dtype, x.shape[1], x.shape[0]
    mn = torch.finfo(dtype).min
    m = torch.full((s, target), fill_value=mn, dtype=dtype)
    if s != 1:
        m = torch.triu(m, diagonal=1)
    m *= torch.arange(target) > cache_position.reshape(-1, 1)
    m = m[None, None, :, :].expand(b, 1, -1, -1)
    m = m.clone()
    L = attention_mask.shape[-1]
    pad = m[:, :, :, :L] + attention_mask[:, None, None, :]
    pad = pad == 0
    m[:, :, :, :L] = m[:, :, :, :L].masked_fill(pad, mn)
    return m


class Llama(nn.Module):
    def __init__(self, c, v):
        super().__init__()
        self.c, self.v = c, v
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([Layer(c, i, v) for i in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"])
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def forward(self, input_ids, attention_mask, position_ids, cache_position, past, static_mask=None, keep=0):
        V = vkey(self.v)
        b, s = input_ids.shape
        x = self.embed_tokens(input_ids)
        if V < (4, 36):
            past_len = past[0][0].shape[2] if past is not None else 0
            mask = mask_v432(attention_mask, b, s, past_len, x.dtype)
            nxt = ()
            for i, layer in enumerate(self.layers):
                x, present = layer(x, mask, position_ids, cache_position, past[i] if past is not None else None, None)
                nxt += (present,)
            cache_out = nxt
        else:
            legacy = not isinstance(past, (DynamicCache, StaticCache, QuantizedCache))
            cache = DynamicCache.from_legacy_cache(past) if legacy else past
            if static_mask is not None:
                mask = static_mask
            else:
                mask = mask_v441(attention_mask, x, cache_position, attention_mask.shape[-1])
            pe = None
            if V >= (4, 43):  # position_embeddings computed once in LlamaModel
                pe = self.layers[0].self_attn.rotary(x, position_ids)
            for layer in self.layers:
                x, _ = layer(x, mask, position_ids, cache_position, cache, pe)
            cache_out = cache.to_legacy_cache() if legacy else cache
            del mask, pe
        x = self.norm(x)
        if keep:
            return self.lm_head(x[:, -keep:, :]), cache_out
        logits = self.lm_head(x)
        return logits.float(), cache_out  # LlamaForCausalLM: logits = logits.float() (<= 4.44)


@torch.no_grad()
def generate_hf(model, input_ids, new_tokens, cache_kind, tr):
    V = vkey(model.v)
    b, s = input_ids.shape
    model_kwargs = {"attention_mask": torch.ones_like(input_ids), "past_key_values": None}
    if cache_kind == "static":
        c = model.c
        model_kwargs["past_key_values"] = StaticCache(b, c["num_key_value_heads"], s + new_tokens,
                                                      c["hidden_size"] // c["num_attention_heads"],
                                                      c["num_hidden_layers"], model.embed_tokens.weight.dtype)
    elif cache_kind == "quantized":
        model_kwargs["past_key_values"] = QuantizedCache(QUANT_RESIDUAL)
    elif V >= (4, 42):
        model_kwargs["past_key_values"] = DynamicCache()
    cache_position = torch.arange(s)
    unfinished = torch.ones(b, dtype=torch.long)
    outputs = None
    model_inputs = None
    for step in range(new_tokens):
        # prepare_inputs_for_generation
        past = model_kwargs["past_key_values"]
        attention_mask = model_kwargs["attention_mask"]
        if V < (4, 36):
            ids = input_ids[:, -1:] if past is not None else input_ids
        else:
            ids = input_ids if step == 0 else input_ids[:, cache_position]
        position_ids = attention_mask.long().cumsum(-1) - 1
        position_ids.masked_fill_(attention_mask == 0, 1)
        if V < (4, 36):
            if past is not None:
                position_ids = position_ids[:, -1].unsqueeze(-1)
        else:
            position_ids = position_ids[:, -ids.shape[1]:].clone(memory_format=torch.contiguous_format)
        static_mask = None
        if cache_kind == "static":  # prepare_inputs_for_generation builds the 4-D mask (4.44)
            shape_of = torch.empty((b, ids.shape[1], 0), dtype=model.embed_tokens.weight.dtype)
            static_mask = mask_v441(attention_mask, shape_of, cache_position, past.max_len)
        model_inputs = {"input_ids": ids, "attention_mask": attention_mask, "position_ids": position_ids,
                        "cache_position": cache_position, "past": past, "static_mask": static_mask}
        outputs = model(model_inputs["input_ids"], model_inputs["attention_mask"], model_inputs["position_ids"],
                        model_inputs["cache_position"], model_inputs["past"], model_inputs["static_mask"])
        next_logits = outputs[0][:, -1, :]
        next_tokens = torch.argmax(next_logits, dim=-1)
        next_tokens = next_tokens * unfinished  # pad_token_id 0
        input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
        # _update_model_kwargs_for_generation
        model_kwargs["past_key_values"] = outputs[1]
        model_kwargs["attention_mask"] = torch.cat([attention_mask, attention_mask.new_ones((b, 1))], dim=-1)
        cache_position = cache_position[-1:] + 1
        del next_logits, past, attention_mask, static_mask
        tr.mark(f"step{step}")
    return input_ids


# ---- gpt-fast ------------------------------------------------------------------------
class FastAttention(nn.Module):  # gpt-fast model.py Attention
    def __init__(self, c):
        super().__init__()
        h, H, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.H, self.kv, self.d, self.dim = H, kv, h // H, h
        self.wqkv = nn.Linear(h, (H + 2 * kv) * self.d, bias=False)
        self.wo = nn.Linear(h, h, bias=False)
        self.kv_cache = None

    def forward(self, x, freqs_cis, mask, input_pos):
        b, s, _ = x.shape
        kv_size = self.kv * self.d
        q, k, v = self.wqkv(x).split([self.dim, kv_size, kv_size], dim=-1)
        q = q.view(b, s, self.H, self.d)
        k = k.view(b, s, self.kv, self.d)
        v = v.view(b, s, self.kv, self.d)
        q = fast_rotary(q, freqs_cis)
        k = fast_rotary(k, freqs_cis)
        q, k, v = map(lambda t: t.transpose(1, 2), (q, k, v))
        k, v = self.kv_cache.update(input_pos, k, v)
        k = k.repeat_interleave(self.H // self.kv, dim=1)
        v = v.repeat_interleave(self.H // self.kv, dim=1)
        y = sdpa_math(q, k, v, mask)
        y = y.transpose(1, 2).contiguous().view(b, s, self.dim)
        return self.wo(y)


def sdpa_math(q, k, v, mask):
    """F.scaled_dot_product_attention's math path with a bool attn_mask (torch 2.x
    attention.cpp _scaled_dot_product_attention_math): the mask turned into an additive
    float mask, q and k each scaled by sqrt(scale), softmax, matmul."""
    bias = torch.zeros(mask.shape, dtype=q.dtype)
    bias.masked_fill_(mask.logical_not(), float("-inf"))
    sf = math.sqrt(1.0 / math.sqrt(q.size(-1)))
    w = torch.matmul(q * sf, k.transpose(-2, -1) * sf)
    w.add_(bias)
    w = torch.softmax(w, dim=-1)
    return torch.matmul(w, v)


def fast_rotary(x, freqs_cis):  # gpt-fast apply_rotary_emb
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    fc = freqs_cis.view(1, xs.size(1), 1, xs.size(3), 2)
    out = torch.stack([xs[..., 0] * fc[..., 0] - xs[..., 1] * fc[..., 1],
                       xs[..., 1] * fc[..., 0] + xs[..., 0] * fc[..., 1]], -1)
    return out.flatten(3).type_as(x)


class KVCache(nn.Module):  # gpt-fast model.py KVCache
    def __init__(self, b, M, kv, d, dtype):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros((b, kv, M, d), dtype=dtype))
        self.register_buffer("v_cache", torch.zeros((b, kv, M, d), dtype=dtype))

    def update(self, input_pos, k, v):
        k_out, v_out = self.k_cache, self.v_cache
        k_out[:, :, input_pos] = k
        v_out[:, :, input_pos] = v
        return k_out, v_out


def quantize_per_token_absmax(t):  # torchao quantization/utils.py quantize_activation_per_token_absmax
    n_bits = 8
    scales = t.abs().amax(dim=-1, keepdim=True)
    if scales.dtype == torch.float16:
        scales = scales.float()
    q_max = 2 ** (n_bits - 1) - 1
    scales = scales.clamp(min=1e-5).div(q_max)
    t = torch.round(t / scales).clamp(-127, 127).to(torch.int8)
    return t, scales.squeeze(-1)


class Int8KVCache(nn.Module):  # torchao _models/llama/model.py AffineQuantizedKVCache
    def __init__(self, b, M, kv, d, dtype):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros((b, kv, M, d), dtype=torch.int8))
        self.register_buffer("v_cache", torch.zeros((b, kv, M, d), dtype=torch.int8))
        self.register_buffer("k_cache_scale", torch.ones((b, kv, M, 1), dtype=dtype))
        self.register_buffer("v_cache_scale", torch.ones((b, kv, M, 1), dtype=dtype))

    def update(self, input_pos, k, v):
        qk, ks = quantize_per_token_absmax(k)
        self.k_cache[:, :, input_pos] = qk
        self.k_cache_scale[:, :, input_pos] = ks.unsqueeze(-1).to(self.k_cache_scale.dtype)
        k_out = self.k_cache * self.k_cache_scale
        k_out[:, :, input_pos] = k
        qv, vs = quantize_per_token_absmax(v)
        self.v_cache[:, :, input_pos] = qv
        self.v_cache_scale[:, :, input_pos] = vs.unsqueeze(-1).to(self.v_cache_scale.dtype)
        v_out = self.v_cache * self.v_cache_scale
        v_out[:, :, input_pos] = v
        return k_out, v_out


class WeightOnlyInt8Linear(nn.Module):  # gpt-fast quantize.py@32971d3 WeightOnlyInt8Linear
    def __init__(self, linear):
        super().__init__()
        w = linear.weight.detach().float()
        scales = (w.abs().amax(dim=1) / 127.5).clamp(min=torch.finfo(torch.float32).eps)
        self.register_buffer("weight", torch.clamp(torch.round(w / scales[:, None]), -128, 127).to(torch.int8))
        self.register_buffer("scales", scales.to(torch.bfloat16))

    def forward(self, x):
        return F.linear(x, self.weight.to(dtype=x.dtype)) * self.scales


def replace_linear_int8(module):  # quantize.py replace_linear_weight_only_int8_per_channel
    for name, child in module.named_children():
        if isinstance(child, nn.Linear):
            setattr(module, name, WeightOnlyInt8Linear(child))
        else:
            replace_linear_int8(child)


class FastBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, f = c["hidden_size"], c["intermediate_size"]
        self.attention = FastAttention(c)
        self.attention_norm = RMSNorm(h, 1e-5)
        self.ffn_norm = RMSNorm(h, 1e-5)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w3 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x, input_pos, freqs_cis, mask):
        h = x + self.attention(self.attention_norm(x), freqs_cis, mask, input_pos)
        y = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(y)) * self.w3(y))


class FastTransformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok_embeddings = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([FastBlock(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], 1e-5)
        self.output = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def setup_caches(self, b, max_seq, int8_kv):
        c = self.c
        d = c["hidden_size"] // c["num_attention_heads"]
        M = (max_seq + 7) // 8 * 8  # find_multiple(max_seq_length, 8)
        dtype = self.output.weight.dtype
        if hasattr(self.output, "scales"):  # model.py setup_caches: a quantized head's dtype is its scales'
            dtype = self.output.scales.dtype
        for blk in self.layers:
            blk.attention.kv_cache = (Int8KVCache if int8_kv else KVCache)(b, M, c["num_key_value_heads"], d, dtype)
        # precompute_freqs_cis(block_size, head_dim): (block_size, d/2, 2) in the model dtype
        freqs = inv_freq(d)
        t = torch.arange(c["max_position_embeddings"])
        freqs = torch.outer(t, freqs)
        fc = torch.polar(torch.ones_like(freqs), freqs)
        self.freqs_cis = torch.stack([fc.real, fc.imag], dim=-1).to(dtype)
        self.causal_mask = torch.tril(torch.ones(M, M, dtype=torch.bool))

    def forward(self, idx, input_pos):
        mask = self.causal_mask[None, None, input_pos]
        freqs_cis = self.freqs_cis[input_pos]
        x = self.tok_embeddings(idx)
        for blk in self.layers:
            x = blk(x, input_pos, freqs_cis, mask)
        x = self.norm(x)  # rebinds x: the last block's output is freed before the head
        return self.output(x)


@torch.no_grad()
def generate_fast(model, prompt, new_tokens, int8_kv, tr):
    """gpt-fast generate.py generate(): greedy (temperature ~0 -> argmax of probs)."""
    b, T = prompt.shape
    T_new = T + new_tokens
    model.setup_caches(b, T_new, int8_kv)
    tr.mark("caches")
    seq = torch.empty(b, T_new, dtype=prompt.dtype)
    seq[:, :T] = prompt
    input_pos = torch.arange(0, T)

    def sample(logits):  # sample(): logits_to_probs(logits[:, -1], temperature, top_k)
        logits = logits[:, -1] / max(1e-5, 1e-5)
        probs = torch.softmax(logits, dim=-1)
        return torch.argmax(probs, dim=-1, keepdim=True), probs

    logits = model(prompt, input_pos)
    next_token = sample(logits)[0].clone()
    del logits
    seq[:, T] = next_token.squeeze()
    tr.mark("step0")
    # generate.py makes this an int32 tensor; torch 1.13 on CPU indexes with int64 only
    input_pos = torch.tensor([T], dtype=torch.long)
    new, new_probs = [], []
    cur = next_token
    for i in range(new_tokens - 1):  # decode_n_tokens
        logits = model(cur.view(b, -1), input_pos)
        next_token, next_prob = sample(logits)
        del logits
        input_pos += 1
        new.append(next_token.clone())
        new_probs.append(next_prob.clone())  # decode_n_tokens keeps every step's probabilities
        cur = next_token.clone()
        tr.mark(f"step{i + 1}")
    seq[:, T + 1:] = torch.cat(new, dim=-1)
    return seq


# ---- cases ---------------------------------------------------------------------------
LLAMA = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=512, num_hidden_layers=4,
             num_attention_heads=8, num_key_value_heads=8, intermediate_size=1376, vocab_size=32000,
             max_position_embeddings=4096, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
             hidden_act="silu")
GQA = dict(LLAMA, num_key_value_heads=2)
SMALLV = dict(LLAMA, vocab_size=4096)

# (name, config, implementation/version, cache, batch, context, new tokens, dtype)
CASES = [
    ("mha", LLAMA, "4.32.1", "tuple", 1, 256, 16, "fp32"),
    ("mha", LLAMA, "4.32.1", "tuple", 4, 256, 16, "fp32"),
    ("v4k", SMALLV, "4.32.1", "tuple", 16, 64, 32, "fp32"),
    ("mha", LLAMA, "4.32.1", "tuple", 4, 256, 16, "bf16"),
    ("gqa", GQA, "4.32.1", "tuple", 4, 256, 16, "fp32"),
    ("mha", LLAMA, "4.41.2", "tuple", 4, 256, 16, "fp32"),
    ("v4k", SMALLV, "4.41.2", "tuple", 16, 64, 32, "fp32"),
    ("mha", LLAMA, "4.44.2", "dynamic", 4, 256, 16, "fp32"),
    ("v4k", SMALLV, "4.44.2", "dynamic", 16, 64, 32, "fp32"),
    ("mha", LLAMA, "4.44.2", "static", 4, 256, 16, "fp32"),
    ("gqa", GQA, "4.44.2", "static", 4, 256, 16, "fp32"),
    ("v4k", SMALLV, "4.44.2", "quantized", 8, 64, 48, "fp32"),
    ("mha", LLAMA, "gpt-fast", "static", 4, 256, 16, "fp32"),
    ("gqa", GQA, "gpt-fast", "static", 4, 256, 16, "fp32"),
    ("gqa", GQA, "gpt-fast", "int8-kv", 4, 256, 16, "fp32"),
    ("mha", LLAMA, "gpt-fast", "static", 4, 256, 16, "bf16"),
    ("mha", LLAMA, "gpt-fast", "int8-kv", 4, 256, 16, "bf16"),
]
# gpt-fast with weight-only int8 layers (--gptfast-weights; weights "gptfast-int8").
WEIGHT_CASES = [
    ("mha", LLAMA, "gpt-fast", "static", 4, 256, 16, "bf16"),
    ("gqa", GQA, "gpt-fast", "static", 4, 256, 16, "fp32"),
]
QUANT_RESIDUAL = 32  # QuantizedCacheConfig(residual_length=32): the cache re-quantises within the run

GPT_FAST_COMMIT = "32971d3129541c5bfb4f715abc33d1c5f408d204"


def trace(c, impl, cache, b, ctx, n, dt, int8_weights=False):
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        model = (FastTransformer(c) if impl == "gpt-fast" else Llama(c, impl)).eval()
        if int8_weights:
            replace_linear_int8(model)  # generate.py _load_model: converted before model.to(dtype=precision)
        if dt == "bf16":
            model = model.to(torch.bfloat16)
        elif int8_weights:
            model = model.to(torch.float32)  # the scales follow the model dtype
        tr.mark("built")
        ids = torch.randint(0, c["vocab_size"], (b, ctx))
        tr.mark("inputs")
        if impl == "gpt-fast":
            out = generate_fast(model, ids, n, cache == "int8-kv", tr)
        else:
            out = generate_hf(model, ids, n, cache, tr)
        tr.mark("done")
        params = tracer.parameter_count(model)
        buffers = sum(t.numel() * t.element_size() for t in model.buffers())
        del out, ids, model
    detail = {"built": tr.live("built"), "buffers_after_generate": buffers,
              "prefill_peak": tr.peak("inputs", "step0")}
    if n > 1:
        detail["decode_peak"] = tr.peak("step0", f"step{n - 1}")
        detail["first_decode_peak"] = tr.peak("step0", "step1")
        detail["last_decode_peak"] = tr.peak(f"step{n - 2}", f"step{n - 1}")
    return params, tr.peak("inputs", "done"), detail


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=None)
    ap.add_argument("--gptfast-weights", action="store_true", help="the WEIGHT_CASES (gpt-fast int8 weights) only")
    a = ap.parse_args()
    records = []
    w8 = a.gptfast_weights
    for name, c, impl, cache, b, ctx, n, dt in (WEIGHT_CASES if w8 else CASES):
        tag = "gptfast" if impl == "gpt-fast" else "tf" + impl.replace(".", "")
        rid = f"cpu-infer-{tag}-llama-{name}-{cache}-b{b}-c{ctx}-n{n}-{dt}" + ("-w8" if w8 else "")
        if a.only and not any(s in rid for s in a.only.split(",")):
            continue
        t0 = time.time()
        params, peak, detail = trace(c, impl, cache, b, ctx, n, dt, w8)
        hf = dict(c)
        sw = {"torch": torch.__version__}
        if impl == "gpt-fast":
            sw["gpt-fast"] = GPT_FAST_COMMIT[:7]
            if cache == "int8-kv":
                sw["torchao"] = "_models/llama/model.py AffineQuantizedKVCache"
        else:
            sw["transformers"] = impl
        infer = {"batch": b, "context": ctx, "new_tokens": n, "dtype": dt,
                 "kv_dtype": "int8" if cache == "int8-kv" else ("int4" if cache == "quantized" else dt),
                 "kv_cache": {"tuple": "dynamic", "dynamic": "dynamic"}.get(cache, cache if cache == "quantized" else "static"),
                 "attention": "eager" if impl != "gpt-fast" else "sdpa_math", "weights": "gptfast-int8" if w8 else dt}
        if cache == "quantized":
            infer.update(kv_residual_length=QUANT_RESIDUAL, kv_group_size=64)
        note = "peak live tensor bytes from model construction to the end of generate (greedy, no_grad, one thread)"
        if cache == "tuple":
            note += "; legacy tuple cache: the previous step's cache stays referenced by generate()"
        if cache == "quantized":
            note += f"; QuantizedCache, residual_length {QUANT_RESIDUAL}, emulated 4-bit storage (group 64)"
        if impl == "gpt-fast":
            note += "; gpt-fast generate.py without torch.compile, SDPA as its math path"
        if w8:
            note += "; quantize.py WeightOnlyInt8Linear for every nn.Linear (head included)"
        records.append({
            **tracer.record_head(rid, "tools/trace/hf_versions_generate.py (Tracker from shared/ground-truth/measure.py)"),
            "model": {"hf_config": hf, "params": params, "impl": "gpt-fast" if impl == "gpt-fast" else "hf-transformers"},
            "infer": infer,
            "software": sw,
            "measured_bytes": peak,
            "detail": detail,
            "notes": note,
        })
        print(rid, peak, detail, f"({time.time() - t0:.1f}s)", flush=True)
    tracer.write_records(a.out, records)


if __name__ == "__main__":
    main()
