#!/usr/bin/env bash
# Keeps tests/data/ground-truth/ (the repository's copy of the ground truth the tests and
# the accuracy report read) equal to the project's shared ground truth.
#
#   tools/sync-ground-truth.sh [SHARED_DIR]          copy the records, README.md, SCHEMA.md and measure.py
#   tools/sync-ground-truth.sh --check [SHARED_DIR]  exit 1 when the copy differs, 77 when SHARED_DIR is absent
#
# SHARED_DIR defaults to ../shared/ground-truth beside the repository. Nothing in the build
# or the tests needs SHARED_DIR: ctest ground_truth.in_sync runs --check and is skipped
# (exit 77) when it is absent, as in a fresh clone.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
copy="${repo_root}/tests/data/ground-truth"

check=0
if [[ "${1:-}" == "--check" ]]; then
  check=1
  shift
fi
shared="${1:-${repo_root}/../shared/ground-truth}"

if [[ ! -d "${shared}" ]]; then
  echo "sync-ground-truth: ${shared} does not exist; nothing to compare (skipped)"
  exit 77
fi

files=()
for f in "${shared}"/*.json "${shared}/README.md" "${shared}/SCHEMA.md" "${shared}/measure.py"; do
  [[ -f "${f}" ]] && files+=("$(basename "${f}")")
done

if ((check)); then
  differ=0
  for name in "${files[@]}"; do
    if ! cmp -s "${shared}/${name}" "${copy}/${name}"; then
      echo "sync-ground-truth: tests/data/ground-truth/${name} differs from ${shared}/${name}"
      differ=1
    fi
  done
  for f in "${copy}"/*; do
    name="$(basename "${f}")"
    if [[ ! -e "${shared}/${name}" ]]; then
      echo "sync-ground-truth: tests/data/ground-truth/${name} is not in ${shared}"
      differ=1
    fi
  done
  if ((differ)); then
    echo "sync-ground-truth: run tools/sync-ground-truth.sh to update the copy, then commit it"
    exit 1
  fi
  echo "sync-ground-truth: tests/data/ground-truth matches ${shared} (${#files[@]} files)"
  exit 0
fi

mkdir -p "${copy}"
find "${copy}" -maxdepth 1 -type f -delete
for name in "${files[@]}"; do
  cp "${shared}/${name}" "${copy}/${name}"
done
echo "sync-ground-truth: copied ${#files[@]} files from ${shared} to tests/data/ground-truth"
