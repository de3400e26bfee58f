#!/usr/bin/env python3
"""Which SDPA backends accept a call: dtype x GQA (enable_gqa) x dropout x causal, on this GPU."""
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

rows = []
for dtype in (torch.float32, torch.bfloat16):
    for gqa in (False, True):
        for dropout in (0.0, 0.1):
            q = torch.randn(2, 16, 256, 64, device="cuda", dtype=dtype, requires_grad=True)
            kv_heads = 4 if gqa else 16
            k = torch.randn(2, kv_heads, 256, 64, device="cuda", dtype=dtype, requires_grad=True)
            v = torch.randn(2, kv_heads, 256, 64, device="cuda", dtype=dtype, requires_grad=True)
            ok = {}
            for b in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                      SDPBackend.MATH):
                try:
                    with sdpa_kernel([b]):
                        F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout,
                                                       enable_gqa=gqa).sum().backward()
                    ok[b.name] = True
                except Exception as e:  # noqa: BLE001
                    ok[b.name] = str(e).splitlines()[0][:120]
            rows.append({"dtype": str(dtype), "gqa": gqa, "dropout": dropout, "backends": ok})
json.dump(rows, open(sys.argv[1], "w"), indent=1)
