#!/usr/bin/env bash
# End-to-end checks of memscale-plan's multi-GPU options (ctest cli.cluster):
#   tests/cli/cluster_checks.sh PATH/TO/memscale-plan
# The per-GPU report, the cluster plan, --emit deepspeed / accelerate-fsdp / torchtune (batch sizes that
# multiply out) and the usage errors (exit 2, one stderr line). Needs bash and python3.
set -u
plan=$1
source "$(dirname "${BASH_SOURCE[0]}")/check_helpers.sh"
check() {  # check NAME CONDITION-STATUS
  if [[ $2 -eq 0 ]]; then pass "$1"; else fail "$1" "$(cat "$work/err")"; fi
}

run --model llama-2-13b --batch 1 --seq 2048 --precision pure_bf16 --gpus 8 --strategy zero3 --offload optimizer --host-memory 512GiB
[[ $rc -eq 0 ]] && grep -q "Peak rank 0" "$work/out" && grep -q "fits 512.00 GiB" "$work/out"; check "--strategy zero3: per-GPU report, host RAM checked" $?

run --model llama-2-13b --batch 1 --seq 2048 --precision pure_bf16 --gpus 8 --strategy zero3 --host-memory 64GiB --offload optimizer,parameters
[[ $rc -eq 0 ]] && grep -q "EXCEEDS 64.00 GiB" "$work/out"; check "--host-memory too small: EXCEEDS" $?

run --model llama-2-13b --batch 1 --seq 2048 --precision pure_bf16 --gpus 16 --nodes 2 --strategy hsdp --json
[[ $rc -eq 0 ]] && python3 -c 'import json,sys; j=json.load(sys.stdin)["layout"]; assert j["gpus"]==16 and j["strategy"]=="hsdp" and j["per_gpu"]["device"]>0' <"$work/out"
check "--strategy hsdp --json: layout object" $?

args=(--model llama-2-70b --batch 1 --seq 4096 --precision amp_bf16 --gpus 32 --nodes 4 --gpu a100-80gb --host-memory 1TiB --global-batch 64)
run "${args[@]}"
[[ $rc -eq 0 ]] && grep -q "^Chosen:" "$work/out"; check "cluster plan: a 70B run finds a layout" $?

run "${args[@]}" --emit deepspeed
[[ $rc -eq 0 ]] && python3 -c '
import json,sys
c=json.load(sys.stdin)
assert c["train_batch_size"]==64
assert c["zero_optimization"]["stage"] in (0,1,2,3)
' <"$work/out"
check "--emit deepspeed: ds_config.json with train_batch_size 64" $?

run "${args[@]}" --emit accelerate-fsdp
[[ $rc -eq 0 ]] && grep -q "^distributed_type: FSDP" "$work/out" && grep -q "fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer" "$work/out"
check "--emit accelerate-fsdp: Accelerate FSDP YAML" $?

# --emit torchtune: the single-device recipe config, its batch keys multiplying out; with --gpus N
# full_finetune_distributed's, launched over N processes.
run --model llama-3-8b --framework torchtune --lora 16 --lora-targets q_proj,v_proj,o_proj,gate_proj,up_proj,down_proj \
  --precision pure_bf16 --batch 4 --grad-accum 8 --seq 2048 --checkpointing full --offload activations --emit torchtune
[[ $rc -eq 0 ]] && grep -q "^  _component_: torchtune.models.llama3.lora_llama3_8b$" "$work/out" &&
  grep -q "^enable_activation_offloading: True$" "$work/out" && python3 -c '
import sys
kv = dict(l.split(": ", 1) for l in sys.stdin.read().splitlines() if l and not l.startswith((" ", "#")) and ": " in l)
assert int(kv["batch_size"]) * int(kv["gradient_accumulation_steps"]) == 32, kv
' <"$work/out"
check "--emit torchtune: LoRA recipe config, 4 x 8" $?
run --model llama-3-8b --framework torchtune --gpus 4 --gpu h100-80gb --batch 2 --seq 4096 --checkpointing full --emit torchtune
[[ $rc -eq 0 ]] && grep -q "tune run --nproc_per_node 4 full_finetune_distributed" "$work/out" &&
  grep -q "^  _component_: torchtune.models.llama3.llama3_8b$" "$work/out" && grep -q "^dtype: bf16$" "$work/out" &&
  grep -q "^custom_sharded_layers: null$" "$work/out" && grep -q "^fsdp_reshard_after_forward: True$" "$work/out"
