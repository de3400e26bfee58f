#!/usr/bin/env bash
# End-to-end checks of memscale-plan --config (registered with ctest as cli.config).
#
#   tests/cli/config_checks.sh PATH/TO/memscale-plan tests/data/hf_configs
#
# Every config.json in the folder estimates (exit 0, valid JSON); a Hub id resolves in a
# fake Hub cache under a temporary HF_HOME; a sequence beyond max_position_embeddings is
# refused with the same message by --config with --seq and by a --cases record whose
# model is an "hf_config". Prints "N passed, M failed"; exits non-zero when anything failed.
set -u

if [[ $# -ne 2 ]]; then
  echo "usage: $0 MEMSCALE_PLAN HF_CONFIG_DIR" >&2
  exit 64
fi
plan=$1
configs=$2

source "$(dirname "${BASH_SOURCE[0]}")/check_helpers.sh"
is_json() { python3 -c 'import json,sys; json.load(sys.stdin)' <"$work/out" 2>/dev/null; }

# --- every config file -----------------------------------------------------------
count=0
for file in "$configs"/*.json; do
  count=$((count + 1))
  run --config "$file" --batch 1 --seq 128 --json
  if [[ $rc -eq 0 ]] && is_json && [[ ! -s "$work/err" ]]; then
    pass "--config $(basename "$file")"
  elif grep -q '"quant_method": "mxfp4"' "$file" && [[ $rc -eq 2 ]] && grep -q "config.quantization_config.dequantize" "$work/err"; then
    pass "--config $(basename "$file"): MXFP4 experts without dequantize, refused by name"
  elif grep -q '"quant_method": "fp8"' "$file" && [[ $rc -eq 2 ]] && grep -q "config.quantization_config" "$work/err"; then
    pass "--config $(basename "$file"): fp8 block-quantised weights, training refused by name"
  else
    fail "--config $(basename "$file")" "exit $rc" "stderr: $(head -c 300 "$work/err")"
  fi
done
if [[ $count -ge 20 ]]; then pass "$count config files found"; else fail "only $count config files in $configs"; fi

# --- a model directory -----------------------------------------------------------
mkdir -p "$work/model"
cp "$configs/Qwen--Qwen3-0.6B.json" "$work/model/config.json"
run --config "$work/model" --batch 1 --seq 128
if [[ $rc -eq 0 ]] && grep -q "peak" "$work/out"; then pass "--config DIR"; else fail "--config DIR" "exit $rc" "$(head -c 300 "$work/err")"; fi

# --- a Hub id in a fake cache ----------------------------------------------------
snap="$work/hf/hub/models--Qwen--Qwen3-0.6B/snapshots/0123456789abcdef"
mkdir -p "$snap" "$work/hf/hub/models--Qwen--Qwen3-0.6B/refs"
cp "$configs/Qwen--Qwen3-0.6B.json" "$snap/config.json"
echo 0123456789abcdef >"$work/hf/hub/models--Qwen--Qwen3-0.6B/refs/main"
HF_HOME="$work/hf" HF_HUB_CACHE="" run --config Qwen/Qwen3-0.6B --batch 1 --seq 128 --json
if [[ $rc -eq 0 ]] && is_json; then pass "--config HUB_ID in \$HF_HOME/hub"; else fail "--config HUB_ID" "exit $rc" "$(head -c 300 "$work/err")"; fi

HF_HOME="$work/hf" HF_HUB_CACHE="" run --config Qwen/Qwen3-8B
if [[ $rc -eq 2 && $(wc -l <"$work/err") -eq 1 ]] && grep -q -- "--config" "$work/err" && grep -q "Qwen/Qwen3-8B" "$work/err"; then
  pass "a Hub id not in the cache: exit 2, one line naming --config and the id"
else
  fail "a Hub id not in the cache" "exit $rc" "$(head -c 300 "$work/err")"
fi

# --- a contradiction is refused the same way by --config and --cases -------------
expected="must be <= 1024 (the max_position_embeddings of gpt2) (got 2048)"
run --config "$configs/openai-community--gpt2.json" --seq 2048
if [[ $rc -eq 2 ]] && grep -qF "$expected" "$work/err"; then pass "--config + --seq beyond max_position_embeddings"; else
  fail "--config + --seq beyond max_position_embeddings" "exit $rc" "$(head -c 300 "$work/err")"
fi
python3 - "$configs/openai-community--gpt2.json" >"$work/cases.json" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
print(json.dumps([{"id": "long", "device": "cpu", "measure": "cpu-tensor-peak",
                   "model": {"hf_config": cfg}, "train": {"batch": 1, "seq": 2048}},
                  {"id": "fits", "device": "cpu", "measure": "cpu-tensor-peak",
                   "model": {"hf_config": cfg}, "train": {"batch": 1, "seq": 1024}}]))
PY
run --cases "$work/cases.json"
if grep -F "$expected" "$work/out" "$work/err" >/dev/null; then pass "--cases hf_config record beyond max_position_embeddings: same message"; else
  fail "--cases hf_config record: same message" "exit $rc" "out: $(head -c 300 "$work/out")" "err: $(head -c 300 "$work/err")"
fi

# --- a quantization_config decides the run, never a 16-bit estimate ----------------
quantized() {  # quantized NAME JSON: Qwen3-0.6B's config with that quantization_config
  mkdir -p "$work/$1"
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["quantization_config"]=json.loads(sys.argv[2]); json.dump(c, open(sys.argv[3], "w"))' \
    "$configs/Qwen--Qwen3-0.6B.json" "$2" "$work/$1/config.json"
}
quantized bnb '{"quant_method":"bitsandbytes","load_in_4bit":true,"bnb_4bit_quant_type":"nf4","bnb_4bit_use_double_quant":true}'
quantized gptq '{"quant_method":"gptq","bits":4,"group_size":128}'
run --config "$work/bnb" --batch 1 --seq 128
if [[ $rc -eq 2 ]] && grep -q "quantization_config" "$work/err" && grep -q -- "--qlora" "$work/err"; then
  pass "a bitsandbytes 4-bit config without adapters: refused, naming quantization_config and --qlora"
else fail "a bitsandbytes 4-bit config without adapters" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$work/bnb" --batch 1 --seq 128 --qlora 8 --json
cp "$work/out" "$work/bnb.json"
run --config "$configs/Qwen--Qwen3-0.6B.json" --batch 1 --seq 128 --qlora 8 --qlora-double-quant --json
if [[ $rc -eq 0 ]] && cmp -s "$work/out" "$work/bnb.json"; then
  pass "a bitsandbytes 4-bit config with --qlora: the config's double quantisation, as --qlora-double-quant"
else fail "a bitsandbytes 4-bit config with --qlora" "exit $rc" "$(diff "$work/out" "$work/bnb.json" | head -5)"; fi
run --config "$work/gptq" --batch 1 --seq 128 --lora 8
if [[ $rc -eq 2 ]] && grep -q "quantization_config" "$work/err"; then pass "training over a GPTQ config: refused, naming quantization_config"; else
  fail "training over a GPTQ config" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$work/gptq" --inference --json
cp "$work/out" "$work/gptq.json"
run --config "$configs/Qwen--Qwen3-0.6B.json" --inference --weights gptq-4bit --json
if [[ $rc -eq 0 ]] && cmp -s "$work/out" "$work/gptq.json"; then pass "--inference on a GPTQ config: its stored format, as --weights gptq-4bit"; else
  fail "--inference on a GPTQ config" "exit $rc" "$(diff "$work/out" "$work/gptq.json" | head -5)"; fi
quantized fp8 '{"quant_method":"fp8","activation_scheme":"dynamic","weight_block_size":[128,128]}'
run --config "$work/fp8" --inference --json
cp "$work/out" "$work/fp8.json"
run --config "$configs/Qwen--Qwen3-0.6B.json" --inference --weights fp8-block --json
if [[ $rc -eq 0 ]] && cmp -s "$work/out" "$work/fp8.json"; then pass "--inference on a fine-grained FP8 config: as --weights fp8-block"; else
  fail "--inference on an FP8 config" "exit $rc" "$(diff "$work/out" "$work/fp8.json" | head -5)"; fi
quantized ct '{"quant_method":"compressed-tensors","format":"pack-quantized","ignore":["lm_head"],"config_groups":{"group_0":{"targets":["Linear"],"weights":{"num_bits":4,"type":"int","strategy":"group","group_size":128,"symmetric":true}}}}'
run --config "$work/ct" --inference --json
if [[ $rc -eq 0 ]] && is_json && grep -q "compressed-tensors-int" "$work/out"; then pass "--inference on a compressed-tensors W4A16 config: its format"; else
  fail "--inference on a compressed-tensors config" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$work/gptq" --inference --weights fp16
if [[ $rc -eq 2 ]] && grep -q -- "--weights" "$work/err" && grep -q "quantization_config" "$work/err"; then
  pass "--weights beside a quantization_config: refused, naming both"
else fail "--weights beside a quantization_config" "exit $rc" "$(head -c 300 "$work/err")"; fi

# --- a pre-quantised bitsandbytes MoE under transformers 5.x: the release that saved it decides ---
saved_moe() {  # saved_moe NAME VERSION: Qwen3-30B-A3B's config, NF4, saved by transformers VERSION
  mkdir -p "$work/$1"
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["quantization_config"]={"quant_method":"bitsandbytes","load_in_4bit":True,"bnb_4bit_quant_type":"nf4"}; c["transformers_version"]=sys.argv[2]; json.dump(c, open(sys.argv[3], "w"))' \
    "$configs/Qwen--Qwen3-30B-A3B.json" "$2" "$work/$1/config.json"
}
saved_moe moe_v4 4.51.0
saved_moe moe_v5 5.17.0
run --config "$work/moe_v4" --inference --json
if [[ $rc -eq 2 ]] && grep -q "config.transformers_version" "$work/err" && grep -q "expert converters" "$work/err"; then
  pass "--inference on a 4.51-saved bitsandbytes MoE under 5.x: refused, naming config.transformers_version"
else fail "--inference on a 4.51-saved bitsandbytes MoE" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$work/moe_v4" --inference --stack transformers=4.51 --json
if [[ $rc -eq 0 ]] && is_json; then pass "--inference on a 4.51-saved bitsandbytes MoE under 4.51: estimated"; else
  fail "--inference on a 4.51-saved bitsandbytes MoE under 4.51" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$work/moe_v5" --inference --json
if [[ $rc -eq 0 ]] && is_json; then pass "--inference on a 5.17-saved bitsandbytes MoE: estimated (16-bit experts)"; else
  fail "--inference on a 5.17-saved bitsandbytes MoE" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$work/moe_v4" --batch 1 --seq 128 --qlora 8
if [[ $rc -eq 2 ]] && grep -q "4.51" "$work/err" && grep -q "expert converters" "$work/err"; then
  pass "--qlora over a 4.51-saved bitsandbytes MoE under 5.x: refused"
else fail "--qlora over a 4.51-saved bitsandbytes MoE" "exit $rc" "$(head -c 300 "$work/err")"; fi

# --- modules_to_not_convert: the linears it keeps stay 16-bit; a name memscale cannot place is refused ---
quantized awq '{"quant_method":"awq","bits":4,"group_size":128,"version":"gemm"}'
quantized awq_head '{"quant_method":"awq","bits":4,"group_size":128,"version":"gemm","modules_to_not_convert":["lm_head"]}'
quantized awq_attn '{"quant_method":"awq","bits":4,"group_size":128,"version":"gemm","modules_to_not_convert":["model.layers.*.self_attn"]}'
quantized awq_bad '{"quant_method":"awq","bits":4,"group_size":128,"version":"gemm","modules_to_not_convert":["no_such_module"]}'
run --config "$work/awq" --inference --json
cp "$work/out" "$work/awq.json"
run --config "$work/awq_head" --inference --json
if [[ $rc -eq 0 ]] && cmp -s "$work/out" "$work/awq.json"; then pass "modules_to_not_convert [lm_head]: the estimate of the plain AWQ config"; else
  fail "modules_to_not_convert [lm_head]" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$work/awq_attn" --inference --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["weight_bytes"]; b=json.load(open(sys.argv[2]))["weight_bytes"]; sys.exit(0 if a > b else 1)' "$work/out" "$work/awq.json"; then
  pass "modules_to_not_convert [model.layers.*.self_attn]: more weight bytes than all-AWQ"
else fail "modules_to_not_convert [model.layers.*.self_attn]" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$work/awq_bad" --inference
if [[ $rc -eq 2 ]] && grep -q 'modules_to_not_convert names "no_such_module"' "$work/err"; then
  pass "modules_to_not_convert naming an unknown module: refused, naming it"
else fail "modules_to_not_convert naming an unknown module" "exit $rc" "$(head -c 300 "$work/err")"; fi

# --- Gemma 3n: the multimodal config with its towers as weights and its embedders run; its text_config ---
run --config "$configs/refused/google--gemma-3n-E2B.json" --batch 1 --seq 128 --json
if [[ $rc -eq 0 ]] && is_json && grep -q '"idle_tower_parameters": 975475552' "$work/out"; then
  pass "gemma3n config, full training: estimated, the towers' 975,475,552 parameters as idle weights"
else fail "gemma3n config, full training" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$configs/refused/google--gemma-3n-E2B.json" --batch 1 --seq 128 --lora 16 --json
if [[ $rc -eq 0 ]] && is_json && grep -q '"idle_tower_parameters": 975475552' "$work/out"; then
  pass "gemma3n config, LoRA: estimated with the towers' 975,475,552 parameters as idle weights"
else fail "gemma3n config, LoRA" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$configs/refused/google--gemma-3n-E2B.json" --batch 1 --seq 1024 --lora 16 --images 1 --image-size 768 --frozen-tower
if [[ $rc -eq 0 ]] && grep -q "run on 1 image(s) of 768x768 per sample: 256 tokens each" "$work/out"; then
  pass "gemma3n config with images: through the frozen MobileNetV5 tower, 256 tokens per image"
else fail "gemma3n config with images" "exit $rc" "$(head -c 300 "$work/err")"; fi
mkdir -p "$work/gemma3n_text"
python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["text_config"], open(sys.argv[2], "w"))' \
  "$configs/refused/google--gemma-3n-E2B.json" "$work/gemma3n_text/config.json"
run --config "$work/gemma3n_text/config.json" --batch 1 --seq 128
if [[ $rc -eq 0 ]]; then pass "gemma3n_text config (E2B's text_config): estimated"
else fail "gemma3n_text config" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$work/gemma3n_text/config.json" --inference
if [[ $rc -eq 2 ]] && grep -q "model.altup_inputs" "$work/err"; then
  pass "gemma3n_text generate(): refused, naming model.altup_inputs"
else fail "gemma3n_text generate()" "exit $rc" "$(head -c 300 "$work/err")"; fi

# --- gpt-oss's MXFP4 experts: training refused unless dequantized at load (Mxfp4Config(dequantize=True)) ---
mkdir -p "$work/mxfp4"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["quantization_config"]["dequantize"]=True; json.dump(c, open(sys.argv[2], "w"))' \
  "$configs/openai--gpt-oss-20b.json" "$work/mxfp4/config.json"
run --config "$configs/openai--gpt-oss-20b.json" --batch 1 --seq 128
if [[ $rc -eq 2 ]] && grep -q "config.quantization_config.dequantize" "$work/err"; then
  pass "gpt-oss MXFP4 config (training): refused, naming quantization_config.dequantize"
else fail "gpt-oss MXFP4 config (training)" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$configs/openai--gpt-oss-20b.json" --inference --attention eager --json
if [[ $rc -eq 0 ]] && is_json && grep -q '"weights": "mxfp4"' "$work/out"; then
  pass "gpt-oss MXFP4 config (--inference): generate() over the matmul_ogs experts"
else fail "gpt-oss MXFP4 config (--inference)" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$configs/openai--gpt-oss-20b.json" --inference --weights bf16 --attention sdpa --stack transformers=4.56
if [[ $rc -eq 0 ]] && grep -q "peak" "$work/out"; then
  pass "gpt-oss MXFP4 config with --weights bf16: generate() over the experts dequantized at load"
else fail "gpt-oss MXFP4 config with --weights bf16" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$work/mxfp4" --batch 1 --seq 128 --json
if [[ $rc -eq 0 ]] && is_json; then pass "gpt-oss MXFP4 config with dequantize true: estimated over bf16 experts"; else
  fail "gpt-oss MXFP4 config with dequantize true" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$work/mxfp4" --inference --attention sdpa --stack transformers=5.0 --json
if [[ $rc -eq 0 ]] && is_json && grep -q '"transformers": "5.0"' "$work/out"; then
  pass "gpt-oss generate() at transformers 5.0: estimated (the experts interface), the release in the report"
else fail "gpt-oss generate() at transformers 5.0" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$work/mxfp4" --inference --attention eager --json
if [[ $rc -eq 0 ]] && is_json; then pass "gpt-oss generate() with dequantize true: estimated"; else
  fail "gpt-oss generate() with dequantize true" "exit $rc" "$(head -c 300 "$work/err")"; fi

# --- a Mamba-2 checkpoint: its config.json keeps the bare Infinity transformers writes ---
codestral="$configs/ssm-multimodal/mistralai--Mamba-Codestral-7B-v0.1.json"
run --config "$codestral" --batch 1 --seq 2048
if [[ $rc -eq 0 ]] && grep -q "^parameters .*7,285,403,648" "$work/out"; then
  pass "mamba2 (Mamba2ForCausalLM, time_step_limit [0.0, Infinity]): the card's total"
else fail "mamba2 --config" "exit $rc" "$(head -c 300 "$work/out")" "$(head -c 300 "$work/err")"; fi

# --- a hybrid MoE checkpoint: Nemotron 3 Nano's Mamba-2, MoE and attention layers ---
nano3="$configs/ssm-multimodal/nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json"
run --config "$nano3" --batch 1 --seq 2048 --precision pure_bf16 --gpu h100-80gb
if [[ $rc -eq 0 ]] && grep -q "^parameters .*31,577,937,344" "$work/out"; then
  pass "nemotron_h with MoE layers (Nemotron 3 Nano 30B-A3B): the card's total, planned on an H100"
else fail "nemotron_h MoE --config" "exit $rc" "$(head -c 300 "$work/out")" "$(head -c 300 "$work/err")"; fi

# --- a multimodal checkpoint in a text-only run: the vision tower held as weights only ---
gemma3="$configs/ssm-multimodal/google--gemma-3-4b-it.json"
run --config "$gemma3" --batch 1 --seq 512
if [[ $rc -eq 0 ]] && grep -q "^parameters .*4,300,079,472" "$work/out" && grep -q "^vision tower .*419,816,304 parameters loaded, idle" "$work/out"; then
  pass "gemma3 (Gemma3ForConditionalGeneration): the total with its tower, and the tower's line"
else fail "gemma3 --config" "exit $rc" "$(head -c 300 "$work/out")" "$(head -c 300 "$work/err")"; fi
run --config "$gemma3" --batch 1 --seq 512 --json
if [[ $rc -eq 0 ]] && python3 -c 'import json,sys; assert json.load(sys.stdin)["idle_tower_parameters"] == 419816304' <"$work/out"; then
  pass "gemma3 --json: idle_tower_parameters"
else fail "gemma3 --json" "exit $rc" "$(head -c 300 "$work/err")"; fi
run --config "$gemma3" --batch 1 --seq 512 --qlora 16
if [[ $rc -eq 2 ]] && grep -q "vision tower" "$work/err"; then pass "gemma3 --qlora: refused, naming the tower"; else
  fail "gemma3 --qlora" "exit $rc" "$(head -c 300 "$work/err")"; fi

qwen2_vl="$configs/ssm-multimodal/Qwen--Qwen2-VL-7B-Instruct.json"
run --config "$qwen2_vl" --batch 1 --seq 512 --lora 16
if [[ $rc -eq 0 ]] && grep -q "^vision tower .*675,759,104 parameters loaded, idle" "$work/out"; then
  pass "qwen2_vl (Qwen2VLForConditionalGeneration): a LoRA plan with the tower's line"
else fail "qwen2_vl --config" "exit $rc" "$(head -c 300 "$work/out")" "$(head -c 300 "$work/err")"; fi

finish
