#!/usr/bin/python3
"""CPU traces of DeepSpeed's own bf16 engine with ZeRO stage 0, 1 and 2 (microsoft/DeepSpeed v0.16.5 @ 38327e07),
one rank of N emulated on one process, on the HF-LLaMA step of liger_cases.py.

Written from deepspeed/runtime/engine.py and deepspeed/runtime/zero/stage_1_and_2.py (DeepSpeedZeroOptimizer):
- engine.py _configure_distributed_model: "bf16": {"enabled": true} casts the module with module.bfloat16();
  get_data_types: under ZeRO the gradient accumulation dtype defaults to the model dtype (no fp32 gradient
  buffer; BF16_Optimizer, which keeps one, runs only without ZeRO); _do_optimizer_sanity_check -> ZeRO optimizer.
- __init__: each group's 16-bit parameters are copied to the host, flattened there (aligned to
  nccl_start_alignment_factor 2 x world size), moved back as bit16_groups_flat and the parameters made views of it;
  the rank's partition is cloned to an fp32 master (single_partition_of_fp32_groups, .clone().float()), the only
  tensor of the wrapped optimizer's group; initialize_optimizer_states steps the optimizer once on a zero fp32
  gradient, so the optimizer state exists from the start.
- backward(): with contiguous_gradients an IPG bucket of reduce_bucket_size 16-bit elements (buf_0; buf_1 only
  with overlap_comm), then loss.float().backward().
- stage 2 (partition_gradients): a hook per parameter (reduce_independent_p_g_buckets_and_remove_grads) copies
  its gradient into the bucket and makes the gradient a view of it; a full bucket is reduced (average_tensor,
  in place) and, per parameter, a gradient outside the rank's partition is dropped, one inside it copied into
  grads_in_partition (one 16-bit buffer of the partition's parameters, allocated at the first copy).
- stage 1 (no hooks without overlap_comm): the whole 16-bit gradients stay until engine.allreduce_gradients ->
  reduce_gradients passes every parameter through the same bucket after backward.
- independent_gradient_partition_epilogue: the last bucket, averaged_gradients = views of the partition's
  gradients (get_flat_partition, return_tensor_list=True), the buckets released, zero_grad(set_to_none).
- step(): the gradient norm from g.double() of each partition gradient (get_grad_norm_direct); then
  single_grad_partition = self.flatten(averaged_gradients).to(fp32) becomes the master's grad, the 16-bit
  gradients are freed, unscale_and_clip_grads in place, optimizer.step(), the fp32 grad dropped, the 16-bit
  partition copied from the master and all-gathered into the flat buffer (in place).
Stage 0 with bf16 (deepspeed/runtime/bf16_optimizer.py BF16_Optimizer; engine.py _do_optimizer_sanity_check returns
BFLOAT16 for a bf16 model with the fp32 grad_accum_dtype get_data_types gives without ZeRO):
- _setup_for_real_optimizer: the 16-bit parameters flattened (aligned to 2 x world size) and made views of the flat
  buffer; the rank's partition cloned to an fp32 master (fp32_groups_flat_partition), the wrapped optimizer's only
  tensor (its state created at the first step); an fp32 gradient buffer for the whole flat group
  (fp32_groups_gradients_flat = torch.zeros_like(bf16 flat, fp32)), per-parameter views of it.
- backward: clear_lp_grads (set_to_none), loss.backward(), update_hp_grads: hp_grad.add_(lp.grad.to(fp32)) per
  parameter (immediate_grad_update defaults to False, config.py), the bf16 gradients kept (clear_lp_grads=False).
- engine.allreduce_gradients -> buffered_allreduce_fallback(get_grads_for_reduction(): the fp32 buffer) ->
  allreduce_bucket: the buffer converted to communication_data_type (bf16 by default), all-reduced, copied back.
- step: the norm of the fp32 gradients (scalars), no clipping (gradient_clipping 0), the master's grad a view of the
  buffer's partition, optimizer.step(), update_lp_params (copy into the bf16 partition, all-gather in place),
  clear_hp_grads (zero_()). The engine does not free the bf16 gradients after a bf16 step without ZeRO
  (_take_model_step: `pass`): they live until the next backward.
Emulation: the other ranks are represented by the rank's 1/N partition (the data values do not matter for memory);
collectives are in place (no buffers). The wrapped optimizer is torch.optim.AdamW on the flat fp32 partition
(torch 1.13 CPU: the single-tensor loop). fp16 is not traced (torch 1.13 has no CPU half matmul): it holds the
same 2-byte tensors, and its overflow check is a per-gradient fp32 temporary.
Run from the repository root:  /usr/bin/python3 tools/trace/deepspeed_cases.py --out docs/data/cpu_traced_deepspeed.json
"""
import torch
import torch.nn.functional as F
import torch.utils.checkpoint

