"""CPU traces of greedy generate() with a KV cache, for docs/data/cpu_traced_inference.json.

/usr/bin/python3 docs/research/scripts/trace_inference.py OUT.json

The model is a plain-torch re-implementation of Hugging Face LlamaForCausalLM's eager path and
its generation loop as of transformers 4.44 (modeling_llama.py, cache_utils.py DynamicCache,
generation/utils.py _sample); `--v445` switches to the 4.45 loop (num_logits_to_keep=1, the
last position's logits cloned and upcast in generate, `del outputs`; transformers PR #31292).
Peaks are measured with tools/trace/tracer.py's Tracker, the harness's method (live tensor bytes
of the c10 CPU allocator, exact to the byte), with the model built inside the trace.
"""
import math, os, sys
import torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "trace"))
import tracer  # noqa: E402

torch.set_num_threads(1)


class RMSNorm(nn.Module):  # LlamaRMSNorm
    def __init__(self, h):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = 1e-6

    def forward(self, x):
        dt = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dt)


class Rotary(nn.Module):  # LlamaRotaryEmbedding (computed once per forward in LlamaModel, 4.44)
    def __init__(self, d):
        super().__init__()
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        self.register_buffer("inv_freq", inv, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv.float() @ pos.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos()
        sin = emb.sin()
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(q, k, cos, sin):
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(x, n):
    b, kvh, s, d = x.shape
    if n == 1:
        return x
    return x[:, :, None, :, :].expand(b, kvh, n, s, d).reshape(b, kvh * n, s, d)


class DynamicCache:  # cache_utils.py DynamicCache.update: append at prefill, torch.cat afterwards
    def __init__(self):
        self.k, self.v = [], []

    def seq_len(self):
        return self.k[0].shape[-2] if self.k else 0

    def update(self, k, v, i):
        if len(self.k) <= i:
            self.k.append(k)
            self.v.append(v)
        else:
            self.k[i] = torch.cat([self.k[i], k], dim=-2)
            self.v[i] = torch.cat([self.v[i], v], dim=-2)
        return self.k[i], self.v[i]


class Attention(nn.Module):  # LlamaAttention.forward (eager)
    def __init__(self, c, i):
        super().__init__()
        h, H, kv = c["hidden"], c["heads"], c["kv_heads"]
        self.H, self.kv, self.d, self.i = H, kv, h // H, i
        self.q_proj = nn.Linear(h, H * self.d, bias=False)
        self.k_proj = nn.Linear(h, kv * self.d, bias=False)
        self.v_proj = nn.Linear(h, kv * self.d, bias=False)
        self.o_proj = nn.Linear(H * self.d, h, bias=False)

    def forward(self, x, mask, cache, pe):
        b, s, _ = x.size()
        q = self.q_proj(x).view(b, s, self.H, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv, self.d).transpose(1, 2)
        cos, sin = pe
        q, k = apply_rotary(q, k, cos, sin)
        k, v = cache.update(k, v, self.i)
        k = repeat_kv(k, self.H // self.kv)
        v = repeat_kv(v, self.H // self.kv)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.d)
        w = w + mask[:, :, :, : k.shape[-2]]
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        w = F.dropout(w, p=0.0, training=False)
        o = torch.matmul(w, v)
        o = o.transpose(1, 2).contiguous().reshape(b, s, -1)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, f = c["hidden"], c["ffn"]
        self.gate_proj = nn.Linear(h, f, bias=False)
        self.up_proj = nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):  # LlamaDecoderLayer
    def __init__(self, c, i):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden"])
        self.self_attn = Attention(c, i)
        self.post_attention_layernorm = RMSNorm(c["hidden"])
        self.mlp = MLP(c)

    def forward(self, x, mask, cache, pe):
        residual = x
        x = self.input_layernorm(x)
        x = self.self_attn(x, mask, cache, pe)
        x = residual + x
        residual = x
        x = self.post_attention_layernorm(x)
        x = self.mlp(x)
        return residual + x


class Llama(nn.Module):  # LlamaForCausalLM
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab"], c["hidden"])
        self.layers = nn.ModuleList([Layer(c, i) for i in range(c["layers"])])
        self.norm = RMSNorm(c["hidden"])
        self.rotary_emb = Rotary(c["hidden"] // c["heads"])
        self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False)

    def causal_mask(self, attention_mask, x, cache_position, past):  # LlamaModel._update_causal_mask (eager)
        dtype = x.dtype
        mn = torch.finfo(dtype).min
        s = x.shape[1]
        t = attention_mask.shape[-1]
        m = torch.full((s, t), fill_value=mn, dtype=dtype)
        if s != 1:
            m = torch.triu(m, diagonal=1)
        m *= torch.arange(t) > cache_position.reshape(-1, 1)
        m = m[None, None, :, :].expand(x.shape[0], 1, -1, -1)
        m = m.clone()
        pad = m[:, :, :, :t] + attention_mask[:, None, None, :]
        pad = pad == 0
        m[:, :, :, :t] = m[:, :, :, :t].masked_fill(pad, mn)
        return m

    def decoder(self, input_ids, attention_mask, position_ids, cache_position, cache):  # LlamaModel.forward
        inputs_embeds = self.embed_tokens(input_ids)  # stays bound through the loop, as in HF
        mask = self.causal_mask(attention_mask, inputs_embeds, cache_position, cache)
        x = inputs_embeds
        pe = self.rotary_emb(x, position_ids)
        for layer in self.layers:
            x = layer(x, mask, cache, pe)
        return self.norm(x)

    def forward(self, input_ids, attention_mask, position_ids, cache_position, cache, keep=0):
        x = self.decoder(input_ids, attention_mask, position_ids, cache_position, cache)
        if keep:  # 4.45: num_logits_to_keep, no upcast without labels
            return self.lm_head(x[:, -keep:, :])
        logits = self.lm_head(x)
        return logits.float()


@torch.no_grad()
def generate(model, input_ids, new_tokens, v445, tr):
    """GenerationMixin._sample, greedy, with an all-ones attention mask as the tokenizer gives."""
    b, s = input_ids.shape
    attention_mask = torch.ones_like(input_ids)
    cache = DynamicCache()
    cache_position = torch.arange(s)
    unfinished = torch.ones(b, dtype=torch.long)
    logits = None
    for step in range(new_tokens):
        # prepare_inputs_for_generation
        ids = input_ids if step == 0 else input_ids[:, cache_position]
        position_ids = attention_mask.long().cumsum(-1) - 1
        position_ids.masked_fill_(attention_mask == 0, 1)
        position_ids = position_ids[:, -ids.shape[1]:].clone(memory_format=torch.contiguous_format)
        if v445:
            out = model(ids, attention_mask, position_ids, cache_position, cache, keep=1)
            next_logits = out[:, -1, :].clone().float()
            del out
        else:
            logits = model(ids, attention_mask, position_ids, cache_position, cache)  # `outputs` lives on
            next_logits = logits[:, -1, :]
        next_tokens = torch.argmax(next_logits, dim=-1)
        next_tokens = next_tokens * unfinished  # pad_token_id 0
        input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones((b, 1))], dim=-1)
        cache_position = cache_position[-1:] + 1
        tr.mark(f"step{step}")
    return input_ids


