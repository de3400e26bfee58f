#!/usr/bin/env bash
# End-to-end checks that no input is silently dropped (registered with ctest as
# cli.ignored-inputs): each option a path does not read is refused naming it, an option a later
# one used to reset keeps its value, and --stack cuda=V is echoed. tools/audit/ignored_inputs.py
# found these by running every option on every path.
#
#   tests/cli/ignored_input_checks.sh PATH/TO/memscale-plan
set -u
if [[ $# -ne 1 ]]; then
  echo "usage: $0 MEMSCALE_PLAN" >&2
  exit 64
fi
plan=$1
source "$(dirname "${BASH_SOURCE[0]}")/check_helpers.sh"

# refused TEXT ARGS...: exit 2, one stderr line containing TEXT.
refused() {
  local text=$1
  shift
  run "$@"
  if [[ $rc -eq 2 && $(wc -l <"$work/err") -eq 1 ]] && grep -qF -- "$text" "$work/err"; then
    pass "refused: $*"
  else
    fail "refused: $*" "exit $rc, expected '$text'" "stderr: $(head -c 300 "$work/err")"
  fi
}

# A setting only some models read, on a model without it.
refused "--target-len sizes an encoder-decoder's" --model gpt2 --target-len 64
refused "--ssm-kernels chooses the code of state-space" --model gpt2 --ssm-kernels torch
refused "--image-size needs --images N" --model gpt2 --image-size 448
refused "--frozen-tower needs --images N" --model gpt2 --frozen-tower
# Training settings on generate() and language-model settings on a vision model.
refused "--paged-optimizer does not apply to --inference" --inference --paged-optimizer
refused "--images does not apply to --inference" --inference --images 1
refused "--frozen-tower does not apply to --inference" --inference --frozen-tower
refused "--ssm-kernels does not apply to the vision model" --model resnet50 --ssm-kernels torch
refused "--frozen-tower describe a multimodal" --model resnet50 --frozen-tower
# DeepSpeed's 16-bit engine on the frameworks that run FSDP2 themselves.
refused "--ds-precision does not apply to --framework torchtitan" \
  --model llama-2-7b --framework torchtitan --gpus 8 --ds-precision bf16
refused "--ds-precision does not apply to --framework torchtune" \
  --model llama-2-7b --framework torchtune --gpus 8 --ds-precision bf16
refused "--ds-precision does not apply to --framework litgpt@main" \
  --model llama-2-7b --framework litgpt@main --gpus 4 --lora 8 --ds-precision bf16
# ds_config.json has no tensor-parallel degree: a given --strategy does not make one appear.
refused "--tp and --pp must be 1 with --emit" --gpus 8 --strategy zero2 --tp 2 --emit deepspeed
# Sizes in a report that has none in text.
refused "--units sets the sizes of a text report; --json gives bytes" --model gpt2 --units mib --json
refused "--cases prints JSON, in bytes" --cases /dev/null --units mib
# A chunk size no loss reads.
refused "--loss-chunk needs a chunked loss" --model gpt2 --loss-chunk 64
refused "--loss-chunk counts tokens per chunk" --model llama-2-7b --framework torchtune --loss-chunk 64
echo '{"model": "gpt2", "run": {"loss_chunk": 64}}' >"$work/chunk.json"
refused "run.loss_chunk" --run "$work/chunk.json"

# --loss before --framework is kept (the framework's defaults used to reset it).
run --model llama-2-7b --batch 1 --seq 512 --precision pure_bf16 --loss standard --framework torchtune --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; r=json.load(sys.stdin)["run"]; assert r["loss"] == "standard", r' <"$work/out" 2>"$work/py"; then
  pass "--loss standard --framework torchtune keeps the standard loss"
else
  fail "--loss standard --framework torchtune keeps the standard loss" "exit $rc" "$(tail -n 1 "$work/py")" "$(head -c 300 "$work/err")"
fi
run --model gpt2 --loss-chunk 64 --framework litgpt --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; r=json.load(sys.stdin)["run"]; assert r["loss_chunk"] == 64, r' <"$work/out" 2>"$work/py"; then
  pass "--loss-chunk 64 --framework litgpt keeps 64 tokens per chunk"
else
  fail "--loss-chunk 64 --framework litgpt keeps 64 tokens per chunk" "exit $rc" "$(tail -n 1 "$work/py")" "$(head -c 300 "$work/err")"
fi

# Two options for one GPU: neither silently replaces the other.
refused "--gpu and --gpu-memory both describe the GPU" --gpu a100-80gb --gpu-memory 24GiB
# A second --stack adds to the first on --inference too (it kept only the last list).
run --model gpt2 --inference --stack torch=2.1 --stack transformers=4.40
if [[ $rc -eq 0 ]] && grep -q "^software .*torch 2.1, transformers 4.40" "$work/out"; then
  pass "--inference --stack torch=2.1 --stack transformers=4.40: both apply"
else
  fail "--inference --stack torch=2.1 --stack transformers=4.40: both apply" "exit $rc" "$(grep software "$work/out")" "$(head -c 300 "$work/err")"
fi

# --stack cuda=V is echoed in the software line and the JSON, as torch and transformers are.
for path in "--model gpt2" "--inference" "--model resnet50"; do
  # shellcheck disable=SC2086
  run $path --stack cuda=12.4
  if [[ $rc -eq 0 ]] && grep -q "^software .*CUDA 12.4, modules loaded lazily" "$work/out"; then
    pass "$path --stack cuda=12.4: the software line says CUDA 12.4"
  else
    fail "$path --stack cuda=12.4: the software line says CUDA 12.4" "exit $rc" "$(grep software "$work/out")" "$(head -c 300 "$work/err")"
  fi
  # shellcheck disable=SC2086
  run $path --stack cuda=12.4 --json
  if [[ $rc -eq 0 ]] && python3 -c '
import json, sys
r = json.load(sys.stdin)
sw = r["inference"]["software"] if "inference" in r else r["software"]
assert sw["cuda"] == "12.4", sw' <"$work/out" 2>"$work/py"; then
    pass "$path --stack cuda=12.4 --json: software.cuda is 12.4"
  else
    fail "$path --stack cuda=12.4 --json: software.cuda is 12.4" "exit $rc" "$(tail -n 1 "$work/py")" "$(head -c 300 "$work/err")"
  fi
done
# The JSON is a --run input: the stated release comes back.
run --model gpt2 --stack cuda=12.1 --json
cp "$work/out" "$work/doc.json"
run --run "$work/doc.json" --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; assert json.load(sys.stdin)["software"]["cuda"] == "12.1"' <"$work/out" 2>"$work/py"; then
  pass "--run of a --json with cuda 12.1 states cuda 12.1"
else
  fail "--run of a --json with cuda 12.1 states cuda 12.1" "exit $rc" "$(tail -n 1 "$work/py")" "$(head -c 300 "$work/err")"
fi

finish
