#!/usr/bin/python3
"""CPU traces of a small multimodal Gemma 3n trained on images, its MobileNetV5 tower frozen.

Gemma3nModel.forward with pixel_values (transformers models/gemma3n/modeling_gemma3n.py@00aa0f5d):
the text and per-layer embeddings and both hard embedders over every token (gemma3n_cases.py's
Gemma3nForConditionalGeneration), then get_image_features: the vision tower (timm's
mobilenetv5_300m_enc, mobilenetv5_cases.py's torch-only MobileNetV5Encoder; no parameter requires
grad and the pixels none, so no graph is recorded there), its (images, 2048, 16, 16) output
reshaped to (images, 2048, 256), permuted, multiplied in place by sqrt(2048) and run through
embed_vision's soft path (soft_embedding_norm, embedding_projection,
embedding_post_projection_norm: trainable in full training, so their inputs are saved); then
get_placeholder_mask (input_ids == image_token_id, expanded; its boolean index copies the image
rows once) and masked_scatter into inputs_embeds before the text stack. Full training of the text
model and the embedders; the audio encoder does not run and stands as one parameter of its count.
Every image is side x side pixels (Gemma3nProcessor's image processor makes 768 x 768; 256 keeps
the trace short on two cores) and 256 image tokens between boi and eoi tokens; the sequence
length counts them all.

Harness: tracer.py (peak live CPU tensor bytes of step 2, fp32, AdamW single-tensor), with marks
around the tower's forward of step 2. Run from the project root (about half an hour on two busy
cores, most of it the 768 x 768 case; --case N runs CASES[N] alone):
    /usr/bin/python3 tools/trace/gemma3n_image_cases.py --out docs/data/cpu_traced_vlm.json
"""
import argparse
import time

import torch

import gemma3n_cases as g3n
import mobilenetv5_cases as mnv5
import tracer

torch.set_num_threads(1)

SOURCE = "tools/trace/gemma3n_image_cases.py (harness: shared/ground-truth/measure.py)"
SOFT_TOKENS = 256  # Gemma3nConfig.vision_soft_tokens_per_image (configuration_gemma3n.py@01854809)


def config():
    """gemma3n_cases.small_multimodal() with image_token_id = the vision vocab_offset + 1, as the
    checkpoints' 262145; boi and eoi ids beside it (every token runs through both hard embedders
    whatever its id, so only the image tokens' places matter to memory)."""
    c = g3n.small_multimodal()
    offset = c["vision_config"]["vocab_offset"]
    c.update(boi_token_id=offset, image_token_id=offset + 1, eoi_token_id=offset + 2,
             vision_soft_tokens_per_image=SOFT_TOKENS)
    return c


class ImageGemma3n(g3n.Gemma3nForConditionalGeneration):
    def __init__(self, c, tr):
        super().__init__(c, {"vision": 1, "audio": g3n.audio_encoder_parameters(c["audio_config"])})
        del self.vision_tower
        self.vision_tower = mnv5.MobileNetV5Encoder()
        self.tr = tr
        self.calls = 0

    def forward(self, input_ids, labels, pixel_values):
        t, lm, c = self.c["text_config"], self.language_model, self.c
        B, S = input_ids.shape
        L, p = t["num_hidden_layers"], t["hidden_size_per_layer_input"]
        inputs_embeds = lm.embed_tokens(input_ids)
        mask = torch.logical_and(input_ids >= 0, input_ids < t["vocab_size_per_layer_input"])
        tokens = torch.where(mask, input_ids, torch.zeros_like(input_ids))
        per_layer_inputs = lm.embed_tokens_per_layer(tokens).reshape(B, S, L, p)
        del mask, tokens
        for e, lo, hi in ((self.embed_vision, self.embed_vision.vocab_offset, self.embed_audio.vocab_offset),
                          (self.embed_audio, self.embed_audio.vocab_offset, None)):
            m = input_ids >= lo if hi is None else torch.logical_and(input_ids >= lo, input_ids < hi)
            embeds = e(torch.where(m, input_ids, e.vocab_offset + e.vocab_size - 1))
            inputs_embeds = torch.where(m.unsqueeze(-1).expand_as(inputs_embeds), embeds, inputs_embeds)
            del m, embeds
        self.calls += 1
        self.tr.mark(f"tower_in_{self.calls}")
        hidden = self.vision_tower(pixel_values)
        self.tr.mark(f"tower_out_{self.calls}")
        width = c["vision_config"]["hidden_size"]
        hidden = hidden.reshape(hidden.shape[0], width, SOFT_TOKENS).permute(0, 2, 1)
        hidden *= width ** 0.5
        e = self.embed_vision
        features = e.embedding_post_projection_norm(e.embedding_projection(e.soft_embedding_norm(hidden)))
        del hidden
        features = features.to(inputs_embeds.dtype)
        special = (input_ids == c["image_token_id"]).unsqueeze(-1).expand_as(inputs_embeds)
        assert inputs_embeds[special].numel() == features.numel()  # get_placeholder_mask's check
        inputs_embeds = inputs_embeds.masked_scatter(special, features)
        logits = torch.nn.functional.linear(lm.stack(inputs_embeds, per_layer_inputs), lm.embed_tokens.weight)
        del inputs_embeds, per_layer_inputs, special, features  # image_hidden_states go with the output
        cap = t["final_logit_softcapping"]
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        logits = logits.float()
        shift_logits = logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        return torch.nn.CrossEntropyLoss()(shift_logits.view(-1, t["vocab_size"]), shift_labels.view(-1))


