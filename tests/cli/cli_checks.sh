#!/usr/bin/env bash
# End-to-end checks of the memscale-plan tool (registered with ctest as cli.memscale-plan).
#
#   tests/cli/cli_checks.sh PATH/TO/memscale-plan PATH/TO/shared/ground-truth
#
# Checks the default run, --json, --list-models, --cases on a ground-truth file, and that
# each kind of bad input exits 2 with exactly one line on stderr. Prints "N passed,
# M failed" and exits non-zero when anything failed. Needs bash and python3 (JSON checks).
set -u

if [[ $# -ne 2 ]]; then
  echo "usage: $0 MEMSCALE_PLAN GROUND_TRUTH_DIR" >&2
  exit 64
fi
plan=$1
truth=$2

source "$(dirname "${BASH_SOURCE[0]}")/check_helpers.sh"

stderr_lines() { wc -l <"$work/err" | tr -d ' '; }

# --- default run -------------------------------------------------------------
run
if [[ $rc -eq 0 ]] && grep -q "peak" "$work/out" && [[ ! -s "$work/err" ]]; then
  pass "no arguments: exit 0, prints the peak"
else
  fail "no arguments: exit 0, prints the peak" "exit $rc" "stderr: $(head -c 300 "$work/err")"
fi

# --- --json --------------------------------------------------------------------
run --model gpt2 --batch 1 --seq 128 --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; json.load(sys.stdin)' <"$work/out" 2>"$work/py"; then
  pass "--json: exit 0, valid JSON"
else
  fail "--json: exit 0, valid JSON" "exit $rc" "stdout: $(head -c 300 "$work/out")" "python: $(tail -n 1 "$work/py")"
fi
if grep -q '"parameters": 124439808' "$work/out"; then
  pass '--json: "parameters": 124439808'
else
  fail '--json: "parameters": 124439808' "stdout: $(head -c 300 "$work/out")"
fi
if python3 - "$work/out" 2>"$work/py" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["model"] == "gpt2"
assert set(d["breakdown"]) >= {"parameters", "gradients", "optimizer", "activations", "workspace"}
assert all(isinstance(v, int) and v >= 0 for v in d["breakdown"].values())
assert set(d["peak"]) >= {"tensor", "reserved", "device", "phase"}
assert all(isinstance(d["peak"][k], int) and d["peak"][k] > 0 for k in ("tensor", "reserved", "device"))
assert d["peak"]["tensor"] <= d["peak"]["reserved"] <= d["peak"]["device"]
assert d["run"]["micro_batch"] == 1 and d["run"]["seq_len"] == 128
EOF
then
  pass "--json: model, breakdown, peak and run have the documented keys"
else
  fail "--json: model, breakdown, peak and run have the documented keys" "python: $(tail -n 1 "$work/py")"
fi

# --- --list-models ---------------------------------------------------------------
run --list-models
presets=(gpt2 gpt2-medium gpt2-large gpt2-xl bert-base-uncased bert-large-uncased llama-2-7b llama-2-13b
         llama-2-70b llama-3-8b mistral-7b mixtral-8x7b qwen2.5-7b t5-small t5-base t5-large flan-t5-base
         resnet18 resnet34 resnet50 resnet101 resnet152 mobilenet_v3_large mobilenet_v3_small efficientnet_b0
         vit_b_16 vit_b_32 vit_l_16 convnext_tiny convnext_small convnext_base)
timm=(vit_small_patch16_224 vit_base_patch16_224 vit_base_patch32_224 vit_large_patch16_224 vit_large_patch14_224
      vit_huge_patch14_224 vit_giant_patch14_224 vit_large_patch14_clip_224 eva02_tiny_patch14_224
      eva02_tiny_patch14_336 eva02_small_patch14_224 eva02_small_patch14_336 eva02_base_patch14_224
      eva02_base_patch14_448 eva02_large_patch14_224 eva02_large_patch14_448 eva_giant_patch14_224
      eva_giant_patch14_336 eva_giant_patch14_560 eva_giant_patch14_clip_224 convnext_atto convnext_femto
      convnext_pico convnext_nano convnext_tiny convnext_small convnext_base convnext_large convnext_xlarge
      resnet18 resnet34 resnet50 resnet101 resnet152)
missing=()
for name in "${presets[@]}"; do
  grep -q "^$name " "$work/out" || missing+=("$name")
done
for name in "${timm[@]}"; do
  grep -q "^timm/$name " "$work/out" || missing+=("timm/$name")
done
lines=$(wc -l <"$work/out" | tr -d ' ')
listed=$((${#presets[@]} + ${#timm[@]}))
if [[ $rc -eq 0 && ${#missing[@]} -eq 0 && $lines -eq $listed ]]; then
  pass "--list-models: one line for each of the $listed presets (${#timm[@]} timm)"
else
  fail "--list-models: one line for each of the $listed presets (${#timm[@]} timm)" "exit $rc, $lines lines" \
    "missing: ${missing[*]:-none}"
fi
if grep -q "^gpt2 .*124439808" "$work/out"; then
  pass "--list-models: gpt2 has 124439808 parameters"
else
  fail "--list-models: gpt2 has 124439808 parameters" "$(grep '^gpt2 ' "$work/out")"
fi

# --- --cases ---------------------------------------------------------------------
cases=$truth/cpu_traced_dev.json
run --cases "$cases"
if [[ $rc -eq 0 ]] && python3 - "$cases" "$work/out" 2>"$work/py" <<'EOF'
import json, sys
records = json.load(open(sys.argv[1]))
answers = json.load(open(sys.argv[2]))
assert isinstance(answers, list), "not an array"
assert len(answers) == len(records), f"{len(answers)} answers for {len(records)} records"
assert [a["id"] for a in answers] == [r["id"] for r in records], "ids out of order"
for a in answers:
    if "error" in a:
        assert set(a) == {"id", "error"}, a
    else:
        assert {"id", "estimated_bytes", "quantity"} <= set(a) <= {"id", "estimated_bytes", "quantity", "class", "band", "verdict", "replay"}, a
        assert isinstance(a["estimated_bytes"], int) and a["estimated_bytes"] > 0, a
EOF
then
  pass "--cases: one answer per record, same id order"
else
  fail "--cases: one answer per record, same id order" "exit $rc" "stderr: $(head -c 300 "$work/err")" \
    "python: $(tail -n 1 "$work/py")"
fi

# --- --cases-stack: the published V100 runs with the versions their source states ---------
stacks="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/docs/data/gpu_published_stack.json"
run --cases "$truth/gpu_published_dev.json" --cases-stack "$stacks"
if [[ $rc -eq 0 ]] && python3 - "$work/out" 2>"$work/py" <<'EOF'
import json, sys
answers = {a["id"]: a for a in json.load(open(sys.argv[1]))}
context = answers["hf-bertL-fp16-b4"]["replay"]["context"]
assert context["module_loading"] == "eager", context
assert context["other"] > 0, context  # torch 1.10: cuBLAS's workspace outside the allocator
EOF
then
  pass "--cases-stack: torch 1.10 / CUDA 11.2 runs load modules eagerly"
else
  fail "--cases-stack: torch 1.10 / CUDA 11.2 runs load modules eagerly" "exit $rc" \
    "stderr: $(head -c 300 "$work/err")" "python: $(tail -n 1 "$work/py")"
fi

# --- --gpu / --list-gpus ------------------------------------------------------------
run --model bert-base-uncased --batch 16 --seq 128 --gpu rtx3090 --json
if [[ $rc -eq 0 ]] && python3 - "$work/out" 2>"$work/py" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))["plan"]
assert p["mode"] == "none" and p["fits"] is True, p
assert [m["mode"] for m in p["modes"]] == ["none", "conservative", "balanced", "aggressive"], p
assert isinstance(p["budget"], int) and p["budget"] > 0, p
EOF
then
  pass "--gpu rtx3090: bert-base-uncased 16 x 128 fits without techniques"
else
  fail "--gpu rtx3090: bert-base-uncased 16 x 128 fits without techniques" "exit $rc" \
    "stderr: $(head -c 300 "$work/err")" "python: $(tail -n 1 "$work/py")"
fi

run --model gpt2-xl --batch 1 --seq 512 --gpu rtx3090 --json
if [[ $rc -eq 0 ]] && python3 - "$work/out" 2>"$work/py" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))["plan"]
assert p["modes"][0]["fits"] is False and p["fits"] is True, p
EOF
then
  pass "--gpu rtx3090: gpt2-xl 1 x 512 needs a memory-saving mode and fits with one"
else
  fail "--gpu rtx3090: gpt2-xl 1 x 512 needs a memory-saving mode and fits with one" "exit $rc" \
    "stderr: $(head -c 300 "$work/err")" "python: $(tail -n 1 "$work/py")"
fi

run --model gpt2-xl --batch 1 --seq 512 --gpu rtx3090 --headroom 0.10
if [[ $rc -eq 0 ]] && grep -q "^Plan on " "$work/out" && grep -q "^Chosen: " "$work/out"; then
  pass "--gpu text: Plan and Chosen lines"
else
  fail "--gpu text: Plan and Chosen lines" "exit $rc" "stderr: $(head -c 300 "$work/err")"
fi

run --list-gpus
lines=$(wc -l <"$work/out" | tr -d ' ')
if [[ $rc -eq 0 && $lines -ge 37 ]] && grep -q "^rtx3090 " "$work/out"; then
  pass "--list-gpus: at least 37 lines, rtx3090 among them"
else
  fail "--list-gpus: at least 37 lines, rtx3090 among them" "exit $rc, $lines lines"
fi

# --- bad input: exit 2, exactly one stderr line starting "memscale-plan: " -------
bad_input() {
  local label="$*"
  run "$@"
  local n
  n=$(stderr_lines)
  if [[ $rc -eq 2 && $n -eq 1 ]] && grep -q '^memscale-plan: ' "$work/err"; then
    pass "bad input '$label': exit 2, one stderr line"
  else
    fail "bad input '$label': exit 2, one stderr line" "exit $rc, $n stderr lines" \
      "stderr: $(head -c 300 "$work/err")"
  fi
}

# bad_input_says TEXT ARGS...: bad input whose one stderr line contains TEXT.
bad_input_says() {
  local text=$1
  shift
  local label="$*"
  run "$@"
  if [[ $rc -eq 2 && $(stderr_lines) -eq 1 ]] && grep -qF -- "$text" "$work/err"; then
    pass "bad input '$label': says '$text'"
  else
    fail "bad input '$label': says '$text'" "exit $rc" "stderr: $(head -c 300 "$work/err")"
  fi
}

bad_input --batch 0
bad_input --batch abc
bad_input --batch -3
bad_input --batch 4x
bad_input --batch 99999999999999999999
bad_input --batch
bad_input --model nope
bad_input_says 'did you mean gpt2-xl?' --model gpt2-xxl
bad_input_says 'did you mean rtx3090?' --gpu rtx309
bad_input --precision fp9
bad_input --optimizer adamx
bad_input --checkpointing sometimes
bad_input --attention quantum
bad_input --cases /nonexistent
bad_input_says '--cases-stack needs --cases' --cases-stack "$stacks"
bad_input --gpu nope
bad_input --gpu rtx3090 --headroom 0.5
bad_input --gpu rtx3090 --headroom abc
for h in nan inf -1 0 0.150001 0.09; do bad_input_says "--headroom must be within 0.10-0.15 (got \"$h\")" --gpu rtx3090 --headroom "$h"; done
bad_input_says 'tokens (micro_batch x seq_len) overflows' --model llama-2-7b --batch 9999999999999999 --seq 4096
# --- the allocator replay, the context and the software stack ---------------------
bad_input_says '--alloc-conf "expandable_segment:True"' --gpu rtx4090 --alloc-conf expandable_segment:True
bad_input_says 'max_split_size_mb' --gpu rtx4090 --alloc-conf max_split_size_mb:abc
bad_input_says '--context-memory' --gpu rtx4090 --context-memory 0
bad_input_says '--context-memory' --gpu rtx4090 --context-memory lots
bad_input_says '--stack torch' --stack torch=two
bad_input_says 'expected torch, transformers, bitsandbytes or cuda' --stack jax=0.4
bad_input_says 'must be package=version' --stack torch
bad_input_says '--stack torch must be 2.0 or later for a CUDA vision run' --model resnet50 --stack torch=1.13
bad_input_says '--stack transformers does not apply to a vision model' --model resnet50 --stack transformers=4.46
# --- the framework ---------------------------------------------------------------
bad_input_says '--framework must be one of hf, litgpt, torchtune, torchtitan; did you mean torchtune?' --framework torchtun
bad_input_says 'torchtitan is modelled with FSDP2' --framework torchtitan
bad_input_says 'torchtitan is read at 0.1.0' --framework torchtitan@0.2.0
bad_input_says 'torchtitan is modelled with FSDP2' --gpus 1 --framework torchtitan
bad_input_says '--pp does not apply to --framework torchtitan' --gpus 8 --pp 2 --framework torchtitan
bad_input_says '--tp 8 with --framework torchtitan needs --gpus a multiple of it with at least two FSDP2 ranks' --gpus 8 --tp 8 --framework torchtitan
bad_input_says '--strategy zero3 does not apply to --framework torchtitan' --gpus 8 --strategy zero3 --framework torchtitan
bad_input_says "--svg-batch draws a single-GPU plan's modes; torchtitan's run has no plan" --gpus 8 --framework torchtitan --gpu h100-80gb --svg-batch "$work/titan.svg"
bad_input_says '--sac-policy needs --framework torchtitan' --checkpointing selective --sac-policy op
bad_input_says '--checkpointing must be selective with sac_policy op' --gpus 8 --framework torchtitan --sac-policy op
bad_input_says '--sac-policy must be one of none, full, op, layer:K' --gpus 8 --framework torchtitan --sac-policy some
bad_input_says 'torch.compile is not modelled' --gpus 8 --framework torchtitan --compile
echo '{"model": "llama-3-8b", "framework": "torchtitan", "run": {"precision": "pure_bf16", "data_parallel": 8, "float8": true}}' \
  >"$work/float8.json"
bad_input_says 'run.float8 float8 training is not modelled' --run "$work/float8.json"
run --model llama-3-8b --batch 1 --seq 8192 --framework torchtitan --gpus 8 --checkpointing selective --sac-policy op --json
if [[ $rc -eq 0 ]] && python3 - "$work/out" 2>"$work/py" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["framework"] == {"name": "torchtitan"}, r["framework"]
run = r["run"]
assert run["data_parallel"] == 8 and run["precision"] == "pure_bf16", run
assert run["checkpointing"] == "selective" and run["sac_policy"] == "op", run
EOF2
then
  pass "--framework torchtitan --gpus 8 --sac-policy op --json: one GPU's step of FSDP2 over 8, bf16, the policy written"
else
  fail "--framework torchtitan --gpus 8 --sac-policy op --json: one GPU's step, the policy written" "exit $rc" \
    "stderr: $(head -c 300 "$work/err")" "python: $(tail -n 1 "$work/py")"
fi
bad_input_says '--emit torchtitan needs --framework torchtitan' --gpus 8 --emit torchtitan
run --model llama-3-8b --batch 2 --seq 8192 --framework torchtitan --gpus 8 --checkpointing selective --sac-policy op --emit torchtitan
if [[ $rc -eq 0 ]] && grep -q '^flavor = "8B"$' "$work/out" && grep -q '^data_parallel_shard_degree = 8$' "$work/out" &&
  grep -q '^global_batch_size = 16$' "$work/out" && grep -q '^selective_ac_option = "op"$' "$work/out"; then
  pass "--emit torchtitan: the job TOML with the flavor, FSDP2 degree, batches and the policy"
else
  fail "--emit torchtitan: the job TOML" "exit $rc" "stdout: $(head -c 600 "$work/out")" "stderr: $(head -c 300 "$work/err")"
fi
run --model llama-3-8b --batch 1 --seq 8192 --framework torchtitan --gpus 8 --checkpointing full --gpu h100-80gb
if [[ $rc -eq 0 ]] && grep -q "^Verdict on .*per GPU, device 31.34 GiB, band unmeasured): fits" "$work/out" &&
  grep -q "^  verdict with the band -35.0% .. +35.0% (unmeasured" "$work/out"; then
  pass "--framework torchtitan --gpus 8 --gpu: the verdict of one GPU against its budget, from the device figure with NCCL"
else
  fail "--framework torchtitan --gpus 8 --gpu: the verdict" "exit $rc" "stdout: $(tail -c 600 "$work/out")" \
    "stderr: $(head -c 300 "$work/err")"
fi
run --model llama-3-8b --batch 1 --seq 8192 --framework torchtitan --gpus 8 --checkpointing full --gpu h100-80gb --json
if [[ $rc -eq 0 ]] && python3 - "$work/out" 2>"$work/py" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
a = r["allocator"]
assert "plan" not in r, r.keys()
assert a["verdict"] == "fits" and a["band"]["class"] == "unmeasured", a
assert a["fit"]["budget"] == 72267543347 and a["device"] == 33647755264, a
EOF2
then
  pass "--framework torchtitan --gpus 8 --gpu --json: the allocator's verdict at the GPU's budget, as the text says"
else
  fail "--framework torchtitan --gpus 8 --gpu --json: the verdict" "exit $rc" \
    "stderr: $(head -c 300 "$work/err")" "python: $(tail -n 1 "$work/py")"
fi
run --model llama-3-8b --batch 1 --seq 8192 --framework torchtitan --gpus 8 --tp 2 --emit torchtitan
if [[ $rc -eq 0 ]] && grep -q '^tensor_parallel_degree = 2$' "$work/out" && grep -q '^data_parallel_shard_degree = 4$' "$work/out" &&
  grep -q '^global_batch_size = 4$' "$work/out"; then
  pass "--framework torchtitan --gpus 8 --tp 2 --emit torchtitan: TP 2 over 4 FSDP2 ranks in the job TOML"
else
  fail "--framework torchtitan --gpus 8 --tp 2 --emit torchtitan" "exit $rc" "stdout: $(head -c 600 "$work/out")" \
    "stderr: $(head -c 300 "$work/err")"
fi
run --model llama-3-8b --batch 1 --seq 8192 --framework torchtitan --gpus 8
first=$(grep '^peak ' "$work/out")
run --model llama-3-8b --batch 1 --seq 8192 --framework torchtitan --gpus 8 --tp 2
if [[ $rc -eq 0 ]] && grep -q "framework torchtitan 0.1.0 (FSDP2 over 4 ranks x TP 2" "$work/out" &&
  [[ -n "$first" && "$first" != "$(grep '^peak ' "$work/out")" ]]; then
  pass "--framework torchtitan --gpus 8 --tp 2: FSDP2 over 4 ranks x TP 2, a different per-GPU peak"
else
  fail "--framework torchtitan --gpus 8 --tp 2" "exit $rc" "stdout: $(grep -A2 framework "$work/out" | head -c 600)" \
    "stderr: $(head -c 300 "$work/err")"
fi
run --model llama-3-8b --batch 1 --seq 8192 --framework torchtitan --gpus 8 --cp 2
cp_peak=$(grep '^peak ' "$work/out")
if [[ $rc -eq 0 ]] && grep -q "framework torchtitan 0.1.0 (FSDP2 over 4 x CP 2 ranks" "$work/out" &&
  [[ -n "$first" && "$first" != "$(grep '^peak ' "$work/out")" ]]; then
  pass "--framework torchtitan --gpus 8 --cp 2: FSDP2 over 4 x CP 2 ranks, a different per-GPU peak"
else
  fail "--framework torchtitan --gpus 8 --cp 2" "exit $rc" "stdout: $(grep -A2 framework "$work/out" | head -c 600)" \
    "stderr: $(head -c 300 "$work/err")"
fi
run --model llama-3-8b --batch 1 --seq 8192 --framework torchtitan --gpus 8 --cp 2 --emit torchtitan
if [[ $rc -eq 0 ]] && grep -q '^context_parallel_degree = 2$' "$work/out" && grep -q '^data_parallel_shard_degree = 4$' "$work/out"; then
  pass "--framework torchtitan --gpus 8 --cp 2 --emit torchtitan: CP 2 over 4 FSDP2 ranks in the job TOML"
else
  fail "--framework torchtitan --gpus 8 --cp 2 --emit torchtitan" "exit $rc" "stdout: $(head -c 600 "$work/out")" \
    "stderr: $(head -c 300 "$work/err")"
fi
run --model llama-3-8b --batch 1 --seq 8192 --framework torchtitan --gpus 8 --cp 2 --tp 2
if [[ $rc -eq 0 ]] && grep -q "framework torchtitan 0.1.0 (FSDP2 over 2 x CP 2 ranks x TP 2" "$work/out" &&
  [[ -n "$cp_peak" && "$cp_peak" != "$(grep '^peak ' "$work/out")" ]]; then
  pass "--framework torchtitan --gpus 8 --cp 2 --tp 2: FSDP2 over 2 x CP 2 ranks x TP 2, a different per-GPU peak"
else
  fail "--framework torchtitan --gpus 8 --cp 2 --tp 2" "exit $rc" "stdout: $(grep -A2 framework "$work/out" | head -c 600)" \
    "stderr: $(head -c 300 "$work/err")"
fi
run --model llama-3-8b --batch 1 --seq 8192 --framework torchtitan --gpus 8 --cp 2 --tp 2 --emit torchtitan
if [[ $rc -eq 0 ]] && grep -q '^context_parallel_degree = 2$' "$work/out" && grep -q '^tensor_parallel_degree = 2$' "$work/out" &&
  grep -q '^data_parallel_shard_degree = 2$' "$work/out"; then
  pass "--framework torchtitan --gpus 8 --cp 2 --tp 2 --emit torchtitan: both degrees over 2 FSDP2 ranks in the job TOML"
else
  fail "--framework torchtitan --gpus 8 --cp 2 --tp 2 --emit torchtitan" "exit $rc" "stdout: $(head -c 600 "$work/out")" \
    "stderr: $(head -c 300 "$work/err")"
fi
bad_input_says 'needs --gpus a multiple of 4' --model llama-3-8b --framework torchtitan --gpus 6 --cp 2 --tp 2
bad_input_says "--cp is torchtitan's context_parallel_degree" --gpus 4 --cp 2 --framework torchtune
run --model llama-3-8b --batch 1 --seq 8192 --framework torchtitan --gpus 16
if [[ $rc -eq 0 ]] && grep -q "framework torchtitan 0.1.0 (FSDP2 over 16 GPUs" "$work/out" &&
  [[ -n "$first" && "$first" != "$(grep '^peak ' "$work/out")" ]]; then
  pass "--framework torchtitan --gpus N: the report names FSDP2 over N GPUs, and N changes the per-GPU peak"
else
  fail "--framework torchtitan --gpus N: the report names FSDP2 over N GPUs" "exit $rc" \
    "stdout: $(grep -A2 framework "$work/out" | head -c 600)" "stderr: $(head -c 300 "$work/err")"
fi
bad_input_says "torchtune's rules are read at 0.6.1" --framework torchtune@0.5.0
bad_input_says 'releases 0.5.5 to 0.5.13' --framework litgpt@0.5.2
bad_input_says 'does not apply to --framework litgpt@main without --lora' --model llama-2-7b --framework litgpt@main --gpus 4 --strategy zero3
run --model llama-2-7b --framework litgpt@main --gpus 4
if [[ $rc -eq 0 ]] && grep -q "fsdp-full" "$work/out" && grep -q "checkpointing full" "$work/out"; then
  pass "--framework litgpt@main --gpus 4 without --lora: full.py's FSDPStrategy, FSDP1 full shard, Blocks checkpointed"
else
  fail "--framework litgpt@main --gpus 4 without --lora: full.py's FSDPStrategy" "exit $rc" \
    "stdout: $(head -c 600 "$work/out")" "stderr: $(head -c 300 "$work/err")"
fi
bad_input_says '--strategy does not apply to --framework litgpt@main' --model llama-2-7b --lora 8 --framework litgpt@main --gpus 4 --strategy zero3
run --model llama-2-7b --lora 8 --framework litgpt@main --gpus 4
if [[ $rc -eq 0 ]] && grep -q "under ModelParallelStrategy: FSDP2 over 4 GPUs" "$work/out"; then
  pass "--framework litgpt@main --lora --gpus 4: one rank of finetune/lora.py's FSDP2 layout, named"
else
  fail "--framework litgpt@main --lora --gpus 4: one rank of finetune/lora.py's FSDP2 layout" "exit $rc" \
    "stdout: $(grep -A2 framework "$work/out" | head -c 600)" "stderr: $(head -c 300 "$work/err")"
fi
run --model llama-3-8b --lora 8 --precision pure_bf16 --framework litgpt@main
if [[ $rc -eq 0 ]] && grep -q "framework litgpt 0.5.13 (main, read at v0.5.13, Lightning-AI/litgpt @ 26857050" "$work/out"; then
  pass "--framework litgpt@main: today's litgpt on one GPU, the commit read named"
else
  fail "--framework litgpt@main: today's litgpt on one GPU, the commit read named" "exit $rc" \
    "stdout: $(grep -A2 framework "$work/out" | head -c 600)" "stderr: $(head -c 300 "$work/err")"
fi
run --model llama-2-7b --precision pure_bf16 --framework litgpt@0.4.9
if [[ $rc -eq 0 ]] && grep -q "loss over the whole logits" "$work/out"; then
  pass "--framework litgpt@0.4.9 without --lora: full.py's loss is the default"
else
  fail "--framework litgpt@0.4.9 without --lora: full.py's loss is the default" "exit $rc" \
    "stdout: $(grep -A2 framework "$work/out" | head -c 600)" "stderr: $(head -c 300 "$work/err")"
fi
bad_input_says "must be standard (its default)" --model llama-2-7b --framework litgpt@0.4.9 --loss chunked
bad_input_says '--framework does not apply to the vision model resnet50' --model resnet50 --framework torchtune
bad_input_says 'framework "torchtune" does not apply to --inference' --inference --framework torchtune
bad_input_says '--tp does not apply to --framework torchtune' --gpus 4 --tp 2 --framework torchtune
bad_input_says '--framework torchtune with --gpus needs N > 1' --gpus 1 --framework torchtune
run --model llama-3-8b --batch 2 --seq 4096 --framework torchtune --gpus 8 --checkpointing full --gpu h100-80gb --json
if [[ $rc -eq 0 ]] && python3 - "$work/out" 2>"$work/py" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["framework"]["name"] == "torchtune", r["framework"]
assert r["run"]["data_parallel"] == 8 and r["run"]["precision"] == "pure_bf16", r["run"]
assert "plan" not in r and r["allocator"]["verdict"] == "fits", r["allocator"]
# bf16 AdamW moments of a 1/8 shard: 4 bytes a parameter over 8 ranks
assert r["breakdown"]["optimizer"] == (r["parameters"] * 4 + 7) // 8, r["breakdown"]
EOF2
then
  pass "--framework torchtune --gpus 8 --json: one rank's FSDP2 step of full_finetune_distributed, bf16 shards, a verdict"
else
  fail "--framework torchtune --gpus 8 --json: one rank's FSDP2 step" "exit $rc" \
    "stderr: $(head -c 300 "$work/err")" "python: $(tail -n 1 "$work/py")"
fi
run --model llama-3-8b --batch 2 --seq 4096 --framework torchtune --lora 8 --gpus 2 --checkpointing full --gpu h100-80gb --json
if [[ $rc -eq 0 ]] && python3 - "$work/out" 2>"$work/py" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["framework"]["name"] == "torchtune", r["framework"]
assert r["run"]["data_parallel"] == 2, r["run"]
# bf16 AdamW moments of a 1/2 share of the adapters only; the frozen base is sharded too
assert r["breakdown"]["optimizer"] == (r["trainable_parameters"] * 4 + 1) // 2, r["breakdown"]
assert r["breakdown"]["parameters"] < r["parameters"] * 2, r["breakdown"]
EOF2
then
  pass "--framework torchtune --lora 8 --gpus 2 --json: one rank's lora_finetune_distributed step, adapter-only state"
else
  fail "--framework torchtune --lora 8 --gpus 2 --json: one rank's FSDP2 LoRA step" "exit $rc" \
    "stderr: $(head -c 300 "$work/err")" "python: $(tail -n 1 "$work/py")"
fi
run --model llama-2-7b --batch 1 --seq 2048 --framework torchtune --qlora 8 --gpus 2 --checkpointing full --gpu a100-80gb --json
if [[ $rc -eq 0 ]] && python3 - "$work/out" 2>"$work/py" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["framework"]["name"] == "torchtune", r["framework"]
assert r["run"]["quant"] == "nf4_double_quant", r["run"]
# a 1/2 share of torchao's NF4 base (about 0.52 bytes a weight), with the gathered units: under
# half of what a 1/2 share of a bf16 base alone would be
assert r["breakdown"]["parameters"] < r["parameters"] * 2 / 2 / 2, r["breakdown"]
EOF2
then
  pass "--framework torchtune --qlora 8 --gpus 2 --json: one rank's lora_finetune_distributed step over NF4 shards"
else
  fail "--framework torchtune --qlora 8 --gpus 2 --json: one rank's FSDP2 QLoRA step" "exit $rc" \
    "stderr: $(head -c 300 "$work/err")" "python: $(tail -n 1 "$work/py")"
fi
# full_finetune_distributed's optimizer_in_bwd: each shard steps in its unit's reduce-scatter, so short
# rows on 2 ranks no longer peak in a step beside every gradient shard.
run --model llama-3-8b --batch 1 --seq 256 --framework torchtune --gpus 2 --checkpointing full --gpu h200 --json
cp "$work/out" "$work/plain.json"
run --model llama-3-8b --batch 1 --seq 256 --framework torchtune --gpus 2 --checkpointing full --gpu h200 --json \
  --optimizer-in-backward
if [[ $rc -eq 0 ]] && python3 - "$work/plain.json" "$work/out" 2>"$work/py" <<'EOF2'
import json, sys
plain, in_bwd = (json.load(open(p)) for p in sys.argv[1:])
assert in_bwd["run"]["optimizer_in_backward"] is True, in_bwd["run"]
assert plain["peak"]["phase"] == "optimizer_step", plain["peak"]
assert in_bwd["peak"]["phase"] == "backward", in_bwd["peak"]
assert in_bwd["breakdown"]["optimizer"] == plain["breakdown"]["optimizer"], in_bwd["breakdown"]
assert in_bwd["peak"]["tensor"] < plain["peak"]["tensor"] - plain["breakdown"]["gradients"], in_bwd["peak"]
EOF2
then
  pass "--framework torchtune --gpus 2 --optimizer-in-backward --json: the shards step in backward, no step peak"
else
  fail "--framework torchtune --gpus 2 --optimizer-in-backward --json" "exit $rc" \
    "stderr: $(head -c 300 "$work/err")" "python: $(tail -n 1 "$work/py")"
fi
run --model llama-3-8b --batch 2 --seq 4096 --framework torchtune --gpus 8 --checkpointing full \
  --custom-sharded-layers tok_embeddings,output --emit torchtune
if [[ $rc -eq 0 ]] && grep -q "^custom_sharded_layers: \['tok_embeddings', 'output'\]$" "$work/out"; then
  pass "--custom-sharded-layers tok_embeddings,output --emit torchtune: the planned units in the recipe config"
else
  fail "--custom-sharded-layers --emit torchtune" "exit $rc" "stdout: $(head -c 600 "$work/out")" \
    "stderr: $(head -c 300 "$work/err")"
fi
bad_input_says 'custom_sharded_layers is a key of torchtune' --framework torchtune --custom-sharded-layers output
bad_input_says 'names modules memscale models as units of their own' --gpus 8 --framework torchtune \
  --custom-sharded-layers norm
bad_input_says 'modelled for decoder-only transformers' --model t5-small --framework litgpt
bad_input_says "run.loss_chunks is torchtune's chunk count" --loss-chunks 4
bad_input_says 'run.liger' --model gpt2 --liger
bad_input_says "are modelled over Hugging Face models (run.framework hf)" \
  --model llama-2-7b --lora 8 --framework torchtune --liger
bad_input_says '--loss must be standard, chunked or fused_linear_ce' --loss fused
bad_input_says '--lora-dropout must be a probability in [0, 1) (got "1")' --lora 8 --lora-dropout 1
bad_input_says '--lora-variant needs --lora or --qlora' --lora-variant dora
bad_input_says '--adapter-dtype needs --lora or --qlora' --precision amp_bf16 --adapter-dtype autocast
bad_input_says '--adapter-dtype must be base, fp32 or autocast (got "bf16")' --lora 8 --adapter-dtype bf16
bad_input_says 'run.loss_chunks needs run.loss chunked' --framework torchtune --loss standard --loss-chunks 4
run --model llama-2-7b --lora 8 --precision pure_bf16 --framework torchtune@0.6.1 --optimizer-in-backward --gpu rtx4090
if [[ $rc -eq 0 ]] && grep -q "framework torchtune 0.6.1: loss chunked over 8 chunks, optimizer in backward" "$work/out" &&
  grep -qE "^  balanced +checkpointing, offload_activations;" "$work/out"; then
  pass "--framework torchtune: printed with its loss; BALANCED keeps the in-backward optimizer on the GPU"
else
  fail "--framework torchtune: printed with its loss; BALANCED keeps the in-backward optimizer on the GPU" "exit $rc" \
    "stdout: $(grep -A2 framework "$work/out" | head -c 600)" "stderr: $(head -c 300 "$work/err")"
fi
run --model gpt2 --batch 1 --seq 128 --offload optimizer
if [[ $rc -eq 0 ]] && grep -qE "^host memory +[0-9.]+ [KMG]iB .*held by the offloads" "$work/out"; then
  pass "--offload optimizer: the text report has its host memory line"
else
  fail "--offload optimizer: the text report has its host memory line" "exit $rc" "stdout: $(tail -c 600 "$work/out")"
fi
run --model gpt2 --batch 1 --seq 128 --offload optimizer --json
if [[ $rc -eq 0 ]] && python3 - "$work/out" 2>"$work/py" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["static"]["host_memory"] > r["static"]["optimizer"], r["static"]
EOF2
then
  pass "--offload optimizer --json: static.host_memory beyond the optimizer state"
else
  fail "--offload optimizer --json: static.host_memory beyond the optimizer state" "exit $rc" "python: $(tail -n 1 "$work/py")"
fi
run --model llama-2-7b --lora 8 --precision pure_bf16 --framework litgpt --json
if [[ $rc -eq 0 ]] && python3 - "$work/out" 2>"$work/py" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["framework"] == {"name": "litgpt"}, r["framework"]
assert r["run"]["loss"] == "chunked" and r["run"]["loss_chunk"] == 128 and r["run"]["no_sync"], r["run"]
EOF2
then
  pass "--framework litgpt --json: the framework and its chunked loss are written"
else
  fail "--framework litgpt --json: the framework and its chunked loss are written" "exit $rc" "python: $(tail -n 1 "$work/py")"
fi
run --model llama-2-7b --precision pure_bf16 --framework litgpt --loss standard
if [[ $rc -eq 0 ]] && grep -q "framework litgpt (scripts @ b96a5708): loss over the whole logits" "$work/out"; then
  pass "--framework litgpt --loss standard: lit-gpt's full fine-tuning loop (finetune/full.py) is estimated"
else
  fail "--framework litgpt --loss standard: lit-gpt's full fine-tuning loop (finetune/full.py) is estimated" "exit $rc" \
    "stdout: $(grep -A2 framework "$work/out" | head -c 600)" "stderr: $(head -c 300 "$work/err")"
fi
run --model gpt2 --batch 2 --seq 512 --gpu h100-80gb --stack torch=2.4,transformers=4.46 --alloc-conf expandable_segments:True
if [[ $rc -eq 0 ]] && grep -q "software       torch 2.4, transformers 4.46" "$work/out" &&
  grep -q "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" "$work/out" &&
  grep -q "reserved .*replayed through the allocator" "$work/out" && grep -q "at the budget" "$work/out"; then
  pass "--stack and --alloc-conf: the stack, the replayed reserved peak and the verdict at the budget are printed"
else
  fail "--stack and --alloc-conf: the stack, the replayed reserved peak and the verdict are printed" "exit $rc" \
    "stdout: $(grep -A8 software "$work/out" | head -c 600)"
fi
# generate() on a GPU: the allocator replay of the whole call, the inference context, the verdict with its band;
# --alloc-conf and --context-memory reach it.
run --model llama-2-7b --inference --batch 8 --context 2048 --new-tokens 128 --gpu h100-80gb --json \
  --alloc-conf expandable_segments:True --context-memory 760MiB
if [[ $rc -eq 0 ]] && python3 - "$work/out" 2>"$work/py" <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1]))
a = j["allocator"]
assert a["replayed"] and a["alloc_conf"] == "expandable_segments:True", a
assert a["context"]["source"] == "measured" and a["context"]["total"] == 760 << 20, a["context"]
assert a["device"] == a["reserved"] + (760 << 20), a
assert a["reserved"] > j["peak"]["tensor"], (a, j["peak"])
assert j["plan"]["verdict"] in ("fits", "borderline", "does_not_fit") and a["verdict"] == j["plan"]["verdict"], j["plan"]
assert a["band"]["measured"] and a["range"]["high"] >= a["device"], a
EOF2
then
  pass "--inference --gpu: the replayed reserved peak, the given context and the verdict with the band"
else
  fail "--inference --gpu: the replayed reserved peak, the given context and the verdict" "exit $rc" "$(head -c 400 "$work/py")" "stderr: $(head -c 300 "$work/err")"
fi
run --model llama-2-7b --inference --batch 8 --context 2048 --new-tokens 128 --gpu a100-40gb
if [[ $rc -eq 0 ]] && grep -q "max_memory_reserved: setup, the prefill and every decoding step replayed" "$work/out" &&
  grep -q "verdict with the band" "$work/out"; then
  pass "--inference --gpu (text): the caching allocator section and the verdict with the band"
else
  fail "--inference --gpu (text): the caching allocator section" "exit $rc" "stdout: $(tail -c 900 "$work/out")"
fi
# generate() as a run document ({"model", "infer"}, docs/run-json.md): --run prints what the flags print,
# as JSON and as text; "run" beside "infer" and an unknown key inside "infer" are refused by name.
cat >"$work/infer.json" <<'EOF2'
{"model": "mistral-7b", "gpu": "a100-40gb", "alloc_conf": "expandable_segments:True",
 "infer": {"batch": 2, "context": 4096, "new_tokens": 256, "weights": "bnb-nf4", "kv_cache": "quantized", "kv_dtype": "int2"}}
EOF2
infer_flags=(--model mistral-7b --inference --batch 2 --context 4096 --new-tokens 256 --weights bnb-nf4 --kv-cache quantized
  --kv-dtype int2 --gpu a100-40gb --alloc-conf expandable_segments:True)
infer_same=1
for format in --json ""; do
  run "${infer_flags[@]}" $format
  cp "$work/out" "$work/infer_flags.out"
  run --run "$work/infer.json" $format
  [[ $rc -eq 0 && -s "$work/out" ]] && cmp -s "$work/out" "$work/infer_flags.out" || infer_same=0
done
if [[ $infer_same -eq 1 ]]; then
  pass "--run with \"infer\": the inference report of the equivalent --inference flags, JSON and text, byte for byte"
else
  fail "--run with \"infer\": the inference report of the equivalent flags" "exit $rc" "$(diff "$work/out" "$work/infer_flags.out" | head -c 600)"
fi
echo '{"model": "gpt2", "run": {"seq_len": 128}, "infer": {"context": 128}}' >"$work/both.json"
bad_input_says '"run" and "infer" in one document' --run "$work/both.json"
echo '{"model": "gpt2", "infer": {"context": 128, "temperature": 0.7}}' >"$work/infer_unknown.json"
bad_input_says 'infer.temperature is not a field of a run document' --run "$work/infer_unknown.json"
# Padded prompts: the text says so, the JSON echoes it, the peak grows by at least the bool mask, and
# flash_attention_2 with padding is refused by name.
run --model llama-2-7b --inference --batch 8 --context 2048 --new-tokens 128 --attention sdpa --stack transformers=5.17 --json
cp "$work/out" "$work/unpadded.json"
run --model llama-2-7b --inference --batch 8 --context 2048 --new-tokens 128 --attention sdpa --stack transformers=5.17 --padded --json
if [[ $rc -eq 0 ]] && python3 - "$work/unpadded.json" "$work/out" 2>"$work/py" <<'EOF2'
import json, sys
plain, padded = (json.load(open(p)) for p in sys.argv[1:3])
assert padded["inference"]["padded"] is True and "padded" not in plain["inference"], (plain["inference"], padded["inference"])
assert padded["peak"]["tensor"] - plain["peak"]["tensor"] >= 8 * 2048 * 2048, (plain["peak"], padded["peak"])
EOF2
then
  pass "--inference --padded: echoed in the JSON, the (batch, 1, rows, keys) mask in the peak"
else
  fail "--inference --padded" "exit $rc" "$(tail -c 600 "$work/py")"
fi
run --model llama-2-7b --inference --batch 8 --context 2048 --padded --attention sdpa --stack transformers=5.17
if [[ $rc -eq 0 ]] && grep -q "^prompts        left-padded" "$work/out"; then
  pass "--inference --padded (text): the prompts line"
else
  fail "--inference --padded (text): the prompts line" "exit $rc" "$(head -c 600 "$work/out")"
fi
bad_input_says 'infer.padded' --model llama-2-7b --inference --padded --attention flash
run --model llama-2-7b --batch 2 --seq 1024 --precision pure_bf16 --attention sdpa --padded --stack transformers=5.17
if [[ $rc -eq 0 ]] && grep -q "padded rows" "$work/out"; then
  pass "--padded (training): the padded rows line"
else
  fail "--padded (training): the padded rows line" "exit $rc" "$(head -c 600 "$work/err")"
fi
bad_input_says 'run.padded' --model llama-2-7b --batch 2 --seq 1024 --packing packed --padded
# On a GPU every mode plans the padded run: AGGRESSIVE keeps SDPA (flash is refused with padding).
run --model llama-2-7b --batch 2 --seq 1024 --precision pure_bf16 --attention sdpa --padded --gpu rtx4090
if [[ $rc -eq 0 ]] && grep -q "^  aggressive  " "$work/out"; then
  pass "--padded --gpu: planned in every mode"
else
  fail "--padded --gpu: planned in every mode" "exit $rc" "$(head -c 600 "$work/err")"
fi
# generate() before transformers 4.42: the tuple caches of the previous step live beside the new ones.
run --model llama-2-7b --inference --batch 8 --context 1024 --new-tokens 256 --stack transformers=4.32 --json
cp "$work/out" "$work/tuple.json"
run --model llama-2-7b --inference --batch 8 --context 1024 --new-tokens 256 --stack transformers=4.46 --json
if [[ $rc -eq 0 ]] && python3 - "$work/tuple.json" "$work/out" 2>"$work/py" <<'EOF2'
import json, sys
old, new = (json.load(open(p)) for p in sys.argv[1:3])
assert old["inference"]["software"]["tuple_cache"] and not new["inference"]["software"]["tuple_cache"], (old["inference"], new["inference"])
assert old["inference"]["software"]["transformers"] == "4.32", old["inference"]
# At the last decoding step the whole previous cache (batch x 1279 positions x 512 KiB) is still held.
assert old["peak"]["tensor"] - new["peak"]["tensor"] > 8 * 1279 * 524288 * 0.9, (old["peak"], new["peak"])
EOF2
then
  pass "--inference --stack transformers=4.32: tuple caches, the previous step's cache held beside the new one"
else
  fail "--inference --stack transformers=4.32: tuple caches" "exit $rc" "$(head -c 400 "$work/py")" "stderr: $(head -c 300 "$work/err")"
fi
bad_input_says 'does not change generate()' --model llama-2-7b --inference --stack bitsandbytes=0.43.2
run --model gpt2 --batch 2 --seq 512
if [[ $rc -eq 0 ]] && grep -q "^software       torch 2.11, transformers 5.17, .*(assumed: the current releases, unless stated)$" "$work/out"; then
  pass "no --stack: the current releases, said to be assumed"
else
  fail "no --stack: the current releases, said to be assumed" "exit $rc" "stdout: $(grep software "$work/out" | head -c 300)"
fi
run --model llama-2-7b --inference --context 256 --new-tokens 16
if [[ $rc -eq 0 ]] && grep -q "^software       torch 2.11, transformers 5.17, CUDA modules loaded lazily (assumed: the current releases" "$work/out"; then
  pass "--inference without --stack: the current releases, said to be assumed"
else
  fail "--inference without --stack: the current releases, said to be assumed" "exit $rc" "stdout: $(grep software "$work/out" | head -c 300)"
fi
run --model gpt2 --batch 2 --seq 512 --gpu h100-80gb --context-memory 1GiB --alloc-conf expandable_segments:True --json
if [[ $rc -eq 0 ]] && python3 - "$work/out" 2>"$work/py" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
a = r["allocator"]
assert a["replayed"] and a["context"]["source"] == "measured", a
assert a["device"] == a["reserved"] + 2**30, a
assert a["fit"]["budget"] == r["plan"]["budget"], a
assert r["alloc_conf"] == "expandable_segments:True" and r["context_memory"] == 2**30, r
# No --stack: the current releases, and the report says they were assumed.
assert r["software"]["torch"] == "2.11" and r["software"]["transformers"] == "5.17", r["software"]
assert r["software_assumed"] == "the current releases", r
EOF2
then
  pass "--json: the allocator object, alloc_conf, context_memory and software"
else
  fail "--json: the allocator object, alloc_conf, context_memory and software" "exit $rc" "python: $(tail -n 1 "$work/py")"
fi
bad_input --frobnicate
bad_input stray
printf '[{"id": "a",' >"$work/malformed.json"
bad_input --cases "$work/malformed.json"

bad_input_says '--batch needs a value (N)' --batch --seq 4
bad_input_says '--batch needs a value (N)' --seq 4 --batch
bad_input_says '--batch must be a positive integer (got "0")' --batch=0
bad_input_says 'did you mean --batch?' --batc 4
bad_input_says 'did you mean --checkpointing?' --checkpoint full
bad_input_says '--json takes no value (got "yes")' --json=yes
bad_input_says '--qlora cannot be combined with --lora' --lora 8 --qlora 8
bad_input_says '--batch cannot be combined with --list-models' --batch 2 --list-models
bad_input_says '--list-gpus cannot be combined with --list-models' --list-models --list-gpus
bad_input_says '--headroom needs --gpu' --headroom 0.12
bad_input_says '--image needs a vision --model' --image 224
bad_input_says 'multiple of the ViT patch size' --model vit_b_16 --image 100
bad_input_says '--image must be' --model resnet18 --image 224x224x3
# --images feed a multimodal language model's vision tower (Qwen2.5-VL), not a vision --model.
bad_input_says '--images, --image-size and --frozen-tower describe' --model resnet50 --images 1 --image-size 224
qwen_vl="$(dirname "$0")/../data/hf_configs/ssm-multimodal/Qwen--Qwen2.5-VL-7B-Instruct.json"
run --config "$qwen_vl" --batch 1 --seq 1024 --precision bf16 --images 2 --image-size 448x448 --frozen-tower
if [[ $rc -eq 0 ]] && grep -qF "run on 2 image(s) of 448x448 per sample: 256 tokens each" "$work/out"; then
  pass "--images 2 --image-size 448x448 --frozen-tower: the tower runs, 256 tokens per image"
else
  fail "--images 2 --image-size 448x448 --frozen-tower: the tower runs, 256 tokens per image" "exit $rc" \
    "$(head -c 300 "$work/err")"
fi
# Gemma 3 resizes every image to vision_config.image_size: the count is mm_tokens_per_image.
gemma3_vl="$(dirname "$0")/../data/hf_configs/ssm-multimodal/google--gemma-3-4b-it.json"
run --config "$gemma3_vl" --batch 1 --seq 1024 --precision bf16 --images 2 --image-size 640x480 --frozen-tower
if [[ $rc -eq 0 ]] && grep -qF "run on 2 image(s) of 640x480 per sample (resized to 896x896): 256 tokens each" "$work/out"; then
  pass "gemma3 --images 2 --image-size 640x480 --frozen-tower: resized to 896x896, 256 tokens per image"
else
  fail "gemma3 --images 2 --image-size 640x480 --frozen-tower: resized to 896x896, 256 tokens per image" "exit $rc" \
    "$(head -c 300 "$work/err")"
fi

# --- vision models -----------------------------------------------------------------
run --model resnet50 --image 384x384 --batch 64 --gpu rtx3060-12gb
if [[ $rc -eq 0 ]] && grep -q "image 384x384" "$work/out" && grep -q "largest micro-batch in any mode: [1-9]" "$work/out" && grep -q "^Chosen: balanced .*\[mode_needed\]" "$work/out"; then
  pass "--model resnet50 --image 384x384 --gpu: a plan with the largest batch"
else
  fail "--model resnet50 --image 384x384 --gpu: a plan with the largest batch" "exit $rc" "$(head -c 300 "$work/err")"
fi
# A vision step on a GPU is replayed through the caching allocator, with the run's allocator options.
run --model resnet50 --batch 64 --gpu h100-80gb --alloc-conf expandable_segments:True
if [[ $rc -eq 0 ]] && grep -qF "caching allocator (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)" "$work/out" &&
  grep -q "reserved .*setup and two steps replayed through the allocator" "$work/out" &&
  grep -q "verdict with the band -5.0% .. +4.0% (torchvision, device): fits" "$work/out"; then
  pass "--model resnet50 --gpu --alloc-conf: the allocator section, replayed with the option"
else
  fail "--model resnet50 --gpu --alloc-conf: the allocator section, replayed with the option" "exit $rc" \
    "$(head -c 300 "$work/err")"
fi
run --model resnet50 --batch 64 --gpu h100-80gb --checkpointing full --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; d=json.load(sys.stdin); a=d["allocator"]; assert a["replayed"] and a["reserved"] >= a["tensor"] and a["device"] == a["reserved"] + a["context"]["total"], a' <"$work/out" 2>"$work/py"; then
  pass "--model resnet50 --checkpointing full --json: checkpointed stages replayed, device = reserved + context"
else
  fail "--model resnet50 --checkpointing full --json: checkpointed stages replayed, device = reserved + context" "exit $rc" \
    "python: $(tail -n 1 "$work/py")"
fi
# A vision run's --stack: the report's software echoes it, and the text report's software line says it.
run --model resnet50 --batch 32 --gpu a100-40gb --stack torch=2.1,cuda=11.6 --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; d=json.load(sys.stdin); s=d["software"]; assert s["torch"] == "2.1" and s["cuda"] == "11.6" and "transformers" not in s, s' <"$work/out" 2>"$work/py"; then
  pass "--model resnet50 --stack torch=2.1,cuda=11.6 --json: the software echoes the stack"
else
  fail "--model resnet50 --stack torch=2.1,cuda=11.6 --json: the software echoes the stack" "exit $rc" "python: $(tail -n 1 "$work/py")"
fi
run --model mobilenet_v3_large --batch 8 --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["architecture"]["parameters"] == 5483032' <"$work/out"; then
  pass "--model mobilenet_v3_large --json: 5483032 parameters"
else
  fail "--model mobilenet_v3_large --json: 5483032 parameters" "exit $rc"
fi
bad_input_says '--seq must be <= 1024 (the learned position table of gpt2)' --seq 2048

# the last occurrence of an option wins; --option=value is the same as --option value
run --batch 3 --batch=1 --seq=64 --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; r=json.load(sys.stdin)["run"]; assert r["micro_batch"]==1 and r["seq_len"]==64, r' <"$work/out" 2>"$work/py"; then
  pass "--batch 3 --batch=1 --seq=64: the last value wins, = form accepted"
else
  fail "--batch 3 --batch=1 --seq=64: the last value wins, = form accepted" "exit $rc" "python: $(tail -n 1 "$work/py")"
fi

# --json output is a --run input: reading it back gives the same document
round_trip() {
  local label="$*"
  if "$plan" "$@" --json >"$work/first.json" 2>"$work/err" &&
    "$plan" --run "$work/first.json" --json >"$work/second.json" 2>>"$work/err" &&
    cmp -s "$work/first.json" "$work/second.json"; then
    pass "round trip '$label': --json | --run gives the same JSON"
  else
    fail "round trip '$label': --json | --run gives the same JSON" "stderr: $(head -c 300 "$work/err")" \
      "diff: $(diff "$work/first.json" "$work/second.json" | head -c 300)"
  fi
}
round_trip
round_trip --model llama-2-7b --qlora 16 --qlora-double-quant --lora-targets all-linear --lora-alpha 32 \
  --offload optimizer,activations --checkpointing full --gpu-memory 24GiB --headroom 0.12 --precision amp_bf16
round_trip --model bert-base-uncased --batch 16 --seq 128 --gpu rtx3090 --checkpointing full --no-dropout
round_trip --model mistral-7b --lora 8 --lora-targets q_proj,v_proj,gate_proj,up_proj,down_proj --optimizer-impl fused
round_trip --model llama-2-7b --lora 8 --precision pure_bf16 --framework torchtune@0.6.1 --optimizer-in-backward --gpu rtx4090
round_trip --model llama-3-8b --qlora 16 --precision pure_bf16 --framework litgpt --loss-chunk 256 --gpu rtx4090
round_trip --model llama-2-7b --lora 8 --framework torchtune --loss standard
round_trip --model llama-2-7b --lora 8 --lora-variant dora --lora-dropout 0 --gpu rtx4090
round_trip --model llama-2-7b --lora 8 --precision amp_bf16 --adapter-dtype autocast --gpu rtx4090
round_trip --model llama-3-8b --lora 16 --precision pure_bf16 --liger --gpu rtx4090
round_trip --model llama-3-8b --precision pure_bf16 --loss fused_linear_ce --batch 2 --seq 2048
round_trip --model llama-3-8b --batch 1 --seq 8192 --framework torchtitan --gpus 8 --checkpointing selective --sac-policy layer:2
round_trip --model llama-2-7b --framework hf@4.40 --attention eager --use-cache off --batch 1 --seq 512
round_trip --model llama-2-7b --framework hf@4.46 --checkpointing full --batch 2 --seq 1024
round_trip --model llama-2-7b --lora 8 --checkpointing full --use-reentrant true
# A vision model's report is a vision run document (docs/run-json.md): it reads back the same,
# and a document written by hand prints what the flags print, as JSON and as text.
round_trip --model resnet50 --image 384x320 --batch 64 --gpu rtx3060-12gb --alloc-conf expandable_segments:True
round_trip --model vit_large_patch16_224.augreg_in21k --channels-last --precision amp_bf16 --checkpointing full --gpu a100-40gb
round_trip --model resnet50 --batch 32 --optimizer adamw_8bit --gpu a100-40gb --stack torch=2.1,bitsandbytes=0.43.1,cuda=11.6
round_trip --model convnext_tiny --optimizer adamw_8bit --grad-accum 4
cat >"$work/vision.json" <<'EOF2'
{"model": "resnet50", "gpu": "rtx3060-12gb", "headroom": 0.12,
 "run": {"micro_batch": 64, "image": 384, "precision": "amp_fp16", "checkpointing": "full", "channels_last": true}}
EOF2
vision_flags=(--model resnet50 --batch 64 --image 384 --precision amp_fp16 --checkpointing full --channels-last
  --gpu rtx3060-12gb --headroom 0.12)
vision_same=1
for format in --json ""; do
  run "${vision_flags[@]}" $format
  cp "$work/out" "$work/vision_flags.out"
  run --run "$work/vision.json" $format
  [[ $rc -eq 0 && -s "$work/out" ]] && cmp -s "$work/out" "$work/vision_flags.out" || vision_same=0
done
if [[ $vision_same -eq 1 ]]; then
  pass "--run with a vision model: the report of the equivalent flags, JSON and text, byte for byte"
else
  fail "--run with a vision model: the report of the equivalent flags" "exit $rc" "$(diff "$work/out" "$work/vision_flags.out" | head -c 600)"
fi
run --run "$work/vision.json" --image 224 --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["run"]["image"] == "224x224" and d["run"]["channels_last"], d["run"]' <"$work/out" 2>"$work/py"; then
  pass "--run vision.json --image 224: an option after --run overrides the document's image, keeps its channels_last"
else
  fail "--run vision.json --image 224: an option after --run overrides the document's image" "exit $rc" "python: $(tail -n 1 "$work/py")"
fi
echo '{"model": "resnet50", "run": {"seq_len": 512}}' >"$work/vision_seq.json"
bad_input_says "run.seq_len is a transformer run's field: the vision model resnet50 takes micro_batch" --run "$work/vision_seq.json"
echo '{"model": "vit_b_16", "framework": "torchtune"}' >"$work/vision_framework.json"
bad_input_says 'framework does not apply to the vision model vit_b_16' --run "$work/vision_framework.json"
bad_input_says '--checkpointing selective does not apply to the vision model resnet50' --model resnet50 --checkpointing selective
echo '{"model": "resnet50", "run": {"imag": 224}}' >"$work/vision_unknown.json"
bad_input_says 'run.imag is not a field of a run document; did you mean image?' --run "$work/vision_unknown.json"
# which torch.utils.checkpoint a run assumes: transformers' default by release, or as stated
run --model llama-2-7b --framework hf@4.46 --checkpointing full
if [[ $rc -eq 0 ]] && grep -qF "checkpointing full (reentrant)" "$work/out"; then
  pass "hf@4.46 --checkpointing full: the report says reentrant (transformers' default before 5.1)"
else
  fail "hf@4.46 --checkpointing full: the report says reentrant (transformers' default before 5.1)" "exit $rc" \
    "stdout: $(grep -m1 checkpointing "$work/out")"
fi
run --model llama-2-7b --checkpointing full
if [[ $rc -eq 0 ]] && grep -qF "checkpointing full (non-reentrant)" "$work/out"; then
  pass "--checkpointing full with no release stated: the report says non-reentrant"
else
  fail "--checkpointing full with no release stated: the report says non-reentrant" "exit $rc" \
    "stdout: $(grep -m1 checkpointing "$work/out")"
fi
bad_input_says 'must be true or false' --use-reentrant yes
bad_input_says 'run.use_reentrant' --use-reentrant true
bad_input_says 'checkpoint_wrapper' --model llama-3-8b --framework torchtitan --gpus 8 --checkpointing full --use-reentrant true
bad_input_says '--use-reentrant does not apply' --model resnet50 --use-reentrant false
# a ground-truth record is a --run input too, and the output of that reads back the same
python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))[0], open(sys.argv[2], "w"))' \
  "$truth/cpu_traced_dev.json" "$work/record.json"
