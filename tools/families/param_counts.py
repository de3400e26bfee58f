#!/usr/bin/env python3
"""Exact parameter counts of the 2025 Hugging Face families, from a config.json alone.

Each count is sum(p.numel() for p in model.parameters()) of the transformers class named by
the family (XForCausalLM), written from its Config defaults and the shapes its modeling file
gives every nn.Parameter; docs/research/families-2025.md cites the file@commit of each
formula.  Standard library only (no torch): the readers in include/memscale/json/hf/ must
reproduce these numbers, and tests/data/hf_configs/README.md lists the model-card checks.

    python3 tools/families/param_counts.py                      # every config below, with the card check
    python3 tools/families/param_counts.py tests/data/hf_configs/families-2025/openai--gpt-oss-20b.json
"""
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "..", "..", "tests", "data", "hf_configs", "families-2025")


def g(c, key, default):
    """config[key] with the Config class default for an absent or null key."""
    v = c.get(key)
    return default if v is None else v


# ---------------------------------------------------------------------------- shared pieces
def linear(i, o, bias=False):
    return i * o + (o if bias else 0)


def gated_mlp(h, f, bias=False):  # gate_proj, up_proj, down_proj (LlamaMLP)
    return 2 * linear(h, f, bias) + linear(f, h, bias)


def embeddings_and_head(c, h, tie_default):
    v = c["vocab_size"]
    tied = g(c, "tie_word_embeddings", tie_default)
    return v * h * (1 if tied else 2)


def gqa_attention(h, heads, kv, hd, qkv_bias=False, o_bias=False):
    return linear(h, heads * hd, qkv_bias) + 2 * linear(h, kv * hd, qkv_bias) + linear(heads * hd, h, o_bias)


# ---------------------------------------------------------------------------- DeepSeek V2 / V3
def mla_attention(c, h, d):
    """DeepseekV2Attention / DeepseekV3Attention.__init__."""
    heads = g(c, "num_attention_heads", d["heads"])
    q_rank = c.get("q_lora_rank", d["q_lora_rank"]) if "q_lora_rank" in c else d["q_lora_rank"]
    kv_rank = g(c, "kv_lora_rank", 512)
    nope = g(c, "qk_nope_head_dim", 128)
    rope = g(c, "qk_rope_head_dim", 64)
    v = g(c, "v_head_dim", 128)
    bias = g(c, "attention_bias", False)
    qk = nope + rope
    n = 0
    if q_rank is None:
        n += linear(h, heads * qk)  # q_proj(bias=False)
    else:
        n += linear(h, q_rank, bias) + q_rank + linear(q_rank, heads * qk)  # q_a_proj, q_a_layernorm, q_b_proj
    n += linear(h, kv_rank + rope, bias) + kv_rank  # kv_a_proj_with_mqa, kv_a_layernorm
    n += linear(kv_rank, heads * (nope + v))  # kv_b_proj
    n += linear(heads * v, h, bias)  # o_proj
    return n


