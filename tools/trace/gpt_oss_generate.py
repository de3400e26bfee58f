#!/usr/bin/python3
"""CPU traces of a small gpt-oss in a greedy generate(), in eval mode under torch.no_grad.

Written from transformers models/gpt_oss/modeling_gpt_oss.py@00d4b3d2 (the 4.55-4.57 file) over the
families_2025.py gpt_oss modules (their parameters; the forward below replaces theirs):
- GptOssExperts.forward with `self.training` false: every expert on every token,
  hidden_states.repeat(num_experts, 1), torch.bmm with gate_up_proj + bias, the clamped SwiGLU,
  torch.bmm with down_proj + bias, times routing_weights.transpose(0, 1), summed over the experts;
  GptOssTopKRouter: topk, softmax in the logits' dtype, scattered into zeros_like(logits).
- eager_attention_forward with sinks: the sink column concatenated to the masked scores, minus
  the row max, softmax in the scores' dtype, probs[..., :-1] times the values; the attention
  returns (attn_output, attn_weights) and GptOssDecoderLayer binds the weights to `_` until the
  MLP's (output, router_scores) rebinds it.
- GptOssModel.forward: both masks every forward (create_causal_mask and
  create_sliding_window_causal_mask: eager (b, 1, q, kv) additive masks, the sliding one over the
  keys its layer's cache hands back), the rotary cos and sin of the positions.
- the cache: DynamicCache(config) as generate() builds it, a DynamicLayer for each full_attention
  layer and a DynamicSlidingWindowLayer for each sliding_attention one (transformers
  cache_utils.py@004999d9: torch.cat([keys, new]) from an empty tensor; the sliding layer keeps the
  view [:, :, -window + 1:] of the cat and returns the cat whole).
- GenerationMixin._sample (4.45 and later): logits of the last position only (logits_to_keep=1),
  copied to fp32, `del outputs`; the input ids and the int64 attention mask grow by torch.cat.
Records go to docs/data/cpu_traced_inference.json (appended by the caller).

Run from the repository root (under a minute of CPU time, one thread):
    /usr/bin/python3 tools/trace/gpt_oss_generate.py --out /tmp/gpt_oss_gen.json
"""
import argparse
import copy

import torch
import torch.nn.functional as F

import families_2025 as fam
import tracer

torch.set_num_threads(1)

SOURCE = "tools/trace/gpt_oss_generate.py (Tracker from shared/ground-truth/measure.py)"


class DynamicLayer:  # cache_utils.py@004999d9 DynamicLayer.update
    def __init__(self):
        self.keys = self.values = None

    def update(self, k, v):
        if self.keys is None:
            self.keys = torch.tensor([], dtype=k.dtype)
            self.values = torch.tensor([], dtype=v.dtype)
        self.keys = torch.cat([self.keys, k], dim=-2)
        self.values = torch.cat([self.values, v], dim=-2)
        return self.keys, self.values


class DynamicSlidingWindowLayer(DynamicLayer):  # cache_utils.py@004999d9
    def __init__(self, window):
        super().__init__()
        self.window = window
        self.cumulative = 0

    def update(self, k, v):
        if self.keys is None:
            self.keys = torch.tensor([], dtype=k.dtype)
            self.values = torch.tensor([], dtype=v.dtype)
        self.cumulative += k.shape[-2]
        full_k = torch.cat([self.keys, k], dim=-2)
        full_v = torch.cat([self.values, v], dim=-2)
        self.keys = full_k[:, :, -self.window + 1:, :]
        self.values = full_v[:, :, -self.window + 1:, :]
        return full_k, full_v

    def mask_length(self, q):  # get_mask_sizes: (kv_length, kv_offset)
        if self.cumulative >= self.window:
            return self.window - 1 + q, max(self.cumulative - self.window + 1, 0)
        return self.cumulative + q, 0


