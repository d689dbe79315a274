#!/usr/bin/env bash
# Off-CPU capture cost, in one run, alternating (this VM is noisy: compare ratios, not absolute times).
#
#   bench/offcpu.sh [BUILD_DIR] [RUNS]
#
# Program: bench/offcpu_bench.cpp, two threads ping-ponging through pipes; it prints its own elapsed time and
# switch rate. Scenarios: as fast as it goes (~100k+ switches/s here) and rate-limited (~20-30k/s: 20 us of
# work per thread per round). Configurations: bare; `fxprof record --cpu-only`; `fxprof record` (off-CPU
# on, DWARF 32 KiB copies); `fxprof record --stack-size 8192`; `perf record -e context-switches -c 1
# --call-graph dwarf` (perf's 8 KiB default copy). For each: the median program time / bare, the median
# records lost (fxprof: lost records; perf: LOST_SAMPLES, the context-switch samples the kernel dropped),
# output size, and post-processing (fxprof: from the program's exit to the profile built, --verbose;
# perf: `perf script` over the data). bcc's offcputime is not installed on Debian 12 by `make test-deps`; it
# is run when `offcputime-bpfcc` is on PATH.
set -euo pipefail

BUILD=${1:-build}
RUNS=${2:-3}
FXPROF=$BUILD/fxprof
PROG=$BUILD/bench/fxprof_offcpu_bench
for f in "$FXPROF" "$PROG"; do
  [[ -x $f ]] || { echo "bench/offcpu.sh: $f is missing (build fxprof and fxprof_offcpu_bench)" >&2; exit 1; }
done
command -v perf >/dev/null || { echo "bench/offcpu.sh: perf is missing (apt-get install linux-perf)" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# run CONFIG ARGS...: appends "ms lost bytes post_ms" to $TMP/CONFIG
run() {
  local cfg=$1
  shift
  local out ms lost=0 bytes=0 post=0
  case $cfg in
    bare) out=$("$PROG" "$@") ;;
    cpu-only | offcpu | offcpu-8k)
      local extra=()
      [[ $cfg == cpu-only ]] && extra=(--cpu-only)
      [[ $cfg == offcpu-8k ]] && extra=(--stack-size 8192)
      out=$("$FXPROF" record -v -q --save-only --no-symbolicate "${extra[@]}" -o "$TMP/p.json.gz" -- "$PROG" "$@" \
        2>"$TMP/err")
      lost=$(sed -n 's/.* \([0-9]*\) lost records.*/\1/p' "$TMP/err" | tail -1)
      post=$(sed -n 's/.*profile built \([0-9.]*\) ms after.*/\1/p' "$TMP/err" | tail -1)
      bytes=$(stat -c %s "$TMP/p.json.gz")
      ;;
    perf)
      out=$(perf record -q -e context-switches -c 1 --call-graph dwarf -o "$TMP/perf.data" -- "$PROG" "$@" \
        2>/dev/null)
      lost=$(perf report --stats -i "$TMP/perf.data" 2>/dev/null | awk '/LOST_SAMPLES events/ {v=$3} END {print v+0}')
      bytes=$(stat -c %s "$TMP/perf.data")
      local t0 t1
      t0=$(date +%s%N)
      perf script -i "$TMP/perf.data" >/dev/null 2>&1 || true
      t1=$(date +%s%N)
      post=$(((t1 - t0) / 1000000))
      ;;
    bcc)
      out=$("$PROG" "$@" &
        pid=$!
        timeout 60 offcputime-bpfcc -f -p "$pid" >"$TMP/bcc.txt" 2>/dev/null &
        wait "$pid")
      bytes=$(stat -c %s "$TMP/bcc.txt" 2>/dev/null || echo 0)
      ;;
  esac
  ms=$(echo "$out" | awk 'NR==1 {print $1}')
  echo "$ms ${lost:-0} ${bytes:-0} ${post:-0}" >>"$TMP/$cfg"
}

scenario() {
  local title=$1
  shift
  local configs=(bare cpu-only offcpu offcpu-8k perf)
  command -v offcputime-bpfcc >/dev/null && configs+=(bcc)
  rm -f "$TMP"/bare "$TMP"/cpu-only "$TMP"/offcpu "$TMP"/offcpu-8k "$TMP"/perf "$TMP"/bcc
  for ((i = 0; i < RUNS; i++)); do
    for c in "${configs[@]}"; do run "$c" "$@"; done
  done
  local rate
  rate=$("$PROG" "$@" | awk '{print $2}')
  echo "== $title: $* (bare: ~$rate switches/s), median of $RUNS"
  printf '%-10s %10s %8s %10s %12s %10s\n' config program_ms x_bare lost output_MB post_ms
  local base
  base=$(awk '{print $1}' "$TMP/bare" | median)
  for c in "${configs[@]}"; do
    local ms lost mb post
    ms=$(awk '{print $1}' "$TMP/$c" | median)
    lost=$(awk '{print $2}' "$TMP/$c" | median)
    mb=$(awk '{print $3 / 1e6}' "$TMP/$c" | median)
    post=$(awk '{print $4}' "$TMP/$c" | median)
    printf '%-10s %10.1f %8.2f %10s %12.2f %10s\n' "$c" "$ms" "$(echo "$ms / $base" | bc -l)" "$lost" "$mb" "$post"
  done
}

scenario "as fast as it goes" 50000
scenario "rate-limited" 20000 20
