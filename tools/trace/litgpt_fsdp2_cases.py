#!/usr/bin/python3
"""CPU traces of one rank of litgpt's finetune/lora.py over several devices (Lightning-AI/litgpt @ 26857050,
v0.5.13; the script shards this way from v0.5.11).

With devices * num_nodes > 1 the script runs Lightning Fabric's ModelParallelStrategy with its own
parallelize_fn (litgpt/finetune/lora.py lines 152-162 and 522-543 @ 26857050): every Block wrapped in
checkpoint_wrapper(preserve_rng_state=False) (activation_checkpointing defaults to True and the strategy
calls parallelize_fn(module, device_mesh) with no third argument), then fully_shard, with no
MixedPrecisionPolicy and the default reshard_after_forward=True, on every nn.Linear whose weight requires a
gradient, every CheckpointWrapper and every Block (reversed module order), and last on the root. Under LoRA
(mark_only_lora_as_trainable before setup_module) no nn.Linear is trainable: the adapters are parameters of
LoRALinear / LoRAQKVLinear, so the units are the Blocks (each CheckpointWrapper's unit manages nothing, its
Block took every parameter) and the root (wte, ln_f, lm_head). The model is built under bf16-true, so the
shards, the gathered parameters, the adapters' gradients, the reduce-scatter input and AdamW's state are bf16.
FSDP2 is tools/trace/torchtitan_cases.py's emulation (one process holds rank 0's 1/N shards, the collectives
are local copies with FSDP2's buffers): the root keeps its parameters gathered after forward
(FSDPState._lazy_init) and reduces in the final callback, as does block 0, whose input (the frozen
embedding's output) needs no gradient, so no post-backward hook fires for it.
FSDP2's overlap of all-gathers with compute is emulated (_fsdp_param_group.py @ pytorch 002a76fb): in forward each
unit's flat all-gather output stays until the next unit's copy-out or the root's post-forward (AllGatherState);
in backward each unit's pre-backward all-gathers the unit before it in post-forward order (_PreBackwardPrefetch; the
root's hook on the output chunks prefetches the top block, block 0 prefetches nothing).
The model, the LoRA loop (lm_head_chunk_size=128, Fabric's fp32 output cast, chunked_cross_entropy) and the
validations before and after step 1 are tools/trace/litgpt_cases.py's main (v0.5.13) code; this script adds
its multi-GPU layout.
Harness: tracer.py (peak live CPU tensor bytes). Run from the repository root:
    /usr/bin/python3 tools/trace/litgpt_fsdp2_cases.py --out docs/data/cpu_traced_frameworks.json
"""
import torch
import torch.nn as nn
import torch.utils.checkpoint

import litgpt_cases as LG
import step_trace as T
import torchtitan_cases as TN
import tracer

SOURCE = "tools/trace/litgpt_fsdp2_cases.py (Tracker of shared/ground-truth/measure.py)"
BF16 = torch.bfloat16


class ShardedGPT(LG.GPT):
    def shard(self, n):
        self.units = [TN.Unit(b, n, True, BF16, BF16) for b in self.h]
        self.root = TN.Unit(nn.ModuleList([self.wte, self.ln_f, self.lm_head]), n, True, BF16, BF16)

    def all_units(self):  # the root module's named_modules() order: the root, then the Blocks
        return [self.root] + self.units

    def shards(self):
        return [s for u in self.all_units() for s in u.shards]

    def forward(self, idx, lm_head_chunk_size=0):
        forward_state = TN.AllGatherState()
        self.root.gather(forward_state)  # stays gathered until the final callback
        Tn = idx.size(1)
        cos, sin, mask = self.cos[:Tn], self.sin[:Tn], self.causal[:Tn, :Tn]
        x = self.wte(idx)
        for i, (unit, b) in enumerate(zip(self.units, self.h)):
            unit.gather(forward_state)
            x = TN._PostBackward.apply(x, unit)
            # checkpoint_wrapper(el, preserve_rng_state=False): the non-reentrant checkpoint
            x = torch.utils.checkpoint.checkpoint(b, x, cos, sin, mask, use_reentrant=False, preserve_rng_state=False)
            unit.reshard()
            # Backward prefetches the block below; block 0's target is the root (no-op, it stays gathered).
            x = TN._PreBackwardPrefetch.apply(x, unit, self.units[i - 1] if i > 0 else None)
        x = self.ln_f(x)
        if lm_head_chunk_size > 0:
            out = [self.lm_head(x_i) for x_i in x.split(lm_head_chunk_size, dim=1)]
        else:
            out = [self.lm_head(x)]
        forward_state.free()  # the root's post-forward frees the last block's flat all-gather output
        # The root's pre-backward hook on every output tensor (FSDPState._register_pre_backward_hook,
        # _fsdp_state.py @ pytorch 01c9f4fc): the first gradient to arrive prefetches the top block, the
        # unit before the root in post-forward order.
        if torch.is_grad_enabled():
            top = self.units[-1]
            for t in out:
                t.register_hook(lambda g: top.unshard())
        return out if lm_head_chunk_size > 0 else out[0]


