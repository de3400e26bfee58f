#!/usr/bin/python3
"""CPU traces of one rank of litgpt main's finetune/full.py over several devices (Lightning-AI/litgpt @ 26857050,
v0.5.13): Lightning Fabric's FSDPStrategy, FSDP1.

With devices * num_nodes > 1 full.py builds FSDPStrategy(auto_wrap_policy={Block},
activation_checkpointing_policy={Block}, state_dict_type="full", limit_all_gathers=True, cpu_offload=False)
(litgpt/finetune/full.py lines 107-114 @ 26857050). Fabric 2.6.1 wraps the model in FullyShardedDataParallel
(FULL_SHARD, use_orig_params=True by default: src/lightning/fabric/strategies/fsdp.py line 169), then wraps each
Block in the non-reentrant checkpoint_wrapper inside its FSDP unit (_setup_activation_checkpointing). Under
bf16-true the module is bf16 and MixedPrecision(param_dtype=reduce_dtype=bfloat16) casts nothing.

FSDP1 as emulated here (torch/distributed/fsdp/_flat_param.py @ 01caf79e, _runtime_utils.py @ 00ae0bc9), one process
holding rank 0's shards, the collectives as local copies with FSDP's buffers:
- each unit (every Block; the root: lm_head, wte, ln_f) is one flat parameter: its tensors in named_modules()
  order, each starting at a multiple of 16 bytes (8 bf16 elements) under use_orig_params, the whole padded to a
  multiple of the ranks (_init_flat_param_and_metadata). The rank keeps its 1/N shard; the optimizer steps the
  original parameters' 1-D views of it (_use_sharded_views), so AdamW's state covers no padding.
- unshard: the padded flat parameter (_full_param_padded) is allocated and filled (all-gather); the module's
  tensors become views of it (_use_unsharded_views: torch.split, then .view), so a unit's weight gradients reach
  the flat parameter through the split's backward, one concatenated flat gradient.
- forward: the root unshards first and is not resharded after forward (the root's _post_forward_reshard);
  each Block unshards before and reshards after its forward (forward_prefetch off).
- backward: a unit's pre-backward hook (on its outputs) unshards it and, BACKWARD_PRE being the default
  backward_prefetch, prefetches the unit before it in post-forward order (_exec_order_utils.py @ 008ec6b1
  get_handle_to_backward_prefetch): the root's the top Block, a Block's the one below, Block 0's none; the post-backward hook on the flat parameter's
  AccumulateGrad reshards the unit, then reduce-scatters the flat gradient into a new shard
  (torch.empty_like(chunks[0])) and keeps it as the sharded gradient. The root's hook fires after the embedding's backward, the last.
- zero_grad(set_to_none=True) clears the original parameters' gradient views; the flat sharded gradient is
  dropped at the next root pre-forward (_root_pre_forward: _clear_grads_if_needed).
The model, full.py's loop (Fabric's fp32 output cast, chunked_cross_entropy over the whole logits with 128-row
chunks) and the validations before and after step 1 are tools/trace/litgpt_cases.py's main (v0.5.13) code.
Harness: tracer.py (peak live CPU tensor bytes). Run from the repository root:
    /usr/bin/python3 tools/trace/litgpt_fsdp1_cases.py --out docs/data/cpu_traced_frameworks.json
"""
import torch
import torch.nn as nn
import torch.utils.checkpoint

import litgpt_cases as LG
import step_trace as T
import tracer

SOURCE = "tools/trace/litgpt_fsdp1_cases.py (Tracker of shared/ground-truth/measure.py)"
BF16 = torch.bfloat16
ALIGN = 16 // torch.empty((), dtype=BF16).element_size()  # _get_aligned_numel(bfloat16)


