#!/usr/bin/python3
"""CPU traces of one rank of torchtune's full_finetune_distributed and lora_finetune_distributed steps
(pytorch/torchtune v0.6.1).

The model, loss and loop are tools/trace/torchtune_cases.py's (torchtune's modules and the recipe's
_loss_step); FSDP2 is tools/trace/torchtitan_cases.py's emulation (one process holds rank 0's 1/N
shards, the collectives are local copies with FSDP2's buffers), configured as torchtune's
training/_distributed.py shard_model applies fully_shard: every TransformerSelfAttentionLayer and
then the root, reshard_after_forward=True for all, no MixedPrecisionPolicy (the model is built in
bf16, so shards, gradients, the reduce-scatter input and AdamW's state are bf16). The root keeps
its parameters gathered after forward (FSDPState._lazy_init, torch 2.4-2.6) and reduce-scatters in
the final callback. The recipe scales the sharded gradients by world_size / num_tokens
(training.scale_grads) before optimizer.step(); clipping is off (clip_grad_norm null in its configs).
lora_finetune_distributed (recipes/lora_finetune_distributed.py @ v0.6.1) builds the same model with
LoRALinear adapters in bf16 (set_default_dtype around the builder), freezes all but the adapters
(set_trainable_params(model, get_adapter_params(model))) and shards it with the same shard_model, so
the adapters are parameters of their layer's unit: the frozen base weights are gathered with them,
but only the adapters get gradients, reduce-scatters and AdamW state (AdamW over model.parameters()
skips parameters without a gradient). With the embeddings frozen, layer 0's input needs no
gradient, so FSDP2 registers no post-backward hook on it and its reduce-scatter runs in the root's
final callback (_fsdp_state.py _root_post_backward_final_callback, torch v2.6.0).
custom_sharded_layers ['tok_embeddings', 'output'] (the stock configs', recipes/configs/llama3/8B_full.yaml
@ v0.6.1) makes those modules units of their own (training/_distributed.py get_shard_conditions matches the
names; shard_model applies fully_shard to them before the root), resharded after each forward call: the
embedding is gathered for its lookup and again before its backward, whose reduce-scatter waits for the
final callback (its input, the tokens, needs no gradient, so FSDP2 registers no post-backward hook); the
output projection is gathered and resharded around each of the recipe's chunk calls
(TransformerDecoder.chunked_output) and, in backward, around each chunk's backward, which reduce-scatters
its gradient into the sharded one. The root keeps the final norm only. The final callback walks the units
in named_modules() order: root, tok_embeddings, layers, output.
FSDP2's overlap of all-gathers with compute at torch 2.6 (torchtitan_cases.py PostForwardOrder, AllGatherState;
shard_model sets no explicit prefetch, training/_distributed.py @ v0.6.1): in forward each unit's flat all-gather
output stays until the next unit's copy-out or the root's post-forward (an output unit's chunks each keep their
own); in backward each unit's pre-backward all-gathers the unit before it in post-forward order: the root's hook
on the output chunks the top layer (with custom_sharded_layers the output unit, whose first chunk's backward
then prefetches the top layer), each layer the one below, layer 0 the embedding unit, even a frozen one under
LoRA, whose flat output nobody copies out until the final callback's finalize_backward.
gradient_accumulation_steps (records "-ga2"): the recipe runs forward and backward per micro-batch with no
no_sync, so every backward reduce-scatters; from the second on FSDP2 adds the output into the stored shard in
place (foreach_reduce, _fsdp_collectives.py @ v2.6.0), as these units then do.
QLoRA (the qlora_ builders under lora_finetune_distributed, e.g. recipes/configs/llama2/7B_qlora.yaml @ v0.6.1)
replaces every layer projection's base by an NF4 weight (nf4_weight.py: torchao's NF4Tensor as plain tensors;
the output projection stays an nn.Linear, lora_llama2 "quantize_base is not applied to final output_proj").
load_from_full_model_state_dict (training/_distributed.py @ v0.6.1) gives each rank torch.chunk(dim 0) of the
NF4 weight, which nf4_new_zeros splits into 1/N of each inner tensor; FSDP2 all-gathers fsdp_pre_all_gather's
(quantized_scalers, quantization_factor, quantized_data) in one flat uint8 buffer with the unit's bf16
parameters (mixed dtypes: foreach_all_gather views every input as uint8, _fsdp_collectives.py @ v2.6.0),
copies each out into an output of its own dtype and fsdp_post_all_gather wraps them without a copy.
enable_activation_offloading (records "-offload"): both recipes wrap the model in OffloadActivations
(training.get_act_offloading_ctx_manager, recipes/*_finetune_distributed.py @ v0.6.1), emulated as in
torchtune_cases.py (TT.HostOffload: uncounted numpy host buffers, a synchronous copy, so no CUDA-stream stash;
the output projection's chunks under NoOpManager).
fsdp_cpu_offload (records "-cpuoffload"): shard_model passes CPUOffloadPolicy() to every fully_shard
(training/_distributed.py @ v0.6.1), so the shards, their gradients and AdamW's state (built on the sharded
parameters) are host tensors, emulated as uncounted numpy buffers. Each all-gather copies the unit's shards to
the device first (FSDPParam.all_gather_inputs, _fsdp_param.py @ v2.6.0: the concatenated input here); each
reduce-scatter output is copied to its host gradient and freed (foreach_reduce, _fsdp_collectives.py @ v2.6.0),
added into it from the second micro-batch on. The optimizer step runs on the host; its per-parameter
temporaries are still counted here (small beside the backward's peak).
optimizer_in_bwd (records "-optim-in-bwd", full_finetune_distributed only: it refuses gradient accumulation and
clip_grad_norm): one AdamW per sharded parameter whose post-accumulate-grad hook steps and zeroes it
(training/memory.py register_optim_in_bwd_hooks @ v0.6.1); FSDP2 calls that hook itself once foreach_reduce has
set the shard's gradient (_fsdp_collectives.py @ v2.6.0), so the emulated reduce does too, and the loss is
normalised by world_size / num_tokens before backward instead of scaling the gradients after it.
Both at once (records "-cpuoffload-optim-in-bwd"; the recipe refuses neither pairing): foreach_reduce copies
the shard's gradient to the host before it runs the hook (_fsdp_collectives.py @ v2.6.0), so each AdamW steps a
host shard with a host gradient and host state; host_adamw_step does torch's single-tensor AdamW update in place
with a host scratch, so that step inside backward adds nothing the harness counts.
Harness: tracer.py (peak live CPU tensor bytes of step 2). Run from the repository root:
    /usr/bin/python3 tools/trace/torchtune_distributed_cases.py --out /tmp/torchtune_distributed.json
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.utils.checkpoint

import llama_blocks as LB
import nf4_weight as NF4
import step_trace as T
import tracer
import torchtitan_cases as TN
import torchtune_cases as TT

SOURCE = "tools/trace/torchtune_distributed_cases.py (Tracker of shared/ground-truth/measure.py)"
BF16 = torch.bfloat16


def host_copy(t):
    """A host tensor: numpy-owned memory, which the harness does not count (not a c10 allocation)."""
    t = t.detach().contiguous()
    if t.dtype == BF16:
        return torch.from_numpy(np.array(t.view(torch.int16).numpy(), copy=True)).view(BF16)
    return torch.from_numpy(np.array(t.numpy(), copy=True))


class HostShardUnit(TN.Unit):
    """A unit under CPUOffloadPolicy: shards and sharded gradients on the host."""

    def __init__(self, module, n_ranks, accumulate_in_place=False):
        super().__init__(module, n_ranks, True, BF16, BF16, accumulate_in_place=accumulate_in_place)
        for sh in self.shards:
            sh.data = host_copy(sh.data)

    def store_grad(self, sh, g):  # D2H into the host gradient, added into it from the second micro-batch
        if sh.grad is None:
            sh.grad = host_copy(g)
        else:
            sh.grad.add_(g)


def host_adamw_state(opt):
    """AdamW's state created on the host (its lazy init skips a non-empty state)."""
    for group in opt.param_groups:
        for p in group["params"]:
            opt.state[p] = dict(step=torch.tensor(0.0), exp_avg=host_copy(torch.zeros_like(p)),
                                exp_avg_sq=host_copy(torch.zeros_like(p)))