# ---------------------------------------------------------------------------------------
# GPT-2 (modeling_gpt2.py, transformers 4.44: legacy tuple cache, no logits upcast)
# ---------------------------------------------------------------------------------------
class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf).normal_(std=0.02))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, h, nh, max_pos):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones((max_pos, max_pos), dtype=torch.bool)).view(1, 1, max_pos, max_pos),
                             persistent=False)
        self.nh, self.hd, self.split = nh, h // nh, h
        self.c_attn = Conv1D(3 * h, h)
        self.c_proj = Conv1D(h, h)

    def _split_heads(self, t):
        return t.view(t.size()[:-1] + (self.nh, self.hd)).permute(0, 2, 1, 3)

    def _attn(self, q, k, v, attention_mask):
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype)
        ql, kl = q.size(-2), k.size(-2)
        causal = self.bias[:, :, kl - ql: kl, :kl]
        mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype)
        w = torch.where(causal, w.to(w.dtype), mask_value)
        w = w + attention_mask
        w = F.softmax(w, dim=-1)
        w = w.type(v.dtype)
        return torch.matmul(w, v)

    def forward(self, x, layer_past, attention_mask):
        q, k, v = self.c_attn(x).split(self.split, dim=2)
        q, k, v = self._split_heads(q), self._split_heads(k), self._split_heads(v)
        if layer_past is not None:
            past_key, past_value = layer_past
            k = torch.cat((past_key, k), dim=-2)
            v = torch.cat((past_value, v), dim=-2)
        present = (k, v)
        o = self._attn(q, k, v, attention_mask)
        o = o.permute(0, 2, 1, 3).contiguous()
        o = o.view(o.size()[:-2] + (self.nh * self.hd,))
        return self.c_proj(o), present


