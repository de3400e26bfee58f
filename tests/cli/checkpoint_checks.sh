#!/usr/bin/env bash
# End-to-end checks of memscale-plan --config on a model_type no reader knows (registered
# with ctest as cli.checkpoint): with a checkpoint beside config.json the run is estimated
# from the safetensors headers (exact parameters) and a generic decoder, and the report says
# so; without one the refusal names the nearest family and a --run model object.
#
#   tests/cli/checkpoint_checks.sh PATH/TO/memscale-plan
set -u
if [[ $# -ne 1 ]]; then
  echo "usage: $0 MEMSCALE_PLAN" >&2
  exit 64
fi
plan=$1
source "$(dirname "${BASH_SOURCE[0]}")/check_helpers.sh"

# A two-layer model of an unknown type: bf16 weights (the data a sparse hole), an inv_freq buffer.
python3 - "$work/model" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
os.makedirs(d)
json.dump({"model_type": "newfamily", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000, "tie_word_embeddings": False},
          open(f"{d}/config.json", "w"))
tensors = [("model.embed_tokens.weight", "BF16", [1000, 64]), ("lm_head.weight", "BF16", [1000, 64]),
           ("model.norm.weight", "BF16", [64]), ("model.layers.0.self_attn.rotary_emb.inv_freq", "F32", [8])]
for l in range(2):
    p = f"model.layers.{l}."
    tensors += [(p + "self_attn.q_proj.weight", "BF16", [64, 64]), (p + "self_attn.k_proj.weight", "BF16", [32, 64]),
                (p + "self_attn.v_proj.weight", "BF16", [32, 64]), (p + "self_attn.o_proj.weight", "BF16", [64, 64]),
                (p + "mlp.gate_proj.weight", "BF16", [128, 64]), (p + "mlp.up_proj.weight", "BF16", [128, 64]),
                (p + "mlp.down_proj.weight", "BF16", [64, 128]), (p + "input_layernorm.weight", "BF16", [64]),
                (p + "post_attention_layernorm.weight", "BF16", [64])]
header, at = {}, 0
for name, dtype, shape in tensors:
    n = 1
    for s in shape: n *= s
    size = n * (4 if dtype == "F32" else 2)
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + size]}
    at += size
h = json.dumps(header).encode()
with open(f"{d}/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    f.truncate(8 + len(h) + at)
PY
# Parameters by hand: 2 x 64,000 + 64 + 2 x (4,096 + 2,048 + 2,048 + 4,096 + 3 x 8,192 + 128) = 202,048.
run --config "$work/model" --batch 2 --seq 64
if [[ $rc -eq 0 ]] && grep -q "activations estimated from a generic decoder: band +-35%" "$work/out" &&
   grep -q "parameters     202,048" "$work/out" && grep -q "^checkpoint " "$work/out"; then
  pass "--config DIR of an unknown model_type with a checkpoint"
else
  fail "--config DIR with a checkpoint" "exit $rc" "out: $(head -c 600 "$work/out")" "err: $(head -c 300 "$work/err")"
fi
run --config "$work/model" --batch 2 --seq 64 --json
if [[ $rc -eq 0 ]] && python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["parameters"] == 202048, j["parameters"]
assert j["generic"]["checkpoint"]["parameters"] == 202048
assert j["generic"]["band"] == [-0.35, 0.35]
assert j["generic"]["checkpoint"]["by_role"]["buffer"]["F32"]["elements"] == 8
' <"$work/out"; then pass "--json carries the checkpoint summary and the band"; else
  fail "--json generic" "exit $rc" "$(head -c 300 "$work/err")"
fi
run --config "$work/model" --gpu h100-80gb
if [[ $rc -eq 2 && $(wc -l <"$work/err") -eq 1 ]] && grep -q "has no family reader" "$work/err"; then pass "--gpu on a generic model is refused"; else
  fail "--gpu on a generic model" "exit $rc" "$(head -c 300 "$work/err")"
fi
# A later --model replaces the generic model.
run --config "$work/model" --model gpt2 --batch 1 --seq 64
if [[ $rc -eq 0 ]] && ! grep -q "generic decoder" "$work/out"; then pass "--model after --config"; else fail "--model after --config" "exit $rc"; fi

# Without weights: the refusal.
mkdir -p "$work/vl"
echo '{"model_type": "qwen2_audio", "text_config": {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28}}' >"$work/vl/config.json"
run --config "$work/vl"
if [[ $rc -eq 2 && $(wc -l <"$work/err") -eq 1 ]] && grep -q "nearest supported: qwen2" "$work/err" &&
   grep -qF '"layers": 28, "hidden": 3584' "$work/err"; then pass "no weights: nearest family and a --run model object"; else
  fail "no weights" "exit $rc" "$(head -c 400 "$work/err")"
fi

finish
