#!/usr/bin/env bash
# Builds the web calculator into BUILD_DIR/web/site (default build-web/web/site) with
# Debian's emscripten (apt-get install emscripten nlohmann-json3-dev).
#
#   web/build.sh [BUILD_DIR]
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${1:-${repo_root}/build-web}"
command -v emcmake >/dev/null || { echo "web/build.sh: emcmake not found (apt-get install emscripten)" >&2; exit 1; }
# Emscripten's cache must be writable; Debian's (/usr/share/emscripten/cache) is not for a user.
if [[ -z "${EM_CACHE:-}" && ! -w /usr/share/emscripten/cache ]]; then
  export EM_CACHE="${build_dir}/em-cache"
  mkdir -p "${EM_CACHE}"
  cp -rn /usr/share/emscripten/cache/. "${EM_CACHE}/" 2>/dev/null || true
fi
emcmake cmake -S "${repo_root}" -B "${build_dir}" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "${build_dir}" --target memscale_web -j "${JOBS:-2}"
echo "${build_dir}/web/site"
