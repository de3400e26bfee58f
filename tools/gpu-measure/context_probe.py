#!/usr/bin/env python3
"""What the CUDA context and the libraries' kernel images cost: nvidia-smi's per-process used memory
minus the caching allocator's reserved bytes, after each first use of a library.

  python3 context_probe.py            prints one JSON object: stage -> {smi, reserved, outside}
Run it once with CUDA_MODULE_LOADING=LAZY (the default) and once with EAGER.
"""
import json
import os
import time

from measure_gpu import smi_used_bytes  # this process's used memory as nvidia-smi reports it


def main():
    import torch
    import torch.nn.functional as F
    stages = {}

    def mark(name):
        torch.cuda.synchronize()
        time.sleep(0.2)
        smi = smi_used_bytes()
        reserved = torch.cuda.memory_reserved()
        stages[name] = {"smi": smi, "reserved": reserved, "outside": None if smi is None else smi - reserved}

    x = torch.zeros(1, device="cuda")
    mark("context")
    a = torch.randn(1024, 1024, device="cuda")
    (a @ a).sum().item()
    mark("fp32_matmul")
    b = a.bfloat16()
    (b @ b).float().sum().item()
    mark("bf16_matmul")
    w = torch.randn(1024, 1024, device="cuda", requires_grad=True)
    (a @ w).relu().sum().backward()
    mark("autograd_backward")
    q = torch.randn(2, 8, 1024, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    mark("sdpa_flash_bf16")
    opt = torch.optim.AdamW([w], lr=1e-3)
    opt.step()
    mark("adamw_step")
    img = torch.randn(8, 3, 224, 224, device="cuda", requires_grad=True)
    conv = torch.nn.Conv2d(3, 64, 7, stride=2, padding=3).cuda()
    conv(img).sum().backward()
    mark("cudnn_conv")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        conv(img).sum().backward()
    mark("cudnn_conv_bf16")
    del x
    print(json.dumps({"module_loading": os.environ.get("CUDA_MODULE_LOADING", "(unset)"),
                      "torch": torch.__version__, "cuda": torch.version.cuda,
                      "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(),
                      "sms": torch.cuda.get_device_properties(0).multi_processor_count, "stages": stages}))


if __name__ == "__main__":
    main()
