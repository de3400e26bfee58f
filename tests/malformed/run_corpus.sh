#!/usr/bin/env bash
# The malformed-input corpus (ctest malformed.corpus): every file listed in EXPECTED must
# make memscale-plan exit 2 within 5 s with exactly one stderr line that names the file
# and contains the expected text (the field, or what is wrong with the document).
# Files under cases/ go to --cases, under configs/ to --config, the others to --run. Two inputs too large to keep in
# the repository (a 10 MB key, a 10 MB string) are written to a temporary folder here.
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

passed=0
failed=0
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
check "$work/huge_key.json" --run "is not a field"
check "$work/huge_string.json" --run "run.precision"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 && $passed -ge 50 ]]