run --run "$work/record.json" --json
if [[ $rc -eq 0 ]] && cp "$work/out" "$work/from_record.json" && "$plan" --run "$work/from_record.json" --json 2>"$work/err" |
  cmp -s - "$work/from_record.json"; then
  pass "--run RECORD: estimates it, and its --json reads back the same"
else
  fail "--run RECORD: estimates it, and its --json reads back the same" "exit $rc" "stderr: $(head -c 300 "$work/err")"
fi
run --batch 2 --run "$work/first.json" --batch 3 --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; assert json.load(sys.stdin)["run"]["micro_batch"] == 3' <"$work/out"; then
  pass "--run FILE then --batch 3: options after --run override it"
else
  fail "--run FILE then --batch 3: options after --run override it" "exit $rc" "stderr: $(head -c 300 "$work/err")"
fi
run --gpu-memory 24GB --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; assert json.load(sys.stdin)["gpu"]["memory"] == 24000000000' <"$work/out"; then
  pass "--gpu-memory 24GB is 24e9 bytes (decimal as typed)"
else
  fail "--gpu-memory 24GB is 24e9 bytes (decimal as typed)" "exit $rc"
fi
bad_input_says 'is not modelled yet' --fp8
bad_input_says '--lora-targets needs --lora or --qlora' --lora-targets q,v
bad_input_says 'did you mean q_proj?' --lora 4 --lora-targets q_prj
bad_input_says '--qlora-double-quant needs --qlora' --lora 4 --qlora-double-quant
bad_input_says 'did you mean optimizer?' --offload optimiser
bad_input_says '--units must be gib, gb or mib (got "tb")' --units tb
# bf16 on a GPU without bf16 arithmetic: refused, naming the GPU and the fp16 precision to use
bad_input_says 'run.precision amp_bf16 needs bf16 arithmetic, which the NVIDIA T4 does not have' --precision amp_bf16 --gpu t4
bad_input_says 'use amp_fp16' --precision pure_bf16 --gpu v100-16gb
bad_input_says 'use amp_fp16' --model resnet50 --batch 8 --precision amp_bf16 --gpu t4
bad_input_says 'which the NVIDIA T4 does not have' --precision amp_bf16 --gpu t4 --gpus 2 --strategy ddp
bad_input_says 'which the NVIDIA T4 does not have' --precision amp_bf16 --gpu t4 --gpus 4
run --precision amp_fp16 --gpu t4
if [[ $rc -eq 0 ]] && grep -q "has no bf16 arithmetic: modes that switch to 16-bit precision use fp16" "$work/out" &&
   grep -q "precision pure_fp16, optimizer adamw_8bit" "$work/out"; then
  pass "--precision amp_fp16 --gpu t4: plans, AGGRESSIVE in pure fp16, and says why"
