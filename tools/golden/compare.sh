#!/usr/bin/env bash
# Prints the golden outputs of the working tree into OUT_DIR (default build/golden):
# memscale-golden's seeded runs plus `memscale-plan --cases --json` of every record file.
# Compare two commits by running it in each and diffing the folders:
#   tools/golden/compare.sh build-a/golden && git stash && ... && diff -r build-a/golden build-b/golden
#
#   tools/golden/compare.sh [OUT_DIR] [BUILD_DIR]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-${repo}/build/golden}"
build="${2:-${repo}/build}"
cd "${repo}"
cmake --build "${build}" --target memscale-golden memscale-plan -j2 >/dev/null
mkdir -p "${out}"
"${build}/tools/memscale-golden" tests/data/hf_configs > "${out}/golden.txt"
for f in tests/data/ground-truth/*.json docs/data/*.json; do
  name=$(basename "${f}" .json)
  "${build}/examples/memscale-plan" --cases "${f}" --json > "${out}/cases-${name}.json" 2>&1 || true
done
wc -l "${out}/golden.txt"
sha256sum "${out}"/* | sed "s|${out}/||"
