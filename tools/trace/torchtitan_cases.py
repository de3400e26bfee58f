#!/usr/bin/python3
"""CPU traces of torchtitan training steps (pytorch/torchtitan v0.1.0 @ f7084fc7), FSDP2 emulated on one process.

Written from:
- torchtitan/models/llama3/model/model.py: Attention (wq/wk/wv/wo, apply_rotary_emb through view_as_complex
  on xq.float(), repeat_kv = expand + reshape copy, sdpa), FeedForward w2(silu(w1 x) * w3 x), nn.RMSNorm,
  output = self.output(h).
- torchtitan/components/loss.py: cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1)) on the whole
  logits; torchtitan/train.py: optimizers.zero_grad() first, `del pred` before loss.backward(),
  clip_grad_norm_, optimizers.step().
- torchtitan/models/llama3/infra/parallelize.py apply_fsdp: MixedPrecisionPolicy(param_dtype=bfloat16,
  reduce_dtype=float32); fully_shard per TransformerBlock (reshard_after_forward except the last block), then
  the root; apply_ac: mode full = checkpoint_wrapper per block; selective "op" = the _save_list policy
  (every other aten.mm and the flash/efficient SDPA outputs are MUST_SAVE, the rest recomputed);
  selective "<k>" = full checkpoint of every k-th block.
- FSDP2 (torch.distributed fsdp, _fsdp_collectives.py foreach_all_gather / foreach_reduce): a unit's sharded
  fp32 parameters are cast to bf16 (all-gather input, 1/N), all-gathered into one flat bf16 output, copied
  out into the unsharded parameters, and freed after forward (storage resized to 0) and gathered again
  before the unit's backward; after it, the bf16 unsharded grads are copied into one fp32
  reduce-scatter input of the unit's full size, freed, and the 1/N fp32 output becomes the sharded grads.
  FSDP2's overlap at torch 2.6 (PostForwardOrder, AllGatherState): in forward the flat output stays until the
  next unit's copy-out or the root's post-forward; in backward each pre-backward all-gathers the unit before it
  in post-forward order (apply_fsdp sets no explicit prefetch): the root's targets the top block, left gathered
  (a no-op), each block the one below.
- Tensor parallelism (apply_tp, models/llama3/infra/parallelize.py @ f7084fc7, over the 2-D mesh
  dp_shard x tp): wq/wk/wv/w1/w3 ColwiseParallel, wo/w2 RowwiseParallel(output_layouts=Shard(1)), the norms
  SequenceParallel, PrepareModuleInput Shard(1) -> Replicate before attention and feed_forward, tok_embeddings
  RowwiseParallel(Replicate -> Shard(1)), output ColwiseParallel(Shard(1) -> Shard(-1)) under loss_parallel.
  One TP rank holds its heads, MLP columns and vocabulary rows; FSDP2 shards that over dp_shard. The
  collectives are torch.distributed._functional_collectives' (torch 2.6): all_gather_tensor on dim 1 gathers
  into dim 0 and then cats the chunks along dim 1; reduce_scatter_tensor on dim 1 first cats the chunks along
  dim 0. loss_parallel's cross-entropy is torch/distributed/tensor/parallel/loss.py's _log_softmax
  decomposition and its fused _nll_loss_and_log_softmax_backward.
- Context parallelism (train.py @ f7084fc7: the step inside context_parallel(cp_mesh, buffers=[inputs, labels,
  freqs_cis], buffer_seq_dims=[1, 1, 0], no_restore_buffers={inputs, labels}), rotate method allgather; FSDP2 over
  the flattened dp_shard x cp mesh). torch's context_parallel and ring attention
  (torch/distributed/tensor/experimental/_attention.py, read at pytorch @ 0123248a): freqs_cis cloned for the
  restore, every buffer sharded with resize_ (its storage kept) into the rank's 2 of 2 x cp round-robin chunks;
  _templated_ring_attention with _AllGatherRotater (the flat cat of the local k and v all-gathered once, held
  through the loop) and _SDPAMerger (fp32 merge of each step's output and logsumexp); its backward with fp32
  grad_query / grad_key / grad_value accumulators, k and v gathered again, the key/value gradients passed on by
  an _AllToAllRotater (permute_tensor: one receive buffer). The emulated rank is the last (cp - 1): with load
  balancing each of its steps i >= 1 uses the full local q and the first half of the peer's k and v.
- CP x TP (the mesh dp_shard x cp x tp, tp innermost: ParallelDims.build_mesh): both of the above at once, the
  CP-sharded inputs and freqs_cis feeding the TP rank's sequence-parallel blocks and its ring over the local heads.
Emulation on torch 1.13 / one process: N ranks are represented by shards of 1/N of each parameter (the data
values do not matter for memory); the collectives become local copies with the same buffers. Selective
per-op checkpointing (torch.utils.checkpoint.create_selective_checkpoint_contexts, torch >= 2.4) is written
out with a TorchDispatchMode that caches the chosen ops' outputs in forward and returns them in the
recompute, inside a non-reentrant checkpoint with early stop (torch 2.x default). SDPA is FlashEmulation
(saves q, k, v, out, fp32 logsumexp like aten::_scaled_dot_product_flash_attention).
Run from the repository root:  /usr/bin/python3 tools/trace/torchtitan_cases.py --out docs/data/cpu_traced_frameworks.json
"""
import math
import weakref

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import llama_blocks as LB
import step_trace as T
import tracer

