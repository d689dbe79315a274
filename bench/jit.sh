#!/usr/bin/env bash
# JIT names over time (issue 22), fxprof against perf on the same program, RUNS runs each.
#
#   bench/jit.sh [BUILD_DIR] [RUNS]
#
# Program: tests/programs/jit/reuse.js under node: rounds of compiling (and collecting) much throw-away code,
# then sorting with a comparator compiled afresh each round, so V8 puts code where other code was. Measure:
# of the samples in the comparator's place (the first JIT frame under V8's sort builtins), how many are
# named fxprofCompare (bench/jit/comparator.py). Modes: jitdump (node --perf-prof; perf: `perf record -k
# mono -g`, then `perf inject --jit`) and perf map (node --perf-basic-prof; perf: `perf record -g`).
# Goals: fxprof >= 95 % with a jitdump, >= 90 % with a perf map.
set -euo pipefail

BUILD=${1:-build}
RUNS=${2:-3}
FXPROF=$(cd "$BUILD" && pwd)/fxprof
here=$(cd "$(dirname "$0")" && pwd)
PROG=$here/../tests/programs/jit/reuse.js
[[ -x $FXPROF ]] || { echo "bench/jit.sh: $FXPROF is missing (build fxprof)" >&2; exit 1; }
for t in node perf python3; do
  command -v $t >/dev/null || { echo "bench/jit.sh: $t is missing (make test-deps)" >&2; exit 1; }
done
TMP=$(mktemp -d)
trap 'cleanup_maps; rm -rf "$TMP"' EXIT
cd "$TMP"
# node, its pid kept so that its perf map (which node leaves in /tmp) is removed after, and no other's.
NODE=(sh -c 'echo $$ >>"$0"/pids; exec node "$@"' "$TMP")
cleanup_maps() {
  while read -r pid; do rm -f "/tmp/perf-$pid.map"; done <"$TMP/pids" 2>/dev/null || true
  : >"$TMP/pids"
}

for mode in --perf-prof --perf-basic-prof; do
  for run in $(seq "$RUNS"); do
    rm -rf "$TMP"/*.data "$TMP"/*.dump "$TMP"/*.so "$TMP"/*.log "$TMP"/f.* "$TMP"/perf.folded
    "$FXPROF" record -q --cpu-only --save-only -o f.json.gz --export folded -- \
      "${NODE[@]}" $mode --expose-gc "$PROG" 4 150 >/dev/null 2>f.err
    echo "$mode run $run: fxprof $(python3 "$here/jit/comparator.py" f.folded)"
    if [[ $mode == --perf-prof ]]; then
      perf record -q -k mono -g -F 1000 -o perf.data -- "${NODE[@]}" $mode --expose-gc "$PROG" 4 150 >/dev/null 2>&1
      perf inject --jit -i perf.data -o perf.jit.data 2>/dev/null
      perf script -i perf.jit.data -F comm,ip,sym 2>/dev/null >script.txt
    else
      perf record -q -g -F 1000 -o perf.data -- "${NODE[@]}" $mode --expose-gc "$PROG" 4 150 >/dev/null 2>&1
      perf script -i perf.data -F comm,ip,sym 2>/dev/null >script.txt
    fi
    python3 "$here/jit/perf_fold.py" script.txt >perf.folded
    echo "$mode run $run: perf   $(python3 "$here/jit/comparator.py" perf.folded)"
    cleanup_maps
  done
done