def deepseek(c, version):
    d = {"heads": 32, "q_lora_rank": 1536} if version == 2 else {"heads": 128, "q_lora_rank": 1536}
    defaults = {  # DeepseekV2Config / DeepseekV3Config
        2: dict(h=4096, f=11008, moe_f=1407, layers=32, routed=64, shared=2, dense=0, vocab=32000),
        3: dict(h=7168, f=18432, moe_f=2048, layers=61, routed=256, shared=1, dense=3, vocab=129280),
    }[version]
    h = g(c, "hidden_size", defaults["h"])
    L = g(c, "num_hidden_layers", defaults["layers"])
    f = g(c, "intermediate_size", defaults["f"])
    mf = g(c, "moe_intermediate_size", defaults["moe_f"])
    E = g(c, "n_routed_experts", defaults["routed"])
    shared = g(c, "n_shared_experts", defaults["shared"])
    dense = min(g(c, "first_k_dense_replace", defaults["dense"]), L)
    attn = mla_attention(c, h, d)
    norms = 2 * h
    dense_layer = attn + norms + gated_mlp(h, f)
    # V2: gate = nn.Linear(h, E, bias=False); V3: DeepseekV3TopkRouter.weight (E, h) plus the
    # e_score_correction_bias buffer (not a parameter).
    moe_layer = attn + norms + E * gated_mlp(h, mf) + E * h + gated_mlp(h, mf * shared)
    c2 = dict(c, vocab_size=g(c, "vocab_size", defaults["vocab"]))
    total = dense * dense_layer + (L - dense) * moe_layer + embeddings_and_head(c2, h, False) + h
    # Activated per token, as DeepSeek counts it (2.4B V2-Lite, 37B V3): without the input
    # embedding, with the head and the num_experts_per_tok routed experts of each MoE layer.
    out = {"total": total, "dense_layer": dense_layer, "moe_layer": moe_layer,
           "active_per_token": total - c2["vocab_size"] * h
           - (L - dense) * (E - g(c, "num_experts_per_tok", 0)) * gated_mlp(h, mf)}
    mtp = g(c, "num_nextn_predict_layers", 0)
    if mtp:
        # DeepSeek-V3 README_WEIGHTS.md: each MTP module holds embed_tokens, enorm, hnorm, eh_proj
        # (2h -> h), one decoder layer like the main model's MoE layers, and shared_head (norm,
        # head). transformers' DeepseekV3Model does not build it: _keys_to_ignore_on_load_unexpected
        # = [r"model\.layers\.61.*"] drops it on load.
        per = moe_layer + 2 * h + linear(2 * h, h) + h + 2 * c2["vocab_size"] * h
        out["mtp_in_checkpoint"] = mtp * per
    q = c.get("quantization_config") or {}
    if q.get("quant_method") == "fp8" and q.get("weight_block_size"):
        out["fp8_scale_inv_elements"] = deepseek_fp8_scales(c, h, d, L, dense, f, mf, E, shared, mtp, q["weight_block_size"])
    out["checkpoint_total"] = total + out.get("mtp_in_checkpoint", 0) + out.get("fp8_scale_inv_elements", 0)
    return out


def deepseek_fp8_scales(c, h, d, L, dense, f, mf, E, shared, mtp, block):
    """weight_scale_inv tensors of the block-fp8 checkpoint: one fp32 per block of every
    quantized Linear (attention projections, experts, shared experts, dense MLPs; not the
    router, norms, embeddings or head)."""
    bo, bi = block

    def s(i, o):
        return math.ceil(o / bo) * math.ceil(i / bi)

    heads = g(c, "num_attention_heads", d["heads"])
    q_rank = c.get("q_lora_rank", d["q_lora_rank"])
    kv_rank = g(c, "kv_lora_rank", 512)
    nope, rope, v = g(c, "qk_nope_head_dim", 128), g(c, "qk_rope_head_dim", 64), g(c, "v_head_dim", 128)
    attn = (s(h, heads * (nope + rope)) if q_rank is None else s(h, q_rank) + s(q_rank, heads * (nope + rope)))
    attn += s(h, kv_rank + rope) + s(kv_rank, heads * (nope + v)) + s(heads * v, h)

    def mlp(ff):
        return 2 * s(h, ff) + s(ff, h)

    moe = attn + E * mlp(mf) + mlp(mf * shared)
    total = dense * (attn + mlp(f)) + (L - dense) * moe
    total += mtp * (moe + s(2 * h, h))
    return total