SOURCE = "tools/trace/torchtitan_cases.py (Tracker of shared/ground-truth/measure.py)"
BF16 = torch.bfloat16

# ---- selective per-op checkpointing ---------------------------------------------------------------
_SAC = {"mode": None, "cache": None}  # FlashEmulation consults this (a Python Function is not an aten op)


class _RecordOps(TorchDispatchMode):
    def __init__(self, cache):
        super().__init__()
        self.cache, self.mm = cache, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if _SAC["mode"] == "inside":  # FlashEmulation's per-slice matmuls are not the model's mm
            return out
        if func is torch.ops.aten.mm.default:
            self.mm += 1
            if self.mm % 2 == 1:  # _save_list policy: mm is saved unless its count is even
                self.cache.append(out.detach())
        return out


class _ReplayOps(TorchDispatchMode):
    def __init__(self, cache):
        super().__init__()
        self.cache, self.mm = cache, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.mm.default:
            self.mm += 1
            if self.mm % 2 == 1:
                return self.cache.pop(0)
        return func(*args, **(kwargs or {}))


class _Stop(Exception):
    pass


class _Holder:
    pass


def checkpoint(fn, x, policy_cache=False):
    """Non-reentrant checkpoint (saved-tensor hooks, recompute on first unpack, early stop), optionally with the
    selective per-op cache."""
    holders, storage, cache = [], weakref.WeakKeyDictionary(), []

    def pack(t):
        h = _Holder()
        holders.append(weakref.ref(h))
        return h

    def unpack(h):
        if h not in storage:
            count = [0]

            def ipack(t):
                i = count[0]
                count[0] += 1
                ref = holders[i]() if i < len(holders) else None
                if ref is not None:
                    storage[ref] = t.detach()
                if count[0] == len(holders):
                    raise _Stop
                return None

            def iunpack(_):
                raise RuntimeError("unreachable")

            xr = x.detach().requires_grad_(x.requires_grad)
            try:
                with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(ipack, iunpack):
                    if policy_cache:
                        _SAC.update(mode="replay", cache=cache)
                        with _ReplayOps(cache):
                            fn(xr)
                    else:
                        fn(xr)
            except Exception as e:  # _Stop crosses the C++ op boundary as a RuntimeError naming it
                if not (isinstance(e, _Stop) or "_Stop" in str(e)):
                    raise
            finally:
                _SAC.update(mode=None, cache=None)
        return storage[h]

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        if policy_cache:
            _SAC.update(mode="record", cache=cache)
            try:
                with _RecordOps(cache):
                    out = fn(x)
            finally:
                _SAC.update(mode=None, cache=None)
        else:
            out = fn(x)
    return out


class Flash(LB.FlashEmulation):
    @staticmethod
    def forward(ctx, q, k, v):
        if _SAC["mode"] == "replay":
            out, lse = _SAC["cache"].pop(0)
            ctx.save_for_backward(q, k, v, out, lse)
            return out
        prev, _SAC["mode"] = _SAC["mode"], "inside"  # the slices' mm are not the model's mm
        try:
            out, lse = LB.FlashEmulation.compute(q, k, v)
        finally:
            _SAC["mode"] = prev
        ctx.save_for_backward(q, k, v, out, lse)
        if prev == "record":  # the flash op is on the _save_list
            _SAC["cache"].append((out.detach(), lse))
        return out


# ---- ring attention (context parallelism, the last CP rank) -----------------------------------------


def _slice_attention(q, k, v, causal):  # FlashEmulation.compute for a (q rows) x (k rows) block
    b, h, s, d = q.shape
    out = torch.empty_like(q)
    lse = torch.empty(b, h, s, dtype=torch.float32)
    mask = torch.ones(s, k.shape[2], dtype=torch.bool).triu(1) if causal else None
    with torch.no_grad():
        for i in range(b):
            for j in range(h):
                sc = (q[i, j].float() @ k[i, j].float().t()) / math.sqrt(d)
                if mask is not None:
                    sc.masked_fill_(mask, float("-inf"))
                lse[i, j] = torch.logsumexp(sc, dim=-1)
                out[i, j] = (torch.exp(sc - lse[i, j, :, None]) @ v[i, j].float()).to(q.dtype)
                del sc
    return out, lse


_BACKWARD_ROWS = 64  # query rows per tile of the emulated kernel's backward


