#!/usr/bin/env python3
"""Exact parameter counts of the state-space / hybrid stacks, the multimodal configs and the
timm vision models, from a config.json (or a timm model name) alone.

Each count is sum(p.numel() for p in model.parameters()) of the class the config names,
written from the Config defaults and the shapes the modeling file gives every nn.Parameter
(buffers such as falcon_mamba's b_c_rms, falcon_h1's mup_vector or EVA's rotary tables are
not parameters). docs/research/ssm-multimodal-timm.md cites the file@commit of each formula.
Standard library only (no torch): the readers in include/memscale/ must reproduce these numbers.

    python3 tools/families/ssm_vision_params.py          # every config and timm model, with the published check
    python3 tools/families/ssm_vision_params.py tests/data/hf_configs/ssm-multimodal/tiiuae--falcon-mamba-7b.json
"""
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "..", "..", "tests", "data", "hf_configs", "ssm-multimodal")


def g(c, key, default):
    """config[key] with the Config class default for an absent or null key."""
    v = c.get(key)
    return default if v is None else v


def linear(i, o, bias=False):
    return i * o + (o if bias else 0)


def gated_mlp(h, f, bias=False):  # gate_proj, up_proj, down_proj
    return 2 * linear(h, f, bias) + linear(f, h, bias)


def head(c, h, v, tie_default):
    return v * h * (1 if g(c, "tie_word_embeddings", tie_default) else 2)


# ------------------------------------------------------------------------ state-space stacks
def mamba1_mixer(h, d, n, k, r, proj_bias, conv_bias, dt_norms=False):
    """MambaMixer / FalconMambaMixer / JambaMambaMixer parameters."""
    p = linear(h, 2 * d, proj_bias)              # in_proj
    p += d * k + (d if conv_bias else 0)        # conv1d, depthwise (d, 1, k)
    p += linear(d, r + 2 * n)                   # x_proj, no bias
    p += linear(r, d, True)                     # dt_proj
    p += d * n + d                              # A_log, D
    p += linear(d, h, proj_bias)                # out_proj
    if dt_norms:                                # Jamba dt/b/c RMSNorm weights
        p += r + 2 * n
    return p


def mamba(c, falcon=False):
    """MambaForCausalLM (modeling_mamba.py) / FalconMambaForCausalLM (modeling_falcon_mamba.py)."""
    h = c["hidden_size"]
    d = g(c, "intermediate_size", int(g(c, "expand", 2) * h))  # a config.json key wins over expand * hidden
    r = g(c, "time_step_rank", "auto")
    r = math.ceil(h / 16) if r == "auto" else r
    bias = g(c, "use_bias", not falcon)  # MambaConfig True, FalconMambaConfig False
    layer = h + mamba1_mixer(h, d, g(c, "state_size", 16), g(c, "conv_kernel", 4), r, bias, g(c, "use_conv_bias", True))
    return c["num_hidden_layers"] * layer + h + head(c, h, g(c, "vocab_size", 50280), True)


def mamba2_mixer(h, d, heads, groups, n, k, proj_bias, conv_bias, gated_norm=True, out_bias=None):
    conv_dim = d + 2 * groups * n
    p = linear(h, d + conv_dim + heads, proj_bias)     # in_proj: z, xBC, dt
    p += conv_dim * k + (conv_dim if conv_bias else 0)  # conv1d
    p += 3 * heads                                      # dt_bias, A_log, D
    p += d if gated_norm else 0                         # MambaRMSNormGated
    p += linear(d, h, proj_bias if out_bias is None else out_bias)
    return p


def mamba2(c):
    """Mamba2ForCausalLM (modeling_mamba2.py); untied head by default."""
    h = g(c, "hidden_size", 4096)
    d = int(g(c, "expand", 2) * h)
    layer = h + mamba2_mixer(h, d, g(c, "num_heads", 128), g(c, "n_groups", 8), g(c, "state_size", 128),
                             g(c, "conv_kernel", 4), g(c, "use_bias", False), g(c, "use_conv_bias", True))
    return g(c, "num_hidden_layers", 64) * layer + h + head(c, h, g(c, "vocab_size", 32768), False)


