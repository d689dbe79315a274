#!/usr/bin/env bash
# Heap profiling overhead: the malloc+free microbenchmark (bench/heap_bench.cpp, 4-frame call chain) bare,
# under `fxprof record --heap` (sampled), `--heap=full`, and heaptrack, alternately in one run. Prints the
# best (lowest) ns per iteration of each over RUNS runs and the ratios to the bare run: on this shared 2-core
# VM a preemption inside a 15 ms loop moved the median by 2-5x, while the best run is the cost itself. The
# bare and sampled loops run 10x ITERATIONS (they are fast) so that each measures for long enough.
#
#   bench/heap.sh [BUILD_DIR] [RUNS] [ITERATIONS]
set -euo pipefail
BUILD=$(realpath "${1:-build}")  # absolute: heaptrack runs from a temporary folder
RUNS=${2:-3}
N=${3:-1000000}
FXPROF=$BUILD/fxprof
PROG=$BUILD/bench/fxprof_heap_bench
for f in "$FXPROF" "$PROG"; do
  [[ -x $f ]] || { echo "bench/heap.sh: $f is missing (build the fxprof and fxprof_heap_bench targets)" >&2; exit 1; }
done
command -v heaptrack >/dev/null || { echo "bench/heap.sh: heaptrack is missing (apt-get install heaptrack)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

ns() { grep -o '^[0-9.]* ns' | cut -d' ' -f1; }
best() { sort -g | head -1; }
declare -A all
for ((r = 0; r < RUNS; r++)); do
  all[bare]+="$("$PROG" $((N * 10)) | ns) "
  all[sampled]+="$("$FXPROF" record --heap -s --no-symbolicate -o "$TMP/s.json.gz" -- "$PROG" $((N * 10)) 2>/dev/null | ns) "
  all[full]+="$("$FXPROF" record --heap=full -s --no-symbolicate -o "$TMP/f.json.gz" -- "$PROG" "$N" 2>/dev/null | ns) "
  all[heaptrack]+="$(cd "$TMP" && heaptrack -o "$TMP/ht" "$PROG" "$N" 2>/dev/null | ns) "
  rm -f "$TMP"/ht*
done
bare=$(echo "${all[bare]}" | tr ' ' '\n' | grep . | best)
printf "%-10s %8s ns/iter\n" bare "$bare"
for k in sampled full heaptrack; do
  m=$(echo "${all[$k]}" | tr ' ' '\n' | grep . | best)
  printf "%-10s %8s ns/iter  %6.2fx bare\n" "$k" "$m" "$(echo "$m / $bare" | bc -l)"
done
full=$(echo "${all[full]}" | tr ' ' '\n' | grep . | best)
ht=$(echo "${all[heaptrack]}" | tr ' ' '\n' | grep . | best)
printf "full-mode slowdown / heaptrack slowdown: %.2f\n" "$(echo "($full / $bare) / ($ht / $bare)" | bc -l)"
ls -l "$TMP/f.json.gz" | awk -v n="$N" '{printf "full-mode profile of %d allocations: %.1f MB\n", n, $5 / 1e6}'