def _slice_attention_backward(q, k, v, out, lse, g, causal):  # FlashEmulation.backward for the same block
    """In tiles of query rows: the flash kernel's backward holds no (q rows) x (k rows) scores, and whole-slice fp32
    scores (several at once, 1 MiB each at 512 rows) would sit on top of the ring's buffers in a block's backward, an
    artefact of the emulation that no GPU run has."""
    b, h, s, d = q.shape
    gq, gk, gv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    mask = torch.ones(s, k.shape[2], dtype=torch.bool).triu(1) if causal else None
    with torch.no_grad():
        for i in range(b):
            for j in range(h):
                kf, vf = k[i, j].float(), v[i, j].float()
                gk_acc, gv_acc = torch.zeros_like(kf), torch.zeros_like(vf)
                for r in range(0, s, _BACKWARD_ROWS):
                    rows = slice(r, r + _BACKWARD_ROWS)
                    qf, gf = q[i, j, rows].float(), g[i, j, rows].float()
                    sc = (qf @ kf.t()) / math.sqrt(d)
                    if mask is not None:
                        sc.masked_fill_(mask[rows], float("-inf"))
                    p = torch.exp(sc - lse[i, j, rows, None])
                    gv_acc += p.t() @ gf
                    ds = p * (gf @ vf.t() - (gf * out[i, j, rows].float()).sum(-1, keepdim=True)) / math.sqrt(d)
                    gq[i, j, rows] = (ds @ kf).to(q.dtype)
                    gk_acc += ds.t() @ qf
                    del sc, p, ds
                gk[i, j], gv[i, j] = gk_acc.to(k.dtype), gv_acc.to(v.dtype)
    return gq, gk, gv


def _all_gather_flat(flat, cp):  # ft_c.all_gather_tensor(gather_dim=0): the peers' pieces stand in as copies
    out = torch.empty(cp * flat.numel(), dtype=flat.dtype)
    for r in range(cp):
        out[r * flat.numel(): (r + 1) * flat.numel()].copy_(flat)
    return out


def _partial_update(original, new, idx):  # _attention.py _partial_update(dim=2, n_chunks=2, add=True)
    chunks = list(original.chunk(2, dim=2))
    chunks[idx] += new
    return torch.cat(chunks, dim=2)


def _ring_forward(query, key, value, cp):  # _templated_ring_attention, rank cp - 1, load balanced
    rank = cp - 1
    key, value = key.contiguous(), value.contiguous()
    gathered, out_acc, lse_acc = None, None, None
    for i in range(cp):
        if i > 0:
            buf = gathered.chunk(cp)[rank - i]
            key = buf[: key.numel()].reshape(key.shape)
            value = buf[key.numel():].reshape(value.shape)
        if i < cp - 1:
            next_kv = torch.cat([key.flatten(), value.flatten()])
            if gathered is None:
                gathered = _all_gather_flat(next_kv, cp)
            next_kv = None  # exchange_buffers returns None
        if i == 0:
            q, k, v, causal = query, key, value, True
        else:  # i <= rank: the first local chunk of the peer's k and v
            q, k, v, causal = query, key.chunk(2, dim=2)[0], value.chunk(2, dim=2)[0], False
        out, lse = _slice_attention(q, k, v, causal)
        # _SDPAMerger.step with convert_to_f32
        block_out, block_lse = out.to(torch.float32), lse.to(torch.float32).unsqueeze(-1)
        if lse_acc is None:
            out_acc, lse_acc = block_out, block_lse
        else:
            out_acc = out_acc - torch.sigmoid(block_lse - lse_acc) * (out_acc - block_out)
            lse_acc = lse_acc - F.logsigmoid(lse_acc - block_lse)
        del block_out, block_lse
    return out_acc.to(query.dtype), lse_acc.squeeze(-1)


def _ring_backward(query, key, value, out, lse, grad_out, cp):  # _templated_ring_attention_backward, rank cp - 1
    rank = cp - 1
    grad_query = torch.zeros_like(query, dtype=torch.float32)
    grad_key = torch.zeros_like(key, dtype=torch.float32)
    grad_value = torch.zeros_like(value, dtype=torch.float32)
    key, value = key.contiguous(), value.contiguous()
    gathered, received = None, None
    for i in range(cp):
        if i > 0:
            buf = gathered.chunk(cp)[rank - i]
            key = buf[: key.numel()].reshape(key.shape)
            value = buf[key.numel():].reshape(value.shape)
        if i != cp - 1:
            next_kv = torch.cat([key.flatten(), value.flatten()])  # stays bound until the next step
            if gathered is None:
                gathered = _all_gather_flat(next_kv, cp)
        if i == 0:
            k, v, causal = key, value, True
        else:
            k, v, causal = key.chunk(2, dim=2)[0], value.chunk(2, dim=2)[0], False
        grad_query_, grad_key_, grad_value_ = _slice_attention_backward(query, k, v, out, lse, grad_out, causal)
        if i == 0:
            grad_key += grad_key_
            grad_value += grad_value_
        else:
            next_grad_kv = received  # dkv_rotater.next_buffer()
            grad_key = next_grad_kv[: grad_key.numel()].reshape(grad_key.shape)
            grad_value = next_grad_kv[grad_key.numel():].reshape(grad_value.shape)
            grad_key = _partial_update(grad_key, grad_key_, 0)
            grad_value = _partial_update(grad_value, grad_value_, 0)
        next_grad_kv = torch.cat([grad_key.flatten(), grad_value.flatten()])
        received = next_grad_kv.clone()  # permute_tensor's output: the previous rank's buffer
        grad_query += grad_query_
    grad_query = grad_query.to(query.dtype)
    next_grad_kv = received.to(key.dtype)
    del received
    n = grad_key.numel()
    return grad_query, next_grad_kv[:n].reshape(grad_key.shape), next_grad_kv[n:].reshape(grad_value.shape)


