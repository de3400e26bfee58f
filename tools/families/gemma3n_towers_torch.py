#!/usr/bin/env python3
"""Cross-check of include/memscale/json/hf/gemma3n_towers.hpp and mobilenetv5.hpp with torch only
(no timm, no transformers): builds Gemma 3n's towers from their module shapes and prints
sum(p.numel() for p in module.parameters()).

  - vision: timm's MobileNetV5Encoder ("mobilenetv5_300m_enc"), from the arch_def block strings of
    timm/models/mobilenetv5.py@aa4b5850 and the blocks of _efficientnet_blocks.py /
    layers/attention2d.py at that commit (convs without bias, RmsNorm2d = one weight per channel,
    LayerScale2d on uir and mqa blocks);
  - audio: Gemma3nAudioEncoder and both Gemma3nMultimodalEmbedders of modeling_gemma3n.py@b87ecf8c,
    with Gemma3nAudioConfig's defaults (configuration_gemma3n.py@01854809).

    /usr/bin/python3 tools/families/gemma3n_towers_torch.py
"""
from functools import partial

import torch
from torch import nn

# Shapes only: every tensor on the meta device, so nothing is allocated.
Conv1d, Conv2d = partial(nn.Conv1d, device="meta"), partial(nn.Conv2d, device="meta")
Linear, Embedding = partial(nn.Linear, device="meta"), partial(nn.Embedding, device="meta")


def empty(n):
    return nn.Parameter(torch.empty(n, device="meta"))

STAGES = [
    ["er_r1_k3_s2_e4_c128", "er_r1_k3_s1_e4_c128", "er_r1_k3_s1_e4_c128"],
    ["uir_r1_a3_k5_s2_e6_c256", "uir_r1_a5_k0_s1_e4_c256", "uir_r1_a3_k0_s1_e4_c256",
     "uir_r1_a5_k0_s1_e4_c256", "uir_r1_a3_k0_s1_e4_c256"],
    ["uir_r1_a5_k5_s2_e6_c640"] + ["uir_r1_a5_k0_s1_e4_c640"] * 7 + ["uir_r1_a0_k0_s1_e1_c640"]
    + ["mqa_r1_k3_h12_v2_s1_d64_c640", "uir_r1_a0_k0_s1_e2_c640"] * 14,
    ["uir_r1_a5_k5_s2_e6_c1280"] + ["mqa_r1_k3_h16_s1_d96_c1280", "uir_r1_a0_k0_s1_e2_c1280"] * 19,
]


def make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def norm(c):  # RmsNorm2d(affine=True)
    return empty(c)


def conv(i, o, k, groups=1, bias=False):
    return Conv2d(i, o, k, groups=groups, bias=bias)


def decode(s):
    parts = s.split("_")
    o = {p[0]: int(p[1:]) for p in parts[1:]}
    return parts[0], o


def uir(i, o, a, k, e, layer_scale=True):
    m, mid = nn.ParameterList(), make_divisible(i * e)
    mods = nn.ModuleList()
    if a:
        mods.append(conv(i, i, a, groups=i)); m.append(norm(i))
    mods.append(conv(i, mid, 1)); m.append(norm(mid))
    if k:
        mods.append(conv(mid, mid, k, groups=mid)); m.append(norm(mid))
    mods.append(conv(mid, o, 1)); m.append(norm(o))
    if layer_scale:
        m.append(empty(o))
    return nn.ModuleList([mods, m])


def block(kind, o, i):
    if kind == "er":
        mid = make_divisible(i * o["e"])
        return nn.ModuleList([conv(i, mid, o["k"]), conv(mid, o["c"], 1),
                              nn.ParameterList([norm(mid), norm(o["c"])])])
    if kind == "uir":
        return uir(i, o["c"], o.get("a", 0), o["k"], o["e"])
    h, d, v = o["h"], o["d"], o.get("v", 1)
    mods = [conv(i, h * d, 1), conv(i, d, 1), conv(i, d, 1), conv(h * d, o["c"], 1)]
    params = [norm(i), empty(o["c"])]
    if v > 1:
        mods += [conv(i, i, o["k"], groups=i), conv(i, i, o["k"], groups=i)]
        params += [norm(i), norm(i)]
    return nn.ModuleList([nn.ModuleList(mods), nn.ParameterList(params)])


def mobilenetv5_300m_enc():
    stem = 64
    net = nn.ModuleList([conv(3, stem, 3, bias=True), nn.ParameterList([norm(stem)])])
    features, i = [stem], stem
    for stage in STAGES:
        for s in stage:
            kind, o = decode(s)
            net.append(block(kind, o, i))
            i = o["c"]
        features.append(i)
    net.append(uir(features[-2] + features[-1], 2048, 0, 0, 2, layer_scale=False))
    net.append(nn.ParameterList([norm(2048)]))
    return net


def audio_encoder(h=1536, heads=8, layers=12, kernel=5, feat=128, ch=(128, 32)):
    f = feat
    for _ in range(2):
        f = (f + 2 - 3) // 2 + 1
    rms = lambda n: empty(n)
    sscp = nn.ModuleList([Conv2d(1, ch[0], 3, bias=False), Conv2d(ch[0], ch[1], 3, bias=False),
                          Linear(ch[1] * f, h, bias=False), nn.ParameterList([rms(ch[0]), rms(ch[1])])])
    d = h // heads

    def ffw():
        return nn.ModuleList([Linear(h, 4 * h, bias=False), Linear(4 * h, h, bias=False),
                              nn.ParameterList([rms(h), rms(h)])])

    def conformer():
        attention = nn.ModuleList([Linear(h, heads * d, bias=False) for _ in range(4)]  # q, k, v, pos_proj
                                  + [Linear(h, h, bias=False),  # post
                                     nn.ParameterList([rms(h), rms(h), rms(d)])])  # pre/post norms, per_dim_scale
        lconv = nn.ModuleList([Linear(h, 2 * h, bias=False), Conv1d(h, h, kernel, groups=h, bias=False),
                               Linear(h, h, bias=False), nn.ParameterList([rms(h), rms(h)])])
        return nn.ModuleList([ffw(), attention, lconv, ffw(), nn.ParameterList([rms(h)])])

    return nn.ModuleList([sscp] + [conformer() for _ in range(layers)])


def embedder(vocab, tower_hidden, text_hidden):
    return nn.ModuleList([Embedding(vocab, tower_hidden), Linear(tower_hidden, text_hidden, bias=False),
                          nn.ParameterList([empty(tower_hidden) for _ in range(2)])])


def count(m):
    return sum(p.numel() for p in m.parameters())


if __name__ == "__main__":
    vision, audio = count(mobilenetv5_300m_enc()), count(audio_encoder())
    embedders = count(embedder(128, 2048, 2048)) + count(embedder(128, 1536, 2048))
    print(f"vision tower (mobilenetv5_300m_enc) {vision:,}")
    print(f"audio tower (Gemma3nAudioEncoder)   {audio:,}")
    print(f"embed_vision + embed_audio          {embedders:,}")
    print(f"towers and embedders                {vision + audio + embedders:,}")