else
  fail "--precision amp_fp16 --gpu t4: plans, AGGRESSIVE in pure fp16, and says why" "exit $rc" "$(head -c 300 "$work/err")"
fi

# GPU suggestions prefer the family the name starts with, then names that contain it.
bad_input_says 'did you mean a100-40gb or a100-80gb?' --gpu a100
bad_input_says 'did you mean h100-80gb?' --gpu h100
bad_input_says 'did you mean rtx4090?' --gpu 4090
run --gpu-memory 24gb --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; assert json.load(sys.stdin)["gpu"]["memory"] == 24000000000' <"$work/out"; then
  pass "--gpu-memory 24gb (lower case) is 24e9 bytes"
else
  fail "--gpu-memory 24gb (lower case) is 24e9 bytes" "exit $rc" "stderr: $(head -c 300 "$work/err")"
fi

# --units applies to every size a text report prints: no GiB left with --units gb or mib.
units_everywhere() {
  local unit=$1 label=$2
  shift 2
  run "$@" --units "$unit"
  if [[ $rc -eq 0 ]] && ! grep -q "GiB" "$work/out" && grep -q " $label" "$work/out"; then
    pass "--units $unit: $* prints every size in $label"
  else
    fail "--units $unit: $* prints every size in $label" "exit $rc" "GiB: $(grep -m 2 "GiB" "$work/out")"
  fi
}
units_everywhere gb GB --model gpt2 --batch 2 --seq 512 --gpu rtx3090
units_everywhere mib MiB --model gpt2 --batch 2 --seq 512 --gpu rtx3090
units_everywhere gb GB --model llama-2-7b --inference --context 1024 --new-tokens 16 --gpu a100-80gb
units_everywhere gb GB --model gpt2 --batch 2 --seq 512 --gpus 2 --strategy ddp --gpu rtx3090
units_everywhere gb GB --model resnet50 --image 224 --batch 64 --gpu rtx3060-12gb
units_everywhere gb GB --list-gpus

# --help succeeds
run --help
if [[ $rc -eq 0 ]] && grep -q -- "--model" "$work/out" && grep -q -- "--qlora" "$work/out" && grep -q -- "--list-gpus" "$work/out"; then
  pass "--help: exit 0, lists the options"
else
  fail "--help: exit 0, lists the options" "exit $rc"
fi
run --batch 0 --help
if [[ $rc -eq 0 ]] && grep -q -- "--model" "$work/out"; then
  pass "--help wins over an invalid option before it"
else
  fail "--help wins over an invalid option before it" "exit $rc"
fi

finish