class RingFlash(torch.autograd.Function):
    """The flash SDPA call under context_parallel: the ring forward, the ring backward; saves what the
    flash kernel saves (q, k, v, the merged output and logsumexp)."""

    @staticmethod
    def forward(ctx, q, k, v, cp):
        ctx.cp = cp
        out, lse = _ring_forward(q, k, v, cp)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, g):
        q, k, v, out, lse = ctx.saved_tensors
        # grad_out goes to the kernels as it comes (a transposed view): _templated_ring_attention_backward
        # makes no copy of it.
        gq, gk, gv = _ring_backward(q, k, v, out, lse, g, ctx.cp)
        return gq, gk, gv, None


class ContextParallel:
    """context_parallel's buffer handling for one step: freqs_cis cloned for the restore, the buffers
    resized in place to the rank's round-robin chunks (chunks rank and 2cp-1-rank of 2 x cp)."""

    def __init__(self, cp, freqs_cis, inputs):
        self.cp, self.freqs_cis, self.inputs, self.original = cp, freqs_cis, inputs, None

    def _shard(self, t, dim):
        chunks = t.chunk(2 * self.cp, dim=dim)
        rank = self.cp - 1
        with torch.no_grad():
            shard = torch.cat([chunks[rank], chunks[2 * self.cp - 1 - rank]], dim=dim).clone()
            t.resize_(shard.shape)
            t.copy_(shard)

    def enter(self):
        self.original = self.freqs_cis.clone()
        self._shard(self.freqs_cis, 0)
        for t in self.inputs:  # no_restore_buffers: sharded once, their storage kept
            if t.shape[1] % (2 * self.cp) == 0 and not getattr(t, "_cp_sharded", False):
                self._shard(t, 1)
                t._cp_sharded = True

    def exit(self):
        with torch.no_grad():
            self.freqs_cis.resize_(self.original.shape)
            self.freqs_cis.copy_(self.original)
        self.original = None


# ---- model ------------------------------------------------------------------------------------------


def rms_norm(x, w, eps=1e-5):  # F.rms_norm composite (torch 2.4-2.7): upcast, normalise, type_as(input), * w
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * w