import liger_cases as HF
import llama_blocks as LB
import step_trace as T
import tracer

SOURCE = "tools/trace/deepspeed_cases.py (Tracker of shared/ground-truth/measure.py)"
NCCL_START_ALIGNMENT_FACTOR = 2  # stage_1_and_2.py: nccl_start_alignment_factor


class ZeroOptimizer:
    """DeepSpeedZeroOptimizer's device buffers for rank 0 of `ranks` (stage 1 or 2, contiguous_gradients,
    overlap_comm off, one parameter group, no offload)."""

    def __init__(self, model, ranks, stage, bucket):
        self.stage, self.bucket_size, self.ranks = stage, bucket, ranks
        self.params = [p for p in model.parameters() if p.requires_grad]
        dtype = self.params[0].dtype
        self.dtype = dtype
        # Host copies, device tensors freed, the flat buffer built on the host and moved back.
        cpu_data = [p.data.clone() for p in self.params]
        for p in self.params:
            p.data = torch.empty(1, dtype=dtype)
        total = sum(t.numel() for t in cpu_data)
        align = NCCL_START_ALIGNMENT_FACTOR * ranks
        padded = (total + align - 1) // align * align
        flat = torch.zeros(padded, dtype=dtype)
        off = 0
        self.offsets = []
        for p, t in zip(self.params, cpu_data):
            flat[off: off + t.numel()].copy_(t.view(-1))
            self.offsets.append(off)
            off += t.numel()
        del cpu_data, t
        self.flat = flat
        for p, o in zip(self.params, self.offsets):  # _update_model_bit16_weights
            shape = self.shapes[id(p)]
            p.data = flat.narrow(0, o, shape.numel()).view(shape)
        self.partition_size = padded // ranks
        self.partition = flat.narrow(0, 0, self.partition_size)  # rank 0's
        self.master = self.partition.clone().float().detach()
        self.master.requires_grad = True
        self.optimizer = torch.optim.AdamW([self.master], lr=1e-5)
        # initialize_optimizer_states: one step on a zero fp32 gradient
        self.master.grad = torch.zeros(self.partition_size, dtype=torch.float32)
        self.optimizer.step()
        self.master.grad = None
        self.in_partition = [o < self.partition_size for o in self.offsets]
        self.grads_in_partition = None
        self.ipg = None
        self.averaged = None
        self.hooks = []
        if stage == 2:
            for p in self.params:
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._hook(p))
                self.hooks.append(acc)

    def _hook(self, p):
        def fn(*_):
            self.reduce_and_remove(p)
        return fn

    def reduce_and_remove(self, p):
        n = p.numel()
        if self.elements + n > self.bucket_size:
            self.reduce_ipg()
        if n > self.bucket_size:
            self.extra_large = p
        else:
            view = self.ipg.narrow(0, self.elements, n)
            view.copy_(p.grad.view(-1))
            p.grad.data = view.view_as(p.grad)
        self.elements += n
        self.in_bucket.append(p)

    def reduce_ipg(self):
        for p in self.in_bucket:
            i = self.index[id(p)]
            if self.stage == 2 and not self.in_partition[i]:
                p.grad = None
            elif self.in_partition[i]:
                self.copy_in_partition(p)
        self.in_bucket, self.elements, self.extra_large = [], 0, None

    def copy_in_partition(self, p):
        if self.grads_in_partition is None:
            size = sum(q.numel() for q, inside in zip(self.params, self.in_partition) if inside)
            self.grads_in_partition = torch.empty(size, dtype=self.dtype)
            self.gip_offset = 0
        view = self.grads_in_partition.narrow(0, self.gip_offset, p.numel())
        view.copy_(p.grad.view(-1))
        p.grad.data = view.view_as(p.grad)
        self.gip_offset += p.numel()

    def backward(self, loss):
        self.ipg = torch.empty(self.bucket_size, dtype=self.dtype)
        self.in_bucket, self.elements, self.extra_large = [], 0, None
        loss.float().backward()
        if self.stage == 1:  # engine.allreduce_gradients -> reduce_gradients
            for p in self.params:
                if p.grad is not None:
                    self.reduce_and_remove(p)
        self.epilogue()

    def epilogue(self):
        self.reduce_ipg()
        grads = []
        got = 0
        for p, o, inside in zip(self.params, self.offsets, self.in_partition):
            if not inside:
                continue
            take = min(p.numel(), self.partition_size - o)
            grads.append(p.grad.view(-1).narrow(0, 0, take))
            got += take
        self.averaged = grads
        self.ipg = None
        self.grads_in_partition = None
        for p in self.params:
            p.grad = None

    def step(self):
        norms = [torch.linalg.vector_norm(g.double()) for g in self.averaged]
        total = torch.linalg.vector_norm(torch.stack(norms))
        del norms
        single = torch.cat([g.view(-1) for g in self.averaged]).to(torch.float32)  # flatten(...).to(fp32)
        self.master.grad = single
        self.averaged = None
        del single
        self.master.grad.mul_(min(1.0, 1.0 / (float(total) + 1e-6)))
        self.optimizer.step()
        self.master.grad = None
        self.partition.data.copy_(self.master.data)

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None


