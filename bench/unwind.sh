#!/usr/bin/env bash
# Unwinding benchmark and DWARF recording overhead.
#  1. fxprof_unwind_bench: real stacks of real programs recorded once (32 KiB copies), unwound again and again on
#     one core: stacks per second (target >= 200,000/s), cold and warm.
#  2. Recording overhead at 1 kHz on a CPU-bound program (xz, -O2, no frame pointers) of `fxprof record`
#     (--call-graph dwarf is its default) against `perf record --call-graph dwarf,32768 -F 1000`, measured
#     alternately in one run (this machine is noisy), printed as ratios of median wall times.
#   bench/unwind.sh [BUILD_DIR] [ROUNDS]     (default: build, 5)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
build=${1:-$src/build}
rounds=${2:-5}
bench=$build/bench/fxprof_unwind_bench
if grep -q fxprof_unwind_bench "$build/build.ninja" 2>/dev/null; then
  cmake --build "$build" --target fxprof_unwind_bench >/dev/null
else
  # bench/ is not added to the build yet: compile the bench against the build's libraries.
  cmake --build "$build" --target fxprof_unwind fxprof_base >/dev/null
  mkdir -p "$build/bench"
  g++ -std=c++20 -O2 -g -I"$src" "$src/bench/unwind_bench.cpp" "$src/tests/recorder/unwind/capture.cpp" \
    -o "$bench" "$build/recorder/unwind/libfxprof_unwind.a" "$build/base/libfxprof_base.a" -lz
fi

echo "== unwinding throughput (one core)"
"$bench"
source "$(dirname "$0")/programs.sh"
programs=$(test_programs "$build")
prog=$programs/unw_prog
if [ -x "$prog" ]; then
  "$bench" -- "$prog" mixed 200 "$programs/libunw_lib.so"
fi

echo
echo "== recording overhead at 1 kHz, DWARF mode (median wall time of $rounds alternating runs)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seq 1 2000000 > "$tmp/input.txt"
work() { xz -T1 -3 -c "$tmp/input.txt" > /dev/null; }
now() { date +%s%N; }
fxprof=$build/fxprof
# The benchmark measures fxprof or fails: a probe of the same work (which has samples, unlike `true`) must
# record, else the run stops with fxprof's own message.
if ! "$fxprof" record -s -q --no-symbolicate -o "$tmp/probe.json.gz" -- xz -T1 -3 -c "$tmp/input.txt" \
    >/dev/null 2>"$tmp/probe.err"; then
  echo "bench/unwind.sh: fxprof record failed: $(tail -n 1 "$tmp/probe.err")" >&2
  exit 1
fi
have_fxprof=1
: > "$tmp/base"; : > "$tmp/fxprof"; : > "$tmp/perf"
i=0
while [ $i -lt "$rounds" ]; do
  t0=$(now); work; t1=$(now); echo $(( (t1 - t0) / 1000000 )) >> "$tmp/base"
  if [ $have_fxprof = 1 ]; then
    t0=$(now)
    "$fxprof" record -F 1000 -s --no-symbolicate -o "$tmp/p.json.gz" -- xz -T1 -3 -c "$tmp/input.txt" \
      > /dev/null 2> "$tmp/fxprof.err"
    t1=$(now); echo $(( (t1 - t0) / 1000000 )) >> "$tmp/fxprof"
  fi
  t0=$(now)
  perf record -q --call-graph dwarf,32768 -F 1000 -o "$tmp/perf.data" -- xz -T1 -3 -c "$tmp/input.txt" \
    > /dev/null 2> "$tmp/perf.err"
  t1=$(now); echo $(( (t1 - t0) / 1000000 )) >> "$tmp/perf"
  i=$((i + 1))
done
median() { sort -n "$1" | awk '{v[NR] = $1} END {if (NR == 0) print 0; else print v[int((NR + 1) / 2)]}'; }
base=$(median "$tmp/base"); perf=$(median "$tmp/perf")
echo "xz -3 of $(wc -c < "$tmp/input.txt") bytes: no profiler ${base} ms"
echo "perf record --call-graph dwarf,32768 -F 1000: ${perf} ms  ($(awk -v a="$perf" -v b="$base" 'BEGIN {printf "%.3f", a / b}') x no profiler)"
if [ $have_fxprof = 1 ]; then
  fx=$(median "$tmp/fxprof")
  echo "fxprof record (dwarf, 1 kHz):                 ${fx} ms  ($(awk -v a="$fx" -v b="$base" 'BEGIN {printf "%.3f", a / b}') x no profiler)"
  echo "fxprof / perf: $(awk -v a="$fx" -v b="$perf" 'BEGIN {printf "%.3f", a / b}')"
fi