class FlatUnit:
    """One FSDP1 unit of `modules` under use_orig_params over `n` ranks, rank 0's view."""

    def __init__(self, modules, n):
        self.n = n
        self.entries, self.numels = [], []  # entries: (module, name, shape) or None for padding
        total = 0
        data = []
        for mod in modules:
            for _, sub in mod.named_modules():
                for name, p in list(sub._parameters.items()):
                    if p is None:
                        continue
                    gap = -total % ALIGN
                    if gap:
                        self.entries.append(None)
                        self.numels.append(gap)
                        data.append(torch.zeros(gap, dtype=BF16))
                        total += gap
                    self.entries.append((sub, name, p.shape))
                    self.numels.append(p.numel())
                    data.append(p.detach().reshape(-1))
                    total += p.numel()
        gap = -total % n
        if gap:
            self.entries.append(None)
            self.numels.append(gap)
            data.append(torch.zeros(gap, dtype=BF16))
            total += gap
        self.total, self.shard_numel = total, total // n
        self.padding = total - sum(k for e, k in zip(self.entries, self.numels) if e is not None)
        with torch.no_grad():
            full = torch.cat(data)
            self.shard = full[: self.shard_numel].clone()
        del full, data
        # The original parameters' parts of rank 0's shard: what the optimizer steps.
        self.params, self.ranges = [], []
        offset = 0
        for e, k in zip(self.entries, self.numels):
            if e is not None:
                sub, name, _ = e
                del sub._parameters[name]
                if offset < self.shard_numel:
                    end = min(offset + k, self.shard_numel)
                    self.params.append(nn.Parameter(self.shard[offset:end]))
                    self.ranges.append((offset, end))
            offset += k
        self.real_numel = sum(k for e, k in zip(self.entries, self.numels) if e is not None)
        # The FlatParameter: one leaf, its storage allocated while unsharded.
        self.flat = torch.empty(self.total, dtype=BF16, requires_grad=True)
        self.acc = self.flat.expand_as(self.flat).grad_fn.next_functions[0][0]
        self.acc.register_hook(lambda *unused: self.post_backward())
        self.flat.storage().resize_(0)
        self.gathered = False
        self.shard_grad = None

    def gather(self):  # _unshard: all-gather into _full_param_padded
        if not self.gathered:
            with torch.no_grad():
                self.flat.storage().resize_(self.total)
                self.flat.data[: self.shard_numel].copy_(self.shard)
                self.flat.data[self.shard_numel:].zero_()  # the other ranks' parts, in place
            self.gathered = True
        pieces = torch.split(self.flat, self.numels)  # _use_unsharded_views(as_params=False)
        for e, piece in zip(self.entries, pieces):
            if e is not None:
                sub, name, shape = e
                sub._parameters[name] = piece.view(shape)

    def reshard(self):
        self.flat.storage().resize_(0)
        self.gathered = False

    def post_backward(self):  # _post_backward_hook: reshard, then reduce-scatter the flat gradient
        self.reshard()
        unsharded = self.flat.grad
        self.flat.grad = None
        with torch.no_grad():
            new = torch.empty(self.shard_numel, dtype=BF16)  # torch.empty_like(chunks[0])
            new.copy_(unsharded[: self.shard_numel])  # the reduce-scatter
            del unsharded
            if self.shard_grad is None:  # _accumulate_sharded_grad
                self.shard_grad = new
            else:
                self.shard_grad += new
            del new

    def finalize(self):  # _finalize_params with use_orig_params: the parameters' gradient views
        for p, (a, b) in zip(self.params, self.ranges):
            p.grad = None if self.shard_grad is None else self.shard_grad[a:b]

    def reset_grad_if_cleared(self):  # _clear_grads_if_needed
        if all(p.grad is None for p in self.params):
            self.shard_grad = None


class _PreBackward(torch.autograd.Function):
    """The pre-backward hook FSDP registers on a unit's outputs: unshard it, prefetch the next one."""

    @staticmethod
    def forward(ctx, x, unit, following):
        ctx.unit, ctx.following = unit, following
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():  # views that the checkpoint's recomputed forward saves as the first did
            ctx.unit.gather()
            if ctx.following is not None:
                ctx.following.gather()
        return g, None, None


class ShardedGPT(LG.GPT):
    def shard(self, n):
        self.units = [FlatUnit([b], n) for b in self.h]
        self.root = FlatUnit([self.lm_head, self.wte, self.ln_f], n)  # GPT's named_modules order

    def all_units(self):
        return [self.root] + self.units

    def forward(self, idx, lm_head_chunk_size=0):
        for u in self.all_units():
            u.reset_grad_if_cleared()
        self.root.gather()
        Tn = idx.size(1)
        cos, sin, mask = self.cos[:Tn], self.sin[:Tn], self.causal[:Tn, :Tn]
        x = self.wte(idx)
        for i, (unit, b) in enumerate(zip(self.units, self.h)):
            unit.gather()
            x = torch.utils.checkpoint.checkpoint(b, x, cos, sin, mask, use_reentrant=False,
                                                  preserve_rng_state=False)
            unit.reshard()
            x = _PreBackward.apply(x, unit, self.units[i - 1] if i > 0 else None)
        x = self.ln_f(x)
        # The root's pre-backward hook, on its outputs, prefetches the top block (the unit before it in
        # post-forward order) once the loss's backward reaches the logits.
        return _PreBackward.apply(self.lm_head(x), self.root, self.units[-1])