class CheckpointedCausalLM(HF.CausalLM):
    """HF-LLaMA with gradient_checkpointing_enable(): each decoder layer under torch.utils.checkpoint
    (modeling_llama.py LlamaModel.forward -> _gradient_checkpointing_func; non-reentrant, as ssm_cases.py)."""

    def forward(self, ids, labels):
        x = self.embed_tokens(ids)
        s = ids.size(1)
        freqs = torch.outer(torch.arange(s).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        for layer in self.layers:
            x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=False)
        x = self.norm(x)
        padded = F.pad(labels, (0, 1), value=HF.IGNORE)[..., 1:].contiguous()
        logits = self.lm_head(x)
        return F.cross_entropy(logits.float().view(-1, self.vocab), padded.view(-1), ignore_index=HF.IGNORE)


class BF16Stage0:
    """BF16_Optimizer's device buffers for rank 0 of `ranks` (one parameter group, no clipping)."""

    def __init__(self, model, ranks):
        self.params = [p for p in model.parameters() if p.requires_grad]
        total = sum(p.numel() for p in self.params)
        align = NCCL_START_ALIGNMENT_FACTOR * ranks
        padded = (total + align - 1) // align * align
        pad = [torch.zeros(padded - total, dtype=torch.bfloat16)] if padded > total else []
        self.flat = torch.cat([p.data.view(-1) for p in self.params] + pad)  # _flatten_dense_tensors_aligned
        del pad
        off = 0
        self.grads = []
        self.fp32_grads = torch.zeros(padded, dtype=torch.float32)
        for p in self.params:
            p.data = self.flat.narrow(0, off, p.numel()).view(p.shape)
            self.grads.append(self.fp32_grads.narrow(0, off, p.numel()).view(p.shape))
            off += p.numel()
        self.partition_size = padded // ranks
        self.partition = self.flat.narrow(0, 0, self.partition_size)
        self.master = self.partition.clone().float().detach()
        self.master.requires_grad = True
        self.grad_partition = self.fp32_grads.narrow(0, 0, self.partition_size)
        self.optimizer = torch.optim.AdamW([self.master], lr=1e-5)

    def backward(self, loss):
        for p in self.params:  # clear_lp_grads
            p.grad = None
        loss.backward()
        for p, hp in zip(self.params, self.grads):  # update_hp_grads
            hp.add_(p.grad.to(torch.float32).view(hp.shape))
        # engine.allreduce_gradients: the fp32 buffer in communication_data_type (bf16), reduced, copied back
        reduced = self.fp32_grads.to(torch.bfloat16)
        self.fp32_grads.copy_(reduced)
        del reduced

    def step(self):
        norm = torch.zeros([], dtype=torch.float32)
        for g in self.grads:
            norm.add_(g.float().norm(2) ** 2)
        del norm
        self.master.grad = self.grad_partition
        self.optimizer.step()
        self.partition.data.copy_(self.master.data)  # update_lp_params; the all-gather is in place
        self.fp32_grads.zero_()  # clear_hp_grads


