#!/usr/bin/python3
"""Trace torchvision training steps on CPU with the harness's method (tracer.py).

Same method and record schema as ../shared/ground-truth/measure.py (its vision path),
with the image size, precision, optimizer and memory format as parameters.
Run from the repository root:
  /usr/bin/python3 tools/trace/vision_cases.py --out docs/data/cpu_traced_vision.json
"""
import argparse

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
import torchvision

import tracer

torch.set_num_threads(1)

FAMILY = {"resnet": "resnet", "mobilenet_v3": "mobilenet", "mobilenet_v2": "mobilenet", "efficientnet": "efficientnet",
          "vit": "vit", "convnext": "convnext"}
ACT = {"resnet": "relu", "mobilenet": "hardswish", "efficientnet": "silu", "vit": "gelu", "convnext": "gelu"}


def family_of(name):
    for k, v in FAMILY.items():
        if name.startswith(k):
            return v
    raise ValueError(name)


class Checkpointed(torch.nn.Module):
    """torch.utils.checkpoint (non-reentrant) around one stage."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=False)


def checkpoint_stages(model):
    """The stages memscale's planner checkpoints: ResNet layer1-4, ConvNeXt stages, each
    MobileNet/EfficientNet inverted residual, each ViT encoder block."""
    name = type(model).__name__
    if name == "ResNet":
        for k in ("layer1", "layer2", "layer3", "layer4"):
            setattr(model, k, Checkpointed(getattr(model, k)))
    elif name == "VisionTransformer":
        layers = model.encoder.layers
        for i, k in enumerate(list(layers._modules)):
            layers._modules[k] = Checkpointed(layers._modules[k])
    elif name in ("MobileNetV3", "EfficientNet"):
        f = model.features
        for k in list(f._modules)[1:-1]:
            blocks = f._modules[k]
            if isinstance(blocks, torch.nn.Sequential) and name == "EfficientNet":
                for j in list(blocks._modules):
                    blocks._modules[j] = Checkpointed(blocks._modules[j])
            else:
                f._modules[k] = Checkpointed(blocks)
    elif name == "ConvNeXt":
        f = model.features
        for k in list(f._modules)[1::2]:
            f._modules[k] = Checkpointed(f._modules[k])
    else:
        raise ValueError(name)


def run(c):
    tracer.reset_seed()
    name, B, px, optn, prec = c["model"], c["batch"], c["image"], c["opt"], c["prec"]
    cl = c.get("channels_last", False)
    with tracer.Tracker() as tr:
        model = getattr(torchvision.models, name)()
        if prec == "pure_bf16":
            model = model.to(torch.bfloat16)
        if cl:
            model = model.to(memory_format=torch.channels_last)
        if c.get("ckpt") == "full":
            checkpoint_stages(model)
        model.train()
        tr.mark("built")
        opt = tracer.make_opt(optn, model.parameters())
        x = torch.randn(B, 3, px, px, dtype=torch.bfloat16 if prec == "pure_bf16" else torch.float32)
        if cl:
            x = x.contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (B,))
        tr.mark("inputs")
        forward = tracer.in_precision(prec, lambda: F.cross_entropy(model(x), y))
        grads = tracer.GradientBytes(lambda: model.parameters())
        times, lossv = tracer.train_two_steps(tr, forward, opt, grads)
        grads_enum = grads.bytes
        params_enum = tracer.tensor_bytes(list(model.parameters()))
        opt_enum = tracer.optimizer_state_bytes([opt])
        nparams = tracer.parameter_count(model)
        buffers_enum = tracer.tensor_bytes(list(model.buffers()))
        inputs_bytes = tracer.tensor_bytes([x, y])
        del model, opt, x, y
    r = dict(nparams=nparams, params_enum=params_enum, buffers_enum=buffers_enum, grads_enum=grads_enum, opt_enum=opt_enum,
             inputs_bytes=inputs_bytes, built=tr.live("built"), inputs_live=tr.live("inputs"))
    r.update(tracer.step_readings(tr))
    r.update(end_live=tr.live("__end__"), n_events=tr.n_events, step_seconds=times, loss=lossv)
    fam = family_of(name)
    cid = case_id(c)
    train = dict(batch=B, seq=None, image=px, precision=prec, optimizer=optn,
                 optimizer_impl="single_tensor (torch 1.13 CPU default)", checkpointing=c.get("ckpt", "none"),
                 attention="eager" if fam == "vit" else None, grad_accum=1, lora_rank=0, frozen="none", zero_stage=0,
                 dp=1, tp=1, dropout="train mode (HF/torchvision defaults)")
    if cl:
        train["memory_format"] = "channels_last"
    return {
        **tracer.record_head(cid, "tools/trace/vision_cases.py (Tracker of shared/ground-truth/measure.py)"),
        "model": dict(family=fam, name="torchvision.models." + name, params=nparams, layers=None, hidden=None, heads=None,
                      kv_heads=None, ffn=None, vocab=None, max_pos=None, tied_embeddings=None, activation=ACT[fam],
                      norm="layernorm" if fam in ("vit", "convnext") else "batchnorm", impl="torchvision"),
        "train": train,
        **tracer.peak_fields(r),
        "components": tracer.components(r),
        "detail": r, "torch": torch.__version__, "torchvision": torchvision.__version__,
        "notes": "as measure.py's vision records: peak live CPU tensor bytes of training step 2 (absolute)",
    }


def case_id(c):
    return f"cpu-{c['model']}-b{c['batch']}-{c['image']}px-{c['opt']}" + ("" if c["prec"] == "fp32" else "-" + c["prec"]) + \
        ("-channels_last" if c.get("channels_last") else "") + ("-ckpt" if c.get("ckpt") == "full" else "")


def cases():
    L = []
    for m, px, B in (("resnet50", 224, 2), ("resnet50", 224, 8), ("resnet18", 128, 8), ("resnet18", 320, 4),
                     ("resnet18", 512, 2), ("resnet101", 224, 2), ("mobilenet_v3_large", 160, 8),
                     ("mobilenet_v3_large", 384, 2), ("efficientnet_b0", 224, 2), ("efficientnet_b0", 224, 8),
                     ("convnext_tiny", 224, 2), ("vit_b_16", 224, 2), ("vit_b_16", 224, 4),
                     ("convnext_tiny", 224, 8), ("convnext_tiny", 160, 4), ("resnet34", 256, 4), ("mobilenet_v3_small", 224, 16),
                     ("resnet50", 128, 16), ("efficientnet_b0", 320, 4), ("vit_b_32", 224, 8), ("resnet152", 224, 2)):
        L.append(dict(model=m, batch=B, image=px, opt="adamw", prec="fp32"))
    L.append(dict(model="resnet18", batch=8, image=224, opt="sgd_momentum", prec="fp32"))
    L.append(dict(model="resnet50", batch=4, image=224, opt="sgd_momentum", prec="fp32"))
    L.append(dict(model="resnet18", batch=8, image=224, opt="adamw", prec="amp_bf16"))
    L.append(dict(model="resnet18", batch=8, image=224, opt="adamw", prec="fp32", channels_last=True))
    L.append(dict(model="mobilenet_v3_large", batch=8, image=224, opt="adamw", prec="amp_bf16"))
    L.append(dict(model="resnet50", batch=4, image=224, opt="adamw", prec="amp_bf16"))
    L.append(dict(model="efficientnet_b0", batch=4, image=224, opt="sgd_momentum", prec="fp32"))
    for m, B in (("resnet50", 8), ("resnet18", 16), ("mobilenet_v3_large", 8), ("efficientnet_b0", 8), ("vit_b_16", 4),
                 ("convnext_tiny", 4)):
        L.append(dict(model=m, batch=B, image=224, opt="adamw", prec="fp32", ckpt="full"))
    return L


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    out = tracer.read_records(a.out)
    done = {r["id"] for r in out}
    for c in cases():
        if a.only and a.only not in c["model"]:
            continue
        if case_id(c) in done:
            continue
        rec = run(c)
        out.append(rec)
        tracer.write_records(a.out, out)
        d = rec["detail"]
        print(rec["id"], rec["measured_bytes"], "act", rec["components"]["activations"], "steps", d["step_seconds"], flush=True)


if __name__ == "__main__":
    main()
