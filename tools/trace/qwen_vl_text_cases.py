#!/usr/bin/python3
"""CPU traces of small Qwen2.5-VL and Qwen3-VL models in a text-only run (no images).

Qwen2.5-VL: plain-torch re-implementation of the eager training path of
Qwen2_5_VLForConditionalGeneration (huggingface/transformers models/qwen2_5_vl/modeling_qwen2_5_vl.py
@00b676f8): Qwen2_5_VLTextModel with the Qwen2 decoder layer (q/k/v biases, RMSNorm, SwiGLU), one
Qwen2_5_VLRotaryEmbedding forward per model forward giving (3, B, S, head_dim) cos and sin, and in
every layer apply_multimodal_rotary_pos_emb, which concatenates that layer's cos and sin sections
into new (B, 1, S, head_dim) tensors; the loss is loss_utils' ForCausalLMLoss. Qwen3-VL
(models/qwen3_vl/modeling_qwen3_vl.py @00709b86): the Qwen3 decoder layer (per-head q/k RMSNorm),
whose interleaved multimodal RoPE is applied once to the frequencies, so every layer reads the same
(B, S, head_dim) cos and sin. Both build their vision tower and merger as the modeling files do
(parameters only: without pixel_values autograd never reaches them, so they get no gradient and no
optimizer state).

Harness: tracer.py (the method of shared/ground-truth/measure.py: peak live CPU tensor bytes of
step 2, fp32, AdamW single-tensor). Run from the project root (under a minute):
    /usr/bin/python3 tools/trace/qwen_vl_text_cases.py --out docs/data/cpu_traced_vision_tower.json
which replaces this script's records in that file and keeps the others.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "docs", "research", "scripts"))
import trace_families  # noqa: E402  (Layer, LlamaRMSNorm, rotate_half, eager_attention)

torch.set_num_threads(1)

SOURCE = "tools/trace/qwen_vl_text_cases.py (harness: shared/ground-truth/measure.py)"

QWEN2_5_VL = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
    "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 2048, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "attention_dropout": 0.0, "tie_word_embeddings": False, "hidden_act": "silu",
    "rope_scaling": {"type": "mrope", "mrope_section": [4, 6, 6]},
    "vision_config": {"depth": 2, "hidden_size": 64, "intermediate_size": 96, "num_heads": 4, "in_channels": 3,
                      "patch_size": 8, "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 128},
}
QWEN3_VL = {
    "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl", "tie_word_embeddings": False,
    "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 128, "intermediate_size": 256,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
                    "vocab_size": 1000, "max_position_embeddings": 2048, "rms_norm_eps": 1e-6,
                    "rope_theta": 5000000.0, "attention_bias": False, "attention_dropout": 0.0, "hidden_act": "silu",
                    "rope_scaling": {"rope_type": "default", "mrope_section": [6, 5, 5], "mrope_interleaved": True}},
    "vision_config": {"depth": 2, "hidden_size": 64, "intermediate_size": 96, "num_heads": 4, "in_channels": 3,
                      "patch_size": 8, "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 128,
                      "num_position_embeddings": 64, "deepstack_visual_indexes": [0, 1]},
}


# ---------------------------------------------------------------------------------------
# vision towers: parameters only (a text-only run never calls them)
# ---------------------------------------------------------------------------------------
class Qwen25VisionTower(nn.Module):  # Qwen2_5_VisionTransformerPretrainedModel
    def __init__(self, v):
        super().__init__()
        h, f, m = v["hidden_size"], v["intermediate_size"], v["spatial_merge_size"]
        k = (v["temporal_patch_size"], v["patch_size"], v["patch_size"])
        self.patch_embed = nn.Conv3d(v["in_channels"], h, kernel_size=k, stride=k, bias=False)
        self.blocks = nn.ModuleList()
        for _ in range(v["depth"]):
            b = nn.Module()
            b.norm1, b.norm2 = trace_families.LlamaRMSNorm(h), trace_families.LlamaRMSNorm(h)
            b.qkv, b.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            b.gate_proj, b.up_proj, b.down_proj = nn.Linear(h, f), nn.Linear(h, f), nn.Linear(f, h)
            self.blocks.append(b)
        merged = h * m * m
        self.ln_q = trace_families.LlamaRMSNorm(h)
        self.mlp = nn.Sequential(nn.Linear(merged, merged), nn.GELU(), nn.Linear(merged, v["out_hidden_size"]))


class Qwen3VisionTower(nn.Module):  # Qwen3VLVisionModel
    def __init__(self, v):
        super().__init__()
        h, f, m = v["hidden_size"], v["intermediate_size"], v["spatial_merge_size"]
        k = (v["temporal_patch_size"], v["patch_size"], v["patch_size"])
        self.patch_embed = nn.Conv3d(v["in_channels"], h, kernel_size=k, stride=k, bias=True)
        self.pos_embed = nn.Embedding(v["num_position_embeddings"], h)
        self.blocks = nn.ModuleList()
        for _ in range(v["depth"]):
            b = nn.Module()
            b.norm1, b.norm2 = nn.LayerNorm(h, eps=1e-6), nn.LayerNorm(h, eps=1e-6)
            b.qkv, b.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            b.linear_fc1, b.linear_fc2 = nn.Linear(h, f), nn.Linear(f, h)
            self.blocks.append(b)
        merged = h * m * m

        def merger(postshuffle):
            mm = nn.Module()
            mm.norm = nn.LayerNorm(merged if postshuffle else h, eps=1e-6)
            mm.linear_fc1, mm.linear_fc2 = nn.Linear(merged, merged), nn.Linear(merged, v["out_hidden_size"])
            return mm

        self.merger = merger(False)
        self.deepstack_merger_list = nn.ModuleList([merger(True) for _ in v["deepstack_visual_indexes"]])


# ---------------------------------------------------------------------------------------
# text decoders
# ---------------------------------------------------------------------------------------
class MropeAttention(trace_families.Attention):
    """Qwen2_5_VLAttention: trace_families' Qwen2 attention with apply_multimodal_rotary_pos_emb."""

    def forward(self, x, cos, sin, mask):
        """cos and sin are the (3, B, S, head_dim) tables; each layer cats its sections into new
        (B, 1, S, head_dim) tensors."""
        return mrope_attention(self, x, cos, sin, mask)


