#!/usr/bin/python3
"""CPU traces of torchtune recipes' training steps (pytorch/torchtune v0.6.1 @ a6290a5b).

Plain-torch re-implementation of what the recipes run, from:
- torchtune/modules/transformer.py: TransformerSelfAttentionLayer (sa_norm -> attn -> + x -> mlp_norm -> mlp
  -> + h); TransformerDecoder.unembed: final norm, then with num_output_chunks > 0 the output projection per
  chunk of the sequence (chunked_output), else output(h).float().
- torchtune/modules/attention.py MultiHeadAttention: separate q/k/v projections (no fused qkv), q.view ->
  rope -> transpose; k, v unsqueeze(2).expand(...).flatten(1, 2) to all heads (a copy for GQA);
  SDPA(is_causal); output.transpose(1, 2).contiguous().view -> output_proj.
- torchtune/modules/rms_norm.py: F.rms_norm(x.float(), ..., weight=scale).to(x.dtype) (fp32 inside).
- torchtune/modules/position_embeddings.py RotaryPositionalEmbeddings: x.float() pairs times the fp32 cache,
  stack, type_as(x).
- torchtune/modules/peft/lora.py LoRALinear: F.linear(x, W) + (alpha/rank) * lora_b(lora_a(dropout(x))),
  adapters in the model dtype; the builders' lora_dropout default is 0.0 (nn.Identity).
- torchtune/modules/loss/ce_chunked_output_loss.py CEWithChunkedOutputLoss: per chunk
  F.cross_entropy(logits.float(), labels, reduction="sum"), summed, / number of labelled tokens.
- recipes/lora_finetune_single_device.py / full_finetune_single_device.py: _loss_step (labels shifted by
  hstack with ignore_index, `del logits` before backward), loss * num_tokens, backward, scale_grads,
  optimizer.step(), zero_grad(set_to_none=True); dtype=bf16 for the whole model, AdamW state in bf16.
- optimizer_in_bwd (torchtune/training/memory.py register_optim_in_bwd_hooks): one optimizer per parameter,
  stepped and zeroed in a post-accumulate-grad hook. torch 1.13 has no
  Tensor.register_post_accumulate_grad_hook (2.1+); the trace hooks the parameter's AccumulateGrad node
  (Node.register_hook runs after the node), which is the same point in the backward.
- enable_activation_checkpointing: non-reentrant checkpoint around each TransformerSelfAttentionLayer
  (training.set_activation_checkpointing). enable_activation_offloading (training/_activation_offloading.py
  OffloadActivations, saved-tensors hooks): every saved tensor >= 1024 bytes that is not a parameter is copied
  to pinned host memory in forward and copied back in backward; the output layer is excluded (NoOpManager).
  Host memory is emulated with numpy buffers, which the harness does not count (they are not c10
  allocations), so the trace shows device memory only. The CUDA-stream stash (up to 5 tensors kept on the
  device until their copy finishes) is not emulated: the copy here is synchronous. The full recipe takes it
  beside optimizer_in_bwd (full_finetune_single_device.py refuses neither pairing): "-ac-offload-optim-in-bwd".
- QLoRA (the qlora_ builders under lora_finetune_single_device, e.g. llama2/7B_qlora_single_device.yaml):
  every layer projection's base becomes torchao's NF4Tensor (nf4_weight.py), the output projection stays an
  nn.Linear (lora_llama2, models/llama2/_component_builders.py: "quantize_base is not applied to final
  output_proj currently").
Attention is the eager math path (torch 1.13 has no F.scaled_dot_product_attention).
Run from the repository root:  /usr/bin/python3 tools/trace/torchtune_cases.py --out docs/data/cpu_traced_frameworks.json
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

import llama_blocks as LB
import nf4_weight as NF4
import step_trace as T
import tracer

SOURCE = "tools/trace/torchtune_cases.py (Tracker of shared/ground-truth/measure.py)"
IGNORE = -100


class LoRALinear(nn.Module):
    def __init__(self, inf, outf, rank, alpha):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(outf, inf))
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        self.rank = rank
        if rank:
            self.lora_a = nn.Linear(inf, rank, bias=False)
            self.lora_b = nn.Linear(rank, outf, bias=False)
            self.scale = alpha / rank

    def forward(self, x):
        out = F.linear(x, self.weight)
        if not self.rank:
            return out
        lora_out = self.lora_a(x)  # dropout 0.0: nn.Identity
        lora_out = self.scale * self.lora_b(lora_out)
        return out + lora_out


class RMSNorm(nn.Module):
    def __init__(self, n, eps=1e-5):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return LB.rms_norm_fp32(x, self.scale, self.eps).to(x.dtype)


def rope(x, cache):  # RotaryPositionalEmbeddings.forward, x: [b, s, n_h, h_d]
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    c = cache[: x.size(1)].view(-1, xs.size(1), 1, xs.size(3), 2)
    out = torch.stack([xs[..., 0] * c[..., 0] - xs[..., 1] * c[..., 1],
                       xs[..., 1] * c[..., 0] + xs[..., 0] * c[..., 1]], -1)
    return out.flatten(3).type_as(x)


class Layer(nn.Module):
    def __init__(self, m, c):
        super().__init__()
        h, nh, kv, f = m["hidden"], m["heads"], m["kv_heads"], m["ffn"]
        self.nh, self.kv, self.hd = nh, kv, h // nh
        r = c["rank"]
        tgt = c["targets"]
        self.q_proj = LoRALinear(h, h, r if "q_proj" in tgt else 0, c["alpha"])
        self.k_proj = LoRALinear(h, kv * self.hd, r if "k_proj" in tgt else 0, c["alpha"])
        self.v_proj = LoRALinear(h, kv * self.hd, r if "v_proj" in tgt else 0, c["alpha"])
        self.output_proj = LoRALinear(h, h, r if "output_proj" in tgt else 0, c["alpha"])
        rm = r if c["lora_mlp"] else 0
        self.w1, self.w3 = LoRALinear(h, f, rm, c["alpha"]), LoRALinear(h, f, rm, c["alpha"])
        self.w2 = LoRALinear(f, h, rm, c["alpha"])
        self.sa_norm, self.mlp_norm = RMSNorm(h), RMSNorm(h)

    def attn(self, x, cache):
        b, s, _ = x.shape
        q = rope(self.q_proj(x).view(b, s, self.nh, self.hd), cache).transpose(1, 2)
        k = rope(self.k_proj(x).view(b, s, -1, self.hd), cache).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, self.hd).transpose(1, 2)
        shape = (b, self.kv, self.nh // self.kv, -1, self.hd)
        k = k.unsqueeze(2).expand(shape).flatten(1, 2)
        v = v.unsqueeze(2).expand(shape).flatten(1, 2)
        out = LB.causal_attention(q, k, v)
        return self.output_proj(out.transpose(1, 2).contiguous().view(b, s, -1))

    def forward(self, x, cache):
        h = self.attn(self.sa_norm(x), cache) + x
        y = self.mlp_norm(h)
        return h + self.w2(F.silu(self.w1(y)) * self.w3(y))


class Decoder(nn.Module):
    def __init__(self, m, c):
        super().__init__()
        self.tok_embeddings = nn.Embedding(m["vocab"], m["hidden"])
        self.layers = nn.ModuleList([Layer(m, c) for _ in range(m["layers"])])
        self.norm = RMSNorm(m["hidden"])
        self.output = nn.Linear(m["hidden"], m["vocab"], bias=False)
        hd = m["hidden"] // m["heads"]
        theta = 1.0 / (500000 ** (torch.arange(0, hd, 2)[: hd // 2].float() / hd))
        idx = torch.outer(torch.arange(c["seq"]).float(), theta)
        self.register_buffer("cache", torch.stack([idx.cos(), idx.sin()], dim=-1), persistent=False)
        self.num_output_chunks = 0
        self.ckpt = c["ac"]
        self.offload = None

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            if self.ckpt:
                h = torch.utils.checkpoint.checkpoint(layer, h, self.cache, use_reentrant=False)
            else:
                h = layer(h, self.cache)
        h = self.norm(h)
        if self.offload is not None:  # NoOpManager around the output layer
            self.offload.paused = True
        if self.num_output_chunks > 0:
            out = [self.output(chunk) for chunk in h.chunk(self.num_output_chunks, dim=1)]
        else:
            out = self.output(h).float()
        if self.offload is not None:
            self.offload.paused = False
        return out


class CEWithChunkedOutputLoss:
    def __init__(self, num_output_chunks=8):
        self.num_output_chunks = num_output_chunks

    def __call__(self, logits, labels):
        total = (labels != IGNORE).sum()
        labels = [t.reshape(-1) for t in labels.chunk(self.num_output_chunks, dim=1)]
        logits = [lc.reshape(-1, lc.size(-1)) for lc in logits]
        loss = 0.0
        for lc, tc in zip(logits, labels):
            loss += F.cross_entropy(lc.float(), tc, ignore_index=IGNORE, reduction="sum")
        return loss / total


class HostOffload:
    """OffloadActivations' pack/unpack (min_offload_size 1024 bytes, parameters kept), synchronous."""

    def __init__(self):
        self.paused = False

    def hooks(self):
        def pack(t):
            if self.paused or isinstance(t, nn.Parameter) or t.numel() * t.element_size() < 1024:
                return (False, t)
            host = t.detach().contiguous()
            raw = host.view(torch.int16) if host.dtype == torch.bfloat16 else host
            return (True, (np.array(raw.numpy(), copy=True), t.dtype, t.shape, t.stride()))

        def unpack(p):
            moved, v = p
            if not moved:
                return v
            arr, dtype, shape, stride = v
            t = torch.from_numpy(arr).clone()  # the copy back to the device
            if dtype == torch.bfloat16:
                t = t.view(torch.bfloat16)
            return t.view(shape) if t.is_contiguous() else torch.as_strided(t, shape, stride)

        return torch.autograd.graph.saved_tensors_hooks(pack, unpack)


