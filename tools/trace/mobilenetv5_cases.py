#!/usr/bin/python3
"""CPU traces of Gemma 3n's vision tower forward, frozen: timm's mobilenetv5_300m_enc.

A plain-torch re-implementation of timm/models/mobilenetv5.py@aa4b5850 (MobileNetV5Encoder,
MobileNetV5MultiScaleFusionAdapter), timm/models/_efficientnet_blocks.py@aa4b5850
(EdgeResidual, UniversalInvertedResidual, MobileAttention), timm/layers/attention2d.py@aa4b5850
(MultiQueryAttention2d, the unfused path: torch 1.13 has no scaled_dot_product_attention) and
timm/layers/fast_norm.py@aa4b5850 rms_norm2d, built from the block strings of
json/hf/mobilenetv5.hpp with random weights. Gemma3nModel.get_image_features
(modeling_gemma3n.py@b87ecf8c) runs the tower frozen, so the forward records no graph: it is
traced here under torch.no_grad(), and the peak of live CPU tensor bytes above the built model
and the pixel values is what a model of the tower's forward moment must explain.

Run from the project root:
    /usr/bin/python3 tools/trace/mobilenetv5_cases.py
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracer

torch.set_num_threads(1)

# json/hf/mobilenetv5.hpp mobilenetv5_300m_def (timm/models/mobilenetv5.py@aa4b5850 _gen_mobilenet_v5).
STAGES = [
    ["er_r1_k3_s2_e4_c128", "er_r1_k3_s1_e4_c128", "er_r1_k3_s1_e4_c128"],
    ["uir_r1_a3_k5_s2_e6_c256", "uir_r1_a5_k0_s1_e4_c256", "uir_r1_a3_k0_s1_e4_c256", "uir_r1_a5_k0_s1_e4_c256",
     "uir_r1_a3_k0_s1_e4_c256"],
    ["uir_r1_a5_k5_s2_e6_c640"] + ["uir_r1_a5_k0_s1_e4_c640"] * 7 + ["uir_r1_a0_k0_s1_e1_c640"] +
    ["mqa_r1_k3_h12_v2_s1_d64_c640", "uir_r1_a0_k0_s1_e2_c640"] * 14,
    ["uir_r1_a5_k5_s2_e6_c1280"] + ["mqa_r1_k3_h16_s1_d96_c1280", "uir_r1_a0_k0_s1_e2_c1280"] * 19,
]
STEM, NECK_OUT, NECK_EXPANSION, OUTPUT_RESOLUTION = 64, 2048, 2, 16


def decode(text):  # _decode_block_str for the options these strings use
    kind, *ops = text.split("_")
    b = dict(kind=kind, r=1, k=0, a=0, s=1, e=1, h=0, d=0, v=1)
    for op in ops:
        b[op[0]] = int(op[1:])
    return b


def make_divisible(v):  # timm/layers/helpers.py make_divisible(v, 8)
    rounded = max(8, int(v + 4) // 8 * 8)
    return rounded + 8 if rounded < 0.9 * v else rounded


def rms_norm2d(x, weight, eps=1e-6):  # timm/layers/fast_norm.py rms_norm2d
    v = torch.mean(x.pow(2), dim=1, keepdim=True)
    x = x * torch.rsqrt(v + eps)
    return x * weight.reshape(1, -1, 1, 1) if weight is not None else x


class NormAct(nn.Module):  # RmsNormAct2d (act: GELU, tanh approximation) or RmsNorm2d
    def __init__(self, c, act=True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.act = act

    def forward(self, x):
        x = rms_norm2d(x, self.weight)
        return F.gelu(x, approximate="tanh") if self.act else x


class ConvNormAct(nn.Module):
    def __init__(self, cin, cout, k, stride=1, groups=1, act=True, bias=False):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, ((stride - 1) + (k - 1)) // 2, groups=groups, bias=bias)
        self.bn = NormAct(cout, act)

    def forward(self, x):
        return self.bn(self.conv(x))


class EdgeResidual(nn.Module):
    def __init__(self, cin, b):
        super().__init__()
        mid = make_divisible(cin * b["e"])
        self.conv_exp = ConvNormAct(cin, mid, b["k"], b["s"])
        self.conv_pwl = ConvNormAct(mid, b["c"], 1, act=False)
        self.skip = cin == b["c"] and b["s"] == 1

    def forward(self, x):
        y = self.conv_pwl(self.conv_exp(x))
        return y + x if self.skip else y


class UniversalInvertedResidual(nn.Module):
    def __init__(self, cin, cout, a, k, s, e, layer_scale=True, noskip=False):
        super().__init__()
        mid = make_divisible(cin * e)
        self.dw_start = ConvNormAct(cin, cin, a, s if not k else 1, groups=cin, act=False) if a else None
        self.pw_exp = ConvNormAct(cin, mid, 1)
        self.dw_mid = ConvNormAct(mid, mid, k, s, groups=mid) if k else None
        self.pw_proj = ConvNormAct(mid, cout, 1, act=False)
        self.gamma = nn.Parameter(torch.full((cout,), 1e-5)) if layer_scale else None
        self.skip = cin == cout and s == 1 and not noskip

    def forward(self, x):
        y = self.dw_start(x) if self.dw_start is not None else x
        y = self.pw_exp(y)
        if self.dw_mid is not None:
            y = self.dw_mid(y)
        y = self.pw_proj(y)
        if self.gamma is not None:
            y = y * self.gamma.view(1, -1, 1, 1)  # LayerScale2d, not in place
        return y + x if self.skip else y


class MobileAttention(nn.Module):  # MobileAttention + MultiQueryAttention2d, unfused, not einsum
    def __init__(self, cin, b):
        super().__init__()
        self.h, self.d = b["h"], b["d"]
        self.norm = NormAct(cin, act=False)
        self.query = nn.Conv2d(cin, self.h * self.d, 1, bias=False)

        def kv():
            layers = []
            if b["v"] > 1:
                layers += [nn.Conv2d(cin, cin, b["k"], b["v"], ((b["v"] - 1) + (b["k"] - 1)) // 2, groups=cin,
                                     bias=False), NormAct(cin, act=False)]
            return nn.Sequential(*layers, nn.Conv2d(cin, self.d, 1, bias=False))

        self.key, self.value = kv(), kv()
        self.output = nn.Conv2d(self.h * self.d, b["c"], 1, bias=False)
        self.gamma = nn.Parameter(torch.full((b["c"],), 1e-5))
        self.skip = cin == b["c"]

    def forward(self, x):
        B, _, H, W = x.shape
        n = self.norm(x)
        q = self.query(n).reshape(B, self.h, self.d, -1).transpose(-1, -2).contiguous()
        k = self.key(n)
        k = k.reshape(B, k.shape[1], -1).transpose(1, 2).unsqueeze(1).contiguous()
        v = self.value(n)
        v = v.reshape(B, v.shape[1], -1).transpose(1, 2).unsqueeze(1).contiguous()
        q = q * self.d ** -0.5
        attn = (q @ k.transpose(-1, -2)).softmax(dim=-1)
        o = attn @ v
        o = o.transpose(1, 2).reshape(B, H, W, -1).permute(0, 3, 1, 2).contiguous()
        y = self.output(o) * self.gamma.view(1, -1, 1, 1)
        return y + x if self.skip else y


class MobileNetV5Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_stem = ConvNormAct(3, STEM, 3, 2, bias=True)
        self.stages = nn.ModuleList()
        cin = STEM
        for stage in STAGES:
            blocks = []
            for text in stage:
                b = decode(text)
                if b["kind"] == "er":
                    blocks.append(EdgeResidual(cin, b))
                elif b["kind"] == "uir":
                    blocks.append(UniversalInvertedResidual(cin, b["c"], b["a"], b["k"], b["s"], b["e"]))
                else:
                    blocks.append(MobileAttention(cin, b))
                cin = b["c"]
            self.stages.append(nn.Sequential(*blocks))
        levels = decode(STAGES[2][-1])["c"] + decode(STAGES[3][-1])["c"]
        self.ffn = UniversalInvertedResidual(levels, NECK_OUT, 0, 0, 1, NECK_EXPANSION, layer_scale=False,
                                             noskip=True)
        self.norm = NormAct(NECK_OUT, act=False)

    def forward(self, x):
        x = self.conv_stem(x)
        levels = []
        for i, stage in enumerate(self.stages):
            x = stage(x)
            if i >= 2:  # msfa_indices (-2, -1): the last two feature levels
                levels.append(x)
        del x
        high = levels[0].shape[-2:]
        resized = [F.interpolate(t, size=high, mode="nearest") if t.shape[-2] < high[0] else t for t in levels]
        del levels
        img = self.ffn(torch.cat(resized, dim=1))
        del resized
        s = high[0] // OUTPUT_RESOLUTION
        if s > 1:  # 16 divides the side here; timm resizes bilinearly otherwise
            img = F.avg_pool2d(img, kernel_size=s, stride=s)
        return self.norm(img)


def run_case(images, side):
    tracer.reset_seed()
    model = MobileNetV5Encoder().eval().requires_grad_(False)
    nparams = tracer.parameter_count(model)
    pixels = torch.randn(images, 3, side, side)
    with torch.no_grad(), tracer.Tracker() as tr:
        tr.mark("start")
        out = model(pixels)
        tr.mark("after")
        shape = list(out.shape)
        del out
    return dict(nparams=nparams, peak=tr.peak("start", "after") - tr.live("start"),
                output=tr.live("after") - tr.live("start"), shape=shape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/data/cpu_traced_mobilenetv5.json")
    a = ap.parse_args()
    out = []
    for images, side in ((1, 256), (2, 256), (1, 512), (1, 768)):
        t0 = time.time()
        r = run_case(images, side)
        out.append({
            "id": f"cpu-mobilenetv5_300m_enc-forward-b{images}-{side}",
            "source": "tools/trace/mobilenetv5_cases.py",
            "measure": "cpu-tensor-peak above the model and the pixel values, torch.no_grad() forward",
            "device": "cpu",
            "model": {"timm": "mobilenetv5_300m_enc", "params": r["nparams"]},
            "input": {"images": images, "height": side, "width": side, "dtype": "fp32"},
            "forward_peak_bytes": r["peak"],
            "output_bytes": r["output"],
            "output_shape": r["shape"],
            "software": {"torch": torch.__version__, "timm": "aa4b5850 (re-implemented)"},
        })
        print(f"{out[-1]['id']}: params={r['nparams']} peak={r['peak']} out={r['output']} {r['shape']} "
              f"({time.time() - t0:.1f}s)", flush=True)
    tracer.write_records(a.out, out, final_newline=True)


if __name__ == "__main__":
    main()
