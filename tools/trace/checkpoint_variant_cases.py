#!/usr/bin/python3
"""CPU traces of the two torch.utils.checkpoint variants around each decoder layer of an HF-LLaMA step.

The model is liger_cases.py's plain-torch HF-LLaMA (transformers ~4.51 eager path). Every layer runs under
torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=R), as LlamaModel.forward does through
_gradient_checkpointing_func after gradient_checkpointing_enable(); transformers passes use_reentrant=True when
given no kwargs before PR #43203, False from it. torch/utils/checkpoint.py: the reentrant CheckpointFunction
reruns the layer in its backward and calls torch.autograd.backward on the rerun's outputs, which stay referenced
until it returns; the non-reentrant variant recomputes saved tensors through saved-tensor hooks and keeps no output.

LoRA cases: peft's lora.Linear (deepseek_lora_generate.LoraLinear) on q_proj and v_proj, everything else frozen.
Under the reentrant checkpoint a frozen embedding would leave every block's input without grad and the loss with none,
so the embeddings carry enable_input_require_grads' forward hook (transformers modeling_utils.py
PreTrainedModel.enable_input_require_grads: output.requires_grad_(True)), as TRL's SFTTrainer and peft's
prepare_model_for_kbit_training add it when use_reentrant is true; the non-reentrant case runs without it. Their step
frees the loss before the optimizer step, as Trainer.training_step returns loss.detach(); detail.s2_graph is the live
bytes right after backward, while the loss still holds the graph (and the hook's leaf its .grad).
Run from the repository root:
  /usr/bin/python3 tools/trace/checkpoint_variant_cases.py --out docs/data/cpu_traced_checkpoint_variants.json
"""
import torch
import torch.nn.functional as F
import torch.utils.checkpoint

import deepseek_lora_generate as lora
import liger_cases as HF
import llama_blocks as LB
import step_trace as T
import tracer

SOURCE = "tools/trace/checkpoint_variant_cases.py (Tracker of shared/ground-truth/measure.py)"
LORA_TARGETS = ["q_proj", "v_proj"]
LORA_ALPHA, LORA_DROPOUT = 16, 0.05


def trainer_step(tr, n, forward, optimizer, after_backward):
    """tracer.train_step in Trainer's order: the loss (and with it the graph) is dropped after backward, before the
    optimizer step (Trainer.training_step returns loss.detach()); s{n}_graph marks the moment just before."""
    tr.mark(f"s{n}_start")
    loss = forward()
    tr.mark(f"s{n}_fwd")
    loss.backward()
    tr.mark(f"s{n}_graph")
    value = float(loss)
    del loss
    tr.mark(f"s{n}_bwd")
    after_backward(n)
    optimizer.step()
    tr.mark(f"s{n}_opt")
    optimizer.zero_grad(set_to_none=True)
    tr.mark(f"s{n}_end")
    return value


class CheckpointedLM(HF.CausalLM):
    def __init__(self, m, reentrant, lora_rank=0, input_require_grads=False):
        super().__init__(m, {})
        self.reentrant = reentrant
        if lora_rank:
            for p in self.parameters():
                p.requires_grad_(False)
            for layer in self.layers:
                layer.q_proj = lora.LoraLinear(layer.q_proj, lora_rank, LORA_ALPHA, LORA_DROPOUT)
                layer.v_proj = lora.LoraLinear(layer.v_proj, lora_rank, LORA_ALPHA, LORA_DROPOUT)
        if input_require_grads:
            self.embed_tokens.register_forward_hook(lambda module, args, output: output.requires_grad_(True))

    def forward(self, ids, labels):  # liger_cases.CausalLM.forward with each layer checkpointed
        x = self.embed_tokens(ids)
        s = ids.size(1)
        freqs = torch.outer(torch.arange(s).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        for layer in self.layers:
            x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=self.reentrant)
        x = self.norm(x)
        padded = F.pad(labels, (0, 1), value=HF.IGNORE)[..., 1:].contiguous()
        logits = self.lm_head(x)
        return F.cross_entropy(logits.float().view(-1, self.vocab), padded.view(-1), ignore_index=HF.IGNORE)