def host_adamw_step(opt, scratch):
    """AdamW's update (torch/optim/adamw.py _single_tensor_adamw @ v1.13.0) in place on a host shard, its
    gradient and its state; `scratch`, a host tensor of the shard's shape, takes the denominator."""
    for group in opt.param_groups:
        beta1, beta2 = group["betas"]
        for p in group["params"]:
            st = opt.state[p]
            st["step"] += 1
            step = float(st["step"])
            p.mul_(1 - group["lr"] * group["weight_decay"])
            st["exp_avg"].mul_(beta1).add_(p.grad, alpha=1 - beta1)
            st["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            torch.sqrt(st["exp_avg_sq"], out=scratch)
            scratch.div_(math.sqrt(1 - beta2 ** step)).add_(group["eps"])
            p.addcdiv_(st["exp_avg"], scratch, value=-group["lr"] / (1 - beta1 ** step))


class ShardedHostOffload(TT.HostOffload):
    """OffloadActivations skips parameters; FSDP2's unsharded parameters are nn.Parameters, this
    emulation's are plain tensors (the units' entries), so they are skipped by storage."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def hooks(self):
        outer = super().hooks()
        pack, unpack = outer.pack_hook, outer.unpack_hook
        def pack_unless_parameter(t):
            entries = {u.data_ptr() for unit in self.model.all_units() for u in unit.entries if u.numel() > 0}
            return (False, t) if t.data_ptr() in entries else pack(t)
        return torch.autograd.graph.saved_tensors_hooks(pack_unless_parameter, unpack)


class NF4Unit(TN.Unit):
    """A unit whose projections hold NF4 weights: their inner tensors are sharded and gathered beside the
    bf16 parameters, in one uint8 all-gather output."""

    def __init__(self, module, n_ranks):
        super().__init__(module, n_ranks, True, BF16, BF16)
        self.nf4, self.nf4_shards = [], []
        for mod in module.modules():
            w = getattr(mod, "nf4_weight", None)
            if w is None:
                continue
            for name in NF4.INNER:
                t = getattr(w, name)
                self.nf4_shards.append(t[: t.numel() // n_ranks].clone())
                full = torch.empty_like(t)
                full.storage().resize_(0)
                setattr(w, name, full)
                self.nf4.append(full)

    def unshard(self):
        if self.gathered or self.all_gather_output is not None:
            return
        with torch.no_grad():
            inputs = [t.reshape(-1).view(torch.uint8) for t in self.shards + self.nf4_shards]
            size = sum(t.numel() for t in inputs)
            out = torch.empty(size * self.n, dtype=torch.uint8)  # all_gather_copy_in: the flat output
            off = 0
            for t in inputs:
                out[off: off + t.numel()].copy_(t)
                off += t.numel()
        self.all_gather_output = out

    def copy_out(self, out):  # foreach_all_gather_copy_out into each output
        for u in self.entries + self.nf4:
            u.storage().resize_(u.numel())
            u.data.view(-1).view(torch.uint8)[: u.numel() * u.element_size() // self.n].copy_(
                out[: u.numel() * u.element_size() // self.n])

    def reshard(self):
        for u in self.nf4:
            u.storage().resize_(0)
        super().reshard()


class ShardedDecoder(TT.Decoder):
    def shard(self, n, custom=False, in_place=False, qlora=False, host=False):
        # in_place: a later micro-batch adds its reduce-scatter output into the stored shard in place
        # (FSDP2's foreach_reduce `sharded_param.grad._local_tensor += new_sharded_grad`, torch v2.6.0).
        def unit(module):
            if host:
                return HostShardUnit(module, n, accumulate_in_place=in_place)
            return TN.Unit(module, n, True, BF16, BF16, accumulate_in_place=in_place)

        self.units = [(NF4Unit(layer, n) if qlora else unit(layer)) for layer in self.layers]
        self.custom = custom
        if custom:
            self.emb_unit = unit(self.tok_embeddings)
            self.out_unit = unit(self.output)
            self.root = unit(nn.ModuleList([self.norm]))
        else:
            self.root = unit(nn.ModuleList([self.tok_embeddings, self.norm, self.output]))

    def all_units(self):
        # FSDPStateContext.all_states: the root module's named_modules() order.
        if self.custom:
            return [self.root, self.emb_unit] + self.units + [self.out_unit]
        return self.units + [self.root]

    def shards(self):
        return [s for u in self.all_units() for s in u.shards]

    def output_chunk(self, chunk, forward_state, order):
        if self.offload is not None:  # NoOpManager around the output layer
            self.offload.paused = True
        try:
            return self._output_chunk(chunk, forward_state, order)
        finally:
            if self.offload is not None:
                self.offload.paused = False

    def _output_chunk(self, chunk, forward_state, order):
        if not self.custom:
            return self.output(chunk)
        self.out_unit.gather(forward_state)
        chunk = TN._PostBackward.apply(chunk, self.out_unit)
        y = self.output(chunk)
        self.out_unit.reshard()
        order.post_forward(self.out_unit)
        return TN._PreBackwardHook.apply(y, self.out_unit, order)

    def forward(self, tokens, order):
        forward_state = TN.AllGatherState()
        self.root.gather(forward_state)
        if self.custom:
            self.emb_unit.gather(forward_state)
            h = self.tok_embeddings(tokens)
            self.emb_unit.reshard()
            order.post_forward(self.emb_unit)
            h = TN._PreBackwardHook.apply(h, self.emb_unit, order)
        else:
            h = self.tok_embeddings(tokens)
        for unit, layer in zip(self.units, self.layers):
            unit.gather(forward_state)
            h = TN._PostBackward.apply(h, unit)
            if self.ckpt:
                h = torch.utils.checkpoint.checkpoint(layer, h, self.cache, use_reentrant=False)
            else:
                h = layer(h, self.cache)
            unit.reshard()
            order.post_forward(unit)
            h = TN._PreBackwardHook.apply(h, unit, order)
        h = self.norm(h)
        out = [self.output_chunk(chunk, forward_state, order) for chunk in h.chunk(self.num_output_chunks, dim=1)]
        # The root's post-forward: the last kept all-gather output freed; its pre-backward hook on every
        # output chunk (the first gradient to arrive prefetches the unit before it in post-forward order).
        forward_state.free()
        order.post_forward(self.root)
        if torch.is_grad_enabled():
            for t in out:
                t.register_hook(lambda g: order.pre_backward(self.root))
        return out


def run_case(c):
    m = dict(LB.LLAMA, **c.get("geometry", {}))
    B, S, n = c["batch"], c["seq"], c["ranks"]
    qlora = c.get("qlora", False)
    lora = c.get("lora", False) or qlora
    custom = c.get("custom", False)
    accum = c.get("accum", 1)
    act_offload = c.get("offload", False)
    host = c.get("cpu_offload", False)
    optim_in_bwd = c.get("optim_in_bwd", False)
    # The LoRA configs' adapters (llama3/8B_lora.yaml @ v0.6.1 style: q, v, output_proj and the MLP).
    cfg = dict(rank=8 if lora else 0, targets=("q_proj", "v_proj", "output_proj") if lora else (), alpha=16 if lora else 0,
               lora_mlp=lora, ac=c["ac"], seq=S)

    adapters = {}  # the unsharded adapter count, for the record

    def build():
        model = ShardedDecoder(m, cfg).to(BF16)  # training.set_default_dtype(bf16) around the builder
        model.cache.data = model.cache.data.float()
        model.num_output_chunks = 8
        if lora:
            for name, p in model.named_parameters():
                p.requires_grad_("lora_" in name)
        nf4_numel = NF4.quantize_lora_bases(model, TT.LoRALinear) if qlora else 0
        model.shard(n, custom, in_place=accum > 1, qlora=qlora, host=host)
        if act_offload:
            model.offload = ShardedHostOffload(model)
        shards = model.shards()
        trainable = [s for s in shards if s.requires_grad]
        adapters["numel"] = sum(u.numel() for unit in model.all_units() for u in unit.entries if u.requires_grad)
        if optim_in_bwd:
            # _setup_optimizer(optimizer_in_bwd=True): one AdamW per parameter, stepped and zeroed by
            # register_optim_in_bwd_hooks' post-accumulate-grad hook on the sharded parameter
            # (training/memory.py @ v0.6.1), which FSDP2 calls once that shard's gradient is set.
            opts = {s: torch.optim.AdamW([s], lr=2e-5) for s in trainable}
            scratch = {}
            if host:  # fsdp_cpu_offload: the shard, its gradient and its state are host tensors
                for s in trainable:
                    host_adamw_state(opts[s])
                    scratch[s] = host_copy(torch.empty_like(s))

            def optim_step(s):
                if host:
                    host_adamw_step(opts[s], scratch[s])
                else:
                    opts[s].step()
                opts[s].zero_grad(set_to_none=True)  # torch 2.x's default; torch 1.13's is False

            for unit in model.all_units():
                unit.post_accumulate_grad_hook = optim_step
            optimizers = list(opts.values())
        else:
            optimizers = [torch.optim.AdamW(trainable, lr=2e-5)]
            if host:
                host_adamw_state(optimizers[0])
        return dict(model=model, optimizers=optimizers, trainable=trainable, param_tensors=shards,
                    param_count=sum(u.numel() for unit in model.all_units() for u in unit.entries) + nf4_numel,
                    order=TN.PostForwardOrder(),
                    loss_fn=TT.CEWithChunkedOutputLoss(8),
                    make_inputs=lambda: (torch.randint(0, m["vocab"], (B, S)), torch.randint(0, m["vocab"], (B, S))))

    def step(ctx, tr, k):
        model = ctx["model"]
        tokens, labels = ctx["inputs"]
        num_tokens = None

        def forward():
            nonlocal num_tokens
            num_tokens = (labels != TT.IGNORE).sum()
            if model.offload is not None:
                with model.offload.hooks():
                    logits = model(tokens, ctx["order"])
            else:
                logits = model(tokens, ctx["order"])
            shifted = torch.hstack((labels[..., 1:], torch.full((labels.shape[0], 1), TT.IGNORE, dtype=labels.dtype)))
            loss = ctx["loss_fn"](logits, shifted)
            del logits
            if optim_in_bwd:
                # The recipe normalises before backward instead of scaling the gradients after it.
                return loss * (n / num_tokens)
            return loss * num_tokens

        def backward_one(loss):
            loss.backward()
            # FSDP2's final callback: the root's post-backward, and that of any unit still gathered
            # (layer 0 under LoRA: its input needs no gradient, so no hook fired).
            ctx["order"].final_callback(model.all_units())

        def backward(loss):
            # gradient_accumulation_steps: the recipe runs forward and backward per micro-batch and
            # steps after the last (no no_sync: every backward reduce-scatters), full_finetune_distributed.py @ v0.6.1.
            backward_one(loss)
            del loss
            for _ in range(accum - 1):
                backward_one(forward())

        def grads_of_step2(k):
            if k == 2:
                ctx["grads_step2"] = tracer.tensor_bytes([p.grad for p in ctx["trainable"]])

        return tracer.train_step(tr, k, forward, TT.RecipeOptimizer(ctx, optim_in_bwd, lambda: num_tokens), grads_of_step2,
                                 backward)

    r = T.run_two_steps(build, step)
    train = dict(batch=B, seq=S, precision="pure_bf16", optimizer="adamw", optimizer_impl="for_loop",
                 checkpointing="full" if c["ac"] else "none", attention="eager", grad_accum=accum, zero_stage=3, fsdp="full_shard", dp=n, tp=1, loss_impl="chunked", loss_chunks=8,
                 logits_upcast="per_chunk", param_dtype="bf16", reduce_dtype="bf16", reshard_after_forward="all")
    if optim_in_bwd:
        train.update(optimizer_in_backward=True)
    if custom:
        train.update(custom_sharded_layers=["tok_embeddings", "output"])
    if act_offload:
        train.update(activation_offload=True)
    if host:
        train.update(offload="optimizer+params")
    if lora:
        targets = list(cfg["targets"]) + ["w1", "w2", "w3"]
        train.update(lora_rank=cfg["rank"], lora_alpha=cfg["alpha"], lora_dropout=0.0, lora_targets=",".join(targets),
                     frozen="base", trainable_params=adapters["numel"], trainable_dtype="bf16")
        if qlora:
            train.update(quant="torchao.nf4")
    else:
        train.update(lora_rank=0, frozen="none")
    framework = dict(name="torchtune", version="0.6.1",
                     recipe="lora_finetune_distributed" if lora else "full_finetune_distributed",
                     **({"torchao": "pytorch/ao@05980129"} if qlora else {}),
                     source="pytorch/torchtune@a6290a5b")
    notes = (f"measured_bytes = max live CPU tensor bytes of one emulated rank (of {n}) in training step 2; "
             "FSDP2 collectives are local copies with the same buffers (torchtitan_cases.py Unit, bf16 shards and "
             "reduction), its forward's kept all-gather output and backward prefetch emulated (torch 2.6's "
             "default); the recipe's model, chunked loss and loop from torchtune_cases.py; eager attention" +
             ("; activation offloading emulated with uncounted host buffers" if act_offload else "") +
             ("; fsdp_cpu_offload: shards, gradients and AdamW state in uncounted host buffers" if host else ""))
    model = LB.model_fields(m, "torchtune", r["nparams"] - (train["trainable_params"] if lora else 0))
    return T.record(c["id"], SOURCE, model, train, framework, r, notes)


def cases():
    geo = dict(layers=4, vocab=8000)
    L = []
    for lora in (False, True):
        for ac in (False, True):
            for ranks in (2, 4):
                kind = "lora-distributed-llama-b2-s256-r8" if lora else "full-distributed-llama-b2-s256"
                L.append(dict(id=f"cpu-torchtune-{kind}-fsdp2r{ranks}" + ("-ac" if ac else ""), lora=lora,
                              ac=ac, ranks=ranks, batch=2, seq=256, geometry=geo))
    # The stock configs' custom_sharded_layers: ['tok_embeddings', 'output'].
    for lora in (False, True):
        for ac in (False, True):
            for ranks in (2, 4):
                kind = "lora-distributed-llama-b2-s256-r8" if lora else "full-distributed-llama-b2-s256"
                L.append(dict(id=f"cpu-torchtune-{kind}-fsdp2r{ranks}-units" + ("-ac" if ac else ""), lora=lora,
                              ac=ac, ranks=ranks, batch=2, seq=256, geometry=geo, custom=True))
    # gradient_accumulation_steps 2: the second micro-batch runs beside every stored shard.
    for lora in (False, True):
        for custom in (False, True):
            for ac in (False, True):
                kind = "lora-distributed-llama-b2-s256-r8" if lora else "full-distributed-llama-b2-s256"
                L.append(dict(id=f"cpu-torchtune-{kind}-fsdp2r2" + ("-units" if custom else "") + "-ga2" +
                              ("-ac" if ac else ""), lora=lora, ac=ac, ranks=2, batch=2, seq=256, geometry=geo,
                              custom=custom, accum=2))
    # QLoRA: torchao needs each weight's numel a multiple of 64 x 256 and its 1/N share of every inner
    # tensor whole (nf4_new_zeros), so MHA (llama2's qlora configs), ffn 768 and 4 layers.
    qgeo = dict(layers=4, vocab=8000, kv_heads=4, ffn=768)
    for custom in (False, True):
        for ac in (False, True):
            for ranks in (2, 4):
                L.append(dict(id=f"cpu-torchtune-qlora-distributed-llama-mha-b2-s256-r8-fsdp2r{ranks}" +
                              ("-units" if custom else "") + ("-ac" if ac else ""), qlora=True, ac=ac, ranks=ranks,
                              batch=2, seq=256, geometry=qgeo, custom=custom))
    # enable_activation_offloading (needs activation checkpointing) and fsdp_cpu_offload, alone and together.
    for lora in (False, True):
        kind = "lora-distributed-llama-b2-s256-r8" if lora else "full-distributed-llama-b2-s256"
        for offload, cpu_offload in ((True, False), (False, True), (True, True)):
            for ranks in (2, 4):
                L.append(dict(id=f"cpu-torchtune-{kind}-fsdp2r{ranks}-ac" + ("-offload" if offload else "") +
                              ("-cpuoffload" if cpu_offload else ""), lora=lora, ac=True, ranks=ranks, batch=2,
                              seq=256, geometry=geo, offload=offload, cpu_offload=cpu_offload))
        L.append(dict(id=f"cpu-torchtune-{kind}-fsdp2r2-ga2-cpuoffload", lora=lora, ac=False, ranks=2, batch=2,
                      seq=256, geometry=geo, cpu_offload=True, accum=2))
    # optimizer_in_bwd (full_finetune_distributed only; it refuses gradient accumulation and clipping):
    # each shard steps as its unit's reduce-scatter sets its gradient, which is then freed.
    for custom in (False, True):
        for ac in (False, True):
            for ranks in (2, 4):
                L.append(dict(id=f"cpu-torchtune-full-distributed-llama-b2-s256-fsdp2r{ranks}" +
                              ("-units" if custom else "") + ("-ac" if ac else "") + "-optim-in-bwd", ac=ac,
                              ranks=ranks, batch=2, seq=256, geometry=geo, custom=custom, optim_in_bwd=True))
    # optimizer_in_bwd with fsdp_cpu_offload (and enable_activation_offloading): each shard steps on the host.
    for custom in (False, True):
        for offload in (False, True):
            for ranks in (2, 4):
                L.append(dict(id=f"cpu-torchtune-full-distributed-llama-b2-s256-fsdp2r{ranks}" +
                              ("-units" if custom else "") + "-ac" + ("-offload" if offload else "") +
                              "-cpuoffload-optim-in-bwd", ac=True, ranks=ranks, batch=2, seq=256, geometry=geo,
                              custom=custom, offload=offload, cpu_offload=True, optim_in_bwd=True))
    # More parameters than activations, in the blocks rather than the root: the stored gradient shards
    # of the blocks above held the peak, which optimizer_in_bwd frees.
    wide = dict(layers=8, hidden=512, heads=8, kv_heads=4, ffn=1376, vocab=512)
    for ranks in (2, 4):
        for oib in (False, True):
            L.append(dict(id=f"cpu-torchtune-full-distributed-llama-deep-b1-s16-fsdp2r{ranks}" +
                          ("-optim-in-bwd" if oib else ""), ac=False, ranks=ranks, batch=1, seq=16, geometry=wide,
                          optim_in_bwd=oib))
        L.append(dict(id=f"cpu-torchtune-full-distributed-llama-deep-b1-s16-fsdp2r{ranks}-cpuoffload-optim-in-bwd",
                      ac=False, ranks=ranks, batch=1, seq=16, geometry=wide, cpu_offload=True, optim_in_bwd=True))
    return L


if __name__ == "__main__":
    T.main_loop(cases, run_case, "/tmp/torchtune_distributed_cases.json")