class Norm(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return rms_norm(x, self.weight)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    return torch.view_as_real(xq_ * f).flatten(3).type_as(xq), torch.view_as_real(xk_ * f).flatten(3).type_as(xk)


# ---- tensor-parallel collectives (one rank; the other ranks' pieces are copies of its own) ----------


def _gather_dim1(x, tp):  # funcol.all_gather_tensor(gather_dim=1): gather on dim 0, then cat the chunks on dim 1
    flat = torch.empty((tp * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype)
    for r in range(tp):
        flat[r * x.shape[0]: (r + 1) * x.shape[0]].copy_(x)
    out = torch.cat(torch.chunk(flat, tp, dim=0), dim=1)
    del flat
    return out


def _scatter_dim1(x, tp):  # funcol.reduce_scatter_tensor(scatter_dim=1): cat the chunks on dim 0, then reduce
    flat = torch.cat(torch.chunk(x, tp, dim=1))
    out = flat[: flat.shape[0] // tp].clone()
    del flat
    return out


class AllGatherSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        return _gather_dim1(x, tp)

    @staticmethod
    def backward(ctx, g):
        return _scatter_dim1(g.contiguous(), ctx.tp), None


class ReduceScatterSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        return _scatter_dim1(x.contiguous(), tp)

    @staticmethod
    def backward(ctx, g):
        return _gather_dim1(g.contiguous(), ctx.tp), None


def all_gather_seq(x, tp):
    return AllGatherSeq.apply(x, tp)


def reduce_scatter_seq(x, tp):
    return ReduceScatterSeq.apply(x, tp)


class ParallelCrossEntropy(torch.autograd.Function):
    """F.cross_entropy under loss_parallel on the rank's vocabulary columns: _log_softmax's decomposition
    (x - amax, exp, sum, log; the max and the sum all-reduced) and nll_loss's gather, backward fused as
    (zeros_like(logp) with -1 at the targets + exp(logp)) * grad_output (parallel/loss.py, torch 2.6)."""

    @staticmethod
    def forward(ctx, x, target):
        x_max = torch.amax(x, 1, keepdim=True)
        shifted = x - x_max
        shifted_sumexp = torch.sum(torch.exp(shifted), 1, keepdim=True)
        result = shifted - torch.log(shifted_sumexp)
        del shifted
        local = target % x.shape[1]
        loss = -torch.gather(result, 1, local.unsqueeze(1)).squeeze(1).sum() / target.numel()
        ctx.save_for_backward(result, local)
        return loss

    @staticmethod
    def backward(ctx, g):
        logp, local = ctx.saved_tensors
        grad_output = g / local.numel()
        grad_input = torch.zeros_like(logp)
        grad_input[torch.arange(local.shape[0]), local] = -1.0
        return (grad_input + torch.exp(logp)) * grad_output, None


def repeat_kv(x, n_rep):
    bs, slen, n_kv, hd = x.shape
    return x[:, :, :, None, :].expand(bs, slen, n_kv, n_rep, hd).reshape(bs, slen, n_kv * n_rep, hd)


class Block(nn.Module):
    def __init__(self, m):
        super().__init__()
        h, nh, kv, f = m["hidden"], m["heads"], m["kv_heads"], m["ffn"]
        self.nh, self.kv, self.hd = nh, kv, m.get("head_dim", h // nh)
        self.tp, self.cp = m.get("tp", 1), m.get("cp", 1)
        self.wq, self.wo = nn.Linear(h, nh * self.hd, bias=False), nn.Linear(nh * self.hd, h, bias=False)
        self.wk, self.wv = nn.Linear(h, kv * self.hd, bias=False), nn.Linear(h, kv * self.hd, bias=False)
        self.w1, self.w3, self.w2 = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False), nn.Linear(f, h, bias=False)
        self.attention_norm, self.ffn_norm = Norm(h), Norm(h)
        self.freqs_cis = None

    def attention(self, x):
        bs, s, _ = x.shape
        xq = self.wq(x).view(bs, s, -1, self.hd)
        xk = self.wk(x).view(bs, s, -1, self.hd)
        xv = self.wv(x).view(bs, s, -1, self.hd)
        xq, xk = apply_rotary_emb(xq, xk, self.freqs_cis[:s])
        keys, values = repeat_kv(xk, self.nh // self.kv), repeat_kv(xv, self.nh // self.kv)
        q, k, v = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
        out = RingFlash.apply(q, k, v, self.cp) if self.cp > 1 else Flash.apply(q, k, v)
        return self.wo(out.transpose(1, 2).contiguous().view(bs, s, -1))

    def feed_forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))

    def forward(self, x):
        if self.tp > 1:  # x is the rank's sequence shard (B, S/tp, h)
            h = x + reduce_scatter_seq(self.attention(all_gather_seq(self.attention_norm(x), self.tp)), self.tp)
            return h + reduce_scatter_seq(self.feed_forward(all_gather_seq(self.ffn_norm(h), self.tp)), self.tp)
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


# ---- FSDP2 emulation ------------------------------------------------------------------------------


class Unit:
    """One fully_shard unit: 1/N shards (fp32 under torchtitan's MixedPrecisionPolicy, the model's own
    dtype without one), bf16 unsharded parameters gathered on demand, reduced in `reduce_dtype`."""

    def __init__(self, module, n_ranks, reshard_after_forward, shard_dtype=torch.float32,
                 reduce_dtype=torch.float32, accumulate_in_place=False):
        self.n, self.reshard_after_forward = n_ranks, reshard_after_forward
        self.accumulate_in_place = accumulate_in_place
        self.reduce_dtype = reduce_dtype
        # Called with each shard once its gradient is set (foreach_reduce runs the sharded parameter's
        # post-accumulate-grad hooks there, _fsdp_collectives.py @ v2.6.0): torchtune's optimizer_in_bwd.
        self.post_accumulate_grad_hook = None
        self.entries, self.shards = [], []
        for mod in module.modules():
            for name, p in list(mod._parameters.items()):
                if p is None:
                    continue
                shard = nn.Parameter(p.detach().reshape(-1)[: math.ceil(p.numel() / n_ranks)].clone().to(shard_dtype),
                                     requires_grad=p.requires_grad)
                u = torch.empty(p.shape, dtype=BF16).requires_grad_(p.requires_grad)
                u.storage().resize_(0)
                mod._parameters[name] = u
                self.entries.append(u)
                self.shards.append(shard)
        self.total = sum(u.numel() for u in self.entries)
        self.gathered = False
        self.all_gather_output = None  # an all-gather issued (a prefetch) and not yet copied out
        self.in_pre_backward = False  # PostForwardOrder.pre_backward ran and post_backward has not

    def unshard(self):  # FSDPParamGroup.unshard: foreach_all_gather into one flat output, no copy-out yet
        if self.gathered or self.all_gather_output is not None:
            return
        with torch.no_grad():
            inp = torch.cat([s.to(BF16) for s in self.shards])
            out = torch.empty(self.total, dtype=BF16)
            out[: inp.numel()].copy_(inp)
            del inp
        self.all_gather_output = out

    def gather(self, forward_state=None):  # unshard, then wait_for_unshard's foreach_all_gather_copy_out
        """forward_state: an AllGatherState where FSDP2's forward defers freeing the flat output."""
        if self.gathered:
            return
        self.unshard()
        if forward_state is not None:
            forward_state.free()
        out, self.all_gather_output = self.all_gather_output, None
        with torch.no_grad():
            self.copy_out(out)
        if forward_state is not None:
            forward_state.output = out
        del out
        self.gathered = True

    def copy_out(self, out):  # foreach_all_gather_copy_out into the unsharded parameters
        off = 0
        for u in self.entries:
            u.storage().resize_(u.numel())
            u.data.view(-1).copy_(out[off: off + u.numel()])  # .data: no version bump (FSDP2 preserves it too)
            off += u.numel()

    def reshard(self):
        for u in self.entries:
            u.storage().resize_(0)
        self.gathered = False

    def reduce(self):  # post_backward, then foreach_reduce: the reduce-scatter input in reduce_dtype
        self.in_pre_backward = False
        # Only the parameters that got a gradient are reduced (post_backward's fsdp_params_with_grad,
        # _fsdp_param_group.py @ v2.6.0): frozen ones are gathered but never reduce-scattered.
        pairs = [(u, sh) for u, sh in zip(self.entries, self.shards) if u.grad is not None]
        if not pairs:
            self.reshard()
            return
        with torch.no_grad():
            rs_in = torch.empty(sum(u.numel() for u, _ in pairs), dtype=self.reduce_dtype)
            off = 0
            for u, _ in pairs:
                rs_in[off: off + u.numel()].copy_(u.grad.view(-1))
                off += u.numel()
                u.grad = None
            rs_out = rs_in.new_empty(sum(sh.numel() for _, sh in pairs))
            off = out_off = 0
            for u, sh in pairs:  # rank 0's piece of every parameter
                rs_out[out_off: out_off + sh.numel()].copy_(rs_in[off: off + sh.numel()])
                off += u.numel()
                out_off += sh.numel()
            del rs_in
            off = 0
            for _, sh in pairs:
                self.store_grad(sh, rs_out[off: off + sh.numel()])
                if self.post_accumulate_grad_hook is not None:
                    self.post_accumulate_grad_hook(sh)
                off += sh.numel()
        self.reshard()

    def store_grad(self, sh, g):  # g: the shard's piece of the reduce-scatter output
        if sh.grad is None:
            sh.grad = g
        elif self.accumulate_in_place:  # foreach_reduce: `grad._local_tensor += new_sharded_grad`
            sh.grad.add_(g)
        else:
            sh.grad = sh.grad + g


class AllGatherState:
    """FSDPCommContext.all_gather_state: in forward (the implicit prefetch) wait_for_unshard keeps the flat
    all-gather output after its copy-out and frees it in the next unit's wait_for_unshard, before that copy-out,
    or in the root's post-forward (_fsdp_param_group.py @ pytorch 002a76fb, _fsdp_state.py _post_forward @ 01c9f4fc)."""

    def __init__(self):
        self.output = None

    def free(self):
        self.output = None


class _PreBackwardPrefetch(torch.autograd.Function):
    """FSDPParamGroup.pre_backward with the default prefetch: the unit's own unshard and copy-out, then
    _backward_prefetch issues the all-gather of `target`, the unit before it in post-forward order, whose
    copy-out waits for that unit's own pre-backward (_fsdp_param_group.py @ pytorch 002a76fb)."""

    @staticmethod
    def forward(ctx, x, unit, target):
        ctx.unit, ctx.target = unit, target
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        ctx.unit.gather()
        if ctx.target is not None:
            ctx.target.unshard()
        return g, None, None


class PostForwardOrder:
    """FSDPCommContext.post_forward_order with each group's _post_forward_indices, FSDP2's default backward
    prefetch (_fsdp_param_group.py _record_post_forward, pre_backward, _backward_prefetch, finalize_backward
    @ pytorch 002a76fb; _fsdp_state.py _root_post_backward_final_callback; the same in torch 2.6, whose
    records these are: the target's backward unchecked since pytorch PR 125269, a stray prefetch freed in
    finalize_backward since PR 137348):
    every post-forward appends its unit (a unit called several times, several times); a pre-backward, once until
    the unit's post-backward, gathers the unit, pops its latest index and all-gathers the unit one before it.
    Nothing checks that the target runs a backward: a flat output nobody copies out stays until the final
    callback's finalize_backward, unit by unit in named_modules() order."""

    def __init__(self):
        self.order, self.indices = [], {}

    def post_forward(self, unit):
        self.indices.setdefault(unit, []).append(len(self.order))
        self.order.append(unit)

    def pre_backward(self, unit):
        if unit.in_pre_backward:
            return
        unit.in_pre_backward = True
        unit.gather()
        indices = self.indices.get(unit)
        if indices:
            target = indices.pop() - 1
            if target >= 0:
                self.order[target].unshard()

    def final_callback(self, units):
        """units: the root's named_modules() order. A unit still gathered runs its post-backward there (one
        whose input needed no gradient had no hook); then finalize_backward drops any unconsumed all-gather."""
        for unit in units:
            if unit.gathered:
                unit.reduce()
            unit.all_gather_output = None
        self.order.clear()
        self.indices.clear()


class _PreBackwardHook(torch.autograd.Function):
    """FSDPState's pre-backward hook on a unit's forward outputs: PostForwardOrder.pre_backward."""

    @staticmethod
    def forward(ctx, x, unit, order):
        ctx.unit, ctx.order = unit, order
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        ctx.order.pre_backward(ctx.unit)
        return g, None, None


class _PostBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, unit):
        ctx.unit = unit
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        ctx.unit.reduce()
        return g, None


class Model(nn.Module):
    def __init__(self, m, c):
        super().__init__()
        self.tok_embeddings = nn.Embedding(m["vocab"], m["hidden"])
        self.layers = nn.ModuleList([Block(m) for _ in range(m["layers"])])
        self.norm = Norm(m["hidden"])
        self.output = nn.Linear(m["hidden"], m["vocab"], bias=False)
        hd = m.get("head_dim", m["hidden"] // m["heads"])
        freqs = 1.0 / (500000 ** (torch.arange(0, hd, 2)[: hd // 2].float() / hd))
        ang = torch.outer(torch.arange(c["seq"]).float(), freqs)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(ang), ang), persistent=False)
        self.c = c
        self.tp = m.get("tp", 1)
        n = c["ranks"] * c.get("cp", 1)  # apply_fsdp over the dp_shard_cp mesh
        self.units = [Unit(b, n, i < len(self.layers) - 1) for i, b in enumerate(self.layers)]
        self.root = Unit(nn.ModuleList([self.tok_embeddings, self.norm, self.output]), n, True)
        for b in self.layers:
            b.freqs_cis = self.freqs_cis

    def norm_and_gather(self, h):
        return all_gather_seq(self.norm(h), self.tp) if self.tp > 1 else self.norm(h)

    def shards(self):
        return [s for u in self.units + [self.root] for s in u.shards]

    def block(self, i, x, forward_state, order):
        unit, blk, ac = self.units[i], self.layers[i], self.c["ac"]
        unit.gather(forward_state)
        x = _PostBackward.apply(x, unit)
        if ac == "full" or (ac.isdigit() and (i + 1) % int(ac) == 0):
            y = checkpoint(blk, x)
        elif ac == "op":
            y = checkpoint(blk, x, policy_cache=True)
        else:
            y = blk(x)
        if unit.reshard_after_forward:
            unit.reshard()
        order.post_forward(unit)
        return _PreBackwardHook.apply(y, unit, order)

    def forward(self, tokens, order):
        forward_state = AllGatherState()
        self.root.gather(forward_state)
        if self.tp > 1:
            # The lookup of the rank's vocabulary rows (rank 0's: offset 0), the others masked out
            # (_MaskPartial._partition_value / _reduce_value, tensor/_ops/_embedding_ops.py, torch 2.6),
            # then reduce-scattered onto its sequence shard.
            mask = tokens >= self.tok_embeddings.weight.shape[0]
            ids = tokens.clone()
            ids[mask] = 0
            h = self.tok_embeddings(ids)
            h.masked_fill_(mask.unsqueeze(-1), 0.0)  # output[mask] = 0, in place
            h = reduce_scatter_seq(h, self.tp)
        else:
            h = self.tok_embeddings(tokens)
        for i in range(len(self.layers)):
            h = self.block(i, h, forward_state, order)
        out = self.output(self.norm_and_gather(h))
        # The root keeps its parameters gathered after forward: FSDPState._lazy_init sets the root
        # group's post_forward_mesh_info = None (torch/distributed/_composable/fsdp/_fsdp_state.py,
        # torch 2.4-2.6), whatever reshard_after_forward says; its post-backward reshards it. Its
        # post-forward frees the top block's kept all-gather output. Its pre-backward prefetches the top
        # block, which apply_fsdp left gathered (reshard_after_forward False for the last block).
        forward_state.free()
        order.post_forward(self.root)
        return _PreBackwardHook.apply(out, self.root, order)


def run_case(c):
    m = dict(LB.LLAMA, **c.get("geometry", {}))
    B, S = c["batch"], c["seq"]
    tp, cp = c.get("tp", 1), c.get("cp", 1)
    hd = m["hidden"] // m["heads"]
    # One TP rank's share: its heads, key/value heads, MLP columns and vocabulary rows.
    local = dict(m, heads=m["heads"] // tp, kv_heads=m["kv_heads"] // tp, ffn=m["ffn"] // tp, vocab=m["vocab"] // tp,
                 head_dim=hd, tp=tp, cp=cp)
    h, L = m["hidden"], m["layers"]
    whole_params = (2 * m["vocab"] * h + h + L * (2 * h * m["heads"] * hd + 2 * h * m["kv_heads"] * hd
                                                  + 3 * h * m["ffn"] + 2 * h))

    def build():
        model = Model(local, c)
        shards = model.shards()
        opt = torch.optim.AdamW(shards, lr=8e-4, betas=(0.9, 0.95), weight_decay=0.1)
        return dict(model=model, optimizers=[opt], trainable=shards, param_tensors=shards,
                    param_count=whole_params, order=PostForwardOrder(),
                    make_inputs=lambda: (torch.randint(0, m["vocab"], (B, S)), torch.randint(0, m["vocab"], (B, S))))

    def step(ctx, tr, n):
        model = ctx["model"]
        tokens, labels = ctx["inputs"]

        cp_ctx = ContextParallel(cp, model.freqs_cis, [tokens, labels]) if cp > 1 else None

        def forward():
            if cp_ctx:
                cp_ctx.enter()
            pred = model(tokens, ctx["order"])
            if tp > 1:  # loss_parallel: the logits stay sharded over the vocabulary
                return ParallelCrossEntropy.apply(pred.flatten(0, 1).float(), labels.flatten(0, 1))
            return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))

        def backward(loss):
            loss.backward()
            ctx["order"].final_callback([model.root] + model.units)  # the root's post-backward runs there
            if cp_ctx:  # train_context ends after backward: freqs_cis restored
                cp_ctx.exit()

        # The records were traced with the clipping loop's last gradient still referenced at s{n}_end
        # (zero_grad does not free it): held here to the step's end so that they reproduce.
        last_grad = []

        def clip_grad_norm(n):
            if n == 2:
                ctx["grads_step2"] = tracer.tensor_bytes([p.grad for p in ctx["trainable"]])
            grads = [p.grad for p in ctx["trainable"] if p.grad is not None]
            total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
            coef = torch.clamp(1.0 / (total + 1e-6), max=1.0)
            for g in grads:
                g.mul_(coef)
            last_grad[:] = grads[-1:]

        # train.py calls optimizers.zero_grad() first thing in the next step; nothing is allocated in between,
        # so zeroing at the step's end gives the same peaks and keeps s{n}_start = parameters + optimizer
        # state + inputs.
        return tracer.train_step(tr, n, forward, ctx["optimizers"][0], clip_grad_norm, backward)

    r = T.run_two_steps(build, step)
    ac = c["ac"]
    train = dict(batch=B, seq=S, precision="fsdp_mixed_bf16", param_dtype="bf16", reduce_dtype="fp32",
                 optimizer="adamw", optimizer_impl="for_loop",
                 checkpointing={"none": "none", "full": "full"}.get(ac, "selective"),
                 sac_policy={"none": "none", "full": "full", "op": "op"}.get(ac, f"layer:{ac}"),
                 attention="flash", grad_accum=1, lora_rank=0, frozen="none", zero_stage=3, fsdp="full_shard",
                 dp=c["ranks"], tp=tp, cp=cp, loss_impl="standard", logits_upcast="full",
                 reshard_after_forward="all but the last block")
    framework = dict(name="torchtitan", version="0.1.0", source="pytorch/torchtitan@f7084fc7",
                     toml={"activation_checkpoint.mode": train["checkpointing"],
                           "activation_checkpoint.selective_ac_option": {"op": "op"}.get(ac, ac),
                           "training.mixed_precision_param": "bfloat16", "training.mixed_precision_reduce": "float32",
                           "parallelism.data_parallel_shard_degree": c["ranks"],
                           "parallelism.tensor_parallel_degree": tp, "parallelism.context_parallel_degree": cp})
    notes = (f"measured_bytes = max live CPU tensor bytes of one emulated rank (of {c['ranks']} x tp {tp} x cp {cp}) in "
             "training step 2; FSDP2, TP and CP collectives are local copies with the same buffers; FSDP2's forward keeps each "
             "unit's flat all-gather output until the next copy-out and its backward prefetches the unit before in "
             "post-forward order (torch 2.6's default); attention is FlashEmulation (saved set of "
             "the flash kernel); selective per-op checkpointing written out for torch 1.13.")
    model = LB.model_fields(m, "torchtitan", r["nparams"])
    return T.record(c["id"], SOURCE, model, train, framework, r, notes)


def cases():
    L = []
    geo = dict(layers=4, vocab=8000)
    for ac in ("none", "full", "2", "op"):
        L.append(dict(id=f"cpu-torchtitan-llama-b2-s256-fsdp2r2-ac-{ac}", ac=ac, ranks=2, batch=2, seq=256,
                      geometry=geo))
    L.append(dict(id="cpu-torchtitan-llama-b2-s256-fsdp2r4-ac-op", ac="op", ranks=4, batch=2, seq=256, geometry=geo))
    # TP x FSDP2 on the 2-D mesh: tp 2 over 2 FSDP2 ranks (4 GPUs), and over 4 (8 GPUs).
    for ac in ("none", "full"):
        L.append(dict(id=f"cpu-torchtitan-llama-b2-s256-fsdp2r2-tp2-ac-{ac}", ac=ac, ranks=2, tp=2, batch=2, seq=256,
                      geometry=geo))
    L.append(dict(id="cpu-torchtitan-llama-b2-s256-fsdp2r4-tp2-ac-op", ac="op", ranks=4, tp=2, batch=2, seq=256,
                  geometry=geo))
    # CP x FSDP2 (dp_shard_cp): cp 2 over 2 dp_shard ranks, cp 4 over 1, the ring's last rank.
    for ac in ("none", "full"):
        L.append(dict(id=f"cpu-torchtitan-llama-b2-s256-fsdp2r2-cp2-ac-{ac}", ac=ac, ranks=2, cp=2, batch=2, seq=256,
                      geometry=geo))
    L.append(dict(id="cpu-torchtitan-llama-b2-s256-fsdp2r1-cp4-ac-none", ac="none", ranks=1, cp=4, batch=2, seq=256,
                  geometry=geo))
    # A long sequence over a small vocabulary: the ring attention's buffers make the backward peak.
    long_geo = dict(layers=4, vocab=512)
    for ac, cp, ranks in (("none", 2, 2), ("full", 4, 1)):
        L.append(dict(id=f"cpu-torchtitan-llama-v512-b2-s1024-fsdp2r{ranks}-cp{cp}-ac-{ac}", ac=ac, ranks=ranks, cp=cp,
                      batch=2, seq=1024, geometry=long_geo))
    # CP x TP: the 3-D mesh dp_shard x cp x tp, each CP rank's sequence shard sequence-parallel over its TP group.
    for ac in ("none", "full"):
        L.append(dict(id=f"cpu-torchtitan-llama-b2-s256-fsdp2r2-tp2-cp2-ac-{ac}", ac=ac, ranks=2, tp=2, cp=2, batch=2,
                      seq=256, geometry=geo))
    L.append(dict(id="cpu-torchtitan-llama-v512-b2-s1024-fsdp2r1-tp2-cp2-ac-none", ac="none", ranks=1, tp=2, cp=2,
                  batch=2, seq=1024, geometry=long_geo))
    return L


if __name__ == "__main__":
    T.main_loop(cases, run_case, "/tmp/torchtitan_cases.json")
