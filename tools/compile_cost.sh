#!/usr/bin/env bash
# tools/compile_cost.sh [RUNS]: what one static_assert(memscale::fits(...)) costs at compile
# time. Compiles a translation unit with and without the assertion, RUNS times each (default 5,
# alternating), with g++ and clang++, and prints the medians and their difference in seconds.
#
#   tools/compile_cost.sh          # the README's example (BERT-base 16x128 fits an RTX 3090 as it is)
#   CASES="readme mode" tools/compile_cost.sh 7   # also GPT-2 XL 1x512, which needs a mode
#   CASES=replay tools/compile_cost.sh             # a two-layer model, whose allocator replay runs in the assertion
#
# Environment: CXXS (compilers, default "g++ clang++"), COMPILE_COST_FLAGS (default "-std=c++20 -O0 -c"),
# MEMSCALE_INCLUDE (default: this checkout's include/, e.g. another commit's tree to compare).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=${1:-5}
include=${MEMSCALE_INCLUDE:-$root/include}
read -r -a compilers <<<"${CXXS:-g++ clang++}"
read -r -a flags <<<"${COMPILE_COST_FLAGS:--std=c++20 -O0 -c}"
read -r -a cases <<<"${CASES:-readme}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One TU per case; -DWITH_ASSERT adds the assertion, nothing else changes.
cat >"$tmp/readme.cpp" <<'EOF'
#include <memscale/memscale.hpp>
inline constexpr memscale::training_spec run{.micro_batch = 16, .seq_len = 128};
inline constexpr memscale::gpu_spec rtx3090 = *memscale::find_gpu("rtx3090");
#ifdef WITH_ASSERT
static_assert(memscale::fits(memscale::presets::bert_base_uncased, run, rtx3090));
#endif
int main() {}
EOF
cat >"$tmp/mode.cpp" <<'EOF'
#include <memscale/memscale.hpp>
inline constexpr memscale::training_spec run{.micro_batch = 1, .seq_len = 512};
inline constexpr memscale::gpu_spec rtx3090 = *memscale::find_gpu("rtx3090");
#ifdef WITH_ASSERT
static_assert(memscale::fits(memscale::presets::gpt2_xl, run, rtx3090));  // fits with a memory-saving mode
#endif
int main() {}
EOF

cat >"$tmp/replay.cpp" <<'EOF'
#include <memscale/memscale.hpp>
// Two layers: few enough ops that the caching-allocator replay runs in constant evaluation
// (memscale/device_peak.hpp constant_replay_ops); a deeper model takes the rounding rule there.
inline constexpr memscale::model_spec tiny = memscale::presets::llama_base("tiny", 2, 256, 4, 2, 688, 1000);
inline constexpr memscale::training_spec run{.micro_batch = 2, .seq_len = 64, .prec = memscale::precision::amp_bf16};
inline constexpr memscale::gpu_spec h100 = *memscale::find_gpu("h100-80gb");
#ifdef WITH_ASSERT
static_assert(memscale::fits(tiny, run, h100));
#endif
int main() {}
EOF

# Seconds one compile takes (wall clock).
seconds() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null
  end=$(date +%s%N)
  awk -v ns="$((end - start))" 'BEGIN { printf "%.3f\n", ns / 1e9 }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-9s %-7s %10s %10s %10s   (median of %d runs, s)\n' compiler case without with cost "$runs"
for cxx in "${compilers[@]}"; do
  command -v "$cxx" >/dev/null || { echo "$cxx: not found, skipped" >&2; continue; }
  for c in "${cases[@]}"; do
    [[ -f "$tmp/$c.cpp" ]] || { echo "unknown case $c (readme, mode, replay)" >&2; exit 2; }
    # Both variants must compile before anything is timed.
    "$cxx" "${flags[@]}" -I"$include" "$tmp/$c.cpp" -o "$tmp/check.o"
    "$cxx" "${flags[@]}" -I"$include" -DWITH_ASSERT "$tmp/$c.cpp" -o "$tmp/check.o"
    : >"$tmp/without"
    : >"$tmp/with"
    for ((i = 0; i < runs; ++i)); do
      seconds "$cxx" "${flags[@]}" -I"$include" "$tmp/$c.cpp" -o "$tmp/out.o" >>"$tmp/without"
      seconds "$cxx" "${flags[@]}" -I"$include" -DWITH_ASSERT "$tmp/$c.cpp" -o "$tmp/out.o" >>"$tmp/with"
    done
    without=$(median <"$tmp/without")
    with=$(median <"$tmp/with")
    printf '%-9s %-7s %10s %10s %+10.3f\n' "$cxx" "$c" "$without" "$with" "$(awk -v a="$with" -v b="$without" 'BEGIN { print a - b }')"
  done
done