def eager_mask(B, q, past, kv_length, kv_offset, dtype, window=None):
    """The eager (B, 1, q, kv_length) additive mask: 0 where the key is visible, finfo.min elsewhere."""
    i = torch.arange(past, past + q)[:, None]
    j = torch.arange(kv_offset, kv_offset + kv_length)[None, :]
    ok = j <= i
    if window is not None:
        ok = ok & (i - j < window)
    m = torch.zeros((q, kv_length), dtype=dtype).masked_fill(~ok, torch.finfo(dtype).min)
    return m[None, None].expand(B, 1, q, kv_length).clone()


def rotary(head_dim, positions, theta, dtype):  # GptOssRotaryEmbedding.forward: emb = freqs, no cat
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    freqs = (inv[None, :, None].float().expand(positions.shape[0], -1, 1) @ positions[:, None, :].float()).transpose(1, 2)
    return freqs.cos().to(dtype), freqs.sin().to(dtype)


def attention(a, x, cos, sin, mask, layer_cache):  # GptOssAttention.forward, eager_attention_forward
    B, S, _ = x.shape
    shape = (B, S, -1, a.hd)
    query_states = a.q_proj(x).view(shape).transpose(1, 2)
    key_states = a.k_proj(x).view(shape).transpose(1, 2)
    value_states = a.v_proj(x).view(shape).transpose(1, 2)
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    query_states, key_states = fam.gpt_oss_rotary(query_states, c, s), fam.gpt_oss_rotary(key_states, c, s)
    key_states, value_states = layer_cache.update(key_states, value_states)
    n = a.nh // a.nkv
    key_states, value_states = fam.repeat_kv(key_states, n), fam.repeat_kv(value_states, n)
    attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * a.scaling
    attn_weights = attn_weights + mask[:, :, :, : key_states.shape[-2]]
    sinks = a.sinks.reshape(1, -1, 1, 1).expand(query_states.shape[0], -1, query_states.shape[-2], -1)
    combined_logits = torch.cat([attn_weights, sinks], dim=-1)
    combined_logits = combined_logits - combined_logits.max(dim=-1, keepdim=True).values
    probs = F.softmax(combined_logits, dim=-1, dtype=combined_logits.dtype)
    scores = probs[..., :-1]
    attn_weights = F.dropout(scores, p=0.0, training=False)
    attn_output = torch.matmul(attn_weights, value_states)
    attn_output = attn_output.transpose(1, 2).contiguous()
    attn_output = attn_output.reshape(B, S, -1).contiguous()
    return a.o_proj(attn_output), attn_weights


def experts(e, hidden_states, routing_weights):  # GptOssExperts.forward, the branch without training
    batch_size = hidden_states.shape[0]
    hidden_states = hidden_states.reshape(-1, e.h)
    num_experts = routing_weights.shape[1]
    hidden_states = hidden_states.repeat(num_experts, 1)
    hidden_states = hidden_states.view(num_experts, -1, e.h)
    gate_up = torch.bmm(hidden_states, e.gate_up_proj) + e.gate_up_proj_bias[..., None, :]
    gate, up = gate_up[..., ::2], gate_up[..., 1::2]
    gate = gate.clamp(min=None, max=e.limit)
    up = up.clamp(min=-e.limit, max=e.limit)
    glu = gate * torch.sigmoid(gate * e.alpha)
    next_states = torch.bmm(((up + 1) * glu), e.down_proj)
    next_states = next_states + e.down_proj_bias[..., None, :]
    next_states = next_states.view(num_experts, batch_size, -1, e.h)
    next_states = next_states * routing_weights.transpose(0, 1).view(num_experts, batch_size, -1)[..., None]
    next_states = next_states.sum(dim=0)
    return next_states


def mlp(layer, hidden_states):  # GptOssMLP.forward
    router_scores, router_indices = layer.router(hidden_states)
    routed_out = experts(layer.experts, hidden_states, router_scores)
    return routed_out, router_scores


