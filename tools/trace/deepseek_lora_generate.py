#!/usr/bin/python3
"""CPU traces of the small DeepSeek-V2 of families_2025.py under LoRA and in a greedy generate().

- LoRA: PEFT's lora.Linear (peft v0.13.0 @ 8f074d75 tuners/lora/layer.py Linear.forward: result =
  base_layer(x); x = x.to(lora_A.weight.dtype); result = result + lora_B(lora_A(dropout(x))) *
  scaling; result.to(torch_result_dtype)) wrapped around every nn.Linear whose name ends in a
  target (q_proj, kv_a_proj_with_mqa, kv_b_proj, o_proj and the MLP projections: the dense layer's,
  each routed expert's of the nn.ModuleList experts, the shared experts'); the base frozen, AdamW
  over the adapters. Records go to docs/data/cpu_traced_families_2025.json (two steps, the 2nd read).
- generate(): the same model in eval mode under torch.no_grad, greedy, as GenerationMixin._sample
  runs it from transformers 4.45 (the last position's logits only, cloned to fp32; `del outputs`)
  with a DynamicCache (append at the prefill, torch.cat afterwards). The attention caches the key
  and value after the concatenations (modeling_deepseek_v2.py@0233e509 DeepseekV2Attention.forward:
  past_key_values.update(key_states, value_states)); the model makes an eager (b, 1, q, kv) mask
  and the complex rotary table once per forward. Records go to docs/data/cpu_traced_inference.json.

Run from the repository root (a minute of CPU time, one thread):
    /usr/bin/python3 tools/trace/deepseek_lora_generate.py --lora-out /tmp/lora.json --generate-out /tmp/gen.json
"""
import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

import families_2025 as fam
import tracer

torch.set_num_threads(1)

SOURCE = "tools/trace/deepseek_lora_generate.py (Tracker from shared/ground-truth/measure.py)"
TARGETS = ["q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


class LoraLinear(nn.Module):  # peft lora.Linear over a frozen nn.Linear
    def __init__(self, base, r, alpha, dropout):
        super().__init__()
        self.base_layer = base
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.zeros_(self.lora_B.weight)
        self.scaling = alpha / r

    def forward(self, x):
        result = self.base_layer(x)
        dt = result.dtype
        x = x.to(self.lora_A.weight.dtype)
        result = result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling
        return result.to(dt)


def add_adapters(model, r, alpha, dropout):
    for p in model.parameters():
        p.requires_grad_(False)
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear) and n.split(".")[-1] in TARGETS]
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        setattr(parent, child, LoraLinear(getattr(parent, child), r, alpha, dropout))
    return len(names)


def lora_case(c, B, S, r=8, alpha=16, dropout=0.05):
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        model = fam.build(c)
        base_params = tracer.parameter_count(model)
        wrapped = add_adapters(model, r, alpha, dropout)
        model.train()
        tr.mark("built")
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = tracer.make_opt("adamw", trainable, None)
        x = torch.randint(0, c["vocab_size"], (B, S))
        y = x.clone()
        tr.mark("inputs")
        tracer.train_two_steps(tr, lambda: model(x, y), opt)
        n_trainable = sum(p.numel() for p in trainable)
        params_enum = tracer.tensor_bytes(list(model.parameters()))
        opt_enum = tracer.optimizer_state_bytes([opt])
        del model, opt, x, y, trainable
    res = dict(nparams=base_params, trainable=n_trainable, adapted_layers=wrapped, params_enum=params_enum,
               opt_enum=opt_enum, built=tr.live("built"), end_live=tr.live("__end__"))
    res.update(tracer.step_readings(tr))
    rec = {
        **tracer.record_head(f"cpu-{c['model_type']}-lora-small-b{B}-s{S}-r{r}-adamw", SOURCE),
        "model": {"hf_config": c, "params": base_params},
        "train": dict(batch=B, seq=S, precision="fp32", optimizer="adamw",
                      optimizer_impl="single_tensor (torch 1.13 CPU default)", checkpointing="none",
                      attention="eager", grad_accum=1, lora_rank=r, lora_alpha=alpha, lora_dropout=dropout,
                      lora_variant="lora", lora_targets=TARGETS, trainable_params=n_trainable, frozen="base"),
        **tracer.peak_fields(res),
        "components": tracer.components(res),
        "detail": {k: res[k] for k in ("built", "s2_start", "s2_peak_fwd", "s2_peak_bwd", "s2_peak_opt", "end_live",
                                       "adapted_layers")},
        "software": {"torch": torch.__version__, "transformers": "4.56.0", "peft": "0.13.0"},
        "notes": "PEFT-style adapters re-implemented in plain torch on the families_2025.py DeepSeek-V2 "
                 "(nn.ModuleList experts); model.params counts the base model only",
    }
    return rec


# ---------------------------------------------------------------------------------------
# generate(): the forward with a DynamicCache, written over the families_2025.py modules
# ---------------------------------------------------------------------------------------
class DynamicCache:  # cache_utils.py DynamicLayer.update
    def __init__(self):
        self.k, self.v = [], []

    def update(self, k, v, i):
        if len(self.k) <= i:
            self.k.append(k)
            self.v.append(v)
        else:
            self.k[i] = torch.cat([self.k[i], k], dim=-2)
            self.v[i] = torch.cat([self.v[i], v], dim=-2)
        return self.k[i], self.v[i]


