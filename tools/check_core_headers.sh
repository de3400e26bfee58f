#!/usr/bin/env bash
# Compiles one translation unit that includes every header of the core target (the list
# CMake writes from MEMSCALE_CORE_HEADERS) and fails if any of them reaches nlohmann/json or
# fmt: the core needs only the standard library (house style), the adapters are opt-in.
#
#   tools/check_core_headers.sh CXX INCLUDE_DIR HEADER_LIST
set -euo pipefail
cxx="$1"
include_dir="$2"
list="$3"
tu="$(mktemp --suffix=.cpp)"
trap 'rm -f "${tu}"' EXIT
while IFS= read -r header; do
  [[ -n "${header}" ]] && printf '#include "%s"\n' "${header}"
done <"${list}" >"${tu}"
[[ -s "${tu}" ]] || { echo "no core headers listed in ${list}"; exit 1; }
# -H prints every header the TU opens, one per line, on stderr.
opened="$("${cxx}" -std=c++20 -fsyntax-only -H -I "${include_dir}" "${tu}" 2>&1 >/dev/null)" || {
  echo "${opened}" | tail -20; echo "the core headers do not compile together"; exit 1; }
if grep -E "nlohmann/|/fmt/" <<<"${opened}" | head -5 | grep .; then
  echo "a core header includes nlohmann/json or fmt (first opened above); move it to include/memscale/json/"
  exit 1
fi
echo "$(wc -l <"${list}") core headers, none reaches nlohmann/json or fmt"
