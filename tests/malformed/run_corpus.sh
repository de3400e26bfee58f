#!/usr/bin/env bash
# The malformed-input corpus (ctest malformed.corpus): every file listed in EXPECTED must
# make memscale-plan exit 2 within 5 s with exactly one stderr line that names the file
# and contains the expected text (the field, or what is wrong with the document).
# Files under cases/ go to --cases, under configs/ to --config, the others to --run. Inputs
# that cannot be kept in the repository are made here in a temporary folder: a 10 MB key,
# a 10 MB string, a file over the 64 MiB limit (sparse), a FIFO; devices (/dev/zero,
# /dev/urandom, /proc/self/mem) are read in place. Hostile command lines (escape sequences,
# a 131 KB value, overflows, options a path would drop) end the file. Every stderr line
# must be safe for a terminal: no control character, no C1 control, only UTF-8, < 1000 bytes.
#
#   tests/malformed/run_corpus.sh PATH/TO/memscale-plan
set -u
if [[ $# -ne 1 ]]; then
  echo "usage: $0 MEMSCALE_PLAN" >&2
  exit 64
fi
plan=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
open(f"{work}/huge_key.json", "w").write('{"model":"gpt2","' + "k" * 10_000_000 + '":1}')
open(f"{work}/huge_string.json", "w").write(json.dumps({"model": "gpt2", "run": {"precision": "f" * 10_000_000}}))
PY
mkfifo "$work/fifo.json"
truncate -s $((64 * 1024 * 1024 + 1)) "$work/over_64mib.json"

passed=0
failed=0
# Every stderr line checked is kept (err.N) and judged terminal-safe at the end, by one
# Python process for all of them (one per check cost about a second each on a busy machine):
# no control byte but the final newline, no C1 control or bidi override, valid UTF-8, and a
# line shorter than 1000 bytes.
kept=0
keep_for_terminal_check() {  # keep_for_terminal_check LABEL
  kept=$((kept + 1))
  cp "$work/err" "$work/err.$kept"
  printf '%s\t%s\n' "$work/err.$kept" "$1" >>"$work/kept.tsv"
}
terminal_unsafe() {  # prints one line per kept file that is not terminal-safe
  [[ -f "$work/kept.tsv" ]] || return 0
  python3 - "$work/kept.tsv" <<'PY'
import sys
for row in open(sys.argv[1], encoding="utf-8", errors="replace"):
    path, label = row.rstrip("\n").split("\t", 1)
    data = open(path, "rb").read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        print(f"{label}: not UTF-8"); continue
    line = text[:-1] if text.endswith("\n") else text
    bad = [c for c in line if ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f or c in "\u2028\u2029" or
           0x202a <= ord(c) <= 0x202e or 0x2066 <= ord(c) <= 0x2069]
    if bad or len(data) >= 1000:
        print(f"{label}: {len(bad)} control or bidi characters, {len(data)} bytes")
PY
}

check() {  # check FILE OPTION EXPECTED_TEXT
  local file=$1 option=$2 text=$3
  # A guard against hangs, not a speed test: under ASan on a busy 2-core machine the 10 MB
  # inputs take several seconds (hostile-input speed is a benchmark, benchmarks/read_bench.cpp).
  timeout 30 "$plan" "$option" "$file" >/dev/null 2>"$work/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$work/err" | tr -d ' ')
  local name
  name=$(basename "$file")
  if [[ $rc -eq 2 && $lines -eq 1 ]] && grep -qF -- "$name" "$work/err" && grep -qF -- "$text" "$work/err"; then
    passed=$((passed + 1))
    keep_for_terminal_check "$file"
  else
    failed=$((failed + 1))
    echo "FAIL  $file: want exit 2 and one line naming $name and '$text'"
    echo "      got exit $rc, $lines lines: $(head -c 300 "$work/err")"
  fi
}

while IFS=$'\t' read -r file text; do
  [[ -z "$file" || "$file" == \#* ]] && continue
  option=--run
  [[ "$file" == cases/* ]] && option=--cases
  [[ "$file" == configs/* ]] && option=--config
  check "$here/$file" "$option" "$text"
done <"$here/EXPECTED"
# However deep the clone, a message names the file: a long path keeps its end. Every reader
# is checked from a folder 200 characters deep.
deep="$work/$(printf 'deep-folder-%02d/' $(seq 1 16))"
mkdir -p "$deep"
cp "$here/configs/gpt_oss_odd_layers_without_layer_types.json" "$here/cases/not_array.json" "$here/runs/batch_negative.json" "$deep"
check "$deep/gpt_oss_odd_layers_without_layer_types.json" --config "config.num_hidden_layers must be even without layer_types"
check "$deep/not_array.json" --cases "must hold a JSON array of records"
check "$deep/batch_negative.json" --run "run.micro_batch"
check "$work/huge_key.json" --run "is not a field"
check "$work/huge_string.json" --run "run.precision"

# Files no reader may take: each reader (--run, --cases, --config) refuses what is not a
# regular file before opening it (a FIFO would block, /dev/zero never ends) and stops at
# 64 MiB; a read error names the file and the reason.
for option in --run --cases --config; do
  check "$work/fifo.json" "$option" "is a FIFO; only regular files are read"
  check /dev/zero "$option" "is a character device"
  check "$work/over_64mib.json" "$option" "is larger than 64 MiB"
done
check /dev/urandom --run "is a character device"
[[ -e /proc/self/mem ]] && check /proc/self/mem --config "cannot be read: "

# check_args TEXT ARGS...: a hostile command line exits 2 within 10 s with one stderr line
# that contains TEXT and is safe for a terminal.
check_args() {
  local text=$1
  shift
  timeout 10 "$plan" "$@" >/dev/null 2>"$work/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$work/err" | tr -d ' ')
  local label
  label=$(printf '%q ' "$@" | head -c 120)
  if [[ $rc -eq 2 && $lines -eq 1 ]] && grep -qF -- "$text" "$work/err"; then
    passed=$((passed + 1))
    keep_for_terminal_check "$label"
  else
    failed=$((failed + 1))
    echo "FAIL  $label: want exit 2 and one terminal-safe line with '$text'"
    echo "      got exit $rc, $lines lines: $(head -c 300 "$work/err" | cat -v)"
  fi
}

esc=$'\e]0;PWNED\a\e[2J'
check_args '--gpu must be a GPU from --list-gpus (got "\x1b]0;PWNED\x07\x1b[2J")' --gpu "$esc"
check_args '(got "\x1b]0;PWNED\x07\x1b[2J")' --model "$esc"
check_args '--batch must be a positive integer (got "\x1b]0;PWNED' --batch "$esc"
check_args '--offload must be optimizer' --offload "$esc"
check_args '--strategy must be one of' --strategy "$esc"
check_args 'unknown LoRA target "\x1b]0;PWNED' --lora 8 --lora-targets "q,$esc"
check_args 'unknown option "--\x1b]0;PWNED' "--$esc"
check_args 'cannot be read: No such file or directory' --run "$esc.json"
check_args 'unexpected argument "\xff\xfe\u009b"' $'\xff\xfe\xc2\x9b'
check_args '...(131000 bytes)' --gpu "$(head -c 131000 /dev/zero | tr '\0' x)"  # an argument may have 128 KiB
check_args '--qlora 18446744073709551615 on gpt2 makes the run too large to estimate' --qlora 18446744073709551615
check_args '--gpu-memory must be at least 400 MiB' --gpu-memory 24B
check_args '--gpu-memory must be at least 400 MiB' --gpu-memory 1KiB
check_args '--seq must be <= 4096 (the max_position_embeddings of llama-2-7b) (got 8192)' --model llama-2-7b --seq 8192
check_args '--context + --new-tokens must be <= 8192 (the max_position_embeddings of llama-3-8b)' \
  --model llama-3-8b --inference --context 200000
check_args '--seq does not apply to the vision model resnet50: its input is sized by --image' --model resnet50 --seq 2048
check_args '--lora does not apply to the vision model resnet50' --model resnet50 --lora 8
check_args '--lora does not apply to --inference: inference with LoRA adapters' --model llama-2-7b --inference --lora 8

# A line that passed but is not safe for a terminal turns its pass into a failure.
unsafe=$(terminal_unsafe)
if [[ -n "$unsafe" ]]; then
  while IFS= read -r row; do
    echo "FAIL  not safe for a terminal: $row"
    passed=$((passed - 1))
    failed=$((failed + 1))
  done <<<"$unsafe"
fi
echo "$passed passed, $failed failed"
[[ $failed -eq 0 && $passed -ge 100 ]]