check "--emit torchtune --gpus 4: full_finetune_distributed's config (bf16, FSDP2 keys)" $?
run --model llama-3-8b --framework torchtune --lora 8 --gpus 2 --gpu a100-80gb --emit torchtune
[[ $rc -eq 2 ]] && grep -q "distributed" "$work/err"; check "--emit torchtune --gpus with LoRA: refused (lora_finetune_distributed's config is not written)" $?
run --model llama-3-8b --lora 8 --emit torchtune
[[ $rc -eq 2 ]] && grep -q "add --framework torchtune" "$work/err"; check "--emit torchtune without --framework torchtune: refused" $?

run --model gpt2 --gpus 4 --strategy zero2 --batch 3 --grad-accum 5 --emit deepspeed
[[ $rc -eq 0 ]] && python3 -c 'import json,sys; c=json.load(sys.stdin); assert c["train_batch_size"]==3*5*4' <"$work/out"
check "--emit deepspeed with a layout: 3 x 5 x 4" $?

# Gradient accumulation under ZeRO-3: the partitioned buffer, as at accumulation 1 (not 8x it).
z3=(--model llama-2-7b --gpus 8 --strategy zero3 --gpu a100-80gb --precision amp_bf16 --seq 4096 --batch 1 --checkpointing full)
run "${z3[@]}" --grad-accum 1; one=$(grep "^  gradients" "$work/out")
run "${z3[@]}" --grad-accum 2; two=$(grep "^  gradients" "$work/out")
[[ $rc -eq 0 && -n "$one" && "$one" == "$two" ]]; check "zero3 --grad-accum 2: gradients per GPU as at 1 ($two)" $?

# T5 per GPU: both stacks (DDP per GPU above the single-GPU estimate), never the decoder alone.
run --model t5-small --batch 8 --seq 512 --json; single=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["peak"]["tensor"])' <"$work/out")
run --model t5-small --batch 8 --seq 512 --gpus 2 --strategy ddp --json
python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["layout"]["per_gpu"]["tensor"] > '"${single:-0}"', j' <"$work/out"
check "t5-small --gpus 2 --strategy ddp: per GPU above the single-GPU peak" $?

# A GPU given by name or by memory gives a verdict, in text and JSON.
run --model llama-2-7b --gpus 8 --strategy zero3 --gpu-memory 80GB --headroom 0.10 --precision amp_bf16
[[ $rc -eq 0 ]] && grep -q "^Verdict on .*: fits" "$work/out"; check "--gpu-memory with --gpus: a verdict" $?
run --model llama-2-70b --batch 1 --seq 4096 --precision amp_bf16 --gpu a100-80gb --gpus 8 --strategy zero3
[[ $rc -eq 0 ]] && grep -q "^Verdict on .*does not fit" "$work/out"; check "--gpu with --gpus: the text says it does not fit" $?
run --model llama-2-70b --batch 1 --seq 4096 --precision amp_bf16 --gpu a100-80gb --gpus 8 --strategy zero3 --json
python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["fits"] is False and j["budget_per_gpu"] > 0' <"$work/out"
check "--gpu with --gpus --json: fits false with the budget" $?
run --model gpt2 --gpus 4 --gpu-memory 24GiB
[[ $rc -eq 0 ]] && grep -q "^Chosen:" "$work/out"; check "cluster plan on --gpu-memory" $?

# --emit refuses a layout that does not fit the GPU it was planned on; ZeRO-Offload names its optimizer.
run --model llama-2-70b --batch 1 --seq 4096 --precision amp_bf16 --gpu a100-80gb --gpus 8 --strategy zero3 --emit deepspeed
[[ $rc -eq 2 && ! -s "$work/out" ]] && grep -q "no config written: the layout does not fit" "$work/err"
check "--emit deepspeed for a layout that does not fit: exit 2, nothing written" $?
run --model gpt2 --gpus 2 --strategy zero3 --offload optimizer --emit deepspeed
python3 -c 'import json,sys; c=json.load(sys.stdin); assert c["optimizer"]["type"]=="AdamW"' <"$work/out"
check "--emit deepspeed with optimizer offload: the engine's CPU AdamW" $?

# no_sync: acts with FSDP, refused where it cannot act.
run --model llama-2-7b --gpus 8 --strategy fsdp-full --grad-accum 4 --no-sync
[[ $rc -eq 0 ]] && grep -q "micro-steps under no_sync" "$work/out"; check "--no-sync with fsdp-full" $?

