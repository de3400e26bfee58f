#!/usr/bin/env bash
# Checks two layout rules of include/memscale (docs/architecture.md "Layout rules"):
#  1. a header beside a folder of the same name (estimate.hpp + estimate/) is that folder's
#     umbrella: comments, #pragma once and includes of headers inside the folder, nothing else;
#  2. nothing outside the library (examples/, tools/, web/) names a detail:: namespace;
#  3. each tests/runtime/*.cpp keeps its code in a namespace named after the file, so that the
#     unity batches of memscale_tests (MEMSCALE_BATCH_SOURCES) never see two files' helpers clash;
#  4. no Catch2 test name holds a ';': catch_discover_tests splits names on it (a CMake list), so
#     ctest would filter on half a name, match nothing and report the test as passed.
#
#   tools/check_layout.sh REPO_ROOT
set -euo pipefail
root="$1"
status=0
for dir in "${root}"/include/memscale/*/; do
  name="$(basename "${dir}")"
  header="${root}/include/memscale/${name}.hpp"
  [[ -f "${header}" ]] || continue
  stray="$(grep -nvE "^(//.*|#pragma once|#include \"memscale/${name}/[a-z0-9_/]+\.hpp\"( +// IWYU pragma: export)?|)$" "${header}" || true)"
  if [[ -n "${stray}" ]]; then
    echo "include/memscale/${name}.hpp sits beside include/memscale/${name}/ but is not its umbrella; move these lines into the folder:"
    echo "${stray}" | head -5
    status=1
  fi
done
outside="$(grep -rnE "\bdetail::" "${root}/examples" "${root}/tools" "${root}/web" \
             --include='*.cpp' --include='*.hpp' --include='*.h' | grep -vE "^[^:]+:[0-9]+:\s*//" || true)"
if [[ -n "${outside}" ]]; then
  echo "code outside the library uses a detail:: namespace (make what it needs public):"
  echo "${outside}" | head -10
  status=1
fi
for source in "${root}"/tests/runtime/*.cpp; do
  stem="$(basename "${source}" .cpp)"
  if ! grep -qE "^namespace ${stem} \{$" "${source}" || ! grep -qE "^\}  // namespace ${stem}$" "${source}"; then
    echo "tests/runtime/${stem}.cpp does not wrap its code in 'namespace ${stem} { ... }  // namespace ${stem}'"
    status=1
  fi
done
semicolons="$(grep -nE 'TEST_CASE\("[^"]*;' "${root}"/tests/runtime/*.cpp || true)"
if [[ -n "${semicolons}" ]]; then
  echo "a test name holds ';', which ctest's discovered name cuts (the test would never run under ctest):"
  echo "${semicolons}" | head -5
  status=1
fi
[[ ${status} -eq 0 ]] && echo "layout: every header beside its folder is an umbrella; detail:: stays inside the library; each runtime test has its own namespace and a name ctest keeps whole"
exit ${status}
