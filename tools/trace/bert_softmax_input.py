"""What torch < 1.11 keeps of eager attention's softmax: its input as well as its output.

BertForSequenceClassification's training forward and backward as transformers 4.1x runs it
(models/bert/modeling_bert.py: BertSelfAttention.forward scores / sqrt(d) + extended mask,
softmax, dropout; BertModel.forward builds the mask from ones when the batch has none, as the
published V100 runs' dataset of input_ids and labels only; get_extended_attention_mask
(1 - mask) * -10000.0 in the model's dtype), traced twice on CPU under torch 1.13:
  - "1.13": F.softmax, whose backward saves only the output (derivatives.yaml@e47a5a64);
  - "1.10": a softmax whose autograd node saves input and output, as derivatives.yaml@768cfaa8
    wrote _softmax: _softmax_backward_data(grad, result, dim, self) (the backward kernel reads
    only the output; the input was kept for the double backward).
The difference of the live bytes at the end of forward is the input softmax kept per layer.

  OMP_NUM_THREADS=1 /usr/bin/python3 tools/trace/bert_softmax_input.py [LAYERS, default 1] > docs/data/cpu_traced_softmax_input.json
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tracer  # noqa: E402


class SoftmaxSavingInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        y = torch._softmax(x, dim, False)
        ctx.save_for_backward(x, y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return torch._softmax_backward_data(grad, y, ctx.dim, x.dtype), None


class BertLayer(nn.Module):  # BertSelfAttention + BertSelfOutput + BertIntermediate + BertOutput
    def __init__(self, h, nh, ffn, old_softmax):
        super().__init__()
        self.nh, self.hd, self.old_softmax = nh, h // nh, old_softmax
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.attn_dropout = nn.Dropout(0.1)
        self.attn_dense, self.attn_drop, self.attn_ln = nn.Linear(h, h), nn.Dropout(0.1), nn.LayerNorm(h, eps=1e-12)
        self.intermediate = nn.Linear(h, ffn)
        self.out_dense, self.out_drop, self.out_ln = nn.Linear(ffn, h), nn.Dropout(0.1), nn.LayerNorm(h, eps=1e-12)

    def split(self, t):  # transpose_for_scores
        return t.view(t.size()[:-1] + (self.nh, self.hd)).permute(0, 2, 1, 3)

    def forward(self, x, ext):
        mixed_q = self.query(x)
        k, v = self.split(self.key(x)), self.split(self.value(x))
        q = self.split(mixed_q)
        scores = torch.matmul(q, k.transpose(-1, -2))
        scores = scores / math.sqrt(self.hd)
        scores = scores + ext
        probs = SoftmaxSavingInput.apply(scores, -1) if self.old_softmax else F.softmax(scores, dim=-1)
        probs = self.attn_dropout(probs)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(ctx.size()[:-2] + (self.nh * self.hd,))
        a = self.attn_ln(self.attn_drop(self.attn_dense(ctx)) + x)
        i = F.gelu(self.intermediate(a))
        return self.out_ln(self.out_drop(self.out_dense(i)) + a)


class BertForSequenceClassification(nn.Module):
    def __init__(self, layers, old_softmax, h=1024, nh=16, ffn=4096, vocab=30522, positions=512):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, h, padding_idx=0)
        self.position_embeddings = nn.Embedding(positions, h)
        self.token_type_embeddings = nn.Embedding(2, h)
        self.LayerNorm, self.emb_drop = nn.LayerNorm(h, eps=1e-12), nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(positions).expand((1, -1)))
        self.register_buffer("token_type_ids", torch.zeros((1, positions), dtype=torch.long))
        self.layer = nn.ModuleList([BertLayer(h, nh, ffn, old_softmax) for _ in range(layers)])
        self.pooler = nn.Linear(h, h)
        self.cls_drop, self.classifier = nn.Dropout(0.1), nn.Linear(h, 2)

    def forward(self, ids, labels):
        B, S = ids.shape
        am = torch.ones((B, S))  # BertModel.forward: no attention_mask in the batch
        tt = self.token_type_ids[:, :S].expand(B, S)
        e = self.word_embeddings(ids) + self.token_type_embeddings(tt)
        e = e + self.position_embeddings(self.position_ids[:, :S])
        x = self.emb_drop(self.LayerNorm(e))
        ext = am[:, None, None, :].to(dtype=x.dtype)  # get_extended_attention_mask
        ext = (1.0 - ext) * -10000.0
        for layer in self.layer:
            x = layer(x, ext)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        logits = self.classifier(self.cls_drop(pooled))
        return F.cross_entropy(logits.view(-1, 2), labels.view(-1))


def trace(layers, batch, seq, old_softmax):
    tracer.reset_seed()
    model = BertForSequenceClassification(layers, old_softmax)
    model.train()
    ids = torch.randint(100, 30000, (batch, seq))
    labels = torch.zeros(batch, dtype=torch.long)
    with tracer.Tracker() as tr:
        tr.mark("start")
        loss = model(ids, labels)
        tr.mark("fwd")
        loss.backward()
        tr.mark("bwd")
        del loss
    return {"fwd": tr.live("fwd") - tr.live("start"), "peak": tr.peak("start", "bwd") - tr.live("start")}


def main():
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    heads, seq, out = 16, 512, []
    for batch in (1, 4):
        new, old = trace(layers, batch, seq, False), trace(layers, batch, seq, True)
        scores = batch * heads * seq * seq
        out.append({"layers": layers, "batch": batch, "seq": seq, "torch_1_13": new, "torch_1_10": old,
                    "fwd_delta": old["fwd"] - new["fwd"], "peak_delta": old["peak"] - new["peak"],
                    "fp32_scores_per_layer": 4 * scores})
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