def run_case(c):
    m = dict(LB.LLAMA, **c["geometry"])
    B, S = c["batch"], c["seq"]

    rank = c.get("lora_rank", 0)
    seen = {}

    def build():
        model = CheckpointedLM(m, c["reentrant"], rank, c.get("input_require_grads", False))
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(trainable, lr=1e-4, foreach=False)
        # model.params counts the base model (the frozen weights under LoRA), as the LoRA records do.
        base = sum(p.numel() for p in model.parameters() if not p.requires_grad) if rank else None
        return dict(model=model, optimizers=[opt], trainable=trainable, param_count=base,
                    make_inputs=lambda: (torch.randint(0, m["vocab"], (B, S)), torch.randint(0, m["vocab"], (B, S))))

    def step(ctx, tr, n):
        ids, labels = ctx["inputs"]

        def grads_of_step2(n):
            if n == 2:
                ctx["grads_step2"] = tracer.tensor_bytes([p.grad for p in ctx["trainable"]])

        forward = lambda: ctx["model"](ids, labels)  # noqa: E731
        if not rank:
            return tracer.train_step(tr, n, forward, ctx["optimizers"][0], grads_of_step2)
        seen["tracker"] = tr
        return trainer_step(tr, n, forward, ctx["optimizers"][0], grads_of_step2)

    r = T.run_two_steps(build, step)
    train = dict(batch=B, seq=S, precision="fp32", optimizer="adamw", optimizer_impl="for_loop",
                 checkpointing="full", use_reentrant=c["reentrant"], attention="eager", grad_accum=1, lora_rank=0,
                 frozen="none", zero_stage=0, dp=1, tp=1, loss_impl="standard")
    framework = dict(name="hf", version="4.51 (re-implemented)")
    notes = ("measured_bytes = max live CPU tensor bytes in training step 2; HF-LLaMA step re-implemented in plain "
             "torch, every decoder layer under torch.utils.checkpoint with use_reentrant=" + str(c["reentrant"]) + ".")
    if rank:
        r["s2_graph"] = seen["tracker"].live("s2_graph")
        train.update(lora_rank=rank, lora_alpha=LORA_ALPHA, lora_dropout=LORA_DROPOUT, lora_variant="lora",
                     lora_targets=LORA_TARGETS, trainable_params=r["trainable"], frozen="base", trainable_dtype="fp32")
        notes += (" LoRA r=" + str(rank) + " on q_proj and v_proj, the rest frozen; the embeddings' forward hook of "
                  "enable_input_require_grads " + ("on" if c["input_require_grads"] else "off") +
                  "; the loss dropped before the optimizer step (Trainer's order).")
    model = LB.model_fields(m, "hf-transformers", r["nparams"])
    return T.record(c["id"], SOURCE, model, train, framework, r, notes, software={"transformers": "4.51 (emulated)"})


def cases():
    L = []
    for B, S in ((2, 256), (4, 512)):
        for reentrant in (False, True):
            name = "reentrant" if reentrant else "non-reentrant"
            L.append(dict(id=f"cpu-llama-ckpt-{name}-b{B}-s{S}", batch=B, seq=S, reentrant=reentrant,
                          geometry=dict(layers=4, vocab=1000)))
    # LoRA: the reentrant checkpoint with the hook it needs, the non-reentrant one without it.
    for B, S in ((2, 256), (4, 512)):
        for reentrant in (False, True):
            name = "reentrant-input-grads" if reentrant else "non-reentrant"
            L.append(dict(id=f"cpu-llama-lora-ckpt-{name}-b{B}-s{S}", batch=B, seq=S, reentrant=reentrant,
                          lora_rank=8, input_require_grads=reentrant, geometry=dict(layers=4, vocab=1000)))
    return L


if __name__ == "__main__":
    T.main_loop(cases, run_case, "/tmp/checkpoint_variant_cases.json")
