#!/usr/bin/python3
"""CPU traces of a small Gemma 3 trained on images with its SigLIP vision tower frozen.

Plain-torch re-implementation of Gemma3ForConditionalGeneration's training forward with
pixel_values and token_type_ids (huggingface/transformers models/gemma3/modeling_gemma3.py
@0018aa64): Gemma3Model.forward embeds the ids (scaled), runs get_image_features (the SigLIP
tower of models/siglip/modeling_siglip.py @1c51a62f: the patch Conv2d on pixel_values cast to
the weights' dtype, the position table, the encoder layers with eager attention and the
gelu_pytorch_tanh MLP, post_layernorm; then Gemma3MultiModalProjector: transpose, reshape,
contiguous, AvgPool2d to mm_tokens_per_image, Gemma3RMSNorm, matmul), get_placeholder_mask
(whose boolean index copies the image rows once), masked_scatter, and create_causal_mask_mapping:
token_type_ids make an or_mask_function (image tokens attend bidirectionally within their image),
so masking_utils materialises each layer type's mask, (B, 1, S, S) of the model's dtype under
eager. The text stack is trace_families.py's gemma3_text (a global and a local rotary pair).
The tower's parameters have requires_grad False, so no autograd graph is recorded there; LoRA
adapts o_proj and the MLP only (PEFT's name match would put q/k/v adapters in SiglipAttention too),
with the embeddings' output requiring grad as PreTrainedModel.enable_input_require_grads makes it
(PEFT and the Trainer call it under gradient checkpointing): without it the first layer's
attention, which has no adapter before o_proj, records no graph, which memscale does not model yet.
Every image is image_size^2 (Gemma3ImageProcessor resizes to it) and mm_tokens_per_image tokens
between boi and eoi tokens; the sequence length counts them all.

Harness: tracer.py (peak live CPU tensor bytes of step 2, fp32, AdamW single-tensor), with marks
around the tower's forward of step 2. Run from the project root (about a minute):
    /usr/bin/python3 tools/trace/gemma3_image_cases.py --out docs/data/cpu_traced_vlm.json
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

import tracer
import vision_tower_cases as vt
from deepseek_lora_generate import LoraLinear

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "docs", "research", "scripts"))
import trace_families  # noqa: E402

torch.set_num_threads(1)

SOURCE = "tools/trace/gemma3_image_cases.py (harness: shared/ground-truth/measure.py)"
IMAGE, BOI, EOI = 1100, 1098, 1099

CONFIG = {
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "mm_tokens_per_image": 64,
    "image_token_index": IMAGE, "boi_token_index": BOI, "eoi_token_index": EOI,
    "text_config": {"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"], "hidden_size": 128,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
                    "intermediate_size": 256, "vocab_size": 1101, "hidden_activation": "gelu_pytorch_tanh",
                    "query_pre_attn_scalar": 32, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
                    "attention_dropout": 0.0, "sliding_window": 512, "sliding_window_pattern": 2,
                    "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "max_position_embeddings": 2048},
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 96, "intermediate_size": 192,
                      "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 224, "patch_size": 14,
                      "layer_norm_eps": 1e-6, "attention_dropout": 0.0, "vision_use_head": False},
}


class ImageGemma3(vt.Gemma3ForConditionalGeneration):
    def __init__(self, c, tr):
        super().__init__(c)
        self.tr = tr
        self.calls = 0

    def masks(self, x, token_type_ids):
        """create_causal_mask_mapping: each layer type's eager mask (causal, sliding window for the
        local layers) OR the same-image block, as torch.where(bool, 0, min) of (B, 1, S, S)."""
        B, S = token_type_ids.shape
        is_image = token_type_ids == 1
        new_image = is_image & ~F.pad(is_image, (1, 0), value=False)[:, :-1]
        group = torch.where(is_image, torch.cumsum(new_image.int(), dim=1) - 1, torch.full_like(token_type_ids, -1))
        q = torch.arange(S).view(1, 1, S, 1)
        k = torch.arange(S).view(1, 1, 1, S)
        block = (is_image[:, None, :, None] & is_image[:, None, None, :]) & \
            (group[:, None, :, None] == group[:, None, None, :])
        window = self.c["text_config"]["sliding_window"]
        out = {}
        for kind in ("sliding_attention", "full_attention"):
            allowed = (k <= q) if kind == "full_attention" else ((k <= q) & (k > q - window))
            allowed = allowed | block
            out[kind] = torch.where(allowed, torch.tensor(0.0, dtype=x.dtype), torch.finfo(x.dtype).min)
            del allowed
        return out

    def forward(self, ids, labels, pixel_values, token_type_ids):
        lm, t = self.lm, self.c["text_config"]
        B, S = ids.shape
        special = ids == IMAGE  # the image id is out of the vocabulary only when >= vocab_size
        llm_ids = ids
        x = lm.embed_tokens(llm_ids)
        x = x * torch.tensor(t["hidden_size"] ** 0.5, dtype=x.dtype)  # Gemma3TextScaledWordEmbedding
        self.calls += 1
        self.tr.mark(f"tower_in_{self.calls}")
        feats = self.multi_modal_projector(self.vision_tower(pixel_values))
        self.tr.mark(f"tower_out_{self.calls}")
        feats = feats.to(x.dtype)
        mask = special.unsqueeze(-1).expand_as(x)
        assert x[mask].numel() == feats.numel()  # get_placeholder_mask's check
        x = x.masked_scatter(mask, feats)
        masks = self.masks(x, token_type_ids)
        rope_global = trace_families.rope(lm.hd, S, t["rope_theta"], x.dtype)
        rope_local = trace_families.rope(lm.hd, S, t["rope_local_base_freq"], x.dtype)
        for i, layer in enumerate(lm.layers):
            full = (i + 1) % t["sliding_window_pattern"] == 0
            cos, sin = rope_global if full else rope_local
            x = layer(x, cos, sin, masks["full_attention" if full else "sliding_attention"])
        del masks, rope_global, rope_local, cos, sin
        h = lm.norm(x)
        del x, feats, mask, special  # Gemma3Model.forward returns (image_hidden_states go with the output)
        logits = lm.lm_head(h).float()
        sl = logits[..., :-1, :].contiguous()
        lb = labels[..., 1:].contiguous()
        return F.cross_entropy(sl.view(-1, sl.size(-1)), lb.view(-1))


def run(c, B, S, images, lora):
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        model = ImageGemma3(c, tr)
        model.train()
        for p in model.vision_tower.parameters():
            p.requires_grad_(False)
        for p in model.multi_modal_projector.parameters():
            p.requires_grad_(False)
        base_params = tracer.parameter_count(model)
        if lora:
            for p in model.parameters():
                p.requires_grad_(False)
            for layer in model.lm.layers:
                layer.self_attn.o_proj = LoraLinear(layer.self_attn.o_proj, 8, 16, 0.0)
                for name in ("gate_proj", "up_proj", "down_proj"):
                    setattr(layer.mlp, name, LoraLinear(getattr(layer.mlp, name), 8, 16, 0.0))
            # enable_input_require_grads: a forward hook on the input embeddings
            model.lm.embed_tokens.register_forward_hook(lambda module, args, output: output.requires_grad_(True))
        tr.mark("built")
        opt = tracer.make_opt("adamw", [p for p in model.parameters() if p.requires_grad], None)
        n_tokens = c["mm_tokens_per_image"]
        assert images * (n_tokens + 2) < S
        ids = torch.randint(0, 1000, (B, S))
        for i in range(B):
            at = 4
            for _ in range(images):
                ids[i, at - 1] = BOI
                ids[i, at: at + n_tokens] = IMAGE
                ids[i, at + n_tokens] = EOI
                at += n_tokens + 4
        token_type_ids = (ids == IMAGE).long()  # Gemma3Processor: 1 on image tokens
        labels = ids.clone()
        labels[token_type_ids == 1] = -100
        v = c["vision_config"]
        pixel_values = torch.randn(B * images, 3, v["image_size"], v["image_size"])
        tr.mark("inputs")
        grad_bytes = tracer.GradientBytes(lambda: model.parameters())
        tracer.train_two_steps(tr, lambda: model(ids, labels, pixel_values, token_type_ids), opt, grad_bytes)
        d = dict(nparams=base_params, nparams_with_adapters=tracer.parameter_count(model),
                 tower_params=sum(p.numel() for p in model.vision_tower.parameters())
                 + sum(p.numel() for p in model.multi_modal_projector.parameters()),
                 params_enum=tracer.tensor_bytes(list(model.parameters())),
                 opt_enum=tracer.optimizer_state_bytes([opt]), grads_enum=grad_bytes.bytes,
                 image_tokens_per_image=n_tokens, pixel_values_bytes=pixel_values.numel() * 4)
        del model, opt, ids, labels, pixel_values, token_type_ids
    return tracer.tower_step_readings(tr, d)


CASES = (  # batch, seq (all tokens), images per sample, lora
    (2, 256, 1, False),
    (1, 384, 2, True),
    (4, 160, 1, False),
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/data/cpu_traced_vlm.json")
    a = ap.parse_args()
    kept = tracer.records_without(a.out, "cpu-gemma3-")
    out = []
    size = CONFIG["vision_config"]["image_size"]
    for B, S, n, lora in CASES:
        t0 = time.time()
        d = run(CONFIG, B, S, n, lora)
        kind = "lora_o_mlp-input_grads" if lora else "full"
        train = dict(batch=B, seq=S, images_per_sample=n, image=f"{size}x{size}", precision="fp32", optimizer="adamw",
                     optimizer_impl="single_tensor (torch 1.13 CPU default)", checkpointing="none",
                     attention="eager", grad_accum=1)
        if lora:
            train.update(lora_rank=8, lora_alpha=16, lora_targets="o_proj,gate_proj,up_proj,down_proj", lora_dropout=0.0, frozen="base")
        else:
            train.update(frozen="vision_tower")
        rec = {**tracer.record_head(f"cpu-gemma3-small-b{B}-s{S}-{n}x{size}x{size}-{kind}-frozen_tower-adamw", SOURCE),
               "model": {"hf_config": CONFIG, "params": d["nparams"], "vision_tower_params": d["tower_params"],
                         "impl": "hf-transformers"},
               "train": train,
               **tracer.peak_fields(d), "components": tracer.components(d), "detail": d, "torch": torch.__version__,
               "notes": "peak live CPU tensor bytes of training step 2 (absolute); traced from a torch-only "
                        "re-implementation of transformers Gemma3ForConditionalGeneration (eager) with images and "
                        "token_type_ids, the SigLIP tower and projector frozen; seq counts every token, image tokens "
                        "and boi/eoi included" + ("; LoRA with the embeddings' output requiring grad "
                                                   "(enable_input_require_grads)" if lora else "")}
        out.append(rec)
        print(f"{rec['id']}: peak={d['s2_peak']} fwd={d['s2_peak_fwd']} bwd={d['s2_peak_bwd']} "
              f"tower_in={d['s2_tower_in']} tower_peak={d['s2_tower_peak']} tower_out={d['s2_tower_out']} "
              f"({time.time() - t0:.1f}s)", flush=True)
    tracer.write_records(a.out, kept + out)


if __name__ == "__main__":
    main()