# ---------------------------------------------------------------------------- gpt-oss
def gpt_oss(c):
    """GptOssForCausalLM in its dequantized (bf16) form; MXFP4 changes the stored bytes, not the count."""
    h = g(c, "hidden_size", 2880)
    L = g(c, "num_hidden_layers", 36)
    heads = g(c, "num_attention_heads", 64)
    kv = g(c, "num_key_value_heads", 8)
    hd = g(c, "head_dim", 64)
    E = g(c, "num_local_experts", 128)
    f = g(c, "intermediate_size", 2880)
    bias = g(c, "attention_bias", True)
    attn = gqa_attention(h, heads, kv, hd, bias, bias) + heads  # + sinks (num_attention_heads,)
    router = E * h + E  # GptOssTopKRouter weight and bias
    experts = E * (h * 2 * f + 2 * f + f * h + h)  # gate_up_proj(+bias), down_proj(+bias)
    layer = attn + 2 * h + router + experts
    c2 = dict(c, vocab_size=g(c, "vocab_size", 201088))
    out = {"total": L * layer + embeddings_and_head(c2, h, False) + h, "layer": layer,
           "expert_weights": L * E * (h * 2 * f + f * h)}
    k = g(c, "num_experts_per_tok", 4)
    # OpenAI's model card counts active parameters without the input embedding (3.61B / 5.13B)
    out["active_per_token"] = out["total"] - c2["vocab_size"] * h - L * (E - k) * (h * 2 * f + 2 * f + f * h + h)
    return out


def mxfp4_expert_bytes(c):
    """Bytes of the *_blocks (uint8, two e2m1 values per byte) and *_scales (one e8m0 byte per
    32 values) tensors that hold gpt-oss expert weights on disk (integrations/mxfp4.py)."""
    r = gpt_oss(c)
    n = r["expert_weights"]
    return n // 2 + n // 32


# ---------------------------------------------------------------------------- Llama 4 (text)
def llama4_text(c):
    t = c.get("text_config", c)
    h = g(t, "hidden_size", 5120)
    L = g(t, "num_hidden_layers", 48)
    heads = g(t, "num_attention_heads", 40)
    kv = g(t, "num_key_value_heads", 8)
    hd = g(t, "head_dim", 128)
    f = g(t, "intermediate_size", 8192)
    f_mlp = g(t, "intermediate_size_mlp", 16384)
    E = g(t, "num_local_experts", 16)
    step = g(t, "interleave_moe_layer_step", 1)
    moe_layers = t.get("moe_layers")
    if moe_layers is None:
        moe_layers = list(range(step - 1, L, step))
    bias = g(t, "attention_bias", False)
    attn = gqa_attention(h, heads, kv, hd, bias, bias)  # Llama4TextL2Norm has no weight
    moe = E * (h * 2 * f + f * h) + E * h + gated_mlp(h, f)  # experts, router, shared_expert
    dense = gated_mlp(h, f_mlp)
    n_moe = len([i for i in moe_layers if i < L])
    t2 = dict(t, vocab_size=g(t, "vocab_size", 202048))
    total = L * (attn + 2 * h) + n_moe * moe + (L - n_moe) * dense + embeddings_and_head(t2, h, False) + h
    return {"total": total, "moe_layers": n_moe, "dense_layers": L - n_moe}