# DeepSpeed's own bf16 engine: echoed in the report and the layout JSON, emitted as the bf16 block;
# a layout it does not model is refused naming the field.
ds=(--model llama-2-7b --batch 1 --seq 2048 --precision pure_bf16 --checkpointing full --gpus 8 --strategy zero2 --ds-precision bf16)
run "${ds[@]}"
[[ $rc -eq 0 ]] && grep -q "DeepSpeed bf16 engine (fp32 master partition)" "$work/out"; check "--ds-precision bf16: echoed" $?
run "${ds[@]}" --json
[[ $rc -eq 0 ]] && python3 -c 'import json,sys; assert json.load(sys.stdin)["layout"]["deepspeed_precision"]=="bf16"' <"$work/out"
check "--ds-precision bf16 --json: layout.deepspeed_precision" $?
run "${ds[@]}" --emit deepspeed
[[ $rc -eq 0 ]] && python3 -c 'import json,sys; c=json.load(sys.stdin); assert c["bf16"]["enabled"] and not c["fp16"]["enabled"]' <"$work/out"
check "--ds-precision bf16 --emit deepspeed: the bf16 block" $?
run --model llama-2-7b --precision amp_bf16 --gpus 8 --strategy zero2 --ds-precision bf16
[[ $rc -ne 0 ]] && grep -q "run.precision" "$work/err"; check "--ds-precision bf16 with amp_bf16: refused naming run.precision" $?
run --model llama-2-7b --precision pure_bf16 --gpus 8 --strategy ddp --ds-precision bf16
[[ $rc -ne 0 ]] && grep -q "parallel.deepspeed.precision" "$work/err"; check "--ds-precision with ddp: refused" $?
# Stage 0: BF16_Optimizer and FP16_Optimizer.
run --model llama-2-7b --batch 1 --seq 2048 --precision pure_bf16 --checkpointing full --gpus 8 --strategy zero0 --ds-precision bf16
[[ $rc -eq 0 ]] && grep -q "zero0, .*DeepSpeed bf16 engine without ZeRO (BF16_Optimizer" "$work/out"; check "--strategy zero0 --ds-precision bf16: echoed" $?
run --model llama-2-7b --batch 1 --seq 2048 --precision pure_fp16 --optimizer-impl fused --gpus 8 --strategy zero0 --ds-precision fp16
[[ $rc -eq 0 ]] && grep -q "FP16_Optimizer: whole fp32 master" "$work/out"; check "--strategy zero0 --ds-precision fp16: echoed" $?
run --model llama-2-7b --precision pure_bf16 --gpus 8 --strategy zero0
[[ $rc -ne 0 ]] && grep -q "parallel.deepspeed.precision" "$work/err"; check "--strategy zero0 without --ds-precision: refused" $?

# Single-GPU plan: how to switch on what the chosen mode uses.
run --model gpt2-xl --batch 2 --seq 1024 --gpu rtx3090
[[ $rc -eq 0 ]] && grep -q "^  switch on checkpointing: model.gradient_checkpointing_enable()" "$work/out"
check "single-GPU plan: a switch-on line for the chosen mode" $?

for bad in "--strategy zero3" "--gpus 4 --strategy zero9" "--gpus 4 --host-memory 12XB --strategy ddp" \
           "--gpus 4" "--gpus 6 --nodes 4 --strategy ddp" "--gpus 4 --strategy fsdp-full --emit deepspeed" \
           "--gpus 4 --strategy ddp --tp 3" "--global-batch 3 --gpus 2 --strategy zero3" \
           "--gpus 8 --gpu a100-80gb --tp 64 --pp 128" "--no-sync" "--host-memory 1TiB" "--gpus 2 --strategy zero3 --grad-accum 2 --no-sync" \
           "--model resnet50 --gpus 2 --strategy ddp" "--gpus 2 --strategy ddp --inference" \
           "--gpus 2 --strategy ddp --svg x.svg --gpu t4" "--model t5-small --gpus 4 --strategy zero1 --tp 2" \
           "--ds-precision bf16" "--gpus 4 --strategy zero2 --ds-precision fp8" "--gpus 4 --gpu a100-80gb --ds-precision bf16"; do
  # shellcheck disable=SC2086
  run $bad
  [[ $rc -eq 2 ]] && [[ $(wc -l <"$work/err") -eq 1 ]]; check "usage error, exit 2, one line: $bad" $?
done

finish