def run(c, B, S, images, side):
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        model = ImageGemma3n(c, tr)
        model.train()
        model.vision_tower.requires_grad_(False)
        nparams = tracer.parameter_count(model)
        tower_params = tracer.parameter_count(model.vision_tower)
        tr.mark("built")
        opt = tracer.make_opt("adamw", [p for p in model.parameters() if p.requires_grad], None)
        assert images * (SOFT_TOKENS + 2) < S
        ids = torch.randint(0, c["text_config"]["vocab_size_per_layer_input"], (B, S))
        for i in range(B):
            at = 4
            for _ in range(images):
                ids[i, at - 1] = c["boi_token_id"]
                ids[i, at: at + SOFT_TOKENS] = c["image_token_id"]
                ids[i, at + SOFT_TOKENS] = c["eoi_token_id"]
                at += SOFT_TOKENS + 4
        labels = ids.clone()
        labels[ids == c["image_token_id"]] = -100
        pixel_values = torch.randn(B * images, 3, side, side)
        tr.mark("inputs")
        grad_bytes = tracer.GradientBytes(lambda: model.parameters())
        tracer.train_two_steps(tr, lambda: model(ids, labels, pixel_values), opt, grad_bytes)
        d = dict(nparams=nparams, tower_params=tower_params, params_enum=tracer.tensor_bytes(list(model.parameters())),
                 opt_enum=tracer.optimizer_state_bytes([opt]), grads_enum=grad_bytes.bytes,
                 image_tokens_per_image=SOFT_TOKENS, pixel_values_bytes=pixel_values.numel() * 4)
        del model, opt, ids, labels, pixel_values
    return tracer.tower_step_readings(tr, d)


CASES = (  # batch, seq (all tokens), images per sample, side
    (1, 320, 1, 256),
    (2, 288, 1, 256),
    (1, 640, 2, 256),
    (1, 288, 1, 768),  # the processor's size: the tower's moment above the text step's
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/data/cpu_traced_vlm.json")
    ap.add_argument("--case", type=int, action="append", help="run only these CASES indices (the others' records kept)")
    a = ap.parse_args()
    out = []
    c = config()
    for B, S, n, side in (CASES[i] for i in a.case) if a.case else CASES:
        t0 = time.time()
        d = run(c, B, S, n, side)
        train = dict(batch=B, seq=S, images_per_sample=n, image=f"{side}x{side}", precision="fp32", optimizer="adamw",
                     optimizer_impl="single_tensor (torch 1.13 CPU default)", checkpointing="none",
                     attention="eager", grad_accum=1, frozen="vision_tower")
        rec = {**tracer.record_head(f"cpu-gemma3n-small-b{B}-s{S}-{n}x{side}x{side}-full-frozen_tower-adamw", SOURCE),
               "model": {"hf_config": c, "params": d["nparams"], "vision_tower_params": d["tower_params"],
                         "impl": "hf-transformers"},
               "train": train,
               **tracer.peak_fields(d), "components": tracer.components(d), "detail": d,
               # gemma3n arrived in transformers 4.53.0 (as gemma3n_cases.py's records).
               "software": {"torch": torch.__version__, "transformers": "4.53.0"},
               "notes": "peak live CPU tensor bytes of training step 2 (absolute); traced from a torch-only "
                        "re-implementation of transformers Gemma3nForConditionalGeneration (eager) with images, the "
                        "MobileNetV5 tower frozen (unfused MultiQueryAttention2d: torch 1.13 has no SDPA), the text "
                        "model and the embedders trained; seq counts every token, image tokens and boi/eoi included"}
        out.append(rec)
        print(f"{rec['id']}: peak={d['s2_peak']} fwd={d['s2_peak_fwd']} bwd={d['s2_peak_bwd']} "
              f"start={d['s2_start']} tower_in={d['s2_tower_in']} tower_peak={d['s2_tower_peak']} "
              f"tower_out={d['s2_tower_out']} ({time.time() - t0:.1f}s)", flush=True)
    ids = {r["id"] for r in out}
    # A full run replaces every Gemma 3n record, --case only those it makes.
    kept = [r for r in tracer.records_without(a.out, () if a.case else "cpu-gemma3n-") if r["id"] not in ids]
    tracer.write_records(a.out, kept + out)


if __name__ == "__main__":
    main()
