#!/usr/bin/python3
"""CPU traces of small Qwen2.5-VL, Qwen2-VL and Qwen3-VL models trained on images with the vision
tower frozen.

Plain-torch re-implementation of Qwen2_5_VLForConditionalGeneration's training forward with
pixel_values (huggingface/transformers models/qwen2_5_vl/modeling_qwen2_5_vl.py @00b676f8):
Qwen2_5_VLModel.forward embeds the ids, runs get_image_features (the tower:
Qwen2_5_VisionPatchEmbed's Conv3d, rot_pos_emb, get_window_index, the blocks with window or full
attention split per cu_seqlens chunk, eager attention per chunk, the PatchMerger, the reverse
index), cats the per-image splits, masked_scatters them into inputs_embeds, builds the (3, B, S)
position ids (get_rope_index) and runs the text model (tools/trace/qwen_vl_text_cases.py's decoder).
The tower's parameters have requires_grad False (freeze_vision_tower in Qwen's finetune scripts),
so no autograd graph is recorded there. The sequence length counts every token, image tokens
included.

Qwen2-VL (models/qwen2_vl/modeling_qwen2_vl.py @00b676f8): Qwen2VisionTransformerPretrainedModel
runs PatchEmbed's Conv3d, VisionRotaryEmbedding's table, blocks of LayerNorm, VisionAttention over
each whole image (cu_seqlens per image, eager per chunk) and VisionMlp (fc1, QuickGELU, fc2), then
the PatchMerger (LayerNorm, Linear, GELU, Linear); the text model is Qwen2.5-VL's. Qwen3-VL
(models/qwen3_vl/modeling_qwen3_vl.py @00709b86): Qwen3VLVisionModel adds the learned pos_embed
interpolated bilinearly to each grid (fast_pos_embed_interpolate) to the Conv3d's output, runs
blocks of LayerNorm, attention per image and fc1/GELU-tanh/fc2, merges the features after each
deepstack_visual_indexes block with its own merger and the last block's with the merger; the text
model (the Qwen3 decoder, one interleaved-mrope cos/sin for all layers from (3, B, S) position ids)
adds the i-th deepstack feature to the image positions after decoder layer i (_deepstack_process).

Harness: tracer.py (peak live CPU tensor bytes of step 2, fp32, AdamW single-tensor), with marks
around the tower's forward of step 2. Run from the project root (about a minute):
    /usr/bin/python3 tools/trace/qwen_vl_image_cases.py --out docs/data/cpu_traced_vlm.json
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracer
import qwen_vl_text_cases as text
from deepseek_lora_generate import LoraLinear

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "docs", "research", "scripts"))
import trace_families  # noqa: E402

torch.set_num_threads(1)

SOURCE = "tools/trace/qwen_vl_image_cases.py (harness: shared/ground-truth/measure.py)"
IMAGE_TOKEN, VISION_START = 999, 998

CONFIG = dict(text.QWEN2_5_VL)
CONFIG["image_token_id"] = IMAGE_TOKEN
CONFIG["vision_start_token_id"] = VISION_START
CONFIG["vision_config"] = dict(CONFIG["vision_config"], window_size=32, fullatt_block_indexes=[1],
                               hidden_act="silu")


QWEN2_VL = {k: v for k, v in text.QWEN2_5_VL.items() if k != "vision_config"}
QWEN2_VL.update(architectures=["Qwen2VLForConditionalGeneration"], model_type="qwen2_vl",
                image_token_id=IMAGE_TOKEN, vision_start_token_id=VISION_START,
                vision_config={"depth": 2, "embed_dim": 64, "mlp_ratio": 2, "num_heads": 4, "in_channels": 3,
                               "patch_size": 8, "temporal_patch_size": 2, "spatial_merge_size": 2,
                               "hidden_size": 128, "hidden_act": "quick_gelu"})
QWEN3_VL = dict(text.QWEN3_VL, image_token_id=IMAGE_TOKEN, vision_start_token_id=VISION_START)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Tower(text.Qwen25VisionTower):
    """Qwen2_5_VisionTransformerPretrainedModel.forward (eager attention)."""

    def __init__(self, v):
        super().__init__(v)
        self.v = v
        self.nh = v["num_heads"]
        hd = v["hidden_size"] // self.nh
        dim = hd // 2  # Qwen2_5_VisionRotaryEmbedding(head_dim // 2)
        self.register_buffer("inv_freq", 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)),
                             persistent=False)

    def rot_pos_emb(self, grid_thw):
        m = self.v["spatial_merge_size"]
        pos_ids = []
        for t, h, w in grid_thw.tolist():
            hpos = torch.arange(h).unsqueeze(1).expand(-1, w).reshape(h // m, m, w // m, m).permute(0, 2, 1, 3).flatten()
            wpos = torch.arange(w).unsqueeze(0).expand(h, -1).reshape(h // m, m, w // m, m).permute(0, 2, 1, 3).flatten()
            pos_ids.append(torch.stack([hpos, wpos], dim=-1).repeat(t, 1))
        pos_ids = torch.cat(pos_ids, dim=0)
        max_grid = int(grid_thw[:, 1:].max())
        seq = torch.arange(max_grid, dtype=self.inv_freq.dtype)
        full = torch.outer(seq, self.inv_freq)
        return full[pos_ids].flatten(1)

    def get_window_index(self, grid_thw):
        m, p = self.v["spatial_merge_size"], self.v["patch_size"]
        vws = self.v["window_size"] // m // p
        window_index, cu = [], [0]
        wid = 0
        for gt, gh, gw in grid_thw.tolist():
            lh, lw = gh // m, gw // m
            index = torch.arange(gt * lh * lw).reshape(gt, lh, lw)
            pad_h, pad_w = vws - lh % vws, vws - lw % vws
            nwh, nww = (lh + pad_h) // vws, (lw + pad_w) // vws
            ip = F.pad(index, (0, pad_w, 0, pad_h), "constant", -100)
            ip = ip.reshape(gt, nwh, vws, nww, vws).permute(0, 1, 3, 2, 4).reshape(gt, nwh * nww, vws, vws)
            seqlens = (ip != -100).sum([2, 3]).reshape(-1)
            ip = ip.reshape(-1)
            window_index.append(ip[ip != -100] + wid)
            cu.extend((seqlens.cumsum(0) * m * m + cu[-1]).tolist())
            wid += gt * lh * lw
        return torch.cat(window_index, dim=0), cu

    def block(self, b, x, cu, cos, sin):
        x = x + self.attn(b, b.norm1(x), cu, cos, sin)
        n = b.norm2(x)
        return x + b.down_proj(F.silu(b.gate_proj(n)) * b.up_proj(n))

    def attn(self, b, x, cu, cos, sin):  # Qwen2_5_VLVisionAttention.forward, eager per chunk
        S = x.shape[0]
        q, k, v = b.qkv(x).reshape(S, 3, self.nh, -1).permute(1, 0, 2, 3).unbind(0)
        q, k = q.float(), k.float()  # apply_rotary_pos_emb_vision
        c, s = cos.unsqueeze(-2).float(), sin.unsqueeze(-2).float()
        qe = (q * c) + (rotate_half(q) * s)
        ke = (k * c) + (rotate_half(k) * s)
        q, k = qe.to(x.dtype), ke.to(x.dtype)
        del qe, ke
        q, k, v = q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0), v.transpose(0, 1).unsqueeze(0)
        lengths = cu[1:] - cu[:-1]
        splits = [torch.split(t, lengths.tolist(), dim=2) for t in (q, k, v)]
        scaling = (x.shape[-1] // self.nh) ** -0.5
        outs = [self.eager(qq, kk, vv, scaling)[0] for qq, kk, vv in zip(*splits)]
        o = torch.cat(outs, dim=1)
        o = o.reshape(S, -1).contiguous()
        return b.proj(o)

    def eager(self, q, k, v, scaling):  # eager_attention_forward, no mask, dropout 0
        w = torch.matmul(q, k.transpose(2, 3)) * scaling
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        w = F.dropout(w, p=0.0, training=self.training)
        o = torch.matmul(w, v).transpose(1, 2).contiguous()
        return o, w

    def forward(self, x, grid_thw):
        v = self.v
        x = x.view(-1, v["in_channels"], v["temporal_patch_size"], v["patch_size"], v["patch_size"])
        x = self.patch_embed(x.to(self.patch_embed.weight.dtype)).view(-1, v["hidden_size"])
        rot = self.rot_pos_emb(grid_thw)
        window_index, cu_window = self.get_window_index(grid_thw)
        cu_window = torch.unique_consecutive(torch.tensor(cu_window, dtype=torch.int32))
        S, unit = x.shape[0], v["spatial_merge_size"] ** 2
        x = x.reshape(S // unit, unit, -1)[window_index, :, :].reshape(S, -1)
        rot = rot.reshape(S // unit, unit, -1)[window_index, :, :].reshape(S, -1)
        emb = torch.cat((rot, rot), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        cu = torch.repeat_interleave(grid_thw[:, 1] * grid_thw[:, 2], grid_thw[:, 0]).cumsum(dim=0, dtype=torch.int32)
        cu = F.pad(cu, (1, 0), value=0)
        for i, b in enumerate(self.blocks):
            x = self.block(b, x, cu if i in v["fullatt_block_indexes"] else cu_window, cos, sin)
        x = self.mlp(self.ln_q(x).view(-1, self.mlp[0].in_features))  # Qwen2_5_VLPatchMerger
        return x[torch.argsort(window_index), :]


class Qwen2Tower(Tower):
    """Qwen2VisionTransformerPretrainedModel.forward (eager attention): no window reordering, every
    block attends over a whole image."""

    def __init__(self, v):
        nn.Module.__init__(self)
        e, f, m = v["embed_dim"], v["embed_dim"] * v["mlp_ratio"], v["spatial_merge_size"]
        k = (v["temporal_patch_size"], v["patch_size"], v["patch_size"])
        self.v = dict(v, hidden_size=e)
        self.nh = v["num_heads"]
        self.patch_embed = nn.Conv3d(v["in_channels"], e, kernel_size=k, stride=k, bias=False)
        self.blocks = nn.ModuleList()
        for _ in range(v["depth"]):
            b = nn.Module()
            b.norm1, b.norm2 = nn.LayerNorm(e, eps=1e-6), nn.LayerNorm(e, eps=1e-6)
            b.qkv, b.proj = nn.Linear(e, 3 * e), nn.Linear(e, e)
            b.fc1, b.fc2 = nn.Linear(e, f), nn.Linear(f, e)
            self.blocks.append(b)
        merged = e * m * m
        self.ln_q = nn.LayerNorm(e, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(merged, merged), nn.GELU(), nn.Linear(merged, v["hidden_size"]))
        dim = e // self.nh // 2  # VisionRotaryEmbedding(head_dim // 2)
        self.register_buffer("inv_freq", 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)),
                             persistent=False)

    def block(self, b, x, cu, cos, sin):  # Qwen2VLVisionBlock; VisionMlp with QuickGELUActivation
        x = x + self.attn(b, b.norm1(x), cu, cos, sin)
        h = b.fc1(b.norm2(x))
        return x + b.fc2(h * torch.sigmoid(1.702 * h))

    def forward(self, x, grid_thw):
        v = self.v
        x = x.view(-1, v["in_channels"], v["temporal_patch_size"], v["patch_size"], v["patch_size"])
        x = self.patch_embed(x.to(self.patch_embed.weight.dtype)).view(-1, v["hidden_size"])
        rot = self.rot_pos_emb(grid_thw)  # a local of forward, as emb is
        emb = torch.cat((rot, rot), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        cu = torch.repeat_interleave(grid_thw[:, 1] * grid_thw[:, 2], grid_thw[:, 0]).cumsum(dim=0, dtype=torch.int32)
        cu = F.pad(cu, (1, 0), value=0)
        for b in self.blocks:
            x = self.block(b, x, cu, cos, sin)
        return self.mlp(self.ln_q(x).view(-1, self.mlp[0].in_features))  # PatchMerger


class Qwen3Tower(text.Qwen3VisionTower):
    """Qwen3VLVisionModel.forward (eager attention) with its deepstack features."""
    attn = Tower.attn  # Qwen3VLVisionAttention is Qwen2.5-VL's, eager per cu_seqlens chunk
    eager = Tower.eager

    def __init__(self, v):
        super().__init__(v)
        self.v = v
        self.nh = v["num_heads"]
        self.side = int(v["num_position_embeddings"] ** 0.5)
        dim = v["hidden_size"] // self.nh // 2
        self.register_buffer("inv_freq", 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)),
                             persistent=False)

    def rot_pos_emb(self, grid_thw):
        m = self.v["spatial_merge_size"]
        max_hw = int(grid_thw[:, 1:].max().item())
        freq_table = torch.outer(torch.arange(max_hw, dtype=self.inv_freq.dtype), self.inv_freq)
        total = int(torch.prod(grid_thw, dim=1).sum().item())
        pos_ids = torch.empty((total, 2), dtype=torch.long)
        offset = 0
        for t, h, w in grid_thw.tolist():
            mh, mw = h // m, w // m
            row = torch.arange(mh)[:, None, None, None] * m + torch.arange(m)[None, None, :, None]
            col = torch.arange(mw)[None, :, None, None] * m + torch.arange(m)[None, None, None, :]
            row = row.expand(mh, mw, m, m).reshape(-1)
            col = col.expand(mh, mw, m, m).reshape(-1)
            coords = torch.stack((row, col), dim=-1)
            if t > 1:
                coords = coords.repeat(t, 1)
            pos_ids[offset: offset + coords.shape[0]] = coords
            offset += coords.shape[0]
        return freq_table[pos_ids].flatten(1)

    def fast_pos_embed_interpolate(self, grid_thw):
        n = self.side
        idx_list, weight_list = [[] for _ in range(4)], [[] for _ in range(4)]
        for t, h, w in grid_thw.tolist():
            hi, wi = torch.linspace(0, n - 1, h), torch.linspace(0, n - 1, w)
            hf, wf = hi.int(), wi.int()
            hc, wc = (hi.int() + 1).clip(max=n - 1), (wi.int() + 1).clip(max=n - 1)
            dh, dw = hi - hf, wi - wf
            bh, bhc = hf * n, hc * n
            indices = [(bh[None].T + wf[None]).flatten(), (bh[None].T + wc[None]).flatten(),
                       (bhc[None].T + wf[None]).flatten(), (bhc[None].T + wc[None]).flatten()]
            weights = [((1 - dh)[None].T * (1 - dw)[None]).flatten(), ((1 - dh)[None].T * dw[None]).flatten(),
                       (dh[None].T * (1 - dw)[None]).flatten(), (dh[None].T * dw[None]).flatten()]
            for i in range(4):
                idx_list[i].extend(indices[i].tolist())
                weight_list[i].extend(weights[i].tolist())
        idx_tensor = torch.tensor(idx_list, dtype=torch.long)
        weight_tensor = torch.tensor(weight_list, dtype=self.pos_embed.weight.dtype)
        pos_embeds = self.pos_embed(idx_tensor) * weight_tensor[:, :, None]
        patch_pos_embeds = pos_embeds[0] + pos_embeds[1] + pos_embeds[2] + pos_embeds[3]
        patch_pos_embeds = patch_pos_embeds.split([h * w for _, h, w in grid_thw.tolist()])
        m = self.v["spatial_merge_size"]
        permuted = []
        for pe, (t, h, w) in zip(patch_pos_embeds, grid_thw.tolist()):
            pe = pe.repeat(t, 1)
            pe = pe.view(t, h // m, m, w // m, m, -1).permute(0, 1, 3, 2, 4, 5).flatten(0, 4)
            permuted.append(pe)
        return torch.cat(permuted)

    def merge(self, mm, x, postshuffle):  # Qwen3VLVisionPatchMerger
        hs = mm.linear_fc1.in_features
        x = mm.norm(x.view(-1, hs) if postshuffle else x).view(-1, hs)
        return mm.linear_fc2(F.gelu(mm.linear_fc1(x)))

    def block(self, b, x, cu, cos, sin):  # Qwen3VLVisionBlock; Qwen3VLVisionMLP with gelu_pytorch_tanh
        x = x + self.attn(b, b.norm1(x), cu, cos, sin)
        return x + b.linear_fc2(F.gelu(b.linear_fc1(b.norm2(x)), approximate="tanh"))

    def forward(self, x, grid_thw):
        v = self.v
        input_dtype = x.dtype
        x = x.view(-1, v["in_channels"], v["temporal_patch_size"], v["patch_size"], v["patch_size"])
        x = self.patch_embed(x.to(self.patch_embed.weight.dtype)).view(-1, v["hidden_size"])
        pos_embeds = self.fast_pos_embed_interpolate(grid_thw)
        x = (x + pos_embeds).to(input_dtype)
        rot = self.rot_pos_emb(grid_thw)
        emb = torch.cat((rot, rot), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        cu = torch.repeat_interleave(grid_thw[:, 1] * grid_thw[:, 2], grid_thw[:, 0]).cumsum(dim=0, dtype=torch.int32)
        cu = F.pad(cu, (1, 0), value=0)
        deepstack = []
        for i, b in enumerate(self.blocks):
            x = self.block(b, x, cu, cos, sin)
            if i in v["deepstack_visual_indexes"]:
                j = v["deepstack_visual_indexes"].index(i)
                deepstack.append(self.merge(self.deepstack_merger_list[j], x, True))
        return self.merge(self.merger, x, False), deepstack


class ImageVL(text.VLForConditionalGeneration):
    def __init__(self, c, tr):
        # Qwen2-VL's text model is Qwen2.5-VL's (Qwen2VLTextModel, mrope sections per layer).
        super().__init__(dict(c, model_type="qwen2_5_vl", vision_config=text.QWEN2_5_VL["vision_config"])
                         if c["model_type"] == "qwen2_vl" else c)
        self.family = c["model_type"]
        self.visual = {"qwen2_5_vl": Tower, "qwen2_vl": Qwen2Tower, "qwen3_vl": Qwen3Tower}[self.family](
            c["vision_config"])
        self.tr = tr
        self.calls = 0

    def rope_index(self, ids, grid_thw):
        """get_rope_index with images: a (3, B, S) int64 tensor of positions (text runs of one
        position, each image's t/h/w grid after merging)."""
        B, S = ids.shape
        m = self.visual.v["spatial_merge_size"]
        position_ids = torch.ones(3, B, S, dtype=ids.dtype)
        image = 0
        for i in range(B):
            tokens = ids[i].tolist()
            parts, st = [], 0
            while True:
                try:
                    ed = tokens.index(IMAGE_TOKEN, st)
                except ValueError:
                    break
                t, h, w = grid_thw[image].tolist()
                lt, lh, lw = t, h // m, w // m
                st_idx = parts[-1].max() + 1 if parts else 0
                parts.append(torch.arange(ed - st).view(1, -1).expand(3, -1) + st_idx)
                ti = torch.arange(lt).view(-1, 1).expand(-1, lh * lw).flatten()
                hi = torch.arange(lh).view(1, -1, 1).expand(lt, -1, lw).flatten()
                wi = torch.arange(lw).view(1, 1, -1).expand(lt, lh, -1).flatten()
                parts.append(torch.stack([ti, hi, wi]) + (ed - st) + st_idx)
                st = ed + lt * lh * lw
                image += 1
            if st < len(tokens):
                st_idx = parts[-1].max() + 1 if parts else 0
                parts.append(torch.arange(len(tokens) - st).view(1, -1).expand(3, -1) + st_idx)
            position_ids[:, i, :] = torch.cat(parts, dim=1).reshape(3, -1)
        return position_ids

    def rotary_at(self, x, position_ids):
        with torch.no_grad():
            B = position_ids.shape[1]
            inv = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.int64).float() / self.hd))
            freqs = (inv[None, None, :, None].float().expand(3, B, -1, 1) @ position_ids[:, :, None, :].float()).transpose(2, 3)
            if self.family == "qwen3_vl":  # Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope
                freqs_t = freqs[0]
                for dim, offset in enumerate((1, 2), start=1):
                    idx = slice(offset, self.section[dim] * 3, 3)
                    freqs_t[..., idx] = freqs[dim, ..., idx]
                freqs = freqs_t
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def deepstack_process(self, x, visual_pos_masks, visual_embeds):  # Qwen3VLTextModel._deepstack_process
        visual_embeds = visual_embeds.to(x.device, x.dtype)
        x = x.clone()
        local_this = x[visual_pos_masks, :] + visual_embeds
        x[visual_pos_masks, :] = local_this
        return x

    def forward(self, ids, labels, pixel_values, grid_thw):
        B, S = ids.shape
        x = self.embed_tokens(ids)
        self.calls += 1
        self.tr.mark(f"tower_in_{self.calls}")
        pixel_values = pixel_values.type(self.visual.patch_embed.weight.dtype)  # get_image_features
        image_embeds = self.visual(pixel_values, grid_thw)
        deepstack = None
        if self.family == "qwen3_vl":
            image_embeds, deepstack = image_embeds
        split = (grid_thw.prod(-1) // self.visual.v["spatial_merge_size"] ** 2).tolist()
        image_embeds = torch.cat(torch.split(image_embeds, split), dim=0)
        self.tr.mark(f"tower_out_{self.calls}")
        image_mask = (ids == IMAGE_TOKEN).unsqueeze(-1).expand_as(x)
        image_embeds = image_embeds.to(x.device, x.dtype)
        x = x.masked_scatter(image_mask, image_embeds)
        visual_pos_masks = image_mask[..., 0]  # Qwen3VLModel.forward: a view
        position_ids = self.rope_index(ids, grid_thw)
        cos, sin = self.rotary_at(x, position_ids)
        mask = torch.full((S, S), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)[None, None]
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, mask)
            if deepstack is not None and i < len(deepstack):
                x = self.deepstack_process(x, visual_pos_masks, deepstack[i])
        del cos, sin, mask
        h = self.norm(x)
        del image_embeds, image_mask, visual_pos_masks, deepstack, position_ids, x  # the model's forward returns
        logits = self.lm_head(h)
        logits = logits.float()
        shifted = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), shifted.view(-1), ignore_index=-100)