class GPT2Block(nn.Module):
    def __init__(self, h, nh, max_pos):
        super().__init__()
        self.ln_1 = nn.LayerNorm(h)
        self.attn = GPT2Attention(h, nh, max_pos)
        self.ln_2 = nn.LayerNorm(h)
        self.c_fc = Conv1D(4 * h, h)
        self.c_proj = Conv1D(h, 4 * h)

    def forward(self, x, layer_past, attention_mask):
        residual = x
        a, present = self.attn(self.ln_1(x), layer_past, attention_mask)
        x = a + residual
        residual = x
        x = self.c_proj(gelu_new(self.c_fc(self.ln_2(x))))
        return residual + x, present


class GPT2(nn.Module):  # GPT2LMHeadModel
    def __init__(self, c):
        super().__init__()
        h = c["hidden"]
        self.wte = nn.Embedding(c["vocab"], h)
        self.wpe = nn.Embedding(c["max_pos"], h)
        self.h = nn.ModuleList([GPT2Block(h, c["heads"], c["max_pos"]) for _ in range(c["layers"])])
        self.ln_f = nn.LayerNorm(h)
        self.lm_head = nn.Linear(h, c["vocab"], bias=False)
        self.lm_head.weight = self.wte.weight

    def decoder(self, input_ids, past, attention_mask, position_ids):  # GPT2Model.forward
        if past is None:
            past = tuple([None] * len(self.h))
        b = input_ids.shape[0]
        attention_mask = attention_mask.view(b, -1)[:, None, None, :]
        attention_mask = attention_mask.to(dtype=self.wte.weight.dtype)
        attention_mask = (1.0 - attention_mask) * torch.finfo(self.wte.weight.dtype).min
        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        x = inputs_embeds + position_embeds
        presents = ()
        for block, layer_past in zip(self.h, past):
            x, present = block(x, layer_past, attention_mask)
            presents = presents + (present,)
        x = self.ln_f(x)
        return x, presents

    def forward(self, input_ids, past, attention_mask, position_ids):
        x, presents = self.decoder(input_ids, past, attention_mask, position_ids)
        return self.lm_head(x), presents


@torch.no_grad()
def generate_gpt2(model, input_ids, new_tokens, tr):
    """GenerationMixin._sample with GPT-2's legacy tuple cache (model_kwargs and `outputs`
    both hold the previous step's tuples while the next forward builds new ones)."""
    b = input_ids.shape[0]
    attention_mask = torch.ones_like(input_ids)
    past = None
    unfinished = torch.ones(b, dtype=torch.long)
    outputs = None
    for step in range(new_tokens):
        # GPT2LMHeadModel.prepare_inputs_for_generation
        ids = input_ids if past is None else input_ids[:, -1:]
        position_ids = attention_mask.long().cumsum(-1) - 1
        position_ids.masked_fill_(attention_mask == 0, 1)
        if past is not None:
            position_ids = position_ids[:, -ids.shape[1]:]
        outputs = model(ids, past, attention_mask, position_ids)
        next_logits = outputs[0][:, -1, :]
        next_tokens = torch.argmax(next_logits, dim=-1)
        next_tokens = next_tokens * unfinished
        input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
        past = outputs[1]
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones((b, 1))], dim=-1)
        tr.mark(f"step{step}")
    return input_ids


def trace(c, batch, context, new_tokens, dtype, v445):
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        model = (GPT2(c) if c.get("family") == "gpt2" else Llama(c)).eval()
        if dtype == "bf16":
            model = model.to(torch.bfloat16)
        tr.mark("built")
        ids = torch.randint(0, c["vocab"], (batch, context))
        tr.mark("inputs")
        if c.get("family") == "gpt2":
            out = generate_gpt2(model, ids, new_tokens, tr)
        else:
            out = generate(model, ids, new_tokens, v445, tr)
        tr.mark("done")
        del out, ids, model
    params = tracer.parameter_count(GPT2(c) if c.get("family") == "gpt2" else Llama(c))
    detail = {"built": tr.live("built"), "prefill_peak": tr.peak("inputs", "step0")}
    if new_tokens > 1:
        detail["decode_peak"] = tr.peak("step0", f"step{new_tokens - 1}")
        detail["first_decode_peak"] = tr.peak("step0", "step1")
    return params, tr.peak("inputs", "done"), detail


