#!/usr/bin/env bash
# Builds the web calculator (web/build.sh) and serves it on http://127.0.0.1:PORT/ (default
# 8000) until Ctrl-C. Needs Debian's emscripten and nlohmann-json3-dev.
#
#   web/serve.sh [PORT]
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
port="${1:-8000}"
site="$("${repo_root}/web/build.sh" | tail -n 1)"
echo "memscale web calculator: http://127.0.0.1:${port}/ (Ctrl-C stops it)"
exec python3 -m http.server --bind 127.0.0.1 --directory "${site}" "${port}"
