#!/usr/bin/python3
"""CPU traces of a small Llama 4 trained on images with its vision tower frozen.

Plain-torch re-implementation of Llama4ForConditionalGeneration's training forward with
pixel_values (huggingface/transformers models/llama4/modeling_llama4.py @000c33fd): the token
embeddings, get_image_features (Llama4VisionModel: Llama4UnfoldConvolution's unfold, permute and
bias-free Linear, the class token concatenated last, positional_embedding_vlm, layernorm_pre, the
encoder layers with Llama4VisionAttention (q/k/v with biases, vision_apply_rotary_emb through
view_as_complex in fp32, vision_eager_attention_forward: softmax in the input dtype) and
Llama4VisionMLP (GELU), layernorm_post, the class token dropped, then Llama4VisionPixelShuffleMLP:
pixel_shuffle's two permuted contiguous copies and Llama4VisionMLP2), the flattened features
through Llama4MultiModalProjector, get_placeholder_mask (whose boolean index copies the image rows
once), masked_scatter, the text model (families_2025.py's Llama4ForCausalLM stack) and the loss
Llama4ForConditionalGeneration computes itself: a contiguous copy of the shifted logits, not
upcast. image_features, projected_vision_flat and special_image_mask are forward()'s locals
through the language model.

The image processor (image_processing_llama4_fast.py, processing_llama4.py) tiles an image into
vision_config.image_size squares on the best-fitting canvas of at most max_patches (16) tiles,
adds a global tile when there is more than one, and writes <|image_start|>, per tile row the
tiles' patch tokens with x separators between them and a y separator after the row, <|image|>,
the global tile's patch tokens and <|image_end|>. Patch tokens per tile: (image_size / patch)^2
* pixel_shuffle_ratio^2. The tower's parameters have requires_grad False, so no autograd graph
is recorded there.

Harness: tracer.py (peak live CPU tensor bytes of step 2, fp32, AdamW single-tensor), with marks
around the tower's forward of step 2. Run from the project root (about a minute):
    /usr/bin/python3 tools/trace/llama4_image_cases.py --out docs/data/cpu_traced_vlm.json
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracer
import families_2025 as fam

torch.set_num_threads(1)

SOURCE = "tools/trace/llama4_image_cases.py (harness: shared/ground-truth/measure.py)"
PATCH_TOKEN, IMAGE_START, IMAGE_END, IMAGE, TILE_X, TILE_Y = 4000, 4001, 4002, 4003, 4004, 4005
MAX_TILES = 16  # Llama4ImageProcessorFast.max_patches

TEXT = fam.CONFIGS["llama4_text"]
CONFIG = {
    "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "image_token_index": PATCH_TOKEN,
    "boi_token_index": IMAGE_START, "eoi_token_index": IMAGE_END, "tie_word_embeddings": False,
    "text_config": dict(TEXT, model_type="llama4_text"),
    "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 64, "intermediate_size": 256,
                      "num_hidden_layers": 2, "num_attention_heads": 4, "num_channels": 3, "image_size": 112,
                      "patch_size": 14, "pixel_shuffle_ratio": 0.5, "projector_input_dim": 128,
                      "projector_output_dim": 128, "vision_output_dim": 128, "rope_theta": 10000,
                      "norm_eps": 1e-5, "attention_dropout": 0.0, "projector_dropout": 0.0,
                      "vision_feature_select_strategy": "default"},
}


class VisionAttention(nn.Module):
    def __init__(self, v):
        super().__init__()
        h = v["hidden_size"]
        self.nh, self.hd = v["num_attention_heads"], h // v["num_attention_heads"]
        self.q_proj, self.k_proj = nn.Linear(h, h), nn.Linear(h, h)
        self.v_proj, self.o_proj = nn.Linear(h, h), nn.Linear(h, h)

    @staticmethod
    def rotary(q, k, freqs_ci):
        """vision_apply_rotary_emb: fp32 complex products, cast back to the input dtype."""
        q_ = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
        k_ = torch.view_as_complex(k.float().reshape(*k.shape[:-1], -1, 2))
        f = freqs_ci.view(1, freqs_ci.shape[0], 1, freqs_ci.shape[-1])
        q_out = torch.view_as_real(q_ * f).flatten(3)
        k_out = torch.view_as_real(k_ * f).flatten(3)
        return q_out.type_as(q), k_out.type_as(k)

    def forward(self, x, freqs_ci):
        shape = (*x.shape[:-1], -1, self.hd)
        q, k, v = self.q_proj(x).view(shape), self.k_proj(x).view(shape), self.v_proj(x).view(shape)
        q, k = self.rotary(q, k, freqs_ci)  # the caller's q and k stay alive until it returns
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        # vision_eager_attention_forward
        w = torch.matmul(q, k.transpose(2, 3)) * self.hd ** -0.5
        w = F.softmax(w, dim=-1)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        out = out.reshape(*x.shape[:-1], -1).contiguous()
        return self.o_proj(out), w


class VisionLayer(nn.Module):
    def __init__(self, v):
        super().__init__()
        h = v["hidden_size"]
        self.self_attn = VisionAttention(v)
        self.fc1, self.fc2 = nn.Linear(h, v["intermediate_size"]), nn.Linear(v["intermediate_size"], h)
        self.input_layernorm, self.post_attention_layernorm = nn.LayerNorm(h), nn.LayerNorm(h)

    def forward(self, x, freqs_ci):
        residual = x
        x = self.input_layernorm(x)
        x, weights = self.self_attn(x, freqs_ci)  # the weights stay the layer's local to its end
        x = residual + x
        residual = x
        x = self.post_attention_layernorm(x)
        x = self.fc2(F.gelu(self.fc1(x)))
        return residual + x


def vision_freqs(v):
    """Llama4VisionRotaryEmbedding: (side^2 + 1, 1, head_dim / 2) complex, the class token's row 0."""
    idx = v["image_size"] // v["patch_size"]
    img_idx = torch.arange(idx ** 2, dtype=torch.int32).reshape(idx ** 2, 1)
    img_idx = torch.cat([img_idx, img_idx[:1]], dim=0)
    img_idx[-1, -1] = -2
    fx, fy = img_idx % idx, img_idx // idx
    freq_dim = v["hidden_size"] // v["num_attention_heads"] // 2
    rope = 1.0 / (v["rope_theta"] ** (torch.arange(0, freq_dim, 2)[: freq_dim // 2].float() / freq_dim))
    freqs_x = ((fx + 1)[..., None] * rope[None, None, :]).repeat_interleave(2, dim=-1)
    freqs_y = ((fy + 1)[..., None] * rope[None, None, :]).repeat_interleave(2, dim=-1)
    freqs = torch.cat([freqs_x, freqs_y], dim=-1).float().contiguous()[..., ::2]
    freqs = freqs.masked_fill(img_idx.reshape(-1, 1, 1) < 0, 0)
    return torch.view_as_complex(torch.stack([torch.cos(freqs), torch.sin(freqs)], dim=-1))


class VisionModel(nn.Module):
    def __init__(self, v):
        super().__init__()
        h, p = v["hidden_size"], v["patch_size"]
        self.v = v
        self.unfold = nn.Unfold(kernel_size=(p, p), stride=p)
        self.patch_linear = nn.Linear(v["num_channels"] * p * p, h, bias=False)
        side = v["image_size"] // p
        self.class_embedding = nn.Parameter(torch.randn(h) * h ** -0.5)
        self.positional_embedding_vlm = nn.Parameter(torch.randn(side * side + 1, h) * h ** -0.5)
        self.freqs_ci = vision_freqs(v)  # a plain attribute, not a buffer (.to(device) copies it on a GPU)
        self.layernorm_pre, self.layernorm_post = nn.LayerNorm(h), nn.LayerNorm(h)
        self.layers = nn.ModuleList([VisionLayer(v) for _ in range(v["num_hidden_layers"])])
        self.adapter_fc1 = nn.Linear(v["intermediate_size"], v["projector_input_dim"], bias=False)
        self.adapter_fc2 = nn.Linear(v["projector_output_dim"], v["projector_output_dim"], bias=False)

    def pixel_shuffle(self, x, r):
        n, patches, c = x.shape
        side = int(patches ** 0.5)
        x = x.view(n, side, side, -1)
        x = x.view(n, side, int(side * r), int(c / r)).permute(0, 2, 1, 3).contiguous()
        x = x.view(n, int(side * r), int(side * r), int(c / (r * r))).permute(0, 2, 1, 3).contiguous()
        return x.view(n, -1, x.shape[-1])

    def forward(self, pixel_values):
        x = self.patch_linear(self.unfold(pixel_values).permute(0, 2, 1))
        n, patches, h = x.shape
        x = torch.cat([x, self.class_embedding.expand(n, 1, h)], dim=1)
        x = x.reshape(n, 1, patches + 1, h) + self.positional_embedding_vlm.to(dtype=x.dtype)
        x = self.layernorm_pre(x).view(n, -1, h)
        freqs_ci = self.freqs_ci
        for layer in self.layers:
            x = layer(x, freqs_ci)
        last_hidden_state = x  # the encoder's BaseModelOutput keeps it to the end of forward
        del x
        x = self.layernorm_post(last_hidden_state)[:, :-1, :]
        x = self.adapter(self.pixel_shuffle(x, self.v["pixel_shuffle_ratio"]))
        del last_hidden_state
        return x

    def adapter(self, encoded):
        """Llama4VisionMLP2 (projector_dropout 0: F.dropout returns its input)."""
        x = F.gelu(self.adapter_fc1(encoded))
        return F.gelu(self.adapter_fc2(x))


class ImageLlama4(nn.Module):
    def __init__(self, c, tr):
        super().__init__()
        self.lm = fam.Llama4ForCausalLM(c["text_config"])
        self.vision_model = VisionModel(c["vision_config"])
        self.projector = nn.Linear(c["vision_config"]["vision_output_dim"], c["text_config"]["hidden_size"], bias=False)
        self.tr = tr
        self.calls = 0

    def forward(self, ids, labels, pixel_values):
        lm = self.lm
        x = lm.embed_tokens(ids)
        self.calls += 1
        self.tr.mark(f"tower_in_{self.calls}")
        image_features = self.vision_model(pixel_values)
        vision_flat = image_features.view(-1, image_features.size(-1))
        projected = self.projector(vision_flat).to(x.dtype)
        self.tr.mark(f"tower_out_{self.calls}")
        special = ids == PATCH_TOKEN
        mask = special.unsqueeze(-1).expand_as(x)
        assert x[mask].numel() == projected.numel()  # get_placeholder_mask's check
        x = x.masked_scatter(mask, projected)
        # Llama4TextModel through Llama4ForCausalLM (families_2025.py), then the model's own loss.
        c = lm.c
        S = ids.shape[1]
        cache_position = torch.arange(S)
        masks = {"full_attention": fam.causal_mask(S, x.dtype),
                 "chunked_attention": fam.causal_mask(S, x.dtype, chunk=c.get("attention_chunk_size", 8192))}
        freqs_cis = fam.rope_polar(c["head_dim"], S, c.get("rope_theta", 500000.0))
        for layer in lm.layers:
            x = layer(x, freqs_cis, masks, cache_position)
        del masks, freqs_cis
        h = lm.norm(x)
        del x
        logits = lm.lm_head(h)
        del h, image_features, vision_flat, projected, mask, special  # Llama4ForConditionalGeneration's locals
        return fam.shifted_logits_loss(logits, labels)


def best_canvas(height, width, tile):
    """get_best_fit over find_supported_resolutions(max_patches, tile): the smallest upscale, else
    the largest downscale, then the smallest area; returns (rows, columns) of tiles."""
    options = [(a, b) for n in range(1, MAX_TILES + 1) for a in range(1, n + 1) if n % a == 0 for b in [n // a]]
    scales = {(a, b): min(a * tile / height, b * tile / width) for a, b in options}
    up = [s for s in scales.values() if s >= 1]
    chosen = min(up) if up else max(scales.values())
    return min((o for o in options if scales[o] == chosen), key=lambda o: o[0] * o[1])


def image_tokens(rows, cols, per_tile):
    """Llama4Processor._prompt_split_image: the token ids of one image."""
    out = [IMAGE_START]
    if rows * cols > 1:
        for _ in range(rows):
            for x in range(cols):
                out += [PATCH_TOKEN] * per_tile
                if x < cols - 1:
                    out.append(TILE_X)
            out.append(TILE_Y)
    return out + [IMAGE] + [PATCH_TOKEN] * per_tile + [IMAGE_END]


def run(c, B, S, images, height, width):
    v = c["vision_config"]
    tile = v["image_size"]
    per_tile = (tile // v["patch_size"]) ** 2 // int(round(1 / v["pixel_shuffle_ratio"] ** 2))
    rows, cols = best_canvas(height, width, tile)
    tiles = rows * cols + (1 if rows * cols > 1 else 0)
    one = image_tokens(rows, cols, per_tile)
    assert images * len(one) < S
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        model = ImageLlama4(c, tr)
        model.train()
        for p in list(model.vision_model.parameters()) + list(model.projector.parameters()):
            p.requires_grad_(False)
        base_params = tracer.parameter_count(model)
        tr.mark("built")
        opt = tracer.make_opt("adamw", [p for p in model.parameters() if p.requires_grad], None)
        ids = torch.randint(0, 3990, (B, S))
        for i in range(B):
            at = 2
            for _ in range(images):
                ids[i, at: at + len(one)] = torch.tensor(one)
                at += len(one) + 3
        labels = ids.clone()
        labels[ids == PATCH_TOKEN] = -100
        pixel_values = torch.randn(B * images * tiles, v["num_channels"], tile, tile)
        tr.mark("inputs")
        grad_bytes = tracer.GradientBytes(lambda: model.parameters())
        tracer.train_two_steps(tr, lambda: model(ids, labels, pixel_values), opt, grad_bytes)
        d = dict(nparams=base_params, tower_params=sum(p.numel() for p in model.vision_model.parameters())
                 + sum(p.numel() for p in model.projector.parameters()),
                 params_enum=tracer.tensor_bytes(list(model.parameters())),
                 opt_enum=tracer.optimizer_state_bytes([opt]), grads_enum=grad_bytes.bytes,
                 tiles_per_image=tiles, image_tokens_per_image=len(one),
                 pixel_values_bytes=pixel_values.numel() * 4)
        del model, opt, ids, labels, pixel_values
    return tracer.tower_step_readings(tr, d)


CASES = (  # batch, seq (all tokens), images per sample, image height x width
    (2, 128, 1, 112, 112),
    (1, 256, 2, 224, 112),
    (2, 192, 1, 200, 300),
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/data/cpu_traced_vlm.json")
    a = ap.parse_args()
    kept = tracer.records_without(a.out, "cpu-llama4-")
    out = []
    for B, S, n, height, width in CASES:
        t0 = time.time()
        d = run(CONFIG, B, S, n, height, width)
        train = dict(batch=B, seq=S, images_per_sample=n, image=f"{height}x{width}", precision="fp32",
                     optimizer="adamw", optimizer_impl="single_tensor (torch 1.13 CPU default)", checkpointing="none",
                     attention="eager", grad_accum=1, frozen="vision_tower")
        rec = {**tracer.record_head(f"cpu-llama4-small-b{B}-s{S}-{n}x{height}x{width}-full-frozen_tower-adamw", SOURCE),
               "model": {"hf_config": CONFIG, "params": d["nparams"], "vision_tower_params": d["tower_params"],
                         "impl": "hf-transformers"},
               "train": train,
               **tracer.peak_fields(d), "components": tracer.components(d), "detail": d, "torch": torch.__version__,
               "notes": "peak live CPU tensor bytes of training step 2 (absolute); traced from a torch-only "
                        "re-implementation of transformers Llama4ForConditionalGeneration (eager) with images, the "
                        "vision model and projector frozen; seq counts every token, the processor's special tokens "
                        "included; pixel_values of the weights' dtype"}
        out.append(rec)
        print(f"{rec['id']}: peak={d['s2_peak']} fwd={d['s2_peak_fwd']} bwd={d['s2_peak_bwd']} "
              f"tower_in={d['s2_tower_in']} tower_peak={d['s2_tower_peak']} tower_out={d['s2_tower_out']} "
              f"tiles={d['tiles_per_image']} tokens={d['image_tokens_per_image']} ({time.time() - t0:.1f}s)",
              flush=True)
    tracer.write_records(a.out, kept + out)


if __name__ == "__main__":
    main()