def main():
    out_path = sys.argv[1]
    base = dict(layers=4, hidden=512, heads=8, kv_heads=8, ffn=1376, vocab=32000, max_pos=4096)
    gqa = dict(base, kv_heads=2)
    small_vocab = dict(base, vocab=4096)
    gpt2 = dict(family="gpt2", layers=4, hidden=512, heads=8, kv_heads=8, ffn=2048, vocab=50257, max_pos=1024)
    cases = [
        (gpt2, "gpt2", 1, 128, 16, "fp32", False),
        (gpt2, "gpt2", 4, 256, 32, "fp32", False),
        (gpt2, "gpt2", 8, 64, 128, "fp32", False),
        (gpt2, "gpt2", 2, 512, 8, "bf16", False),
        # (config, name, batch, context, new tokens, dtype, transformers 4.45 loop)
        (base, "mha", 1, 128, 16, "fp32", False),
        (base, "mha", 4, 512, 8, "fp32", False),
        (base, "mha", 2, 1024, 4, "fp32", False),
        (base, "mha", 8, 64, 64, "fp32", False),
        (gqa, "gqa", 4, 512, 8, "fp32", False),
        (gqa, "gqa", 1, 2048, 4, "fp32", False),
        (small_vocab, "v4k", 2, 1024, 8, "fp32", False),
        (small_vocab, "v4k", 16, 32, 128, "fp32", False),
        (base, "mha", 2, 256, 8, "bf16", False),
        (gqa, "gqa", 2, 512, 8, "bf16", False),
        (base, "mha", 4, 512, 8, "fp32", True),
        (gqa, "gqa", 2, 1024, 16, "fp32", True),
        (small_vocab, "v4k", 8, 128, 96, "fp32", True),
    ]
    records = []
    for c, name, b, s, n, dt, v445 in cases:
        params, peak, detail = trace(c, b, s, n, dt, v445)
        tv = "4.45.0" if v445 else "4.44.2"
        fam = c.get("family", "llama")
        rid = f"cpu-infer-{'' if fam == 'gpt2' else 'llama-'}{name}-b{b}-c{s}-n{n}-{dt}" + ("-tf445" if v445 else "")
        records.append({
            **tracer.record_head(rid, "docs/research/scripts/trace_inference.py (Tracker from shared/ground-truth/measure.py)"),
            "model": ({"family": "gpt2", "name": "GPT-2-style (plain-torch GPT2LMHeadModel eager)", "params": params,
                       "layers": c["layers"], "hidden": c["hidden"], "heads": c["heads"], "kv_heads": c["kv_heads"],
                       "ffn": c["ffn"], "vocab": c["vocab"], "max_pos": c["max_pos"], "tied_embeddings": True,
                       "activation": "gelu", "norm": "layernorm", "impl": "hf-transformers"} if fam == "gpt2" else
                      {"family": "llama", "name": "LLaMA-style (plain-torch LlamaForCausalLM eager)", "params": params,
                       "layers": c["layers"], "hidden": c["hidden"], "heads": c["heads"], "kv_heads": c["kv_heads"],
                       "ffn": c["ffn"], "vocab": c["vocab"], "max_pos": c["max_pos"], "tied_embeddings": False,
                       "activation": "swiglu", "norm": "rmsnorm", "impl": "hf-transformers"}),
            "infer": {"batch": b, "context": s, "new_tokens": n, "dtype": dt, "kv_dtype": dt, "kv_cache": "dynamic",
                      "attention": "eager", "weights": dt},
            "software": {"torch": torch.__version__, "transformers": tv},
            "measured_bytes": peak,
            "detail": detail,
            "notes": "peak live tensor bytes from model construction to the end of generate (greedy, no_grad)",
        })
        print(rid, peak, detail, flush=True)
    tracer.write_records(out_path, records)


if __name__ == "__main__":
    main()