def jamba(c):
    """JambaForCausalLM (modeling_jamba.py): (total, active) with top-k of the experts active."""
    h = g(c, "hidden_size", 4096)
    f = g(c, "intermediate_size", 14336)
    heads, kv = g(c, "num_attention_heads", 32), g(c, "num_key_value_heads", 8)
    hd = h // heads
    E, k = g(c, "num_experts", 16), g(c, "num_experts_per_tok", 2)
    d = g(c, "mamba_expand", 2) * h
    r = g(c, "mamba_dt_rank", "auto")
    r = math.ceil(h / 16) if r == "auto" else r
    mamba_p = mamba1_mixer(h, d, g(c, "mamba_d_state", 16), g(c, "mamba_d_conv", 4), r, g(c, "mamba_proj_bias", False),
                           g(c, "mamba_conv_bias", True), dt_norms=True)
    attn_p = linear(h, heads * hd) + 2 * linear(h, kv * hd) + linear(heads * hd, h)
    total = active = 0
    for i in range(g(c, "num_hidden_layers", 32)):
        mixer = attn_p if i % g(c, "attn_layer_period", 8) == g(c, "attn_layer_offset", 4) else mamba_p
        moe = i % g(c, "expert_layer_period", 2) == g(c, "expert_layer_offset", 1) and E > 1
        ff_total = E * gated_mlp(h, f) + linear(h, E) if moe else gated_mlp(h, f)
        ff_active = k * gated_mlp(h, f) + linear(h, E) if moe else gated_mlp(h, f)
        total += mixer + ff_total + 2 * h
        active += mixer + ff_active + 2 * h
    rest = h + head(c, h, g(c, "vocab_size", 65536), False)
    return total + rest, active + rest