def engine_step(gradients_of, zero_grad):
    """One training step through the emulated engine: forward, engine backward, step; step 2's
    gradient bytes are what gradients_of(engine) holds after the backward. Stage 0 keeps its bf16
    gradients into the next backward (zero_grad False); ZeRO 1/2 sets them to None."""

    def step(ctx, tr, n):
        ids, labels = ctx["inputs"]
        z = ctx["zero"]
        tr.mark(f"s{n}_start")
        loss = ctx["model"](ids, labels)
        tr.mark(f"s{n}_fwd")
        z.backward(loss)
        tr.mark(f"s{n}_bwd")
        if n == 2:
            ctx["grads_step2"] = tracer.tensor_bytes(gradients_of(z))
        z.step()
        tr.mark(f"s{n}_opt")
        if zero_grad:
            z.zero_grad(set_to_none=True)
        value = float(loss)
        del loss
        tr.mark(f"s{n}_end")
        return value

    return step


def run_stage0_case(c):
    m = dict(LB.LLAMA, **c.get("geometry", {}))
    B, S = c["batch"], c["seq"]

    def build():
        ckpt = c.get("ckpt", False)
        model = (CheckpointedCausalLM if ckpt else HF.CausalLM)(m, {}).to(torch.bfloat16)  # module.bfloat16()
        model.inv_freq.data = model.inv_freq.data.float()
        z = BF16Stage0(model, c["ranks"])
        return dict(model=model, optimizers=[z.optimizer], trainable=z.params, zero=z,
                    param_tensors=list(model.parameters()) + [z.master],
                    param_count=sum(p.numel() for p in model.parameters()),
                    make_inputs=lambda: (torch.randint(0, m["vocab"], (B, S)), torch.randint(0, m["vocab"], (B, S))))

    r = T.run_two_steps(build, engine_step(lambda z: [p.grad for p in z.params] + [z.fp32_grads], zero_grad=False))
    train = dict(batch=B, seq=S, precision="pure_bf16", optimizer="adamw", optimizer_impl="for_loop",
                 checkpointing="full" if c.get("ckpt") else "none", attention="eager", grad_accum=1, lora_rank=0,
                 frozen="none", zero_stage=0, dp=c["ranks"], tp=1, ds_precision="bf16", loss_impl="standard")
    if c.get("ckpt"):
        train["use_reentrant"] = False  # HFLlama.forward's torch.utils.checkpoint call
    framework = dict(name="hf", version="4.51 (re-implemented)",
                     engine={"deepspeed": "0.16.5", "source": "microsoft/DeepSpeed@38327e07",
                             "ds_config": {"bf16": {"enabled": True}, "zero_optimization": {"stage": 0}}})
    notes = (f"measured_bytes = max live CPU tensor bytes of one emulated rank (of {c['ranks']}) in training step 2; "
             "BF16_Optimizer's buffers re-implemented in torch (16-bit flat parameters, fp32 master partition, whole "
             "fp32 gradient buffer, the all-reduce's bf16 copy of it, bf16 gradients kept until the next backward); "
             "collectives in place.")
    model = LB.model_fields(m, "hf-transformers", r["nparams"])
    return T.record(c["id"], SOURCE, model, train, framework, r, notes,
                    software={"transformers": "4.51 (emulated)", "deepspeed": "0.16.5 (emulated)"})


def build_optimizer(model, ranks, stage, bucket):
    shapes = {id(p): p.shape for p in model.parameters()}
    ZeroOptimizer.shapes = shapes
    z = ZeroOptimizer(model, ranks, stage, bucket)
    z.index = {id(p): i for i, p in enumerate(z.params)}
    return z


