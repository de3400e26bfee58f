#!/usr/bin/python3
"""CPU re-implementation of gpt-oss's generate() allocations over MXFP4 experts (triton_kernels' matmul_ogs).

There is no triton here: the MoE block allocates, in the same order and sizes, the tensors transformers'
integrations/mxfp4.py@0189b1d0 mlp_forward and triton_kernels allocate on CUDA, and fills them in place
(the values are not the model's; the bytes are):
- router_logits = F.linear(hidden_states, router.weight, router.bias), bound until the MLP returns;
- routing() (triton_kernels routing.py@04467ccf, topk.py@02ed6565): topk_forward's values [T, k] in the
  logits' dtype, int16 indices [T, k] and the bitmatrix (cdiv(E, 32) x pad32(T) uint32); sort_tokens'
  hist and partial hist, expt_offs, combined_indx (2 T k int32), gate_scal (T k), token_offs_combined
  (5 x pad512(E + 1) int32) and block_pid_map (4 x pad512(max tiles) int32); the top-k outputs, the
  partial hist and expt_offs are gone when routing returns;
- Mxfp4GptOssExperts.forward: gate_up_proj_bias.to(torch.float32), the first matmul_ogs's output
  [1, T k, F] (init_allocation: the gathered rows, the fused swiglu's reduction_n = 2), then
  down_proj_bias.to(torch.float32), the second's output [1, T, H] and its scratchpad [1, 1, T k, H]
  (k > 1: no fused scatter), which reduce_grouped sums into the output.
The weights: the experts as blocks and scales (uint8, Mxfp4GptOssExperts), their biases and every
other parameter in bf16. The rest of generate() is tools/trace/gpt_oss_generate.py's, run in bf16, its
forward keeping inputs_embeds bound through the blocks as GptOssModel.forward does.
Records go to docs/data/cpu_traced_mxfp4.json.

Run from the repository root (under a minute of CPU time, one thread):
    /usr/bin/python3 tools/trace/gpt_oss_mxfp4_generate.py --out docs/data/cpu_traced_mxfp4.json
"""
import argparse
import copy

import torch
import torch.nn.functional as F

import families_2025 as fam
import gpt_oss_generate as gen
import tracer

torch.set_num_threads(1)

SOURCE = "tools/trace/gpt_oss_mxfp4_generate.py (Tracker from shared/ground-truth/measure.py)"


def cdiv(a, b):
    return (a + b - 1) // b


def pad(x, multiple):
    return cdiv(x, multiple) * multiple


def max_tiles(experts, gates):  # routing.py get_max_n_tiles, block_ms()[0] = 16
    if gates <= experts:
        return gates
    return experts - 1 + cdiv(gates - experts + 1, 16)


def routing(logits, k):  # triton_kernels routing(): topk_forward, then sort_tokens
    T, E = logits.shape
    y_vals = torch.empty((T, k), dtype=logits.dtype)
    y_indx = torch.empty((T, k), dtype=torch.int16)
    bitmatrix = torch.empty((cdiv(E, 32), pad(T, 32)), dtype=torch.int32)
    y_indx.copy_(torch.arange(k, dtype=torch.int16).expand(T, k))
    y_vals.fill_(1.0 / k)
    bitmatrix.zero_()
    hist = torch.empty((E,), dtype=torch.int32)
    partial_hist = torch.empty((cdiv(T, 32), E), dtype=torch.int32)
    expt_offs = torch.empty((E,), dtype=torch.int32)
    combined_indx = torch.empty((T * k * 2,), dtype=torch.int32)
    gate_scal = torch.empty((T * k,), dtype=logits.dtype)
    token_offs_combined = torch.empty((5, pad(E + 1, 512)), dtype=torch.int32)
    block_pid_map = torch.empty((4, pad(max_tiles(E, T * k), 512)), dtype=torch.int32)
    for t in (hist, partial_hist, expt_offs, combined_indx, token_offs_combined, block_pid_map):
        t.zero_()
    gate_scal.fill_(1.0 / k)
    del y_vals, y_indx, bitmatrix, partial_hist, expt_offs
    return (gate_scal, hist, token_offs_combined, block_pid_map), combined_indx


def experts_forward(e, hidden_states, k):  # Mxfp4GptOssExperts.forward over matmul_ogs
    rows = hidden_states.shape[0] * k
    gate_up_bias = e.gate_up_proj_bias.to(torch.float32)
    intermediate_cache1 = torch.empty((1, rows, e.f), dtype=hidden_states.dtype)
    intermediate_cache1.fill_(0.01)
    del gate_up_bias
    down_bias = e.down_proj_bias.to(torch.float32)
    output = torch.empty((1, hidden_states.shape[0], e.h), dtype=hidden_states.dtype)
    scratch = torch.empty((1, 1, rows, e.h), dtype=hidden_states.dtype)
    scratch.fill_(0.01)
    torch.sum(scratch.view(hidden_states.shape[0], k, e.h), dim=1, out=output.view(-1, e.h))
    del scratch, down_bias, intermediate_cache1
    return output.squeeze(0)


