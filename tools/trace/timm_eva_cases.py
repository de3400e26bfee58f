#!/usr/bin/python3
"""CPU traces of small timm Eva models (EVA02 and EVA-01 arguments).

Plain-torch re-implementation of huggingface/pytorch-image-models timm/models/eva.py@0173a139
(Eva, EvaBlock, EvaAttention with qkv_fused False or True -- one qkv Linear without bias fed
torch.cat((q_bias, k_bias, v_bias)) -- and the non-fused branch: torch 1.13 has no
F.scaled_dot_product_attention, which timm's use_fused_attn() tests), timm/layers/mlp.py SwiGLU
with norm_layer (scale_mlp), GluMlp (swiglu_mlp without scale_mlp) or Mlp (GELU, EVA-01),
timm/layers/pos_embed_sincos.py apply_rot_embed_cat and
RotaryEmbeddingCat's cached (patches, 2 * head_dim) fp32 table (a non-persistent buffer; its
values do not matter to memory), and timm.layers.drop.drop_path. Pooling: global_pool 'avg'
with fc_norm.

Harness: tracer.py (peak live CPU tensor bytes of step 2, AdamW single-tensor). Run from the
project root (under a minute):
    /usr/bin/python3 tools/trace/timm_eva_cases.py --out docs/data/cpu_traced_timm_eva.json
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracer

torch.set_num_threads(1)


def drop_path(x, p, training):  # timm.layers.drop.drop_path (scale_by_keep=True)
    if p == 0.0 or not training:
        return x
    keep = 1 - p
    r = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
    r.div_(keep)
    return x * r


def rot(x):  # pos_embed_sincos.rot
    return torch.stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)


def apply_rot_embed_cat(x, emb):  # pos_embed_sincos.apply_rot_embed_cat
    sin_emb, cos_emb = emb.tensor_split(2, -1)
    return x * cos_emb + rot(x) * sin_emb


class EvaBlock(nn.Module):
    def __init__(self, dim, heads, hidden, init_values, dp, a):
        super().__init__()
        self.nh, self.dp = heads, dp
        self.fused, self.swiglu, self.scale_mlp = a["qkv_fused"], a["swiglu_mlp"], a["scale_mlp"]
        self.scale = (dim // heads) ** -0.5
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        if self.fused:
            self.qkv = nn.Linear(dim, 3 * dim, bias=False)
            self.q_bias, self.v_bias = nn.Parameter(torch.zeros(dim)), nn.Parameter(torch.zeros(dim))
            self.register_buffer("k_bias", torch.zeros(dim), persistent=False)
        else:
            self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim, bias=False)
            self.v_proj = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        if not self.swiglu:
            self.fc1 = nn.Linear(dim, hidden)
        elif self.scale_mlp:
            self.fc1_g, self.fc1_x = nn.Linear(dim, hidden), nn.Linear(dim, hidden)
            self.mlp_norm = nn.LayerNorm(hidden, eps=1e-6)
        else:
            self.fc1 = nn.Linear(dim, 2 * hidden)  # GluMlp(hidden_features=hidden * 2)
        self.fc2 = nn.Linear(hidden, dim)
        self.gamma_1 = nn.Parameter(init_values * torch.ones(dim)) if init_values else None
        self.gamma_2 = nn.Parameter(init_values * torch.ones(dim)) if init_values else None

    def attn(self, x, rope):  # EvaAttention.forward, qkv_fused False, fused_attn False
        B, N, C = x.shape
        if self.fused:
            qkv_bias = torch.cat((self.q_bias, self.k_bias, self.v_bias))
            qkv = F.linear(input=x, weight=self.qkv.weight, bias=qkv_bias)
            q, k, v = qkv.reshape(B, N, 3, self.nh, -1).permute(2, 0, 3, 1, 4).unbind(0)
        else:
            q = self.q_proj(x).reshape(B, N, self.nh, -1).transpose(1, 2)
            k = self.k_proj(x).reshape(B, N, self.nh, -1).transpose(1, 2)
            v = self.v_proj(x).reshape(B, N, self.nh, -1).transpose(1, 2)
        if rope is not None:
            q = torch.cat([q[:, :, :1, :], apply_rot_embed_cat(q[:, :, 1:, :], rope)], 2).type_as(v)
            k = torch.cat([k[:, :, :1, :], apply_rot_embed_cat(k[:, :, 1:, :], rope)], 2).type_as(v)
        q = q * self.scale
        a = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        x = a @ v
        return self.proj(x.transpose(1, 2).reshape(B, N, C))

    def mlp(self, x):
        if not self.swiglu:  # Mlp
            return self.fc2(F.gelu(self.fc1(x)))
        if self.scale_mlp:  # SwiGLU with norm_layer
            x = F.silu(self.fc1_g(x)) * self.fc1_x(x)
            return self.fc2(self.mlp_norm(x))
        x1, x2 = self.fc1(x).chunk(2, dim=-1)  # GluMlp, gate_last False
        return self.fc2(F.silu(x1) * x2)

    def forward(self, x, rope):
        y = self.attn(self.norm1(x), rope)
        if self.gamma_1 is not None:
            y = self.gamma_1 * y
        x = x + drop_path(y, self.dp, self.training)
        y = self.mlp(self.norm2(x))
        if self.gamma_2 is not None:
            y = self.gamma_2 * y
        return x + drop_path(y, self.dp, self.training)


class Eva02(nn.Module):
    def __init__(self, a):
        super().__init__()
        dim, p, img, heads = a["embed_dim"], a["patch_size"], a["img_size"], a["num_heads"]
        patches = (img // p) ** 2
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=p, stride=p)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, patches + 1, dim) * 0.02)
        hd = dim // heads
        angles = torch.arange(patches, dtype=torch.float32)[:, None] * torch.linspace(0.1, 1.0, hd)[None, :]
        rope = torch.cat([angles.sin(), angles.cos()], -1) if a["use_rot_pos_emb"] else None
        self.register_buffer("rope", rope, persistent=False)
        dpr = [x.item() for x in torch.linspace(0, a.get("drop_path_rate", 0.0), a["depth"])]
        hidden = int(dim * a["mlp_ratio"])
        self.blocks = nn.ModuleList([EvaBlock(dim, heads, hidden, a.get("init_values"), dpr[i], a)
                                     for i in range(a["depth"])])
        self.fc_norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, a.get("num_classes", 1000))

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        x = x + self.pos_embed
        for blk in self.blocks:
            x = blk(x, self.rope)
        x = x[:, 1:].mean(dim=1)  # global_pool 'avg'
        return self.head(self.fc_norm(x))


BASE = {"patch_size": 16, "embed_dim": 192, "depth": 4, "num_heads": 3, "mlp_ratio": 4 * 2 / 3, "qkv_fused": False,
        "swiglu_mlp": True, "scale_mlp": True, "use_rot_pos_emb": True, "img_size": 128}
# eva02_tiny/small's arguments (qkv_fused and scale_mlp at Eva's defaults) and EVA-01's (plain
# GELU Mlp, no rope), at the same small size.
CASES = {"eva02_small": BASE, "eva02_small_ls_dp": dict(BASE, init_values=1e-5, drop_path_rate=0.1),
         "eva02_fused_glu": dict(BASE, qkv_fused=True, scale_mlp=False),
         "eva01": dict(BASE, mlp_ratio=4.0, qkv_fused=True, swiglu_mlp=False, scale_mlp=False, use_rot_pos_emb=False)}


def run(name, B, prec):
    tracer.reset_seed()
    c = CASES[name]
    with tracer.Tracker() as tr:
        model = Eva02(c)
        model.train()
        tr.mark("built")
        opt = tracer.make_opt("adamw", list(model.parameters()), None)
        img = torch.randn(B, 3, c["img_size"], c["img_size"])
        y = torch.randint(0, 1000, (B,))
        tr.mark("inputs")
        grad_bytes = tracer.GradientBytes(lambda: model.parameters())
        tracer.train_two_steps(tr, tracer.in_precision(prec, lambda: F.cross_entropy(model(img), y)), opt, grad_bytes)
        d = dict(nparams=tracer.parameter_count(model), params_enum=tracer.tensor_bytes(list(model.parameters())),
                 opt_enum=tracer.optimizer_state_bytes([opt]), grads_enum=grad_bytes.bytes)
        del model, opt, img, y
    d["end_live"] = tr.live("__end__")
    d.update(tracer.step_readings(tr, phase_peaks=False))
    return c, d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/data/cpu_traced_timm_eva.json")
    a = ap.parse_args()
    out = []
    # No CPU autocast case: torch 1.13's CPU autocast leaves layer_norm off its lists, and the
    # LayerNorm on SwiGLU's bf16 hidden then refuses its fp32 weight.
    for name, B, prec in [("eva02_small", 4, "fp32"), ("eva02_small", 8, "fp32"), ("eva02_small_ls_dp", 4, "fp32"),
                          ("eva02_fused_glu", 4, "fp32"), ("eva01", 4, "fp32")]:
        t0 = time.time()
        c, d = run(name, B, prec)
        rec = {**tracer.record_head(f"cpu-timm_{name}-b{B}-{prec}-adamw",
                                    "tools/trace/timm_eva_cases.py (harness: shared/ground-truth/measure.py)"),
               "model": {"family": "vit", "name": "timm " + name, "timm_class": "Eva", "timm_args": c,
                         "params": d["nparams"],
                         "impl": "torch-only re-implementation of timm Eva (non-fused attention)"},
               "train": dict(batch=B, seq=None, image=c["img_size"], frozen="none", precision=prec, optimizer="adamw",
                             optimizer_impl="single_tensor (torch 1.13 CPU default)", checkpointing="none",
                             attention="eager", grad_accum=1),
               **tracer.peak_fields(d), "components": tracer.components(d), "detail": d, "torch": torch.__version__,
               "notes": "peak live CPU tensor bytes of training step 2 (absolute)"}
        out.append(rec)
        print(f"{rec['id']}: params={d['nparams']} peak={d['s2_peak']} act={d['s2_fwd'] - d['s2_start']} "
              f"({time.time() - t0:.1f}s)", flush=True)
    tracer.write_records(a.out, out)


if __name__ == "__main__":
    main()