def llama4_vision(c):
    """Llama4VisionModel + Llama4MultiModalProjector (for the whole-checkpoint check only)."""
    v = c["vision_config"]
    t = c["text_config"]
    h = v["hidden_size"]
    f = v["intermediate_size"]
    L = v["num_hidden_layers"]
    p = v["patch_size"]
    ch = v.get("num_channels", 3)
    grid = (v["image_size"] // p) ** 2
    layer = 4 * linear(h, h, True) + linear(h, f, True) + linear(f, h, True) + 4 * h
    n = L * layer + h + (grid + 1) * h + ch * p * p * h + 4 * h  # class_embedding, positional_embedding_vlm, patch_embedding, layernorm_pre/post
    # Llama4VisionPixelShuffleMLP -> Llama4VisionMLP2: fc1 (intermediate_size -> projector_input_dim),
    # fc2 (projector_output_dim -> projector_output_dim), both bias=False
    n += v["intermediate_size"] * v["projector_input_dim"] + v["projector_output_dim"] * v["projector_output_dim"]
    n += v["vision_output_dim"] * t["hidden_size"]  # multi_modal_projector.linear_1 (bias=False)
    return n


# ---------------------------------------------------------------------------- others
def phimoe(c):
    h = g(c, "hidden_size", 4096)
    L = g(c, "num_hidden_layers", 32)
    heads = g(c, "num_attention_heads", 32)
    kv = g(c, "num_key_value_heads", 8)
    hd = h // heads
    f = g(c, "intermediate_size", 6400)
    E = g(c, "num_local_experts", 16)
    bias = g(c, "attention_bias", False)
    layer = gqa_attention(h, heads, kv, hd, bias, bias) + 4 * h + E * gated_mlp(h, f) + E * h  # 2 LayerNorms (w+b)
    c2 = dict(c, vocab_size=g(c, "vocab_size", 32064))
    total = L * layer + embeddings_and_head(c2, h, False) + 2 * h  # final LayerNorm (w+b)
    if g(c, "lm_head_bias", False):
        total += c2["vocab_size"]
    return {"total": total}


def olmoe(c):
    h = g(c, "hidden_size", 2048)
    L = g(c, "num_hidden_layers", 16)
    heads = g(c, "num_attention_heads", 16)
    kv = g(c, "num_key_value_heads", heads)
    hd = h // heads
    f = g(c, "intermediate_size", 2048)
    E = g(c, "num_experts", 64)
    bias = g(c, "attention_bias", False)
    attn = gqa_attention(h, heads, kv, hd, bias, bias) + h + kv * hd  # q_norm(hidden), k_norm(kv*hd)
    layer = attn + 2 * h + E * gated_mlp(h, f) + E * h
    c2 = dict(c, vocab_size=g(c, "vocab_size", 50304))
    return {"total": L * layer + embeddings_and_head(c2, h, False) + h}


def granite(c):
    h = g(c, "hidden_size", 4096)
    L = g(c, "num_hidden_layers", 32)
    heads = g(c, "num_attention_heads", 32)
    kv = g(c, "num_key_value_heads", heads)
    hd = h // heads
    f = g(c, "intermediate_size", 11008)
    ab, mb = g(c, "attention_bias", False), g(c, "mlp_bias", False)
    layer = gqa_attention(h, heads, kv, hd, ab, ab) + gated_mlp(h, f, mb) + 2 * h
    c2 = dict(c, vocab_size=g(c, "vocab_size", 32000))
    # embedding_multiplier, residual_multiplier, attention_multiplier, logits_scaling: floats, no tensors
    return {"total": L * layer + embeddings_and_head(c2, h, False) + h}


def granitemoe(c, shared=False):
    h = g(c, "hidden_size", 4096)
    L = g(c, "num_hidden_layers", 32)
    heads = g(c, "num_attention_heads", 32)
    kv = g(c, "num_key_value_heads", heads)
    hd = h // heads
    f = g(c, "intermediate_size", 11008)
    E = g(c, "num_local_experts", 8)
    ab = g(c, "attention_bias", False)
    # GraniteMoeParallelExperts input_linear (E, 2f, h), output_linear (E, h, f); router Linear(h, E, bias=False)
    layer = gqa_attention(h, heads, kv, hd, ab, ab) + 2 * h + E * (2 * f * h + h * f) + E * h
    if shared:
        s = g(c, "shared_intermediate_size", 0)
        if s:
            layer += h * 2 * s + s * h  # GraniteMoeSharedMLP input_linear (h -> 2s), output_linear (s -> h), no bias
    c2 = dict(c, vocab_size=g(c, "vocab_size", 32000))
    return {"total": L * layer + embeddings_and_head(c2, h, False) + h}


def cohere(c, version=1):
    d = {1: dict(h=8192, f=22528, L=40, H=64, V=256000), 2: dict(h=8192, f=22528, L=40, H=64, V=256000)}[version]  # Cohere2Config = CohereConfig sizes
    h = g(c, "hidden_size", d["h"])
    L = g(c, "num_hidden_layers", d["L"])
    heads = g(c, "num_attention_heads", d["H"])
    kv = g(c, "num_key_value_heads", heads)
    hd = h // heads
    f = g(c, "intermediate_size", d["f"])
    ab = g(c, "attention_bias", False)
    layer = gqa_attention(h, heads, kv, hd, ab, ab) + gated_mlp(h, f) + h  # one CohereLayerNorm (weight only)
    if version == 1 and g(c, "use_qk_norm", False):
        layer += heads * hd + kv * hd  # CohereLayerNorm((heads, head_dim)) and ((kv, head_dim)) weights
    c2 = dict(c, vocab_size=g(c, "vocab_size", d["V"]))
    return {"total": L * layer + embeddings_and_head(c2, h, True) + h}


def internlm2(c):
    h = g(c, "hidden_size", 4096)
    L = g(c, "num_hidden_layers", 32)
    heads = g(c, "num_attention_heads", 32)
    kv = g(c, "num_key_value_heads", heads)
    hd = h // heads
    f = g(c, "intermediate_size", 11008)
    b = g(c, "bias", True)  # InternLM2Config(bias=True)
    layer = linear(h, (heads + 2 * kv) * hd, b) + linear(heads * hd, h, b) + gated_mlp(h, f) + 2 * h
    c2 = dict(c, vocab_size=g(c, "vocab_size", 103168))
    return {"total": L * layer + embeddings_and_head(c2, h, False) + h}


def gpt_bigcode(c):
    h = g(c, "n_embd", g(c, "hidden_size", 768))
    L = g(c, "n_layer", g(c, "num_hidden_layers", 12))
    heads = g(c, "n_head", g(c, "num_attention_heads", 12))
    hd = h // heads
    mq = g(c, "multi_query", True)
    kv_dim = hd if mq else h
    f = g(c, "n_inner", None) or 4 * h
    layer = 2 * 2 * h + linear(h, h + 2 * kv_dim, True) + linear(h, h, True) + linear(h, f, True) + linear(f, h, True)
    V = g(c, "vocab_size", 50257)
    P = g(c, "n_positions", g(c, "max_position_embeddings", 1024))
    tied = g(c, "tie_word_embeddings", True)
    return {"total": L * layer + V * h * (1 if tied else 2) + P * h + 2 * h}


def glm4(c):
    """Glm4ForCausalLM: GlmAttention (q/k/v bias = attention_bias, o_proj without bias), Phi3MLP
    (fused gate_up_proj), four RMSNorms per layer (input, post_self_attn, post_attention, post_mlp)."""
    h = g(c, "hidden_size", 4096)
    L = g(c, "num_hidden_layers", 40)
    heads = g(c, "num_attention_heads", 32)
    kv = g(c, "num_key_value_heads", 2)
    hd = g(c, "head_dim", 128)
    f = g(c, "intermediate_size", 13696)
    ab = g(c, "attention_bias", True)
    layer = gqa_attention(h, heads, kv, hd, ab, False) + linear(h, 2 * f) + linear(f, h) + 4 * h
    c2 = dict(c, vocab_size=g(c, "vocab_size", 151552))
    return {"total": L * layer + embeddings_and_head(c2, h, False) + h}


def count(c):
    t = c.get("model_type")
    if t == "deepseek_v2":
        return deepseek(c, 2)
    if t == "deepseek_v3":
        return deepseek(c, 3)
    if t == "gpt_oss":
        r = gpt_oss(c)
        r["mxfp4_expert_bytes"] = mxfp4_expert_bytes(c)
        return r
    if t in ("llama4", "llama4_text"):
        r = llama4_text(c)
        if t == "llama4":
            r["vision_and_projector"] = llama4_vision(c)
            r["with_vision"] = r["total"] + r["vision_and_projector"]
        return r
    if t == "phimoe":
        return phimoe(c)
    if t == "olmoe":
        return olmoe(c)
    if t == "granite":
        return granite(c)
    if t == "granitemoe":
        return granitemoe(c)
    if t == "granitemoeshared":
        return granitemoe(c, shared=True)
    if t == "cohere":
        return cohere(c, 1)
    if t == "cohere2":
        return cohere(c, 2)
    if t == "internlm2":
        return internlm2(c)
    if t == "gpt_bigcode":
        return gpt_bigcode(c)
    if t == "glm4":
        return glm4(c)
    raise SystemExit(f"no formula for model_type {t!r}")


# (file, quantity, published figure, source, rounding of the published figure)
CHECKS = [
    ("deepseek-ai--DeepSeek-V2-Lite.json", "total", 15.7e9, "model card: 15.7B total (2.4B activated)", 0.1e9),
    ("deepseek-ai--DeepSeek-V3.json", "total", 671e9, "model card: 671B main model (+14B MTP = 685B)", 1e9),
    ("deepseek-ai--DeepSeek-V3.json", "checkpoint_total", 685e9,
     "Hub safetensors 685B: main model + MTP module + fp8 weight_scale_inv tensors", 1e9),
    ("openai--gpt-oss-20b.json", "total", 20.91e9, "OpenAI model card (Aug 2025) table 1: 20.91B total", 0.01e9),
    ("openai--gpt-oss-120b.json", "total", 116.83e9, "OpenAI model card (Aug 2025) table 1: 116.83B total", 0.01e9),
    ("meta-llama--Llama-4-Scout-17B-16E.json", "with_vision", 109e9, "model card: 109B total (17B active)", 1e9),
    ("microsoft--Phi-3.5-MoE-instruct.json", "total", 41.9e9, "model card 42B total; Hub safetensors 41.9B", 0.1e9),
    ("allenai--OLMoE-1B-7B-0924.json", "total", 6.92e9, "OLMoE paper (Muennighoff et al. 2024) table 1: 6.9B total; Hub 6.92B", 0.01e9),
    ("ibm-granite--granite-3.1-8b-instruct.json", "total", 8.17e9, "Hub safetensors 8.17B (card: 8B)", 0.01e9),
    ("ibm-granite--granite-3.1-3b-a800m-instruct.json", "total", 3.3e9, "model card: 3.3B total, 800M active", 0.1e9),
    ("CohereForAI--c4ai-command-r-v01.json", "total", 35.0e9, "model card: 35 billion parameters", 0.1e9),
    ("CohereForAI--c4ai-command-r7b-12-2024.json", "total", 8.03e9, "Hub safetensors 8.03B (card: 7B)", 0.01e9),
    ("internlm--internlm2-7b.json", "total", 7.74e9, "Hub safetensors 7.74B (card: 7B)", 0.01e9),
    ("bigcode--starcoder.json", "total", 15.5e9, "model card: 15.5B parameters", 0.1e9),
    ("bigcode--gpt_bigcode-santacoder.json", "total", 1.1e9, "SantaCoder paper: 1.1B parameters", 0.1e9),
    ("THUDM--GLM-4-9B-0414.json", "total", 9.4e9, "Hub safetensors 9.4B (card: 9B)", 0.1e9),
]


def main(argv):
    if len(argv) > 1:
        for p in argv[1:]:
            print(p, json.dumps(count(json.load(open(p))), indent=1))
        return 0
    bad = 0
    for name, key, published, source, rounding in CHECKS:
        path = os.path.join(CONFIGS, name)
        if not os.path.exists(path):  # a file whose reader landed has moved up to hf_configs/
            path = os.path.join(CONFIGS, "..", name)
        if not os.path.exists(path):
            print(f"{name}: missing")
            bad += 1
            continue
        r = count(json.load(open(path)))
        n = r[key]
        ok = abs(n - published) <= rounding / 2
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name:50s} {key:18s} {n:>18,} vs {published / 1e9:g}B ({source})")
        extra = {k: v for k, v in r.items() if k not in (key,) and isinstance(v, int) and k not in ("layer", "dense_layer", "moe_layer")}
        if extra:
            print("    " + ", ".join(f"{k}={v:,}" for k, v in extra.items()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