def run_case(c):
    m = dict(LG.MODELS[c["model"]], layers=c["layers"], **c["geometry"])
    B, S, n = c["batch"], c["seq"], c["ranks"]
    info = {}

    def build():
        model = ShardedGPT(c, m)
        model = model.to(BF16)  # bf16-true: FSDPPrecision.convert_module
        model.cos.data = model.cos.data.float()  # fit()'s max_seq_length setter rebuilds the cache in fp32
        model.sin.data = model.sin.data.float()
        model.shard(n)
        model.train()
        units = model.all_units()
        trainable = [p for u in units for p in u.params]
        info["numel"] = sum(u.real_numel for u in units)
        info["padding"] = sum(u.padding for u in units)
        opt = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.01)
        return dict(model=model, fabric=LG.FabricModule(model, "fp32"), optimizers=[opt], trainable=trainable,
                    param_tensors=[u.shard for u in units], param_count=info["numel"],
                    make_inputs=lambda: (torch.randint(0, m["vocab"], (B, S)), torch.randint(0, m["vocab"], (B, S))),
                    logits=None)

    def step(ctx, tr, k):
        x, y = ctx["inputs"]
        model = ctx["model"]

        def forward():  # finetune/full.py fit() lines 282-284 @ 26857050
            ctx["logits"] = ctx["fabric"](x)
            return LG.chunked_cross_entropy(ctx["logits"][..., :-1, :], y[..., 1:])

        def backward(loss):
            loss.backward()
            for unit in model.all_units():  # _post_backward_final_callback
                unit.finalize()

        def grads_of_step2(k):
            if k == 2:
                ctx["grads_step2"] = tracer.tensor_bytes([u.shard_grad for u in model.all_units()])

        return LG.fit_step(ctx, tr, k, forward, grads_of_step2, backward)

    r = T.run_two_steps(build, step, LG.VALIDATION_WINDOWS)
    model = {k: m[k] for k in ("family", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "norm")}
    model.update(activation=m["activation"], tied_embeddings=False, params=info["numel"], impl="litgpt",
                 rotary_pct=m["rotary_pct"], parallel_residual=m["parallel"], qkv_bias=m["bias"])
    train = dict(batch=B, seq=S, precision="pure_bf16", optimizer="adamw", optimizer_impl="for_loop",
                 checkpointing="full", attention="eager", grad_accum=1, zero_stage=3, dp=n, tp=1,
                 loss_impl="standard", loss_chunk=0, output_cast="fp32", lora_rank=0, frozen="none")
    framework = dict(name="litgpt", version="0.5.13", strategy="FSDPStrategy", script="litgpt/finetune/full.py",
                     source="Lightning-AI/litgpt@26857050 (v0.5.13) FSDPStrategy over litgpt_cases.py's main model code")
    rec = T.record(c["id"], SOURCE, model, train, framework, r, "", software={"lightning": "2.6.1 (emulated)"})
    rec["measured_bytes"] = max(r["s2_peak"], r["validation_after_step1_peak"])
    rec["first_step_peak_bytes"] = max(r["s1_peak"], r["validation_before_step1_peak"])
    rec["detail"]["flat_padding_elements"] = info["padding"]
    rec["notes"] = (f"measured_bytes = max live CPU tensor bytes of one emulated rank (of {n}) over training step 2 "
                    "and the validation after step 1; FSDP1 flat parameters with use_orig_params' alignment and "
                    "world-size padding, collectives as local copies with FSDP's buffers; litgpt_cases.py's main "
                    "model and full.py loop; eager attention")
    return rec


def cases():
    L = []

    def add(model, ranks, batch=2, seq=256, layers=4, geometry=None, name=None):
        cid = f"cpu-fsdp1-litgpt-full-{name or model}-l{layers}-n{ranks}-b{batch}-s{seq}"
        L.append(dict(id=cid, model=model, ranks=ranks, lora=False, targets=(), r=0, alpha=0, batch=batch, seq=seq,
                      dropout=0.0, version="0.5.13", layers=layers, geometry=geometry or {}))
    add("llama", 2)
    add("llama", 4)
    add("llama-gqa-v4k", 4, batch=4)
    # A 1,000-token vocabulary: the training step (the blocks' backward) outgrows validation.
    add("llama", 2, geometry={"vocab": 1000}, name="llama-v1k")
    add("llama", 4, batch=4, layers=8, geometry={"vocab": 1000}, name="llama-v1k")
    # Widths that are no multiple of 8 and units that are none of 4 ranks: FSDP1's padding.
    add("llama", 4, geometry={"hidden": 250, "heads": 5, "kv_heads": 5, "ffn": 690, "vocab": 4001},
        name="llama-odd-h250-v4001")
    return L


if __name__ == "__main__":
    T.main_loop(cases, run_case, "/tmp/litgpt_fsdp1_cases.json")