def decoder_layer(layer, hidden_states, cos, sin, mask, layer_cache):  # GptOssDecoderLayer.forward
    residual = hidden_states
    hidden_states = layer.input_layernorm(hidden_states)
    hidden_states, _ = attention(layer.self_attn, hidden_states, cos, sin, mask, layer_cache)
    hidden_states = residual + hidden_states
    residual = hidden_states
    hidden_states = layer.post_attention_layernorm(hidden_states)
    hidden_states, _ = mlp(layer, hidden_states)
    hidden_states = residual + hidden_states
    return hidden_states


def forward(model, ids, past, cache):  # GptOssForCausalLM.forward with logits_to_keep=1
    c = model.c
    B, S = ids.shape
    x = model.embed_tokens(ids)
    positions = torch.arange(past, past + S)[None]
    full = eager_mask(B, S, past, past + S, 0, x.dtype)
    sliding_layer = next(layer for layer in cache if isinstance(layer, DynamicSlidingWindowLayer))
    kv_length, kv_offset = sliding_layer.mask_length(S)
    masks = {"full_attention": full,
             "sliding_attention": eager_mask(B, S, past, kv_length, kv_offset, x.dtype, window=c["sliding_window"])}
    cos, sin = rotary(c["head_dim"], positions, c.get("rope_theta", 150000.0), x.dtype)
    for i, layer in enumerate(model.layers):
        x = decoder_layer(layer, x, cos, sin, masks[layer.kind], cache[i])
    x = model.norm(x)
    return model.lm_head(x[:, -1:, :])


@torch.no_grad()
def generate(model, ids, new_tokens, tr):  # GenerationMixin._sample, greedy, 4.45 and later
    c = model.c
    cache = [DynamicSlidingWindowLayer(c["sliding_window"]) if t == "sliding_attention" else DynamicLayer()
             for t in c["layer_types"]]
    attention_mask = torch.ones_like(ids)
    past = 0
    step_ids = ids
    for step in range(new_tokens):
        out = forward(model, step_ids, past, cache)
        next_logits = out[:, -1, :].to(copy=True, dtype=torch.float32)
        del out
        next_tokens = torch.argmax(next_logits, dim=-1)
        past += step_ids.shape[1]
        ids = torch.cat([ids, next_tokens[:, None]], dim=-1)
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones((attention_mask.shape[0], 1))], dim=-1)
        step_ids = ids[:, -1:]
        tr.mark(f"step{step}")
    return ids


def generate_case(c, B, context, new_tokens):
    params, measured, detail = tracer.traced_generate(lambda: fam.build(c), c["vocab_size"], B, context, new_tokens,
                                                      generate)
    return {
        **tracer.record_head(f"cpu-infer-gpt_oss-small-b{B}-c{context}-n{new_tokens}-fp32", SOURCE),
        "model": {"hf_config": c, "params": params},
        "infer": {"batch": B, "context": context, "new_tokens": new_tokens, "dtype": "fp32", "kv_dtype": "fp32",
                  "kv_cache": "dynamic", "attention": "eager", "weights": "fp32"},
        "software": {"torch": torch.__version__, "transformers": "4.56.0"},
        "measured_bytes": measured,
        "detail": detail,
        "notes": "peak live tensor bytes from model construction to the end of generate (greedy, no_grad); the "
                 "families_2025.py gpt-oss (sinks, alternating sliding window of 128, 8 experts run on every token "
                 "by bmm) with a DynamicCache of DynamicLayer and DynamicSlidingWindowLayer layers",
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    c = copy.deepcopy(fam.CONFIGS["gpt_oss"])
    gen = []
    # A prompt longer than the window (the prefill holds it whole, decoding shrinks the sliding
    # layers), one that crosses the window while decoding, and a wider batch.
    for B, ctx, n in ((1, 256, 8), (2, 96, 48), (4, 200, 4)):
        gen.append(generate_case(c, B, ctx, n))
        print(gen[-1]["id"], gen[-1]["measured_bytes"], gen[-1]["detail"], flush=True)
    tracer.write_records(a.out, gen, final_newline=True)


if __name__ == "__main__":
    main()