def grid_of(c, H, W):
    """smart_resize is the identity for these sizes (multiples of patch x merge inside the bounds)."""
    v = c["vision_config"]
    f = v["patch_size"] * v["spatial_merge_size"]
    assert H % f == 0 and W % f == 0
    return 1, H // v["patch_size"], W // v["patch_size"]


def run(c, B, S, images, H, W, lora):
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        model = ImageVL(c, tr)
        model.train()
        for p in model.visual.parameters():
            p.requires_grad_(False)  # freeze_vision_tower
        base_params = tracer.parameter_count(model)  # the checkpoint's (adapters not included)
        if lora:
            for p in model.parameters():
                p.requires_grad_(False)
            for layer in model.layers:
                a = layer.self_attn
                a.q_proj = LoraLinear(a.q_proj, 8, 16, 0.0)
                a.v_proj = LoraLinear(a.v_proj, 8, 16, 0.0)
        tr.mark("built")
        opt = tracer.make_opt("adamw", [p for p in model.parameters() if p.requires_grad], None)
        t, gh, gw = grid_of(c, H, W)
        v = c["vision_config"]
        n_tokens = t * gh * gw // v["spatial_merge_size"] ** 2
        assert images * (n_tokens + 1) < S
        ids = torch.randint(0, 990, (B, S))
        for i in range(B):
            at = 4
            for _ in range(images):
                ids[i, at - 1] = VISION_START
                ids[i, at: at + n_tokens] = IMAGE_TOKEN
                at += n_tokens + 2
        labels = ids.clone()
        patch = v["in_channels"] * v["temporal_patch_size"] * v["patch_size"] ** 2
        pixel_values = torch.randn(B * images * t * gh * gw, patch)
        grid_thw = torch.tensor([[t, gh, gw]] * (B * images))
        tr.mark("inputs")
        grad_bytes = tracer.GradientBytes(lambda: model.parameters())
        tracer.train_two_steps(tr, lambda: model(ids, labels, pixel_values, grid_thw), opt, grad_bytes)
        d = dict(nparams=base_params, nparams_with_adapters=tracer.parameter_count(model),
                 tower_params=sum(p.numel() for p in model.visual.parameters()),
                 params_enum=tracer.tensor_bytes(list(model.parameters())),
                 opt_enum=tracer.optimizer_state_bytes([opt]), grads_enum=grad_bytes.bytes,
                 image_tokens_per_image=n_tokens, pixel_values_bytes=pixel_values.numel() * 4)
        del model, opt, ids, labels, pixel_values
    return tracer.tower_step_readings(tr, d)