def mlp_forward(layer, hidden_states):  # integrations/mxfp4.py@0189b1d0 mlp_forward
    r = layer.router
    batch_size = hidden_states.shape[0]
    hidden_states = hidden_states.reshape(-1, r.h)
    router_logits = F.linear(hidden_states, r.weight, r.bias)
    routing_data, combined_indx = routing(router_logits, r.k)
    routed_out = experts_forward(layer.experts, hidden_states, r.k)
    routed_out = routed_out.reshape(batch_size, -1, r.h)
    del routing_data, combined_indx
    return routed_out, router_logits


def forward(model, ids, past, cache):
    """gpt_oss_generate.forward, with inputs_embeds bound through the blocks as GptOssModel.forward binds
    it (modeling_gpt_oss.py@00d4b3d2: inputs_embeds = self.embed_tokens(input_ids); hidden_states = inputs_embeds)."""
    c = model.c
    B, S = ids.shape
    inputs_embeds = model.embed_tokens(ids)
    x = inputs_embeds
    positions = torch.arange(past, past + S)[None]
    full = gen.eager_mask(B, S, past, past + S, 0, x.dtype)
    sliding_layer = next(layer for layer in cache if isinstance(layer, gen.DynamicSlidingWindowLayer))
    kv_length, kv_offset = sliding_layer.mask_length(S)
    masks = {"full_attention": full,
             "sliding_attention": gen.eager_mask(B, S, past, kv_length, kv_offset, x.dtype, window=c["sliding_window"])}
    cos, sin = gen.rotary(c["head_dim"], positions, c.get("rope_theta", 150000.0), x.dtype)
    for i, layer in enumerate(model.layers):
        x = gen.decoder_layer(layer, x, cos, sin, masks[layer.kind], cache[i])
    x = model.norm(x)
    del inputs_embeds
    return model.lm_head(x[:, -1:, :])


def to_mxfp4(model, c):
    """bf16 parameters, the experts' matrices as MXFP4 blocks and scales (Mxfp4GptOssExperts)."""
    model.to(torch.bfloat16)
    E, h, f = c["num_local_experts"], c["hidden_size"], c["intermediate_size"]
    for layer in model.layers:
        e = layer.experts
        del e.gate_up_proj, e.down_proj
        e.gate_up_proj_blocks = torch.nn.Parameter(torch.zeros(E, 2 * f, h // 32, 16, dtype=torch.uint8),
                                                   requires_grad=False)
        e.gate_up_proj_scales = torch.nn.Parameter(torch.zeros(E, 2 * f, h // 32, dtype=torch.uint8),
                                                   requires_grad=False)
        e.down_proj_blocks = torch.nn.Parameter(torch.zeros(E, h, f // 32, 16, dtype=torch.uint8),
                                                requires_grad=False)
        e.down_proj_scales = torch.nn.Parameter(torch.zeros(E, h, f // 32, dtype=torch.uint8), requires_grad=False)
        e.f = f
    return model


def generate_case(c, B, context, new_tokens):
    gen.mlp = mlp_forward  # decoder_layer and generate call the module's mlp and forward
    gen.forward = forward
    _, measured, detail = tracer.traced_generate(lambda: to_mxfp4(fam.build(c).eval(), c), c["vocab_size"], B, context,
                                                 new_tokens, gen.generate)
    return {
        **tracer.record_head(f"cpu-infer-gpt_oss-small-mxfp4-f{c['intermediate_size']}-k{c['num_experts_per_tok']}-b{B}-c{context}-n{new_tokens}-bf16", SOURCE),
        "model": {"hf_config": c},
        "infer": {"batch": B, "context": context, "new_tokens": new_tokens, "dtype": "bf16", "kv_dtype": "bf16",
                  "kv_cache": "dynamic", "attention": "eager", "weights": "mxfp4"},
        "software": {"torch": torch.__version__, "transformers": "4.56.0"},
        "measured_bytes": measured,
        "detail": detail,
        "notes": "peak live tensor bytes from the inputs to the end of generate (greedy, no_grad): the CPU "
                 "re-implementation of mlp_forward's allocations over triton_kernels (routing, two matmul_ogs), "
                 "compared with the estimate on CUDA without the cuBLAS workspace",
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    c = copy.deepcopy(fam.CONFIGS["gpt_oss"])
    records = []
    # The small model's cases, then a wider MoE (ffn 2048, top-4) whose prefill peaks in the experts.
    wide = dict(c, intermediate_size=2048, num_experts_per_tok=4)
    for cfg, B, ctx, n in ((c, 1, 256, 8), (c, 2, 96, 48), (c, 4, 200, 4), (c, 8, 512, 2), (wide, 16, 64, 4)):
        records.append(generate_case(cfg, B, ctx, n))
        print(records[-1]["id"], records[-1]["measured_bytes"], records[-1]["detail"], flush=True)
    tracer.write_records(a.out, records, final_newline=True)


if __name__ == "__main__":
    main()