def rope_polar_at(dim, positions, theta):  # DeepseekV2RotaryEmbedding.forward over position_ids
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    freqs = (inv[None, :, None].float().expand(positions.shape[0], -1, 1) @ positions[:, None, :].float()).transpose(1, 2)
    return torch.polar(torch.ones_like(freqs), freqs)


def attention(a, i, x, pos, mask, cache):  # DeepseekV2Attention.forward (version 2 rotary), eager
    B, S, _ = x.shape
    q = a.q_proj(x)
    q = q.view(B, S, -1, a.qk).transpose(1, 2)
    q_pass, q_rot = torch.split(q, [a.nope, a.rope], dim=-1)
    ckv = a.kv_a_proj_with_mqa(x)
    k_pass, k_rot = torch.split(ckv, [a.kv_rank, a.rope], dim=-1)
    k_pass = a.kv_b_proj(a.kv_a_layernorm(k_pass)).view(B, S, -1, a.nope + a.v).transpose(1, 2)
    k_pass, value = torch.split(k_pass, [a.nope, a.v], dim=-1)
    k_rot = k_rot.view(B, 1, S, a.rope)
    xq = torch.view_as_complex(q_rot.float().reshape(*q_rot.shape[:-1], -1, 2))
    xk = torch.view_as_complex(k_rot.float().reshape(*k_rot.shape[:-1], -1, 2))
    fc = pos.unsqueeze(1)
    q_rot = torch.view_as_real(xq * fc).flatten(3).type_as(q_rot)
    k_rot = torch.view_as_real(xk * fc).flatten(3).type_as(k_rot)
    k_rot = k_rot.expand(*k_pass.shape[:-1], -1)
    q = torch.cat((q_pass, q_rot), dim=-1)
    k = torch.cat((k_pass, k_rot), dim=-1)
    k, value = cache.update(k, value, i)
    o = fam.eager_attention(q, k, value, mask, a.scaling, 0.0, False)
    return a.o_proj(o.reshape(B, S, -1).contiguous())


def forward(model, ids, past, cache):  # DeepseekV2Model.forward + lm_head(hidden[:, -1:, :])
    c = model.c
    B, S = ids.shape
    x = model.embed_tokens(ids)
    K = past + S
    mn = torch.finfo(x.dtype).min
    m = torch.full((S, K), mn, dtype=x.dtype).triu(diagonal=past + 1)
    mask = m[None, None].expand(B, 1, S, K).clone()
    positions = torch.arange(past, K)[None].expand(B, S)
    pos = rope_polar_at(c["qk_rope_head_dim"], positions, c.get("rope_theta", 10000.0))
    for i, layer in enumerate(model.layers):
        x = x + attention(layer.self_attn, i, layer.input_layernorm(x), pos, mask, cache)
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    x = model.norm(x)
    return model.lm_head(x[:, -1:, :])


@torch.no_grad()
def generate(model, ids, new_tokens, tr):  # GenerationMixin._sample, greedy, 4.45 and later
    cache = DynamicCache()
    past = 0
    step_ids = ids
    for step in range(new_tokens):
        out = forward(model, step_ids, past, cache)
        next_logits = out[:, -1, :].clone().float()
        del out
        next_tokens = torch.argmax(next_logits, dim=-1)
        past += step_ids.shape[1]
        ids = torch.cat([ids, next_tokens[:, None]], dim=-1)
        step_ids = ids[:, -1:]
        tr.mark(f"step{step}")
    return ids


def generate_case(c, B, context, new_tokens):
    params, measured, detail = tracer.traced_generate(lambda: fam.build(c), c["vocab_size"], B, context, new_tokens,
                                                      generate)
    return {
        **tracer.record_head(f"cpu-infer-{c['model_type']}-small-b{B}-c{context}-n{new_tokens}-fp32", SOURCE),
        "model": {"hf_config": c, "params": params},
        "infer": {"batch": B, "context": context, "new_tokens": new_tokens, "dtype": "fp32", "kv_dtype": "fp32",
                  "kv_cache": "dynamic", "attention": "eager", "weights": "fp32"},
        "software": {"torch": torch.__version__, "transformers": "4.56.0"},
        "measured_bytes": measured,
        "detail": detail,
        "notes": "peak live tensor bytes from model construction to the end of generate (greedy, no_grad); "
                 "the families_2025.py DeepSeek-V2 (nn.ModuleList experts) with a DynamicCache",
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lora-out", required=True)
    ap.add_argument("--generate-out", required=True)
    a = ap.parse_args()
    c = copy.deepcopy(fam.CONFIGS["deepseek_v2"])
    lora, gen = [], []
    for B, S in ((2, 128),):
        lora.append(lora_case(c, B, S))
        print(lora[-1]["id"], lora[-1]["measured_bytes"], lora[-1]["train"]["trainable_params"], flush=True)
    for B, ctx, n in ((1, 128, 8), (4, 256, 4)):
        gen.append(generate_case(c, B, ctx, n))
        print(gen[-1]["id"], gen[-1]["measured_bytes"], gen[-1]["detail"], flush=True)
    tracer.write_records(a.lora_out, lora, final_newline=True)
    tracer.write_records(a.generate_out, gen, final_newline=True)


if __name__ == "__main__":
    main()