def run_case(c):
    m = dict(LG.MODELS[c["model"]], layers=c["layers"], **c["geometry"])
    B, S, n = c["batch"], c["seq"], c["ranks"]
    adapters = {}

    def build():
        model = ShardedGPT(c, m)
        for name, p in model.named_parameters():
            p.requires_grad_("lora_" in name)  # mark_only_lora_as_trainable
        model = model.to(BF16)  # bf16-true: the module built in bf16
        model.cos.data = model.cos.data.float()  # fit()'s max_seq_length setter rebuilds the cache in fp32
        model.sin.data = model.sin.data.float()
        model.shard(n)
        model.train()
        shards = model.shards()
        trainable = [s for s in shards if s.requires_grad]
        adapters["numel"] = sum(u.numel() for unit in model.all_units() for u in unit.entries if u.requires_grad)
        opt = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.01)
        return dict(model=model, fabric=LG.FabricModule(model, "fp32"), optimizers=[opt], trainable=trainable,
                    param_tensors=shards,
                    param_count=sum(u.numel() for unit in model.all_units() for u in unit.entries),
                    make_inputs=lambda: (torch.randint(0, m["vocab"], (B, S)), torch.randint(0, m["vocab"], (B, S))),
                    logits=None)

    def step(ctx, tr, k):
        x, y = ctx["inputs"]
        model = ctx["model"]

        def forward():  # finetune/lora.py fit() lines 355-359 @ 26857050
            ctx["logits"] = ctx["fabric"](x, lm_head_chunk_size=128)
            ctx["logits"][-1] = ctx["logits"][-1][..., :-1, :]
            return LG.chunked_cross_entropy(ctx["logits"], y[..., 1:])

        def backward(loss):
            loss.backward()
            for unit in model.all_units():  # FSDP2's final callback: every unit still gathered
                if unit.gathered:
                    unit.reduce()

        def grads_of_step2(k):
            if k == 2:
                ctx["grads_step2"] = tracer.tensor_bytes([p.grad for p in ctx["trainable"]])

        return LG.fit_step(ctx, tr, k, forward, grads_of_step2, backward)

    r = T.run_two_steps(build, step, LG.VALIDATION_WINDOWS)
    model = {k: m[k] for k in ("family", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "norm")}
    model.update(activation=m["activation"], tied_embeddings=False, params=r["nparams"] - adapters["numel"],
                 impl="litgpt", rotary_pct=m["rotary_pct"], parallel_residual=m["parallel"], qkv_bias=m["bias"])
    train = dict(batch=B, seq=S, precision="pure_bf16", optimizer="adamw", optimizer_impl="for_loop",
                 checkpointing="full", attention="eager", grad_accum=1, zero_stage=3, dp=n, tp=1,
                 loss_impl="chunked", loss_chunk=128, output_cast="fp32",
                 lora_rank=c["r"], lora_alpha=c["alpha"], lora_dropout=c["dropout"],
                 lora_targets=",".join(c["targets"]), frozen="base", trainable_params=adapters["numel"])
    framework = dict(name="litgpt", version="0.5.13", strategy="ModelParallelStrategy",
                     script="litgpt/finetune/lora.py",
                     source="Lightning-AI/litgpt@26857050 (v0.5.13) parallelize_fn over litgpt_cases.py's main model code")
    rec = T.record(c["id"], SOURCE, model, train, framework, r, "", software={"lightning": "2.6.1 (emulated)"})
    rec["measured_bytes"] = max(r["s2_peak"], r["validation_after_step1_peak"])
    rec["first_step_peak_bytes"] = max(r["s1_peak"], r["validation_before_step1_peak"])
    rec["notes"] = (f"measured_bytes = max live CPU tensor bytes of one emulated rank (of {n}) over training step 2 "
                    "and the validation after step 1; FSDP2 collectives are local copies with the same buffers "
                    "(torchtitan_cases.py Unit, bf16 shards and reduction), its forward's kept all-gather output "
                    "and backward prefetch emulated; litgpt_cases.py's main model and LoRA "
                    "loop; eager attention")
    return rec


def cases():
    L = []

    def add(model, ranks, targets=("q", "v"), r=8, batch=2, seq=256, layers=4, vocab=None):
        name = model if vocab is None else f"llama-v{vocab // 1000}k"
        cid = f"cpu-fsdp2-litgpt-lora-{name}-l{layers}-n{ranks}-b{batch}-s{seq}-r{r}-{'-'.join(targets)}"
        L.append(dict(id=cid, model=model, ranks=ranks, lora=True, targets=targets, r=r, alpha=2 * r, batch=batch,
                      seq=seq, dropout=0.05, version="0.5.13", layers=layers,
                      geometry={} if vocab is None else {"vocab": vocab}))
    add("llama", 2)
    add("llama", 4)
    add("llama", 2, targets=("q", "k", "v", "proj", "mlp", "head"), r=16)
    add("llama-v32k", 4, batch=4)
    # A small vocabulary: the training step outgrows validation's logits.
    add("llama-v4k", 2)
    add("llama-v4k", 4, batch=4, targets=("q", "k", "v", "proj", "mlp", "head"), r=16)
    # A 1,000-token vocabulary: the training step outgrows validation.
    add("llama", 2, vocab=1000)
    add("llama", 4, batch=4, layers=8, vocab=1000)
    return L


if __name__ == "__main__":
    T.main_loop(cases, run_case, "/tmp/litgpt_fsdp2_cases.json")
