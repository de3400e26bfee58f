#!/usr/bin/python3
"""CPU traces of T5 training steps for docs/data/cpu_traced_t5.json.

A plain-torch re-implementation of Hugging Face transformers' T5ForConditionalGeneration
training forward (src/transformers/models/t5/modeling_t5.py at commit 6b8b757d, eager
attention, use_cache left at its config default True, masks built as T5Stack.forward
builds them when none are passed), traced with tools/trace/tracer.py, the method of the harness
(shared/ground-truth/measure.py): same step, same phases, same record layout.

Run from the repository root:
  /usr/bin/python3 docs/research/scripts/trace_t5.py --out docs/data/cpu_traced_t5.json
"""
import argparse, gc, json, math, os, sys, time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as tcp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "trace"))
import tracer  # noqa: E402

torch.set_num_threads(1)
HARNESS = "docs/research/scripts/trace_t5.py (Tracker from shared/ground-truth/measure.py)"


class T5LayerNorm(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            x = x.to(self.weight.dtype)
        return self.weight * x


def gelu_new(x):  # transformers activations.NewGELUActivation
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class DenseActDense(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wi = nn.Linear(c["d_model"], c["d_ff"], bias=False)
        self.wo = nn.Linear(c["d_ff"], c["d_model"], bias=False)
        self.p = c["dropout"]

    def forward(self, x):
        x = F.relu(self.wi(x))
        x = F.dropout(x, self.p, self.training)
        if x.dtype != self.wo.weight.dtype:
            x = x.to(self.wo.weight.dtype)
        return self.wo(x)


class DenseGatedActDense(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wi_0 = nn.Linear(c["d_model"], c["d_ff"], bias=False)
        self.wi_1 = nn.Linear(c["d_model"], c["d_ff"], bias=False)
        self.wo = nn.Linear(c["d_ff"], c["d_model"], bias=False)
        self.p = c["dropout"]

    def forward(self, x):
        x = gelu_new(self.wi_0(x)) * self.wi_1(x)
        x = F.dropout(x, self.p, self.training)
        if x.dtype != self.wo.weight.dtype:
            x = x.to(self.wo.weight.dtype)
        return self.wo(x)


class T5Attention(nn.Module):
    def __init__(self, c, is_decoder, has_bias):
        super().__init__()
        self.is_decoder, self.has_bias = is_decoder, has_bias
        self.nb, self.md = 32, 128
        self.H, self.dk = c["heads"], c["d_kv"]
        self.inner = self.H * self.dk
        self.q = nn.Linear(c["d_model"], self.inner, bias=False)
        self.k = nn.Linear(c["d_model"], self.inner, bias=False)
        self.v = nn.Linear(c["d_model"], self.inner, bias=False)
        self.o = nn.Linear(self.inner, c["d_model"], bias=False)
        self.p = c["dropout"]
        self.gradient_checkpointing = False
        if has_bias:
            self.relative_attention_bias = nn.Embedding(self.nb, self.H)

    @staticmethod
    def bucket(rel, bidirectional, num_buckets, max_distance):
        buckets = 0
        if bidirectional:
            num_buckets //= 2
            buckets += (rel > 0).to(torch.long) * num_buckets
            rel = torch.abs(rel)
        else:
            rel = -torch.min(rel, torch.zeros_like(rel))
        max_exact = num_buckets // 2
        is_small = rel < max_exact
        large = max_exact + (torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact)
                             * (num_buckets - max_exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, num_buckets - 1))
        buckets += torch.where(is_small, rel, large)
        return buckets

    def compute_bias(self, q_len, k_len, cache_position):
        context = cache_position[:, None]
        memory = torch.arange(k_len, dtype=torch.long)[None, :]
        b = self.bucket(memory - context, not self.is_decoder, self.nb, self.md)
        values = self.relative_attention_bias(b)
        return values.permute([2, 0, 1]).unsqueeze(0)

    def forward(self, x, mask=None, kv=None, position_bias=None, cache=None, cache_position=None):
        B, S = x.shape[:2]
        q = self.q(x).view(B, -1, self.H, self.dk).transpose(1, 2)
        cur = kv if kv is not None else x
        k = self.k(cur).view(B, -1, self.H, self.dk).transpose(1, 2)
        v = self.v(cur).view(B, -1, self.H, self.dk).transpose(1, 2)
        if cache is not None:  # DynamicCache.update on a first call keeps references
            cache.append((k, v))
        scores = torch.matmul(q, k.transpose(3, 2))
        if position_bias is None:
            k_len = k.shape[-2]
            if not self.has_bias:
                position_bias = torch.zeros((1, self.H, S, k_len), dtype=scores.dtype)
                if self.gradient_checkpointing and self.training:
                    position_bias.requires_grad = True
            else:
                position_bias = self.compute_bias(S, k_len, cache_position)[:, :, -S:, :]
            if mask is not None:
                position_bias = position_bias + mask[:, :, :, :k_len]
        scores += position_bias
        w = F.softmax(scores.float(), dim=-1).type_as(scores)
        w = F.dropout(w, self.p, self.training)
        out = torch.matmul(w, v).transpose(1, 2).contiguous().view(B, -1, self.inner)
        return self.o(out), position_bias


class T5Block(nn.Module):
    def __init__(self, c, is_decoder, has_bias):
        super().__init__()
        self.is_decoder = is_decoder
        self.ln0 = T5LayerNorm(c["d_model"])
        self.sa = T5Attention(c, is_decoder, has_bias)
        if is_decoder:
            self.ln1 = T5LayerNorm(c["d_model"])
            self.ca = T5Attention(c, True, False)
        self.ln2 = T5LayerNorm(c["d_model"])
        self.ff = DenseGatedActDense(c) if c["gated"] else DenseActDense(c)
        self.p = c["dropout"]

    def forward(self, h, mask, pb, enc, enc_mask, epb, cache, cache_position):
        a, pb = self.sa(self.ln0(h), mask=mask, position_bias=pb, cache=cache, cache_position=cache_position)
        h = h + F.dropout(a, self.p, self.training)
        if self.is_decoder:
            a, epb = self.ca(self.ln1(h), mask=enc_mask, kv=enc, position_bias=epb, cache=cache)
            h = h + F.dropout(a, self.p, self.training)
        h = h + F.dropout(self.ff(self.ln2(h)), self.p, self.training)
        return h, pb, epb


class T5Stack(nn.Module):
    def __init__(self, c, embed, is_decoder):
        super().__init__()
        self.embed_tokens, self.is_decoder = embed, is_decoder
        n = c["layers"]
        self.block = nn.ModuleList([T5Block(c, is_decoder, i == 0) for i in range(n)])
        self.final_layer_norm = T5LayerNorm(c["d_model"])
        self.p = c["dropout"]
        self.ckpt = False

    def forward(self, ids, enc=None):
        B, S = ids.shape
        x = self.embed_tokens(ids)
        ckpt = self.ckpt and self.training
        use_cache = self.is_decoder and not ckpt  # T5Config.use_cache=True; off under checkpointing
        cache = [] if use_cache else None
        cache_position = torch.arange(S)
        attention_mask = torch.ones(B, S)
        if self.is_decoder:
            # _update_causal_mask -> _prepare_4d_causal_attention_mask_with_cache_position (eager)
            min_dtype = torch.finfo(x.dtype).min
            causal = torch.full((S, S), fill_value=min_dtype, dtype=x.dtype)
            causal = torch.triu(causal, diagonal=1)
            causal *= torch.arange(S) > cache_position.reshape(-1, 1)
            causal = causal[None, None, :, :].expand(B, 1, -1, -1)
            causal = causal.clone()
            padding = causal[:, :, :, :S] + attention_mask[:, None, None, :]
            padding = padding == 0
            causal[:, :, :, :S] = causal[:, :, :, :S].masked_fill(padding, min_dtype)
            del padding
            enc_attention = torch.ones(enc.shape[:2], dtype=torch.long)
            enc_mask = enc_attention[:, None, None, :].to(dtype=x.dtype)  # invert_attention_mask
            enc_mask = (1.0 - enc_mask) * torch.finfo(x.dtype).min
        else:
            causal = attention_mask[:, None, None, :].to(dtype=x.dtype)
            causal = (1.0 - causal) * torch.finfo(x.dtype).min
            enc_mask = None
        pb, epb = None, None
        h = F.dropout(x, self.p, self.training)
        for blk in self.block:
            if ckpt:
                for m in blk.modules():
                    if isinstance(m, T5Attention):
                        m.gradient_checkpointing = True
                h, pb, epb = tcp.checkpoint(blk, h, causal, pb, enc, enc_mask, epb, None, cache_position,
                                            use_reentrant=False)
            else:
                h, pb, epb = blk(h, causal, pb, enc, enc_mask, epb, cache, cache_position)
        h = self.final_layer_norm(h)
        return F.dropout(h, self.p, self.training), cache


class T5ForConditionalGeneration(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.shared = nn.Embedding(c["vocab"], c["d_model"])
        self.encoder = T5Stack(c, self.shared, False)
        self.decoder = T5Stack(c, self.shared, True)
        self.lm_head = nn.Linear(c["d_model"], c["vocab"], bias=False)
        if c["tied"]:
            self.lm_head.weight = self.shared.weight

    def set_ckpt(self, on):
        self.encoder.ckpt = self.decoder.ckpt = on

    def forward(self, input_ids, labels):
        enc, _ = self.encoder(input_ids)
        dec_ids = labels.new_zeros(labels.shape)  # _shift_right, decoder_start_token_id = pad = 0
        dec_ids[..., 1:] = labels[..., :-1].clone()
        dec_ids[..., 0] = 0
        dec_ids.masked_fill_(dec_ids == -100, 0)
        seq, cache = self.decoder(dec_ids, enc)
        if self.c["tied"]:
            seq = seq * (self.c["d_model"] ** -0.5)
        logits = self.lm_head(seq)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)


# google-t5/t5-small and google/flan-t5-small config.json.
MODELS = {
    "t5-small": dict(d_model=512, d_ff=2048, d_kv=64, heads=8, layers=6, vocab=32128, gated=False, tied=True,
                     dropout=0.1, params=60506624, activation="relu"),
    "flan-t5-small": dict(d_model=512, d_ff=1024, d_kv=64, heads=6, layers=8, vocab=32128, gated=True, tied=False,
                          dropout=0.1, params=76961152, activation="gated-gelu"),
}


def run_case(c):
    tracer.reset_seed()
    cfg = MODELS[c["model"]]
    B, S, T, prec, ckpt = c["batch"], c["seq"], c["target"], c["prec"], c["ckpt"]
    with tracer.Tracker() as tr:
        model = T5ForConditionalGeneration(cfg)
        model.set_ckpt(ckpt == "full")
        model.train()
        tr.mark("built")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randint(0, cfg["vocab"], (B, S))
        y = torch.randint(0, cfg["vocab"], (B, T))
        tr.mark("inputs")
        forward = tracer.in_precision(prec, lambda: model(x, y))
        grads = tracer.GradientBytes(lambda: model.parameters())
        times, lossv = tracer.train_two_steps(tr, forward, opt, grads)
        grads_enum = grads.bytes
        params_enum = tracer.tensor_bytes(list(model.parameters()))
        opt_enum = tracer.optimizer_state_bytes([opt])
        nparams = tracer.parameter_count(model)
        inputs_bytes = tracer.tensor_bytes([x, y])
        del model, opt, x, y
    assert nparams == cfg["params"], (c["model"], nparams)
    r = dict(nparams=nparams, params_enum=params_enum, grads_enum=grads_enum, opt_enum=opt_enum, inputs_bytes=inputs_bytes,
             built=tr.live("built"), inputs_live=tr.live("inputs"))
    readings = tracer.step_readings(tr)
    r.update({k: v for k, v in readings.items() if "_peak" not in k})  # the live figures first, then the peaks
    r.update({k: v for k, v in readings.items() if "_peak" in k})
    r.update(end_live=tr.live("__end__"), n_events=tr.n_events, step_seconds=times, loss=lossv)
    return r


def to_record(c, r):
    cfg = MODELS[c["model"]]
    cid = f"cpu-{c['model']}-b{c['batch']}-s{c['seq']}-t{c['target']}-adamw" + \
        ("" if c["prec"] == "fp32" else "-" + c["prec"]) + ("-ckpt" if c["ckpt"] == "full" else "")
    return {
        **tracer.record_head(cid, HARNESS),
        "model": dict(family="t5", name=f"{c['model']} (T5ForConditionalGeneration)", params=r["nparams"],
                      layers=cfg["layers"], hidden=cfg["d_model"], heads=cfg["heads"], kv_heads=cfg["heads"],
                      head_dim=cfg["d_kv"], ffn=cfg["d_ff"], vocab=cfg["vocab"], max_pos=None,
                      tied_embeddings=cfg["tied"], activation=cfg["activation"], norm="rmsnorm",
                      impl="hf-transformers"),
        "train": dict(batch=c["batch"], seq=c["seq"], target_seq=c["target"], precision=c["prec"], optimizer="adamw",
                      optimizer_impl="for_loop", checkpointing=c["ckpt"], attention="eager", grad_accum=1,
                      lora_rank=0, frozen="none", zero_stage=0, dp=1, tp=1,
                      dropout="train mode (dropout_rate 0.1)"),
        **tracer.peak_fields(r),
        "components": tracer.components(r),
        "detail": r,
        "torch": torch.__version__,
        "notes": "seq = encoder tokens, target_seq = decoder (label) tokens; the model returns only the loss "
                 "(use_cache's k/v cache is freed when forward returns); no attention masks passed.",
    }


def cases():
    L = []
    for m in ("t5-small", "flan-t5-small"):
        for B, S, T in ((2, 128, 128), (4, 256, 64), (8, 128, 32), (2, 512, 128)):
            L.append(dict(model=m, batch=B, seq=S, target=T, prec="fp32", ckpt="none"))
        for B, S, T in ((4, 256, 64), (8, 256, 128)):
            L.append(dict(model=m, batch=B, seq=S, target=T, prec="fp32", ckpt="full"))
        for B, S, T in ((4, 256, 64), (2, 128, 128)):
            L.append(dict(model=m, batch=B, seq=S, target=T, prec="amp_bf16", ckpt="none"))
        L.append(dict(model=m, batch=4, seq=256, target=64, prec="amp_bf16", ckpt="full"))
    return L


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/cpu_traced_t5.json")
    ap.add_argument("--only", default=None)
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args()
    out = []
    L = cases()
    if a.only:
        L = [c for c in L if a.only in json.dumps(c)]
    if a.limit:
        L = L[:a.limit]
    for i, c in enumerate(L):
        t0 = time.time()
        r = run_case(c)
        rec = to_record(c, r)
        out.append(rec)
        tracer.write_records(a.out, out)
        print(f"[{i}] {rec['id']}: peak2={r['s2_peak']} peak1={r['s1_peak']} fwd={r['s2_peak_fwd']} "
              f"bwd={r['s2_peak_bwd']} opt={r['s2_peak_opt']} end_live={r['end_live']} {time.time()-t0:.1f}s", flush=True)
        gc.collect()


if __name__ == "__main__":
    main()