def mrope_attention(self, x, cos, sin, mask):
    B, S, _ = x.shape
    shape = (B, S, -1, self.hd)
    q = self.q_proj(x).view(shape).transpose(1, 2)
    k = self.k_proj(x).view(shape).transpose(1, 2)
    v = self.v_proj(x).view(shape).transpose(1, 2)
    section = self.mrope_section * 2
    c = torch.cat([m[i % 3] for i, m in enumerate(cos.split(section, dim=-1))], dim=-1).unsqueeze(1)
    s = torch.cat([m[i % 3] for i, m in enumerate(sin.split(section, dim=-1))], dim=-1).unsqueeze(1)
    q, k = (q * c) + (trace_families.rotate_half(q) * s), (k * c) + (trace_families.rotate_half(k) * s)
    o = trace_families.eager_attention(q, k, v, mask, self.scaling)
    return self.o_proj(o.reshape(B, S, -1))


class VLForConditionalGeneration(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.kind = c["model_type"]
        t = dict(c.get("text_config") or c)
        # trace_families' layers pick q/k biases (qwen2) or per-head q/k norms (qwen3) by model_type.
        t["model_type"] = "qwen2" if self.kind == "qwen2_5_vl" else "qwen3"
        h, V = t["hidden_size"], t["vocab_size"]
        self.hd = t.get("head_dim") if self.kind == "qwen3_vl" else h // t["num_attention_heads"]
        self.theta = t["rope_theta"]
        self.section = (t.get("rope_scaling") or c.get("rope_scaling"))["mrope_section"]
        self.visual = (Qwen25VisionTower if self.kind == "qwen2_5_vl" else Qwen3VisionTower)(c["vision_config"])
        self.embed_tokens = nn.Embedding(V, h)
        self.layers = nn.ModuleList([trace_families.Layer(t) for _ in range(t["num_hidden_layers"])])
        for layer in self.layers:
            if self.kind == "qwen2_5_vl":
                layer.self_attn.__class__ = MropeAttention
                layer.self_attn.mrope_section = self.section
                # each Qwen2_5_VLAttention owns a Qwen2_5_VLRotaryEmbedding (inv_freq, non-persistent)
                layer.self_attn.register_buffer(
                    "inv_freq", 1.0 / (self.theta ** (torch.arange(0, self.hd, 2).float() / self.hd)), persistent=False)
        self.norm = trace_families.LlamaRMSNorm(h, t["rms_norm_eps"])
        self.lm_head = nn.Linear(h, V, bias=False)

    def rotary(self, x, B, S):
        """The text rotary embedding's forward (no_grad, fp32 inside, cast to x's dtype)."""
        with torch.no_grad():
            inv = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.int64).float() / self.hd))
            pos = torch.arange(S).view(1, 1, -1).expand(3, B, -1)  # get_rope_index without images: a view
            freqs = (inv[None, None, :, None].float().expand(3, B, -1, 1) @ pos[:, :, None, :].float()).transpose(2, 3)
            if self.kind == "qwen3_vl":  # apply_interleaved_mrope: overwrite T's slots with H and W
                freqs_t = freqs[0]
                for dim, offset in enumerate((1, 2), start=1):
                    idx = slice(offset, self.section[dim] * 3, 3)
                    freqs_t[..., idx] = freqs[dim, ..., idx]
                freqs = freqs_t
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def forward(self, ids, labels):
        B, S = ids.shape
        x = self.embed_tokens(ids)
        cos, sin = self.rotary(x, B, S)
        mask = torch.full((S, S), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)[None, None]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        del cos, sin, mask
        logits = self.lm_head(self.norm(x))
        # ForCausalLMLoss (loss_utils.py): logits.float(), labels padded and shifted.
        logits = logits.float()
        shifted = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), shifted.view(-1), ignore_index=-100)


