#!/usr/bin/python3
"""CPU traces of a small Gemma 3n text model (model_type gemma3n_text, Gemma3nForCausalLM).

A plain-torch re-implementation of the training forward of transformers
models/gemma3n/modeling_gemma3n.py@b87ecf8c (Gemma3nRMSNorm, Gemma3nTextScaledWordEmbedding,
Gemma3nTextLaurelBlock, Gemma3nTextMLP with _gaussian_topk, Gemma3nTextAltUp,
Gemma3nTextAttention, Gemma3nTextDecoderLayer, Gemma3nTextModel, Gemma3nForCausalLM), eager
attention, defaults of configuration_gemma3n.py@01854809. In training no cache is passed, so the
KV-shared layers compute their own k and v (Gemma3nTextAttention reads the shared cache only when
past_key_value is given). Harness: tracer.py (peak live CPU tensor bytes of the 2nd training step,
fp32, AdamW single-tensor), as tools/trace/families_2025.py.

The records join the other 2025 families' in docs/data/cpu_traced_families_2025.json (records
with the same id are replaced, the others kept), which memscale-accuracy and
tests/runtime/gemma3n_test.cpp read: the AltUp graph (graph/recipes/altup_stack.hpp) is checked
against their peaks, the reader's parameter count against their sum(p.numel()).

Run from the project root:
    /usr/bin/python3 tools/trace/gemma3n_cases.py
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

import tracer
from families_2025 import causal_lm_loss, causal_mask, repeat_kv, rope_cos_sin, rotate_half

torch.set_num_threads(1)


class Gemma3nRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6, with_scale=True):
        super().__init__()
        self.eps = eps
        if with_scale:
            self.weight = nn.Parameter(torch.ones(dim))
        else:
            self.register_buffer("weight", torch.tensor(1.0), persistent=False)

    def forward(self, x):
        xf = x.float()
        out = xf / torch.sqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * self.weight.float()).type_as(x)


class ScaledEmbedding(nn.Embedding):  # Gemma3nTextScaledWordEmbedding
    def __init__(self, n, d, pad, scale):
        super().__init__(n, d, pad)
        self.register_buffer("embed_scale", torch.tensor(scale), persistent=False)

    def forward(self, ids):
        return super().forward(ids) * self.embed_scale.to(self.weight.dtype)


class Laurel(nn.Module):  # Gemma3nTextLaurelBlock
    def __init__(self, c):
        super().__init__()
        h, r = c["hidden_size"], c["laurel_rank"]
        self.linear_left = nn.Linear(h, r, bias=False)
        self.linear_right = nn.Linear(r, h, bias=False)
        self.post_laurel_norm = Gemma3nRMSNorm(h, c["rms_norm_eps"])

    def forward(self, x):
        return x + self.post_laurel_norm(self.linear_right(self.linear_left(x)))


def gelu_tanh(x):  # ACT2FN["gelu_pytorch_tanh"]
    return F.gelu(x, approximate="tanh")


class MLP(nn.Module):  # Gemma3nTextMLP
    def __init__(self, c, i):
        super().__init__()
        h, f = c["hidden_size"], c["intermediate_size"][i]
        self.gate_proj = nn.Linear(h, f, bias=False)
        self.up_proj = nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)
        self.sparsity = c["activation_sparsity_pattern"][i]

    def gaussian_topk(self, x):
        target = torch.tensor(self.sparsity, dtype=torch.float32, device=x.device)
        mult = torch.distributions.normal.Normal(0, 1).icdf(target).type(x.dtype)
        mean = torch.mean(x, dim=-1, keepdim=True)
        std = torch.std(x, dim=-1, keepdim=True, unbiased=False)
        return F.relu(x - (mean + std * mult))

    def forward(self, x):
        g = self.gate_proj(x)
        if self.sparsity > 0.0:
            g = self.gaussian_topk(g)
        return self.down_proj(gelu_tanh(g) * self.up_proj(x))


class AltUp(nn.Module):  # Gemma3nTextAltUp
    def __init__(self, c):
        super().__init__()
        h, n = c["hidden_size"], c["altup_num_inputs"]
        self.c = c
        self.correct_output_scale = nn.Parameter(torch.zeros(h))
        self.correction_coefs = nn.Linear(n, n, bias=False)
        self.prediction_coefs = nn.Linear(n, n ** 2, bias=False)
        self.modality_router = nn.Linear(h, n, bias=False)
        self.router_norm = Gemma3nRMSNorm(h, c["rms_norm_eps"])
        self.register_buffer("router_input_scale", torch.tensor(h ** -1.0), persistent=False)

    def modalities(self, x):
        routed = self.modality_router(self.router_norm(x) * self.router_input_scale)
        return torch.tanh(routed.float()).type_as(x)

    def predict(self, hs):
        c, n = self.c, self.c["altup_num_inputs"]
        mods = self.modalities(hs[c["altup_active_idx"]])
        if self.training and c["altup_coef_clip"] is not None:
            self.prediction_coefs.weight.data.clamp_(-c["altup_coef_clip"], c["altup_coef_clip"])
        coefs = self.prediction_coefs(mods).reshape(*mods.shape[:-1], n, n).permute(0, 1, 3, 2)
        pred = torch.matmul(hs.permute(1, 2, 3, 0), coefs)
        pred = pred.permute(3, 0, 1, 2)
        pred += hs
        return pred.contiguous().type_as(hs)

    def correct(self, pred, activated):
        c, n = self.c, self.c["altup_num_inputs"]
        mods = self.modalities(activated)
        innovation = activated - pred[c["altup_active_idx"]]
        innovation = innovation.repeat(n, 1, 1, 1)
        if c["altup_coef_clip"] is not None:
            self.correction_coefs.weight.data.clamp_(-c["altup_coef_clip"], c["altup_coef_clip"])
        coefs = self.correction_coefs(mods) + 1.0
        coefs = coefs.permute(2, 0, 1).unsqueeze(-1)
        corrected = torch.mul(innovation, coefs)
        corrected += pred
        return corrected.contiguous().type_as(activated)

    def scale_corrected_output(self, x):
        return (x.type_as(self.correct_output_scale) * self.correct_output_scale).type_as(x)


def rope(x, cos, sin):  # apply_rotary_pos_emb(..., unsqueeze_dim=2)
    cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
    return (x * cos) + (rotate_half(x) * sin)


class Attention(nn.Module):  # Gemma3nTextAttention, no cache
    def __init__(self, c, i):
        super().__init__()
        h, hd = c["hidden_size"], c["head_dim"]
        self.hd = hd
        self.is_sliding = c["layer_types"][i] == "sliding_attention"
        bias = c["attention_bias"]
        self.q_proj = nn.Linear(h, c["num_attention_heads"] * hd, bias=bias)
        self.k_proj = nn.Linear(h, c["num_key_value_heads"] * hd, bias=bias)
        self.v_proj = nn.Linear(h, c["num_key_value_heads"] * hd, bias=bias)
        self.o_proj = nn.Linear(c["num_attention_heads"] * hd, h, bias=bias)
        eps = c["rms_norm_eps"]
        self.q_norm = Gemma3nRMSNorm(hd, eps)
        self.k_norm = Gemma3nRMSNorm(hd, eps)
        self.v_norm = Gemma3nRMSNorm(hd, eps, with_scale=False)

    def forward(self, x, cos, sin, mask):
        B, S, _ = x.shape
        shape = (B, S, -1, self.hd)
        q = rope(self.q_norm(self.q_proj(x).view(shape)), cos, sin).transpose(1, 2)
        k = rope(self.k_norm(self.k_proj(x).view(shape)), cos, sin).transpose(1, 2)
        v = self.v_norm(self.v_proj(x).view(shape)).transpose(1, 2)
        n = q.shape[1] // k.shape[1]
        k, v = repeat_kv(k, n), repeat_kv(v, n)
        w = torch.matmul(q, k.transpose(2, 3)) * 1.0  # scaling=1.0
        w = w + mask[:, :, :, : k.shape[-2]]
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        w = F.dropout(w, p=0.0, training=self.training)
        o = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o_proj(o.reshape(B, S, -1).contiguous())


class DecoderLayer(nn.Module):  # Gemma3nTextDecoderLayer
    def __init__(self, c, i):
        super().__init__()
        h, p, eps = c["hidden_size"], c["hidden_size_per_layer_input"], c["rms_norm_eps"]
        self.c = c
        self.self_attn = Attention(c, i)
        self.mlp = MLP(c, i)
        self.input_layernorm = Gemma3nRMSNorm(h, eps)
        self.post_attention_layernorm = Gemma3nRMSNorm(h, eps)
        self.pre_feedforward_layernorm = Gemma3nRMSNorm(h, eps)
        self.post_feedforward_layernorm = Gemma3nRMSNorm(h, eps)
        self.altup = AltUp(c)
        self.laurel = Laurel(c)
        self.per_layer_input_gate = nn.Linear(h, p, bias=False)
        self.per_layer_projection = nn.Linear(p, h, bias=False)
        self.post_per_layer_input_norm = Gemma3nRMSNorm(h, eps)

    def forward(self, hs, rope_global, rope_local, per_layer_input, mask):
        a = self.c["altup_active_idx"]
        predictions = self.altup.predict(hs)
        active = predictions[a]
        normed = self.input_layernorm(active)
        laurel_out = self.laurel(normed)
        cos, sin = rope_local if self.self_attn.is_sliding else rope_global
        attn = self.post_attention_layernorm(self.self_attn(normed, cos, sin, mask))
        attn_gated = active + attn
        attn_laurel = (attn_gated + laurel_out) / math.sqrt(2)
        ffw = self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(attn_laurel)))
        corrected = self.altup.correct(predictions, attn_laurel + ffw)
        first = corrected[a]
        first_clone = first.clone()
        if self.c["altup_correct_scale"]:
            first = self.altup.scale_corrected_output(first_clone)
        first = gelu_tanh(self.per_layer_input_gate(first))
        first = torch.multiply(first, per_layer_input)
        first = self.post_per_layer_input_norm(self.per_layer_projection(first))
        corrected[1:] += first
        return corrected


class Gemma3nForCausalLM(nn.Module):
    def __init__(self, c, ckpt=False):
        super().__init__()
        self.c = c
        self.ckpt = ckpt
        h, L, p, V = c["hidden_size"], c["num_hidden_layers"], c["hidden_size_per_layer_input"], c["vocab_size"]
        self.embed_tokens = ScaledEmbedding(V, h, c["pad_token_id"], h ** 0.5)
        self.layers = nn.ModuleList([DecoderLayer(c, i) for i in range(L)])
        self.norm = Gemma3nRMSNorm(h, c["rms_norm_eps"])
        self.embed_tokens_per_layer = ScaledEmbedding(c["vocab_size_per_layer_input"], L * p, c["pad_token_id"], p ** 0.5)
        self.per_layer_model_projection = nn.Linear(h, L * p, bias=False)
        self.per_layer_projection_norm = Gemma3nRMSNorm(p, c["rms_norm_eps"])
        n = c["altup_num_inputs"]
        self.altup_projections = nn.ModuleList([nn.Linear(h, h, bias=False) for _ in range(1, n)])
        self.altup_unembed_projections = nn.ModuleList([nn.Linear(h, h, bias=False) for _ in range(1, n)])
        self.register_buffer("per_layer_projection_scale", torch.tensor(h ** -0.5), persistent=False)
        self.register_buffer("per_layer_input_scale", torch.rsqrt(torch.tensor(2.0)), persistent=False)
        # tie_word_embeddings: lm_head.weight is embed_tokens.weight

    def model(self, ids):
        c = self.c
        B, S = ids.shape
        L, p = c["num_hidden_layers"], c["hidden_size_per_layer_input"]
        return self.stack(self.embed_tokens(ids), self.embed_tokens_per_layer(ids).reshape(B, S, L, p))

    def stack(self, x0, per_layer_inputs):  # Gemma3nTextModel.forward from inputs_embeds
        c = self.c
        B, S, _ = x0.shape
        L, p = c["num_hidden_layers"], c["hidden_size_per_layer_input"]
        proj = self.per_layer_model_projection(x0)
        proj *= self.per_layer_projection_scale.type(x0.dtype)
        proj = self.per_layer_projection_norm(proj.reshape(B, S, L, p))
        per_layer_inputs = (proj + per_layer_inputs) * self.per_layer_input_scale.type(x0.dtype)
        # create_causal_mask and create_sliding_window_causal_mask with eager attention: (B, 1, S, S)
        # masks of the model's dtype, bound in Gemma3nTextModel.forward's frame through the layers.
        masks = {"full_attention": causal_mask(S, x0.dtype, batch=B),
                 "sliding_attention": causal_mask(S, x0.dtype, window=c["sliding_window"], batch=B)}
        hd = c["head_dim"]
        rope_global = rope_cos_sin(hd, S, c["rope_theta"], x0.dtype)
        rope_local = rope_cos_sin(hd, S, c["rope_local_base_freq"], x0.dtype)
        target = torch.mean(x0 ** 2, dim=-1, keepdim=True) ** 0.5
        eps = torch.tensor(torch.finfo().min)
        temp = [x0]
        for i in range(1, c["altup_num_inputs"]):
            cur = self.altup_projections[i - 1](x0).type(x0.dtype)
            mag = torch.mean(cur ** 2, dim=-1, keepdim=True) ** 0.5
            temp.append(cur * (target / torch.maximum(mag, eps)))
        hs = torch.stack(temp, dim=0)
        for i, layer in enumerate(self.layers):
            args = (hs, rope_global, rope_local, per_layer_inputs[:, :, i, :], masks[c["layer_types"][i]])
            # gradient_checkpointing_enable(): each decoder layer under torch.utils.checkpoint
            # (GradientCheckpointingLayer; non-reentrant, as deepspeed_cases.py and ssm_cases.py).
            hs = torch.utils.checkpoint.checkpoint(layer, *args, use_reentrant=False) if self.ckpt else layer(*args)
        target = torch.mean(hs[0] ** 2, dim=-1, keepdim=True) ** 0.5
        temp = [hs[0]]
        for i in range(1, c["altup_num_inputs"]):
            cur = self.altup_unembed_projections[i - 1](hs[i]).type(x0.dtype)
            mag = torch.mean(cur ** 2, dim=-1, keepdim=True) ** 0.5
            temp.append(cur * (target / torch.maximum(mag, eps)))
        hs = torch.mean(torch.stack(temp), dim=0)
        return self.norm(hs)

    def forward(self, ids, labels):
        logits = F.linear(self.model(ids), self.embed_tokens.weight)
        cap = self.c["final_logit_softcapping"]
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return causal_lm_loss(logits, labels)


class MultimodalEmbedder(nn.Module):  # Gemma3nMultimodalEmbedder (modeling_gemma3n.py@00aa0f5d), hard ids
    def __init__(self, tower, text_hidden):
        super().__init__()
        width, eps = tower["hidden_size"], tower["rms_norm_eps"]
        self.vocab_offset = tower["vocab_offset"]
        self.vocab_size = tower["vocab_size"]
        self.embedding = nn.Embedding(tower["vocab_size"], width)
        self.hard_embedding_norm = Gemma3nRMSNorm(width, eps)
        self.soft_embedding_norm = Gemma3nRMSNorm(width, eps)
        self.embedding_projection = nn.Linear(width, text_hidden, bias=False)
        self.embedding_post_projection_norm = Gemma3nRMSNorm(text_hidden, eps, with_scale=False)

    def forward(self, input_ids):
        hard = self.embedding((input_ids - self.vocab_offset).clamp_(0))
        return self.embedding_post_projection_norm(self.embedding_projection(self.hard_embedding_norm(hard)))


class Gemma3nForConditionalGeneration(nn.Module):
    """Gemma3nModel.forward (modeling_gemma3n.py@00aa0f5d) on input_ids alone: embed_vision and
    embed_audio over every token, merged by torch.where; the language model from inputs_embeds and
    per_layer_inputs; the loss of Gemma3nForConditionalGeneration.forward (logits.float(), a
    shifted contiguous copy, nn.CrossEntropyLoss). The vision tower (timm's mobilenetv5_300m_enc)
    and the audio encoder do not run in a text-only step: they stand here as one parameter each of
    their counts (timm's sum(p.numel()) for the vision tower, tests/runtime/gemma3n_towers_test.cpp;
    the audio encoder's as json/hf/gemma3n_towers.hpp counts it), which take no gradient, so AdamW
    (single-tensor: `if p.grad is None: continue`) makes them no state."""

    def __init__(self, c, tower_params):
        super().__init__()
        t = c["text_config"]
        self.c = c
        self.language_model = Gemma3nForCausalLM(t)
        self.vision_tower = nn.Parameter(torch.zeros(tower_params["vision"]))
        self.audio_tower = nn.Parameter(torch.zeros(tower_params["audio"]))
        self.embed_vision = MultimodalEmbedder(c["vision_config"], t["hidden_size"])
        self.embed_audio = MultimodalEmbedder(c["audio_config"], t["hidden_size"])

    def forward(self, input_ids, labels):
        t, lm = self.c["text_config"], self.language_model
        B, S = input_ids.shape
        L, p = t["num_hidden_layers"], t["hidden_size_per_layer_input"]
        inputs_embeds = lm.embed_tokens(input_ids)
        mask = torch.logical_and(input_ids >= 0, input_ids < t["vocab_size_per_layer_input"])
        tokens = torch.where(mask, input_ids, torch.zeros_like(input_ids))
        per_layer_inputs = lm.embed_tokens_per_layer(tokens).reshape(B, S, L, p)
        vision_mask = torch.logical_and(input_ids >= self.embed_vision.vocab_offset,
                                        input_ids < self.embed_audio.vocab_offset)
        dummy = self.embed_vision.vocab_offset + self.embed_vision.vocab_size - 1
        vision_embeds = self.embed_vision(torch.where(vision_mask, input_ids, dummy))
        inputs_embeds = torch.where(vision_mask.unsqueeze(-1).expand_as(inputs_embeds), vision_embeds, inputs_embeds)
        audio_mask = input_ids >= self.embed_audio.vocab_offset
        dummy = self.embed_audio.vocab_offset + self.embed_audio.vocab_size - 1
        audio_embeds = self.embed_audio(torch.where(audio_mask, input_ids, dummy))
        inputs_embeds = torch.where(audio_mask.unsqueeze(-1).expand_as(inputs_embeds), audio_embeds, inputs_embeds)
        del vision_embeds, audio_embeds
        logits = F.linear(lm.stack(inputs_embeds, per_layer_inputs), lm.embed_tokens.weight)
        cap = t["final_logit_softcapping"]
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        logits = logits.float()
        shift_logits = logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        return nn.CrossEntropyLoss()(shift_logits.view(-1, t["vocab_size"]), shift_labels.view(-1))


def audio_encoder_parameters(a):
    """Gemma3nAudioEncoder's count as json/hf/gemma3n_towers.hpp writes it (square 3x3 kernels,
    stride 2)."""
    h, heads, c0, c1, k = (a["hidden_size"], a["conf_num_attention_heads"], *a["sscp_conv_channel_size"],
                           a["conf_conv_kernel_size"])
    f = a["input_feat_size"]
    for _ in range(2):
        f = (f + 2 - 3) // 2 + 1
    sscp = c0 * 9 + c0 + c0 * c1 * 9 + c1 + c1 * f * h
    d = h // heads
    block = 2 * (8 * h * h + 2 * h) + (4 * h * heads * d + d + h * h + 2 * h) + (3 * h * h + h * k + 2 * h) + h
    return sscp + a["conf_num_hidden_layers"] * block


def small_multimodal():
    """A gemma3n config over small(): the text vocabulary leaves 128 + 128 ids to the vision and
    audio embedders (Gemma3nVisionConfig / Gemma3nAudioConfig vocab_offset, vocab_size); the
    vision tower is mobilenetv5_300m_enc (its output width, hidden_size 2048, is the only one the
    reader counts), the audio encoder a one-block one."""
    t = small()
    t["vocab_size"] = 4096 + 256
    t["vocab_size_per_layer_input"] = 4096
    t["architectures"] = ["Gemma3nForConditionalGeneration"]
    return {"architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n", "text_config": t,
            "vision_config": {"model_type": "gemma3n_vision", "architecture": "mobilenetv5_300m_enc",
                              "hidden_size": 2048, "vocab_size": 128, "vocab_offset": 4096, "rms_norm_eps": 1e-6},
            "audio_config": {"model_type": "gemma3n_audio", "hidden_size": 64, "conf_num_attention_heads": 4,
                             "conf_num_hidden_layers": 1, "conf_conv_kernel_size": 5, "input_feat_size": 32,
                             "sscp_conv_channel_size": [16, 8], "vocab_size": 128, "vocab_offset": 4224,
                             "rms_norm_eps": 1e-6},
            "tie_word_embeddings": True}


# timm.create_model("mobilenetv5_300m_enc") at timm@aa4b5850: sum(p.numel()).
MOBILENETV5_300M_ENC = 294_126_912


def small():
    L = 5
    return {"architectures": ["Gemma3nForCausalLM"], "model_type": "gemma3n_text", "hidden_size": 256,
            "num_hidden_layers": L, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
            "intermediate_size": [1024] * L, "vocab_size": 4096, "vocab_size_per_layer_input": 4096,
            "hidden_size_per_layer_input": 64, "laurel_rank": 32, "altup_num_inputs": 4, "altup_active_idx": 0,
            "altup_coef_clip": 120.0, "altup_correct_scale": True, "num_kv_shared_layers": 2,
            "activation_sparsity_pattern": [0.95, 0.95] + [0.0] * (L - 2),
            "layer_types": ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(L)],
            "sliding_window": 128, "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "final_logit_softcapping": 30.0,
            "attention_bias": False, "attention_dropout": 0.0, "pad_token_id": 0, "tie_word_embeddings": True,
            "max_position_embeddings": 2048}


def run_case(c, B, S, ckpt=False):
    tracer.reset_seed()
    multimodal = c["model_type"] == "gemma3n"
    text = c["text_config"] if multimodal else c
    with tracer.Tracker() as tr:
        if multimodal:
            towers = {"vision": MOBILENETV5_300M_ENC, "audio": audio_encoder_parameters(c["audio_config"])}
            model = Gemma3nForConditionalGeneration(c, towers)
        else:
            model = Gemma3nForCausalLM(c, ckpt)
        model.train()
        tr.mark("built")
        opt = tracer.make_opt("adamw", model.parameters(), None)
        # A text-only step: every id below the embedders' ranges.
        x = torch.randint(0, text["vocab_size_per_layer_input"] if multimodal else c["vocab_size"], (B, S))
        y = x.clone()
        tr.mark("inputs")
        tracer.train_two_steps(tr, lambda: model(x, y), opt)
        nparams = tracer.parameter_count(model)
        params_enum = tracer.tensor_bytes(list(model.parameters()))
        buffers = tracer.tensor_bytes(list(model.buffers()))
        opt_enum = tracer.optimizer_state_bytes([opt])
        del model, opt, x, y
    r = dict(nparams=nparams, params_enum=params_enum, buffers=buffers, opt_enum=opt_enum, built=tr.live("built"),
             end_live=tr.live("__end__"))
    r.update(tracer.step_readings(tr))
    return r


def record(c, B, S, r, ckpt=False):
    return {
        **tracer.record_head(f"cpu-{c['model_type']}-small-b{B}-s{S}{'-ckpt' if ckpt else ''}-adamw",
                             "tools/trace/gemma3n_cases.py (harness: shared/ground-truth/measure.py)"),
        "model": {"hf_config": c, "params": r["nparams"]},
        "train": dict(batch=B, seq=S, precision="fp32", optimizer="adamw",
                      optimizer_impl="single_tensor (torch 1.13 CPU default)", checkpointing="full" if ckpt else "none",
                      attention="eager", grad_accum=1, **({"use_reentrant": False} if ckpt else {})),
        **tracer.peak_fields(r),
        "components": tracer.components(r),
        "detail": {k: r[k] for k in ("buffers", "built", "s2_start", "s2_peak_fwd", "s2_peak_bwd", "s2_peak_opt",
                                     "end_live")},
        # gemma3n arrived in transformers 4.53.0, whose ForCausalLMLoss shifts the labels (as causal_lm_loss).
        "software": {"torch": torch.__version__, "transformers": "4.53.0"},
        "notes": ("a torch re-implementation of modeling_gemma3n.py@00aa0f5d (Gemma3nForConditionalGeneration) on "
                  "input_ids alone, full training: the multimodal embedders run over every token; the towers do "
                  "not run and stand as one parameter of their counts each, which takes no gradient and no AdamW "
                  "state" if c["model_type"] == "gemma3n" else
                  "a torch re-implementation of modeling_gemma3n.py@b87ecf8c (Gemma3nForCausalLM); gemma3n "
                  "arrived in transformers 4.53.0, whose ForCausalLMLoss shifts the labels"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/data/cpu_traced_families_2025.json")
    ap.add_argument("--only", choices=("text", "multimodal"), default=None)
    a = ap.parse_args()
    cases = []
    if a.only != "multimodal":
        cases += [(small(), B, S, ckpt) for B, S, ckpt in ((2, 256, False), (4, 512, False), (4, 512, True))]
    if a.only != "text":
        cases += [(small_multimodal(), B, S, False) for B, S in ((2, 256), (4, 512))]
    out = []
    for c, B, S, ckpt in cases:
        t0 = time.time()
        r = run_case(c, B, S, ckpt)
        out.append(record(c, B, S, r, ckpt))
        print(f"{out[-1]['id']}: params={r['nparams']} peak={r['s2_peak']} act={r['s2_fwd'] - r['s2_start']} "
              f"bwd_peak={r['s2_peak_bwd']} end={r['end_live']} ({time.time() - t0:.1f}s)", flush=True)
    ids = {r["id"] for r in out}
    with open(a.out) as f:
        kept = [r for r in json.load(f) if r["id"] not in ids]
    tracer.write_records(a.out, kept + out, final_newline=True)


if __name__ == "__main__":
    main()