def falcon_h1(c):
    """FalconH1ForCausalLM (modular_falcon_h1.py): Mamba-2 mixer + attention + SwiGLU in every layer."""
    h = g(c, "hidden_size", 4096)
    heads, kv = g(c, "num_attention_heads", 32), g(c, "num_key_value_heads", 8)
    hd = g(c, "head_dim", h // heads)  # LlamaAttention: getattr(config, "head_dim", hidden // heads)
    d = g(c, "mamba_d_ssm", 1024)  # FalconH1Config default 1024; None means mamba_expand * hidden
    if c.get("mamba_d_ssm", 0) is None:
        d = g(c, "mamba_expand", 2) * h
    attn_p = linear(h, heads * hd) + 2 * linear(h, kv * hd) + linear(heads * hd, h)  # attention_bias False
    mix = mamba2_mixer(h, d, g(c, "mamba_n_heads", 128), g(c, "mamba_n_groups", 1), g(c, "mamba_d_state", 256),
                       g(c, "mamba_d_conv", 4), g(c, "mamba_proj_bias", False), g(c, "mamba_conv_bias", True),
                       gated_norm=g(c, "mamba_rms_norm", False), out_bias=g(c, "projectors_bias", False))
    layer = attn_p + mix + gated_mlp(h, g(c, "intermediate_size", 14336)) + 2 * h
    return g(c, "num_hidden_layers", 32) * layer + h + head(c, h, g(c, "vocab_size", 128000), False)


def nemotron_h(c):
    """NemotronHForCausalLM (modeling_nemotron_h.py@897753a0): one mixer per block, named by
    hybrid_override_pattern ('M' Mamba-2, '*' attention, '-' relu2 MLP, 'E' NemotronHMoE); (total, active)."""
    h = g(c, "hidden_size", 4096)
    pattern = c.get("hybrid_override_pattern") or "".join(
        {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}[t] for t in c.get("layers_block_type") or
        ["mamba", "moe", "attention", "moe"])
    heads, kv, hd = g(c, "num_attention_heads", 32), g(c, "num_key_value_heads", 8), g(c, "head_dim", 128)
    mlp_bias = g(c, "mlp_bias", False)
    up_down = lambda f: linear(h, f, mlp_bias) + linear(f, h, mlp_bias)  # NemotronHMLP
    E, k = g(c, "n_routed_experts", 8), g(c, "num_experts_per_tok", 2)
    fe, fs = g(c, "moe_intermediate_size", 7688), g(c, "moe_shared_expert_intermediate_size", 7688)
    # NemotronHMoE: the router weight [E, h], NemotronHExperts' up_proj [E, fe, h] and down_proj [E, h, fe], the shared MLP
    moe_total = E * h + 2 * E * fe * h + up_down(fs)
    moe_active = E * h + 2 * k * fe * h + up_down(fs)
    mixers = {
        "M": mamba2_mixer(h, g(c, "mamba_num_heads", 128) * g(c, "mamba_head_dim", 64), g(c, "mamba_num_heads", 128),
                          g(c, "n_groups", 8), g(c, "ssm_state_size", 128), g(c, "conv_kernel", 4),
                          g(c, "use_bias", False), g(c, "use_conv_bias", True)),
        "*": linear(h, heads * hd) + 2 * linear(h, kv * hd) + linear(heads * hd, h),
        "-": up_down(g(c, "intermediate_size", 21504)),
    }
    total = sum(h + (moe_total if t == "E" else mixers[t]) for t in pattern)
    active = sum(h + (moe_active if t == "E" else mixers[t]) for t in pattern)
    rest = h + head(c, h, g(c, "vocab_size", 131072), False)
    return total + rest, active + rest


# ------------------------------------------------------------------------ multimodal towers
def siglip_vision(v):
    """SiglipVisionModel (modeling_siglip.py) as Gemma 3 builds it (SiglipVisionConfig defaults)."""
    h, i = g(v, "hidden_size", 768), g(v, "intermediate_size", 3072)
    p, img, ch = g(v, "patch_size", 16), g(v, "image_size", 224), g(v, "num_channels", 3)
    patches = (img // p) ** 2
    emb = ch * p * p * h + h + patches * h  # patch_embedding (bias) + position_embedding
    layer = 2 * 2 * h + 4 * linear(h, h, True) + linear(h, i, True) + linear(i, h, True)
    total = emb + g(v, "num_hidden_layers", 12) * layer + 2 * h  # post_layernorm
    if g(v, "vision_use_head", True):  # SiglipMultiheadAttentionPoolingHead
        total += h + (3 * h * h + 3 * h) + linear(h, h, True) + 2 * h + linear(h, i, True) + linear(i, h, True)
    return total


def gemma3_text(t):
    """Gemma3TextModel + tied head with Gemma3TextConfig defaults (configuration_gemma3.py)."""
    h = g(t, "hidden_size", 2304)
    heads, kv, hd = g(t, "num_attention_heads", 8), g(t, "num_key_value_heads", 4), g(t, "head_dim", 256)
    bias = g(t, "attention_bias", False)
    attn = linear(h, heads * hd, bias) + 2 * linear(h, kv * hd, bias) + linear(heads * hd, h, bias) + 2 * hd  # + q/k norm
    layer = attn + gated_mlp(h, g(t, "intermediate_size", 9216)) + 4 * h
    return g(t, "num_hidden_layers", 26) * layer + h + head(t, h, g(t, "vocab_size", 262208), True)


def gemma3(c):
    """Gemma3ForConditionalGeneration: (text, vision tower, projector)."""
    t, v = c.get("text_config") or {}, c.get("vision_config") or {}
    proj = g(v, "hidden_size", 768) * g(t, "hidden_size", 2304) + g(v, "hidden_size", 768)  # weight + soft-emb norm
    return gemma3_text(t), siglip_vision(v), proj


def qwen2_text(c, tie_default=False):
    h = c["hidden_size"]
    heads, kv = c["num_attention_heads"], c.get("num_key_value_heads") or c["num_attention_heads"]
    hd = h // heads
    attn = linear(h, heads * hd, True) + 2 * linear(h, kv * hd, True) + linear(heads * hd, h)
    layer = attn + gated_mlp(h, c["intermediate_size"]) + 2 * h
    return c["num_hidden_layers"] * layer + h + head(c, h, c["vocab_size"], tie_default)


def qwen2_5_vl_vision(v, out_default):
    """Qwen2_5_VisionTransformerPretrainedModel (modeling_qwen2_5_vl.py), Qwen2_5_VLVisionConfig defaults."""
    h, i = g(v, "hidden_size", 3584), g(v, "intermediate_size", 3420)
    p, tp, m = g(v, "patch_size", 14), g(v, "temporal_patch_size", 2), g(v, "spatial_merge_size", 2)
    out = g(v, "out_hidden_size", out_default)
    emb = g(v, "in_channels", 3) * tp * p * p * h  # Conv3d, no bias
    block = 2 * h + linear(h, 3 * h, True) + linear(h, h, True) + gated_mlp(h, i, True)
    merged = h * m * m
    merger = h + linear(merged, merged, True) + linear(merged, out, True)  # ln_q (RMSNorm) + MLP
    return emb + g(v, "depth", 32) * block + merger


def qwen2_vl_vision(v):
    """Qwen2VisionTransformerPretrainedModel (modeling_qwen2_vl.py), Qwen2VLVisionConfig defaults."""
    e, out = g(v, "embed_dim", 1280), g(v, "hidden_size", 3584)
    p, tp, m = g(v, "patch_size", 14), g(v, "temporal_patch_size", 2), g(v, "spatial_merge_size", 2)
    f = int(e * g(v, "mlp_ratio", 4))
    emb = g(v, "in_channels", 3) * tp * p * p * e  # Conv3d, no bias
    block = 4 * e + linear(e, 3 * e, True) + linear(e, e, True) + linear(e, f, True) + linear(f, e, True)
    merged = e * m * m
    merger = 2 * e + linear(merged, merged, True) + linear(merged, out, True)  # ln_q (LayerNorm) + MLP
    return emb + g(v, "depth", 32) * block + merger


def qwen3_text(t):
    h = g(t, "hidden_size", 4096)
    heads, kv, hd = g(t, "num_attention_heads", 32), g(t, "num_key_value_heads", 32), g(t, "head_dim", 128)
    bias = g(t, "attention_bias", False)
    attn = linear(h, heads * hd, bias) + 2 * linear(h, kv * hd, bias) + linear(heads * hd, h, bias) + 2 * hd
    layer = attn + gated_mlp(h, g(t, "intermediate_size", 22016)) + 2 * h
    return g(t, "num_hidden_layers", 32) * layer + h + head(t, h, g(t, "vocab_size", 151936), False)


def qwen3_vl_vision(v):
    """Qwen3VLVisionModel (modeling_qwen3_vl.py): LayerNorm blocks, learned pos-embed, merger + deepstack mergers."""
    h, i = g(v, "hidden_size", 1152), g(v, "intermediate_size", 4304)
    p, tp, m = g(v, "patch_size", 16), g(v, "temporal_patch_size", 2), g(v, "spatial_merge_size", 2)
    out = g(v, "out_hidden_size", 3584)
    emb = g(v, "in_channels", 3) * tp * p * p * h + h + g(v, "num_position_embeddings", 2304) * h
    block = 4 * h + linear(h, 3 * h, True) + linear(h, h, True) + linear(h, i, True) + linear(i, h, True)
    merged = h * m * m
    fcs = linear(merged, merged, True) + linear(merged, out, True)
    merger = 2 * h + fcs
    deepstack = len(g(v, "deepstack_visual_indexes", [8, 16, 24])) * (2 * merged + fcs)
    return emb + g(v, "depth", 27) * block + merger + deepstack


# ------------------------------------------------------------------------ timm models
def timm_vit(patch, dim, depth, heads, mlp_ratio=4.0, img=224, classes=1000, class_token=True, reg_tokens=0,
             qkv_bias=True, global_pool="token", pre_norm=False, init_values=None, no_embed_class=False):
    """timm VisionTransformer (vision_transformer.py) parameters."""
    hidden = int(dim * mlp_ratio)
    prefix = (1 if class_token else 0) + reg_tokens
    patches = (img // patch) ** 2
    p = 3 * patch * patch * dim + (0 if pre_norm else dim)  # PatchEmbed conv, bias=not pre_norm
    p += dim if class_token else 0
    p += reg_tokens * dim
    p += (patches if no_embed_class else patches + prefix) * dim  # pos_embed
    p += 2 * dim if pre_norm else 0
    block = 2 * dim + linear(dim, 3 * dim, qkv_bias) + linear(dim, dim, True) + 2 * dim
    block += linear(dim, hidden, True) + linear(hidden, dim, True)
    block += 2 * dim if init_values else 0  # LayerScale gammas
    p += depth * block
    p += 2 * dim  # norm (token pool) or fc_norm (avg pool)
    p += linear(dim, classes, True) if classes else 0
    return p


def timm_eva02(patch, dim, depth, heads, img, classes=1000, scale_attn_inner=False, global_pool="avg"):
    """timm Eva with the EVA02 args (eva.py): q/k/v separate (k no bias), SwiGLU with LayerNorm, avg pool."""
    hidden = int(dim * 4 * 2 / 3)
    patches = (img // patch) ** 2
    p = 3 * patch * patch * dim + dim + dim + (patches + 1) * dim  # patch_embed, cls_token, pos_embed
    attn = linear(dim, dim, True) + linear(dim, dim) + linear(dim, dim, True) + linear(dim, dim, True)
    attn += 2 * dim if scale_attn_inner else 0
    mlp = 2 * linear(dim, hidden, True) + 2 * hidden + linear(hidden, dim, True)  # fc1_g, fc1_x, norm, fc2
    p += depth * (2 * dim + attn + 2 * dim + mlp)
    p += 2 * dim  # fc_norm (avg) or norm (token)
    p += linear(dim, classes, True) if classes else 0
    return p


def timm_convnext(depths, dims, classes=1000, conv_mlp=False, head_hidden=None):
    """timm ConvNeXt (convnext.py): patch stem, LayerNorm(2d), blocks with gamma, NormMlpClassifierHead."""
    p = 3 * 4 * 4 * dims[0] + dims[0] + 2 * dims[0]  # stem conv + LayerNorm2d
    for s, (n, c) in enumerate(zip(depths, dims)):
        if s > 0:
            p += 2 * dims[s - 1] + dims[s - 1] * c * 4 + c  # LayerNorm2d + conv 2x2
        block = c * 49 + c + 2 * c + linear(c, 4 * c, True) + linear(4 * c, c, True) + c  # dw, norm, mlp, gamma
        p += n * block
    last = dims[-1]
    p += 2 * last  # head norm
    if head_hidden:
        p += linear(last, head_hidden, True)
        last = head_hidden
    p += linear(last, classes, True)
    return p


def timm_resnet(layers, bottleneck, classes=1000):
    """timm ResNet (resnet.py) with the default stem: the torchvision ResNet shapes."""
    p = 3 * 49 * 64 + 2 * 64  # conv1, bn1
    inplanes, exp = 64, 4 if bottleneck else 1
    for s, n in enumerate(layers):
        planes = 64 * 2 ** s
        for b in range(n):
            if bottleneck:
                p += inplanes * planes + 2 * planes + planes * planes * 9 + 2 * planes + planes * planes * exp + 2 * planes * exp
            else:
                p += inplanes * planes * 9 + 2 * planes + planes * planes * 9 + 2 * planes
            if b == 0 and (s > 0 or inplanes != planes * exp):
                p += inplanes * planes * exp + 2 * planes * exp  # downsample conv + bn
            inplanes = planes * exp
    return p + linear(inplanes, classes, True)


TIMM = {  # name: (count, published figure, source of the figure)
    "vit_base_patch16_224": (lambda: timm_vit(16, 768, 12, 12), 86.6e6, "timm model card 86.6M"),
    "vit_small_patch16_224": (lambda: timm_vit(16, 384, 12, 6), 22.1e6, "timm model card 22.1M"),
    "vit_base_patch32_224": (lambda: timm_vit(32, 768, 12, 12), 88.2e6, "timm model card 88.2M"),
    "vit_large_patch16_224": (lambda: timm_vit(16, 1024, 24, 16), 304.3e6, "timm model card 304.3M"),
    "vit_huge_patch14_224": (lambda: timm_vit(14, 1280, 32, 16), 632.0e6, "timm results table 632.0M (in1k head)"),
    "vit_huge_patch14_224.orig_in21k": (lambda: timm_vit(14, 1280, 32, 16, classes=0), 630.8e6,
                                        "timm model card 630.8M (no head)"),
    "vit_giant_patch14_224": (lambda: timm_vit(14, 1408, 40, 16, mlp_ratio=48 / 11), 1012.6e6,
                              "timm results table 1012.6M"),
    "vit_large_patch14_clip_224.openai_ft_in12k_in1k": (
        lambda: timm_vit(14, 1024, 24, 16, pre_norm=True), 304.2e6, "timm model card 304.2M"),
    "eva02_large_patch14_448.mim_m38m_ft_in22k_in1k": (lambda: timm_eva02(14, 1024, 24, 16, 448), 305.1e6,
                                                       "timm model card 305.1M"),
    "eva02_large_patch14_224.mim_in22k": (lambda: timm_eva02(14, 1024, 24, 16, 224, classes=0), 303.3e6,
                                          "timm model card 303.3M (MIM weights, no head)"),
    "eva02_base_patch14_448.mim_in22k_ft_in22k_in1k": (lambda: timm_eva02(14, 768, 12, 12, 448), 87.1e6,
                                                       "timm model card 87.1M"),
    "convnext_tiny": (lambda: timm_convnext((3, 3, 9, 3), (96, 192, 384, 768)), 28.6e6, "timm model card 28.6M"),
    "convnext_small": (lambda: timm_convnext((3, 3, 27, 3), (96, 192, 384, 768)), 50.2e6, "timm model card 50.2M"),
    "convnext_base": (lambda: timm_convnext((3, 3, 27, 3), (128, 256, 512, 1024)), 88.6e6, "timm model card 88.6M"),
    "convnext_large": (lambda: timm_convnext((3, 3, 27, 3), (192, 384, 768, 1536)), 197.8e6, "timm model card 197.8M"),
    "convnext_xlarge": (lambda: timm_convnext((3, 3, 27, 3), (256, 512, 1024, 2048)), 350.2e6, "timm model card 350.2M"),
    "convnext_atto": (lambda: timm_convnext((2, 2, 6, 2), (40, 80, 160, 320), conv_mlp=True), 3.7e6,
                      "timm model card 3.7M"),
    "convnext_nano": (lambda: timm_convnext((2, 2, 8, 2), (80, 160, 320, 640), conv_mlp=True), 15.6e6,
                      "timm model card 15.6M"),
    "resnet18": (lambda: timm_resnet((2, 2, 2, 2), False), 11.7e6, "timm model card 11.7M"),
    "resnet34": (lambda: timm_resnet((3, 4, 6, 3), False), 21.8e6, "timm model card 21.8M"),
    "resnet50": (lambda: timm_resnet((3, 4, 6, 3), True), 25.6e6, "timm model card 25.6M (a1_in1k and others)"),
    "resnet101": (lambda: timm_resnet((3, 4, 23, 3), True), 44.5e6, "timm model card 44.5M"),
    "resnet152": (lambda: timm_resnet((3, 8, 36, 3), True), 60.2e6, "timm model card 60.2M"),
}

# torchvision equivalents memscale already pins exactly (tests/static/vision_static.cpp)
TORCHVISION_EXACT = {"vit_base_patch16_224": 86_567_656, "vit_large_patch16_224": 304_326_632,
                     "convnext_tiny": 28_589_128, "convnext_small": 50_223_688, "convnext_base": 88_591_464,
                     "resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032, "resnet101": 44_549_160,
                     "resnet152": 60_192_808, "vit_base_patch32_224": 88_224_232}


# ------------------------------------------------------------------------ published checks
CARDS = {  # file stem: (published total, half of its last published digit, source)
    "state-spaces--mamba-130m-hf": (129_135_360, 0, "Hub safetensors total 129M; exact sum of MambaForCausalLM"),
    "state-spaces--mamba-2.8b-hf": (2.8e9, 0.05e9, "model name 2.8b (Mamba paper, Table 3: 2.8B)"),
    "tiiuae--falcon-mamba-7b": (7.27e9, 0.005e9, "model card / Hub 7.27B"),
    "mistralai--Mamba-Codestral-7B-v0.1": (7_285_403_648, 0, "model card: 7,285,403,648 parameters"),
    "state-spaces--mamba2-2.7b": (2.7e9, 0.05e9, "model name 2.7b (Mamba-2 paper, Hub 2.7B)"),
    "ai21labs--AI21-Jamba-1.5-Mini": (51.6e9, 0.05e9, "Jamba paper 51.6B total (card 52B), 12B active"),
    "tiiuae--Falcon-H1-0.5B-Base": (0.52e9, 0.005e9, "Falcon-H1 report 0.52B (card 0.5B)"),
    "nvidia--NVIDIA-Nemotron-Nano-9B-v2": (8.89e9, 0.005e9, "model card 8.89B"),
    "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": (31.6e9, 0.05e9, "model card 31.6B total, 3.6B active with embeddings"),
    "google--gemma-3-4b-it": (4_300_079_472, 0, "Hub safetensors total 4.3B; Gemma 3 report: 417M vision + 3.88B"),
    "Qwen--Qwen2.5-VL-7B-Instruct": (8.29e9, 0.005e9, "Hub safetensors total 8.29B"),
    "Qwen--Qwen3-VL-8B-Instruct": (8.77e9, 0.005e9, "Hub safetensors total 8.77B"),
    "Qwen--Qwen2-VL-7B-Instruct": (8.29e9, 0.005e9, "Hub safetensors total 8.29B"),
    "Qwen--Qwen2-VL-2B-Instruct": (2.21e9, 0.005e9, "Hub safetensors total 2.21B"),
}


def count(c):
    t = c.get("model_type")
    if t == "mamba":
        return {"total": mamba(c)}
    if t == "falcon_mamba":
        return {"total": mamba(c, falcon=True)}
    if t == "mamba2":
        return {"total": mamba2(c)}
    if t == "jamba":
        total, active = jamba(c)
        return {"total": total, "active": active}
    if t == "falcon_h1":
        return {"total": falcon_h1(c)}
    if t == "nemotron_h":
        total, active = nemotron_h(c)
        return {"total": total, "active": active}
    if t == "gemma3":
        text, vision, proj = gemma3(c)
        return {"total": text + vision + proj, "text": text, "vision": vision, "projector": proj}
    if t == "qwen2_5_vl":
        text = qwen2_text(c)
        vision = qwen2_5_vl_vision(c.get("vision_config") or {}, c["hidden_size"])
        return {"total": text + vision, "text": text, "vision": vision}
    if t == "qwen2_vl":
        text = qwen2_text(c.get("text_config") or c, c.get("tie_word_embeddings", False))
        vision = qwen2_vl_vision(c.get("vision_config") or {})
        return {"total": text + vision, "text": text, "vision": vision}
    if t == "qwen3_vl":
        text = qwen3_text(c.get("text_config") or {})
        vision = qwen3_vl_vision(c.get("vision_config") or {})
        return {"total": text + vision, "text": text, "vision": vision}
    raise ValueError(f"model_type {t!r} has no formula here")


def check(stem, got):
    if stem not in CARDS:
        return "(no published total)"
    want, half, src = CARDS[stem]
    ok = abs(got - want) <= half
    return ("OK " if ok else "MISMATCH ") + f"vs {want:,.0f} ({src})"


def main(argv):
    paths = argv[1:] or sorted(os.path.join(CONFIGS, f) for f in os.listdir(CONFIGS) if f.endswith(".json"))
    bad = 0
    for p in paths:
        with open(p) as f:
            text = f.read()
        c = json.loads(text)  # Python's json reads the bare Infinity transformers writes for time_step_limit
        stem = os.path.basename(p)[:-5]
        r = count(c)
        line = check(stem, r["total"])
        bad += line.startswith("MISMATCH")
        parts = ", ".join(f"{k} {v:,}" for k, v in r.items() if k != "total")
        print(f"{stem}: {r['total']:,}" + (f" ({parts})" if parts else "") + f"  {line}")
    if len(argv) == 1:
        for name, (fn, want, src) in TIMM.items():
            got = fn()
            ok = abs(got - want) <= 0.05e6 + 1e-9
            bad += not ok
            tv = TORCHVISION_EXACT.get(name)
            same = "" if tv is None else (" = torchvision" if tv == got else f" != torchvision {tv:,}")
            print(f"timm {name}: {got:,}{same}  {'OK' if ok else 'MISMATCH'} vs {want / 1e6:.1f}M ({src})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
