# The pieces every tests/cli/*_checks.sh shares, sourced after it has set `plan` (the
# memscale-plan under test): the pass/fail counters, a scratch folder removed on exit, and
# run(), which leaves memscale-plan's stdout and stderr in $work/out and $work/err and its
# status in $rc. A script ends with `finish`: the "N passed, M failed" line and its status.
passed=0
failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

pass() { passed=$((passed + 1)); echo "ok    $1"; }
fail() {
  failed=$((failed + 1))
  echo "FAIL  $1"
  shift
  for detail in "$@"; do echo "      $detail"; done
}

# run ARGS...: runs memscale-plan with ARGS.
run() {
  "$plan" "$@" >"$work/out" 2>"$work/err"
  rc=$?
}

finish() {
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]
}