def run(c, B, S):
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        model = VLForConditionalGeneration(c)
        model.train()
        tr.mark("built")
        opt = tracer.make_opt("adamw", [p for p in model.parameters() if p.requires_grad], None)
        ids = torch.randint(0, 1000, (B, S))
        labels = ids.clone()
        tr.mark("inputs")
        grad_bytes = tracer.GradientBytes(lambda: model.parameters())
        tracer.train_two_steps(tr, lambda: model(ids, labels), opt, grad_bytes)
        d = dict(nparams=tracer.parameter_count(model),
                 tower_params=sum(p.numel() for p in model.visual.parameters()),
                 params_enum=tracer.tensor_bytes(list(model.parameters())),
                 opt_enum=tracer.optimizer_state_bytes([opt]), grads_enum=grad_bytes.bytes)
        del model, opt, ids, labels
    d["end_live"] = tr.live("__end__")
    d.update(tracer.step_readings(tr, phase_peaks=False))
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/data/cpu_traced_vision_tower.json")
    a = ap.parse_args()
    kept = [r for r in tracer.read_records(a.out) if not r["id"].startswith(("cpu-qwen2_5_vl-", "cpu-qwen3_vl-"))]
    out = []
    for c, B, S in ((QWEN2_5_VL, 2, 128), (QWEN2_5_VL, 4, 256), (QWEN3_VL, 2, 128)):
        t0 = time.time()
        d = run(c, B, S)
        name = c["model_type"]
        rec = {**tracer.record_head(f"cpu-{name}-small-b{B}-s{S}-text_only-adamw", SOURCE),
               "model": {"hf_config": c, "params": d["nparams"], "vision_tower_params": d["tower_params"],
                         "impl": "hf-transformers"},
               "train": dict(batch=B, seq=S, images_per_sample=0, precision="fp32", optimizer="adamw",
                             optimizer_impl="single_tensor (torch 1.13 CPU default)", checkpointing="none",
                             attention="eager", grad_accum=1),
               **tracer.peak_fields(d), "components": tracer.components(d), "detail": d, "torch": torch.__version__,
               "notes": "peak live CPU tensor bytes of training step 2 (absolute); traced from a torch-only "
                        f"re-implementation of transformers {c['architectures'][0]} (eager), text only"}
        out.append(rec)
        print(f"{rec['id']}: params={d['nparams']} tower={d['tower_params']} peak={d['s2_peak']} "
              f"grads={d['grads_enum']} opt={d['opt_enum']} end_live={d['end_live']} ({time.time() - t0:.1f}s)",
              flush=True)
    tracer.write_records(a.out, kept + out)


if __name__ == "__main__":
    main()