def run_case(c):
    if c["stage"] == 0:
        return run_stage0_case(c)
    m = dict(LB.LLAMA, **c.get("geometry", {}))
    B, S = c["batch"], c["seq"]

    def build():
        model = HF.CausalLM(m, {}).to(torch.bfloat16)  # engine: module.bfloat16()
        model.inv_freq.data = model.inv_freq.data.float()
        z = build_optimizer(model, c["ranks"], c["stage"], c["bucket"])
        return dict(model=model, optimizers=[z.optimizer], trainable=z.params, zero=z,
                    param_tensors=list(model.parameters()) + [z.master],
                    param_count=sum(p.numel() for p in model.parameters()),
                    make_inputs=lambda: (torch.randint(0, m["vocab"], (B, S)), torch.randint(0, m["vocab"], (B, S))),
                    cleanup=lambda: z.hooks.clear())

    r = T.run_two_steps(build, engine_step(lambda z: z.averaged, zero_grad=True))
    train = dict(batch=B, seq=S, precision="pure_bf16", optimizer="adamw", optimizer_impl="for_loop",
                 checkpointing="none", attention="eager", grad_accum=1, lora_rank=0, frozen="none",
                 zero_stage=c["stage"], dp=c["ranks"], tp=1, ds_precision="bf16", reduce_bucket_size=c["bucket"],
                 loss_impl="standard")
    framework = dict(name="hf", version="4.51 (re-implemented)",
                     engine={"deepspeed": "0.16.5", "source": "microsoft/DeepSpeed@38327e07",
                             "ds_config": {"bf16": {"enabled": True},
                                           "zero_optimization": {"stage": c["stage"], "contiguous_gradients": True,
                                                                 "overlap_comm": False,
                                                                 "reduce_bucket_size": c["bucket"]}}})
    notes = (f"measured_bytes = max live CPU tensor bytes of one emulated rank (of {c['ranks']}) in training step 2; "
             "DeepSpeedZeroOptimizer's buffers re-implemented in torch (16-bit flat parameters, fp32 master partition, "
             "IPG bucket, partition gradient buffer, fp32 gradient partition at the step); collectives in place.")
    model = LB.model_fields(m, "hf-transformers", r["nparams"])
    return T.record(c["id"], SOURCE, model, train, framework, r, notes,
                    software={"transformers": "4.51 (emulated)", "deepspeed": "0.16.5 (emulated)"})


def cases():
    L = []
    for stage in (1, 2):
        for ranks in (2, 4):
            L.append(dict(id=f"cpu-deepspeed-bf16-zero{stage}-r{ranks}-llama-b2-s256", stage=stage, ranks=ranks,
                          batch=2, seq=256, bucket=1 << 20))
    # Deeper and narrower-vocabulary: the gradients, not the logits, decide stage 1 against stage 2.
    for stage in (1, 2):
        L.append(dict(id=f"cpu-deepspeed-bf16-zero{stage}-r2-llama-l8-v8k-b1-s128", stage=stage, ranks=2, batch=1,
                      seq=128, bucket=1 << 20, geometry=dict(layers=8, vocab=8000)))
    # Stage 0 (BF16_Optimizer): the fp32 gradient buffer and the bf16 gradients are whole on every rank.
    for ranks in (2, 4):
        L.append(dict(id=f"cpu-deepspeed-bf16-zero0-r{ranks}-llama-b2-s256", stage=0, ranks=ranks, batch=2, seq=256))
    for ranks in (2, 4):
        L.append(dict(id=f"cpu-deepspeed-bf16-zero0-r{ranks}-llama-l8-v8k-b1-s128", stage=0, ranks=ranks, batch=1,
                      seq=128, geometry=dict(layers=8, vocab=8000)))
    # Checkpointed layers: the fp32 buffer and the kept bf16 gradients against fewer saved activations.
    for ranks in (2, 4):
        L.append(dict(id=f"cpu-deepspeed-bf16-zero0-r{ranks}-llama-l8-v8k-b2-s256-ckpt", stage=0, ranks=ranks, batch=2,
                      seq=256, ckpt=True, geometry=dict(layers=8, vocab=8000)))
    return L


if __name__ == "__main__":
    T.main_loop(cases, run_case, "/tmp/deepspeed_cases.json")
