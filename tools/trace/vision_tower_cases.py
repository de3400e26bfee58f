#!/usr/bin/python3
"""CPU traces of a small vision-language model (SigLIP tower + Gemma 3 projector + Gemma 3 text
stack) and of small timm ViTs.

Gemma 3: plain-torch re-implementation of the eager training path of
Gemma3ForConditionalGeneration (huggingface/transformers models/gemma3/modeling_gemma3.py@f14d0cbc:
Gemma3Model.get_image_features -> SiglipVisionModel -> Gemma3MultiModalProjector (transpose,
reshape, AvgPool2d, Gemma3RMSNorm, matmul with mm_input_projection_weight), masked_scatter into
the scaled text embeddings, Gemma3TextModel, loss on logits.float() shifted and made contiguous).
The SigLIP tower follows models/siglip/modeling_siglip.py (eager attention). The text stack is
docs/research/scripts/trace_families.py's gemma3_text re-implementation. Three runs of the same
model: an image batch, a text-only batch (pixel_values=None: the tower holds parameters, builds
no graph, and gets no gradient or optimizer state) and an image batch with the tower frozen.

timm: VisionTransformer of huggingface/pytorch-image-models timm/models/vision_transformer.py
@94567641 (Attention's non-fused branch: torch 1.13 has no F.scaled_dot_product_attention, which
is what timm's use_fused_attn() tests; LayerScale; DropPath as timm.layers.drop.drop_path).

Harness: tracer.py (the method of shared/ground-truth/measure.py: peak live CPU tensor bytes of
step 2, fp32, AdamW single-tensor). Run from the project root (about a minute):
    /usr/bin/python3 tools/trace/vision_tower_cases.py --out docs/data/cpu_traced_vision_tower.json
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "docs", "research", "scripts"))
import trace_families  # noqa: E402  (LlamaRecipeForCausalLM, GemmaRMSNorm, rope)

torch.set_num_threads(1)


# ---------------------------------------------------------------------------------------
# SigLIP vision tower (modeling_siglip.py, eager attention, vision_use_head=False)
# ---------------------------------------------------------------------------------------
class SiglipLayer(nn.Module):
    def __init__(self, v):
        super().__init__()
        h, self.nh = v["hidden_size"], v["num_attention_heads"]
        self.hd = h // self.nh
        eps = v.get("layer_norm_eps", 1e-6)
        self.layer_norm1, self.layer_norm2 = nn.LayerNorm(h, eps=eps), nn.LayerNorm(h, eps=eps)
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(h, h) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(h, v["intermediate_size"]), nn.Linear(v["intermediate_size"], h)
        self.p = v.get("attention_dropout", 0.0)

    def attn(self, x):  # SiglipAttention + eager_attention_forward
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, S, self.nh, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, S, self.nh, self.hd).transpose(1, 2)
        w = torch.matmul(q, k.transpose(2, 3)) * self.hd ** -0.5
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        w = F.dropout(w, p=self.p, training=self.training)
        o = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.out_proj(o.reshape(B, S, -1).contiguous())

    def forward(self, x):
        x = x + self.attn(self.layer_norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.layer_norm2(x)), approximate="tanh"))


class SiglipVisionModel(nn.Module):
    def __init__(self, v):
        super().__init__()
        h, p, img = v["hidden_size"], v["patch_size"], v["image_size"]
        self.patch_embedding = nn.Conv2d(v.get("num_channels", 3), h, kernel_size=p, stride=p)
        n = (img // p) ** 2
        self.position_embedding = nn.Embedding(n, h)
        self.register_buffer("position_ids", torch.arange(n).expand((1, -1)), persistent=False)
        self.layers = nn.ModuleList([SiglipLayer(v) for _ in range(v["num_hidden_layers"])])
        self.post_layernorm = nn.LayerNorm(h, eps=v.get("layer_norm_eps", 1e-6))

    def forward(self, pixel_values):
        x = self.patch_embedding(pixel_values).flatten(2).transpose(1, 2)
        x = x + self.position_embedding(self.position_ids)
        for layer in self.layers:
            x = layer(x)
        return self.post_layernorm(x)


class Gemma3MultiModalProjector(nn.Module):  # modeling_gemma3.py
    def __init__(self, c):
        super().__init__()
        v, t = c["vision_config"], c["text_config"]
        self.mm_input_projection_weight = nn.Parameter(torch.zeros(v["hidden_size"], t["hidden_size"]))
        self.mm_soft_emb_norm = trace_families.GemmaRMSNorm(v["hidden_size"], eps=v.get("layer_norm_eps", 1e-6))
        self.patches_per_image = v["image_size"] // v["patch_size"]
        tokens_per_side = int(c["mm_tokens_per_image"] ** 0.5)
        k = self.patches_per_image // tokens_per_side
        self.avg_pool = nn.AvgPool2d(kernel_size=k, stride=k)

    def forward(self, vo):
        B, _, S = vo.shape
        r = vo.transpose(1, 2).reshape(B, S, self.patches_per_image, self.patches_per_image).contiguous()
        pooled = self.avg_pool(r).flatten(2).transpose(1, 2)
        normed = self.mm_soft_emb_norm(pooled)
        return torch.matmul(normed, self.mm_input_projection_weight).type_as(vo)


class Gemma3ForConditionalGeneration(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.vision_tower = SiglipVisionModel(c["vision_config"])
        self.multi_modal_projector = Gemma3MultiModalProjector(c)
        self.lm = trace_families.LlamaRecipeForCausalLM(c["text_config"])  # tied lm_head, sandwich norms, qk-norm

    def forward(self, ids, labels, pixel_values=None):
        lm, t = self.lm, self.c["text_config"]
        image_id = self.c["image_token_index"]
        B, S = ids.shape
        special = ids == image_id  # Gemma3Model.forward: out-of-vocabulary image ids become 0
        llm_ids = ids.clone()
        llm_ids[special] = 0
        x = lm.embed_tokens(llm_ids)
        x = x * torch.tensor(t["hidden_size"] ** 0.5, dtype=x.dtype)  # Gemma3TextScaledWordEmbedding
        if pixel_values is not None:
            feats = self.multi_modal_projector(self.vision_tower(pixel_values)).to(x.dtype)
            mask = special.unsqueeze(-1).expand_as(x)
            x = x.masked_scatter(mask, feats)
        cos, sin = trace_families.rope(lm.hd, S, t.get("rope_theta", 10000.0), x.dtype)
        m = torch.full((S, S), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)[None, None]
        for layer in lm.layers:
            x = layer(x, cos, sin, m)
        logits = lm.lm_head(lm.norm(x)).float()
        sl = logits[..., :-1, :].contiguous()
        lb = labels[..., 1:].contiguous()
        return F.cross_entropy(sl.view(-1, sl.size(-1)), lb.view(-1))


GEMMA3 = {
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "mm_tokens_per_image": 16,
    "image_token_index": 1100, "boi_token_index": 1098, "eoi_token_index": 1099,
    "text_config": {"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"], "hidden_size": 128,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
                    "intermediate_size": 256, "vocab_size": 1100, "hidden_activation": "gelu_pytorch_tanh",
                    "query_pre_attn_scalar": 32, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
                    "attention_dropout": 0.0, "sliding_window": 512, "rope_theta": 10000.0,
                    "max_position_embeddings": 2048},
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 128, "intermediate_size": 256,
                      "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 64, "patch_size": 8,
                      "layer_norm_eps": 1e-6, "attention_dropout": 0.0, "vision_use_head": False},
}


# ---------------------------------------------------------------------------------------
# timm VisionTransformer (vision_transformer.py: PatchEmbed, _pos_embed, Block, Attention)
# ---------------------------------------------------------------------------------------
def drop_path(x, p, training):  # timm.layers.drop.drop_path (scale_by_keep=True)
    if p == 0.0 or not training:
        return x
    keep = 1 - p
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    r = x.new_empty(shape).bernoulli_(keep)
    r.div_(keep)
    return x * r


class TimmBlock(nn.Module):
    def __init__(self, dim, heads, mlp_ratio, init_values, dp):
        super().__init__()
        self.nh, self.hd, self.dp = heads, dim // heads, dp
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim, bias=True), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, int(dim * mlp_ratio)), nn.Linear(int(dim * mlp_ratio), dim)
        self.gamma1 = nn.Parameter(init_values * torch.ones(dim)) if init_values else None
        self.gamma2 = nn.Parameter(init_values * torch.ones(dim)) if init_values else None

    def attn(self, x):  # Attention.forward, fused_attn False
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.nh, self.hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q = q * self.hd ** -0.5
        a = q @ k.transpose(-2, -1)
        a = a.softmax(dim=-1)
        x = a @ v
        return self.proj(x.transpose(1, 2).reshape(B, N, C))

    def forward(self, x):
        y = self.attn(self.norm1(x))
        if self.gamma1 is not None:
            y = y * self.gamma1  # LayerScale (inplace=False)
        x = x + drop_path(y, self.dp, self.training)
        y = self.fc2(F.gelu(self.fc1(self.norm2(x))))
        if self.gamma2 is not None:
            y = y * self.gamma2
        return x + drop_path(y, self.dp, self.training)


class TimmViT(nn.Module):
    def __init__(self, a):
        super().__init__()
        dim, p, img = a["embed_dim"], a["patch_size"], a["img_size"]
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=p, stride=p)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, (img // p) ** 2 + 1, dim) * 0.02)
        dpr = [x.item() for x in torch.linspace(0, a.get("drop_path_rate", 0.0), a["depth"])]
        self.blocks = nn.ModuleList([TimmBlock(dim, a["num_heads"], a.get("mlp_ratio", 4.0), a.get("init_values"),
                                               dpr[i]) for i in range(a["depth"])])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, a.get("num_classes", 1000))

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # PatchEmbed, output_fmt NLC
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = x + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        x = self.norm(x)
        return self.head(x[:, 0])  # global_pool 'token'


TIMM = {
    "timm_vit_small": {"patch_size": 16, "embed_dim": 192, "depth": 4, "num_heads": 3, "img_size": 128},
    "timm_vit_small_ls_dp": {"patch_size": 16, "embed_dim": 192, "depth": 4, "num_heads": 3, "img_size": 128,
                             "init_values": 1e-5, "drop_path_rate": 0.1},
}


def run(name, B, mode):
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        if name == "gemma3":
            c = GEMMA3
            model = Gemma3ForConditionalGeneration(c)
            if mode == "frozen_tower":
                for p in model.vision_tower.parameters():
                    p.requires_grad_(False)
        else:
            c = TIMM[name]
            model = TimmViT(c)
        model.train()
        tr.mark("built")
        opt = tracer.make_opt("adamw", [p for p in model.parameters() if p.requires_grad], None)
        if name == "gemma3":
            S, n_img = 128, c["mm_tokens_per_image"]
            ids = torch.randint(0, 1000, (B, S))
            if mode != "text_only":
                ids[:, 4:4 + n_img] = c["image_token_index"]
            v = c["vision_config"]
            px = torch.randn(B, 3, v["image_size"], v["image_size"]) if mode != "text_only" else None
            labels = ids.clone()
            labels[labels == c["image_token_index"]] = -100
            inputs = (ids, labels, px)
        else:
            img = torch.randn(B, 3, c["img_size"], c["img_size"])
            y = torch.randint(0, 1000, (B,))
        tr.mark("inputs")
        grad_bytes = tracer.GradientBytes(lambda: model.parameters())
        tracer.train_two_steps(tr, lambda: model(*inputs) if name == "gemma3" else F.cross_entropy(model(img), y), opt, grad_bytes)
        grads = grad_bytes.bytes
        nparams = tracer.parameter_count(model)
        tower = sum(p.numel() for p in model.vision_tower.parameters()) if name == "gemma3" else 0
        params_enum = tracer.tensor_bytes(list(model.parameters()))
        opt_enum = tracer.optimizer_state_bytes([opt])
        del model, opt
        if name == "gemma3":
            del inputs, ids, labels, px
        else:
            del img, y
    d = dict(nparams=nparams, tower_params=tower, params_enum=params_enum, opt_enum=opt_enum, grads_enum=grads,
             end_live=tr.live("__end__"))
    d.update(tracer.step_readings(tr, phase_peaks=False))
    return c, d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/data/cpu_traced_vision_tower.json")
    a = ap.parse_args()
    out = []
    cases = [("gemma3", 2, "image"), ("gemma3", 4, "image"), ("gemma3", 2, "text_only"), ("gemma3", 2, "frozen_tower"),
             ("timm_vit_small", 4, "image"), ("timm_vit_small", 8, "image"), ("timm_vit_small_ls_dp", 4, "image")]
    for name, B, mode in cases:
        t0 = time.time()
        c, d = run(name, B, mode)
        if name == "gemma3":
            model = {"family": "gemma3", "hf_config": c, "params": d["nparams"], "vision_tower_params": d["tower_params"],
                     "impl": "hf-transformers"}
            train = dict(batch=B, seq=128, images_per_sample=0 if mode == "text_only" else 1,
                         image=c["vision_config"]["image_size"], frozen="vision_tower" if mode == "frozen_tower" else "none")
        else:
            model = {"family": "vit", "name": "timm " + name, "timm_args": c, "params": d["nparams"],
                     "impl": "torch-only re-implementation of timm VisionTransformer (non-fused attention)"}
            train = dict(batch=B, seq=None, image=c["img_size"], frozen="none")
        train.update(precision="fp32", optimizer="adamw", optimizer_impl="single_tensor (torch 1.13 CPU default)",
                     checkpointing="none", attention="eager", grad_accum=1)
        rec = {**tracer.record_head(f"cpu-{name}-small-b{B}-{mode}-adamw",
                                    "tools/trace/vision_tower_cases.py (harness: shared/ground-truth/measure.py)"),
               "model": model, "train": train,
               **tracer.peak_fields(d),
               "components": tracer.components(d),
               "detail": d, "torch": torch.__version__,
               "notes": "peak live CPU tensor bytes of training step 2 (absolute)"
                        + ("; traced from a torch-only re-implementation of transformers Gemma3ForConditionalGeneration"
                           " (eager)" if name == "gemma3" else "")}
        out.append(rec)
        print(f"{rec['id']}: params={d['nparams']} peak={d['s2_peak']} act={d['s2_fwd'] - d['s2_start']} "
              f"grads={d['grads_enum']} opt={d['opt_enum']} end_live={d['end_live']} ({time.time() - t0:.1f}s)", flush=True)
    tracer.write_records(a.out, out)


if __name__ == "__main__":
    main()
