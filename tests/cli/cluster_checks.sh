#!/usr/bin/env bash
# End-to-end checks of memscale-plan's multi-GPU options (ctest cli.cluster):
#   tests/cli/cluster_checks.sh PATH/TO/memscale-plan
# The per-GPU report, the cluster plan, --emit deepspeed / accelerate-fsdp (batch sizes that
# multiply out) and the usage errors (exit 2, one stderr line). Needs bash and python3.
set -u
plan=$1
passed=0
failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
check() {  # check NAME CONDITION-STATUS
  if [[ $2 -eq 0 ]]; then passed=$((passed + 1)); echo "ok    $1"; else failed=$((failed + 1)); echo "FAIL  $1"; cat "$work/err"; fi
}
run() { "$plan" "$@" >"$work/out" 2>"$work/err"; rc=$?; }

run --model llama-2-13b --batch 1 --seq 2048 --precision pure_bf16 --gpus 8 --strategy zero3 --offload optimizer --host-memory 512GiB
[[ $rc -eq 0 ]] && grep -q "Peak rank 0" "$work/out" && grep -q "fits 512.00 GiB" "$work/out"; check "--strategy zero3: per-GPU report, host RAM checked" $?

run --model llama-2-13b --batch 1 --seq 2048 --precision pure_bf16 --gpus 8 --strategy zero3 --host-memory 64GiB --offload optimizer+params
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

run --model gpt2 --gpus 4 --strategy zero2 --batch 3 --grad-accum 5 --emit deepspeed
[[ $rc -eq 0 ]] && python3 -c 'import json,sys; c=json.load(sys.stdin); assert c["train_batch_size"]==3*5*4' <"$work/out"
check "--emit deepspeed with a layout: 3 x 5 x 4" $?

for bad in "--strategy zero3" "--gpus 4 --strategy zero9" "--gpus 4 --host-memory 12XB --strategy ddp" \
           "--gpus 4" "--gpus 6 --nodes 4 --strategy ddp" "--gpus 4 --strategy fsdp-full --emit deepspeed" \
           "--gpus 4 --strategy ddp --tp 3"; do
  # shellcheck disable=SC2086
  run $bad
  [[ $rc -eq 2 ]] && [[ $(wc -l <"$work/err") -eq 1 ]]; check "usage error, exit 2, one line: $bad" $?
done

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
