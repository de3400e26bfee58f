#!/usr/bin/env python3
"""GPU measurements of timm ViT / EVA02 training steps (torch only, no timm install needed).

The modules re-implement huggingface/pytorch-image-models timm/models/vision_transformer.py
@94567641 (VisionTransformer, Block, Attention: one qkv Linear, F.scaled_dot_product_attention
when fused, else the eager chain) and eva.py@0173a139 (EVA02: q/k/v Linears, rotary q/k,
SwiGLU with a LayerNorm on the hidden, avg pool + fc_norm), as tools/trace/vision_tower_cases.py
and tools/trace/timm_eva_cases.py do on CPU. Second training step, max_memory_allocated after
reset_peak_memory_stats (the method of tools/gpu-measure/measure_gpu.py), AdamW (foreach).
    python3 tools/gpu-measure/timm_vit_gpu.py --out $OUT/timm_gpu.json
docs/data/gpu_measured_timm_h100.json was measured with a condensed copy of these modules
(the same layers and calls; LayerNorm eps and initial values differ, which change no tensor's
size), passed to the device machine on its command line.
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def rot(x):
    return torch.stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)


class Block(nn.Module):
    def __init__(self, dim, heads, hidden, fused, eva):
        super().__init__()
        self.nh, self.fused, self.eva = heads, fused, eva
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        if eva:
            self.q_proj, self.k_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim)
            self.fc1_g, self.fc1_x = nn.Linear(dim, hidden), nn.Linear(dim, hidden)
            self.mlp_norm = nn.LayerNorm(hidden, eps=1e-6)
        else:
            self.qkv = nn.Linear(dim, 3 * dim)
            self.fc1 = nn.Linear(dim, hidden)
        self.proj, self.fc2 = nn.Linear(dim, dim), nn.Linear(hidden, dim)

    def attn(self, x, rope):
        B, N, C = x.shape
        if self.eva:
            q = self.q_proj(x).reshape(B, N, self.nh, -1).transpose(1, 2)
            k = self.k_proj(x).reshape(B, N, self.nh, -1).transpose(1, 2)
            v = self.v_proj(x).reshape(B, N, self.nh, -1).transpose(1, 2)
            s, c = rope.tensor_split(2, -1)
            q = torch.cat([q[:, :, :1], q[:, :, 1:] * c + rot(q[:, :, 1:]) * s], 2).type_as(v)
            k = torch.cat([k[:, :, :1], k[:, :, 1:] * c + rot(k[:, :, 1:]) * s], 2).type_as(v)
        else:
            q, k, v = self.qkv(x).reshape(B, N, 3, self.nh, -1).permute(2, 0, 3, 1, 4).unbind(0)
        if self.fused:
            x = F.scaled_dot_product_attention(q, k, v)
        else:
            q = q * q.shape[-1] ** -0.5
            x = (q @ k.transpose(-2, -1)).softmax(dim=-1) @ v
        return self.proj(x.transpose(1, 2).reshape(B, N, C))

    def mlp(self, x):
        if self.eva:
            return self.fc2(self.mlp_norm(F.silu(self.fc1_g(x)) * self.fc1_x(x)))
        return self.fc2(F.gelu(self.fc1(x)))

    def forward(self, x, rope):
        x = x + self.attn(self.norm1(x), rope)
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(self, a, fused, eva):
        super().__init__()
        dim, p, img, heads = a["embed_dim"], a["patch_size"], a["img_size"], a["num_heads"]
        patches = (img // p) ** 2
        self.eva = eva
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=p, stride=p)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, patches + 1, dim) * 0.02)
        hd = dim // heads
        ang = torch.arange(patches, dtype=torch.float32)[:, None] * torch.linspace(0.1, 1.0, hd)[None, :]
        self.register_buffer("rope", torch.cat([ang.sin(), ang.cos()], -1) if eva else torch.zeros(1),
                             persistent=False)
        hidden = int(dim * a.get("mlp_ratio", 4.0))
        self.blocks = nn.ModuleList([Block(dim, heads, hidden, fused, eva) for _ in range(a["depth"])])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, 1000)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x, self.rope)
        if self.eva:
            return self.head(self.norm(x[:, 1:].mean(dim=1)))  # avg pool + fc_norm
        return self.head(self.norm(x)[:, 0])


VIT_B = {"patch_size": 16, "embed_dim": 768, "depth": 12, "num_heads": 12, "img_size": 224}
EVA_B = {"patch_size": 14, "embed_dim": 768, "depth": 12, "num_heads": 12, "mlp_ratio": 4 * 2 / 3, "qkv_fused": False,
         "swiglu_mlp": True, "scale_mlp": True, "use_rot_pos_emb": True, "img_size": 224, "num_classes": 1000}
CASES = [("vit_base_patch16_224", VIT_B, False, 32, "fp32", "sdpa"),
         ("vit_base_patch16_224", VIT_B, False, 32, "fp32", "eager"),
         ("vit_base_patch16_224", VIT_B, False, 64, "amp_bf16", "sdpa"),
         ("eva02_base_patch14_224", EVA_B, True, 32, "amp_bf16", "sdpa"),
         ("eva02_base_patch14_224", EVA_B, True, 32, "fp32", "eager")]


def measure(a, eva, batch, precision, attention):
    torch.manual_seed(0)
    torch.cuda.empty_cache()
    with torch.device("cuda"):
        model = ViT(a, attention == "sdpa", eva)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(batch, 3, a["img_size"], a["img_size"], device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    for record in (False, True):
        if record:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "amp_bf16"):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    params = sum(p.numel() for p in model.parameters())
    del model, opt, x, y
    return peak, params


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="timm_gpu.json")
    out = []
    for name, a, eva, batch, precision, attention in CASES:
        t0 = time.time()
        peak, params = measure(a, eva, batch, precision, attention)
        out.append({"id": f"h100-timm-{name}-b{batch}-{precision}-{attention}-allocated",
                    "measure": "max_memory_allocated", "device": "h100-80gb",
                    "model": {"family": "vit", "name": "timm " + name, "timm_class": "Eva" if eva else "VisionTransformer",
                              "timm_args": a, "params": params,
                              "impl": "torch-only re-implementation of timm " + ("Eva" if eva else "VisionTransformer")},
                    "train": {"batch": batch, "image": a["img_size"], "precision": precision, "optimizer": "adamw",
                              "optimizer_impl": "foreach", "checkpointing": "none", "attention": attention,
                              "grad_accum": 1},
                    "measured_bytes": peak, "source": "tools/gpu-measure/timm_vit_gpu.py",
                    "software": {"torch": torch.__version__.split("+")[0], "cuda": torch.version.cuda},
                    "detail": {"gpu": torch.cuda.get_device_name(), "seconds": round(time.time() - t0, 2)},
                    "notes": "second training step after torch.cuda.reset_peak_memory_stats()"})
        print(out[-1]["id"], peak, params, flush=True)
    json.dump(out, open(ap.parse_args().out, "w"), indent=1)


if __name__ == "__main__":
    main()