class RecipeOptimizer:
    """The recipe's optimizer step: gradients scaled by 1 / num_tokens, then AdamW, unless the
    optimizer already stepped in backward (optimizer_in_bwd); zero_grad clears every optimizer."""

    def __init__(self, ctx, in_backward, num_tokens):
        self.ctx = ctx
        self.in_backward = in_backward
        self.num_tokens = num_tokens

    def step(self):
        if not self.in_backward:
            for p in self.ctx["trainable"]:  # training.scale_grads(model, 1 / num_tokens)
                p.grad.mul_(1.0 / float(self.num_tokens()))
            self.ctx["optimizers"][0].step()

    def zero_grad(self, set_to_none):
        for o in self.ctx["optimizers"]:
            o.zero_grad(set_to_none=set_to_none)


def run_case(c):
    m = dict(LB.LLAMA, **c.get("geometry", {}))
    B, S = c["batch"], c["seq"]
    nf4_numel = {"n": 0}

    def build():
        model = Decoder(m, c).to(torch.bfloat16)  # training.set_default_dtype(bf16)
        model.cache.data = model.cache.data.float()  # the rope cache is built in fp32 at init
        if c["recipe"] in ("lora", "qlora"):
            for n, p in model.named_parameters():
                p.requires_grad_("lora_" in n)
        if c["recipe"] == "qlora":
            nf4_numel["n"] = NF4.quantize_lora_bases(model, LoRALinear)
        trainable = [p for p in model.parameters() if p.requires_grad]
        if c["optimizer_in_bwd"]:
            opts = {p: torch.optim.AdamW([p], lr=2e-5) for p in trainable}
            for p in trainable:  # register_optim_in_bwd_hooks: step + zero_grad after accumulation
                acc = p.expand_as(p).grad_fn.next_functions[0][0]

                def hook(grad_inputs, grad_outputs, p=p):
                    opts[p].step()
                    opts[p].zero_grad(set_to_none=True)
                acc.register_hook(hook)
                p._acc_node = acc  # keep the node (and its hook) alive
            optimizers = list(opts.values())
        else:
            optimizers = [torch.optim.AdamW(trainable, lr=3e-4)]
        if c["chunked_loss"]:
            model.num_output_chunks = 8
        if c["offload"]:
            model.offload = HostOffload()
        tokens = lambda: (torch.randint(0, m["vocab"], (B, S)), torch.randint(0, m["vocab"], (B, S)))
        def cleanup():  # the AccumulateGrad hooks close over the optimizers: break the cycle
            for p in trainable:
                if hasattr(p, "_acc_node"):
                    del p._acc_node
        return dict(model=model, optimizers=optimizers, trainable=trainable, make_inputs=tokens, cleanup=cleanup,
                    loss_fn=CEWithChunkedOutputLoss(8) if c["chunked_loss"] else None)

    def loss_step(ctx, tokens, labels):
        model = ctx["model"]
        if model.offload is not None:
            with model.offload.hooks():
                logits = model(tokens)
        else:
            logits = model(tokens)
        labels = torch.hstack((labels[..., 1:], torch.full((labels.shape[0], 1), IGNORE, dtype=labels.dtype)))
        if ctx["loss_fn"] is not None:
            loss = ctx["loss_fn"](logits, labels)
        else:  # torch.nn.CrossEntropyLoss on output(h).float()
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=IGNORE)
        del logits
        return loss

    def step(ctx, tr, n):
        tokens, labels = ctx["inputs"]
        num_tokens = None  # lives to the end of the step, as in the recipe's loop

        def forward():
            nonlocal num_tokens
            num_tokens = (labels != IGNORE).sum()
            return loss_step(ctx, tokens, labels) * num_tokens

        def grads_of_step2(n):
            if n == 2:
                ctx["grads_step2"] = tracer.tensor_bytes([p.grad for p in ctx["trainable"]])

        return tracer.train_step(tr, n, forward, RecipeOptimizer(ctx, c["optimizer_in_bwd"], lambda: num_tokens),
                                 grads_of_step2)

    r = T.run_two_steps(build, step)
    r["nparams"] += nf4_numel["n"]  # the NF4 weights are no parameters
    lora = c["recipe"] in ("lora", "qlora")
    train = dict(batch=B, seq=S, precision="pure_bf16", optimizer="adamw", optimizer_impl="for_loop",
                 checkpointing="full" if c["ac"] else "none", attention="eager", grad_accum=1, zero_stage=0, dp=1,
                 tp=1, loss_impl="chunked" if c["chunked_loss"] else "standard",
                 loss_chunks=8 if c["chunked_loss"] else 0, logits_upcast="per_chunk" if c["chunked_loss"] else "full",
                 optimizer_in_backward=c["optimizer_in_bwd"], activation_offload=c["offload"])
    if lora:
        targets = list(c["targets"]) + (["w1", "w2", "w3"] if c["lora_mlp"] else [])
        train.update(lora_rank=c["rank"], lora_alpha=c["alpha"], lora_dropout=0.0, lora_targets=",".join(targets),
                     frozen="base", trainable_params=r["trainable"], trainable_dtype="bf16")
        if c["recipe"] == "qlora":
            train.update(quant="torchao.nf4")
    else:
        train.update(lora_rank=0, frozen="none")
    recipe = ("lora_finetune_single_device" if lora else "full_finetune_single_device")
    framework = dict(name="torchtune", version="0.6.1", recipe=recipe, source="pytorch/torchtune@a6290a5b")
    notes = ("measured_bytes = max live CPU tensor bytes in training step 2; plain-torch re-implementation of the "
             "recipe's model, loss and loop; eager attention" +
             ("; activation offloading emulated with uncounted host buffers" if c["offload"] else ""))
    model = LB.model_fields(m, "torchtune", r["nparams"] - (r["trainable"] if lora else 0))
    return T.record(c["id"], SOURCE, model, train, framework, r, notes)