CASES = (  # config, batch, seq (all tokens), images per sample, H, W, lora
    (CONFIG, 2, 256, 1, 112, 112, False),
    (CONFIG, 2, 320, 1, 224, 224, False),
    (CONFIG, 1, 448, 2, 224, 224, True),
    (QWEN2_VL, 2, 320, 1, 224, 224, False),
    (QWEN2_VL, 1, 448, 2, 224, 224, True),
    # 256 x 256 pixels: the Qwen3-VL processor's min_pixels (65536), so smart_resize keeps it
    (QWEN3_VL, 2, 320, 1, 256, 256, False),
    (QWEN3_VL, 1, 576, 2, 256, 256, True),
    # a smaller image with the record's own min_pixels: the peak is the language model's backward
    (QWEN3_VL, 2, 256, 1, 112, 112, False),
)
MIN_PIXELS = {"qwen3_vl": 65536}  # the processor's bound; a smaller image names its own in the record
FAMILY_NOTES = {"qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration", "qwen2_vl": "Qwen2VLForConditionalGeneration",
                "qwen3_vl": "Qwen3VLForConditionalGeneration"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/data/cpu_traced_vlm.json")
    a = ap.parse_args()
    ours = tuple(f"cpu-{family}-small-" for family in FAMILY_NOTES)
    kept = tracer.records_without(a.out, ours)
    out = []
    for c, B, S, n, H, W, lora in CASES:
        t0 = time.time()
        family = c["model_type"]
        d = run(c, B, S, n, H, W, lora)
        kind = "lora_qv" if lora else "full"
        train = dict(batch=B, seq=S, images_per_sample=n, image=f"{H}x{W}", precision="fp32", optimizer="adamw",
                     optimizer_impl="single_tensor (torch 1.13 CPU default)", checkpointing="none",
                     attention="eager", grad_accum=1)
        if H * W < MIN_PIXELS.get(family, 0):
            train["min_pixels"] = H * W
        if lora:
            train.update(lora_rank=8, lora_alpha=16, lora_targets="q,v", lora_dropout=0.0, frozen="base")
        else:
            train.update(frozen="vision_tower")
        rec = {**tracer.record_head(f"cpu-{family}-small-b{B}-s{S}-{n}x{H}x{W}-{kind}-frozen_tower-adamw", SOURCE),
               "model": {"hf_config": c, "params": d["nparams"], "vision_tower_params": d["tower_params"],
                         "impl": "hf-transformers"},
               "train": train,
               **tracer.peak_fields(d), "components": tracer.components(d), "detail": d, "torch": torch.__version__,
               "notes": "peak live CPU tensor bytes of training step 2 (absolute); traced from a torch-only "
                        "re-implementation of transformers " + FAMILY_NOTES[family] + " (eager) with images, "
                        "the vision tower frozen; seq counts every token, image tokens included"}
        out.append(rec)
        print(f"{rec['id']}: peak={d['s2_peak']} fwd={d['s2_peak_fwd']} bwd={d['s2_peak_bwd']} "
              f"tower_in={d['s2_tower_in']} tower_peak={d['s2_tower_peak']} tower_out={d['s2_tower_out']} "
              f"tokens/img={d['image_tokens_per_image']} ({time.time() - t0:.1f}s)", flush=True)
    tracer.write_records(a.out, kept + out)


if __name__ == "__main__":
    main()
