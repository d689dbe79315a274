#!/usr/bin/env bash
# Recording overhead of `fxprof record` against the uninstrumented program and `perf record -F 1000 -g`,
# measured alternately in one run (this VM is noisy: compare ratios, not absolute times).
#
#   bench/record.sh [BUILD_DIR] [RUNS]
#
# For each program it prints the median wall time of the bare run, of fxprof and of perf, the ratios, and the
# time from the program's exit to fxprof's profile being written (the program is wrapped as
# `sh -c 'PROG; date'` to learn when it exited). Programs: the bundled demo (threads, I/O, sleeps), a
# CPU-bound one (rec_busy spin 1500: 1.5 s of CPU) and a short one (rec_busy spin 20, ~23 ms: start-up and exit
# cost dominate; the target is a whole fxprof run under 0.1 s).
set -euo pipefail

BUILD=${1:-build}
RUNS=${2:-5}
FXPROF=$BUILD/fxprof
DEMO=$BUILD/examples/demo/fxprof_demo
source "$(dirname "$0")/programs.sh"
PROGRAMS=$(test_programs "$BUILD")
BUSY=$PROGRAMS/rec_busy
for f in "$FXPROF" "$DEMO" "$BUSY"; do
  [[ -x $f ]] || { echo "bench/record.sh: $f is missing (build the fxprof, fxprof_demo and rec_busy targets)" >&2; exit 1; }
done
command -v perf >/dev/null || { echo "bench/record.sh: perf is missing (apt-get install linux-perf)" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

now() { date +%s.%N; }

# wall SECONDS of one run of "$@" (output discarded)
wall() {
  local t0 t1
  t0=$(now)
  "$@" >/dev/null 2>&1 || true
  t1=$(now)
  echo "$t1 - $t0" | bc -l
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

bench_one() {
  local label=$1
  shift
  local prog=("$@")
  local base=() fx=() pf=() fxnosym=() lag=() lagnosym=()
  for ((i = 0; i < RUNS; i++)); do
    base+=("$(wall "${prog[@]}")")
    fx+=("$(wall "$FXPROF" record --save-only -o "$TMP/x.json.gz" -- "${prog[@]}")")
    pf+=("$(wall perf record -q -F 1000 -g -o "$TMP/perf.data" -- "${prog[@]}")")
    fxnosym+=("$(wall "$FXPROF" record --save-only --no-symbolicate -o "$TMP/y.json.gz" -- "${prog[@]}")")
    # Exit -> profile written: the wrapper records when the program ended.
    local cmd
    cmd="$(printf '%q ' "${prog[@]}"); date +%s.%N > $TMP/exit"
    "$FXPROF" record --save-only -o "$TMP/z.json.gz" -- sh -c "$cmd" >/dev/null 2>&1 || true
    lag+=("$(echo "$(stat -c %.9Y "$TMP/z.json.gz") - $(cat "$TMP/exit")" | bc -l)")
    "$FXPROF" record --save-only --no-symbolicate -o "$TMP/w.json.gz" -- sh -c "$cmd" >/dev/null 2>&1 || true
    lagnosym+=("$(echo "$(stat -c %.9Y "$TMP/w.json.gz") - $(cat "$TMP/exit")" | bc -l)")
  done
  local b f p fn l ln
  b=$(printf '%s\n' "${base[@]}" | median)
  f=$(printf '%s\n' "${fx[@]}" | median)
  p=$(printf '%s\n' "${pf[@]}" | median)
  fn=$(printf '%s\n' "${fxnosym[@]}" | median)
  l=$(printf '%s\n' "${lag[@]}" | median)
  ln=$(printf '%s\n' "${lagnosym[@]}" | median)
  printf '%-26s bare %6.3fs | fxprof %6.3fs (%5.2fx) no-sym %6.3fs (%5.2fx) | perf -g %6.3fs (%5.2fx) | fxprof/perf %5.2f | exit->profile %5.0f ms (no-sym %4.0f ms)\n' \
    "$label" "$b" "$f" "$(echo "$f / $b" | bc -l)" "$fn" "$(echo "$fn / $b" | bc -l)" "$p" "$(echo "$p / $b" | bc -l)" \
    "$(echo "$f / $p" | bc -l)" "$(echo "$l * 1000" | bc -l)" "$(echo "$ln * 1000" | bc -l)"
}

echo "fxprof record vs bare vs perf record -F 1000 -g: medians of $RUNS alternated runs (wall time)"
echo "fxprof: default --call-graph dwarf, 1 kHz, --save-only (symbolicates by default; no-sym = --no-symbolicate)"
bench_one "demo (threads, I/O)" "$DEMO"
bench_one "cpu-bound (1.5 s)" "$BUSY" spin 1500
bench_one "short (~23 ms)" "$BUSY" spin 20