def cases():
    L = []

    def add(recipe, chunked_loss=True, ac=False, offload=False, optimizer_in_bwd=False, batch=2, seq=256,
            targets=("q_proj", "v_proj", "output_proj"), lora_mlp=True, rank=8, geometry=None, name="llama"):
        cid = f"cpu-torchtune-{recipe}-{name}-b{batch}-s{seq}" + (f"-r{rank}" if recipe != "full" else "") + \
              ("-chunked-ce" if chunked_loss else "-ce") + ("-ac" if ac else "") + ("-offload" if offload else "") + \
              ("-optim-in-bwd" if optimizer_in_bwd else "")
        # The full recipe builds the model without adapters (rank 0: plain linear layers).
        rank = rank if recipe != "full" else 0
        L.append(dict(id=cid, recipe=recipe, chunked_loss=chunked_loss, ac=ac, offload=offload,
                      optimizer_in_bwd=optimizer_in_bwd, batch=batch, seq=seq, targets=targets, lora_mlp=lora_mlp,
                      rank=rank, alpha=2 * rank, geometry=geometry or {}))
    add("lora")
    add("lora", chunked_loss=False)
    add("lora", ac=True)
    add("lora", ac=True, offload=True)
    add("full")
    add("full", optimizer_in_bwd=True)
    add("full", ac=True, optimizer_in_bwd=True)
    # enable_activation_offloading beside optimizer_in_bwd (full_finetune_single_device refuses neither pairing).
    add("full", ac=True, offload=True, optimizer_in_bwd=True)
    # More parameters than activations: the optimizer step holds the peak, which optimizer_in_bwd removes.
    wide = dict(layers=4, hidden=512, heads=8, kv_heads=4, ffn=1376, vocab=4000)
    add("full", batch=1, seq=128, geometry=wide, name="llama-wide")
    add("full", batch=1, seq=128, geometry=wide, name="llama-wide", optimizer_in_bwd=True)
    add("full", ac=True, offload=True, batch=1, seq=128, geometry=wide, name="llama-wide", optimizer_in_bwd=True)
    # QLoRA: torchao needs each weight's numel a multiple of 64 x 256 (MHA as llama2's qlora configs, ffn 768).
    mha = dict(kv_heads=4, ffn=768)
    add("qlora", geometry=mha, name="llama-mha")
    add("qlora", ac=True, geometry=mha, name="llama-mha")
    return L


if __name__ == "__main__":
    T.main_loop(cases, run_case, "/tmp/torchtune_cases.json")
