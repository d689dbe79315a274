#!/usr/bin/env bash
# Off-CPU capture cost, in one run, alternating (this VM is noisy: compare ratios, not absolute times).
#
#   bench/offcpu.sh [BUILD_DIR] [RUNS]
#
# Program: bench/offcpu_bench.cpp, two threads ping-ponging through pipes; it prints its own elapsed time,
# switch rate and CPU time. Scenarios: as fast as it goes (~100k+ switches/s here), rate-limited (~20-30k/s:
# 20 us of work per thread per round), CPU-bound (a fixed ~5 ms of work per round), and futex: as fast as
# it goes through a futex word instead of pipes, so that every wake is a futex system call whose waker's
# registers and 8 KiB of stack fxprof's eBPF waker tracer copies (recorder/waker.h). As root the eBPF
# program's own time per run is read from the kernel (kernel.bpf_stats_enabled is turned on for the run
# and restored): the waker_us column.
#
# Configurations: bare; `fxprof record --cpu-only`; `fxprof record` (off-CPU on: 8 KiB copies at switches,
# 32 KiB at CPU samples); `fxprof record --off-cpu-stack-size 32768` (the copy at switches as large as CPU
# samples', the default before); `perf record -e context-switches -c 1 --call-graph dwarf` (perf's 8 KiB
# default copy); bcc's `offcputime-bpfcc -f -p PID` where it runs (not installed by `make test-deps`;
# Debian: apt-get install bpfcc-tools; one line says whether it ran and why not).
#
# For each, medians of: program time and its ratio to bare; the program's CPU time and its kernel part
# (cpu_ms, sys_ms: the samples are taken in its context; less noisy than elapsed time on a shared machine,
# and for the CPU-bound scenario, whose work is fixed, cpu_ms is the measure); records lost (fxprof: lost
# records plus wakeups the eBPF tracer could not write; perf: LOST_SAMPLES, the context-switch samples the
# kernel dropped); output size; post-processing
# (fxprof: from the program's exit to the profile built, --verbose; perf: `perf script` over the data; bcc:
# from Ctrl-C to its exit, when it symbolizes and prints).
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
BPF_STATS=$(cat /proc/sys/kernel/bpf_stats_enabled 2>/dev/null || echo)
trap 'rm -rf "$TMP"; [[ -n $BPF_STATS ]] && sysctl -qw kernel.bpf_stats_enabled="$BPF_STATS" 2>/dev/null || true' EXIT
[[ $(id -u) == 0 && -n $BPF_STATS ]] && sysctl -qw kernel.bpf_stats_enabled=1
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# run CONFIG ARGS...: appends "ms lost bytes post_ms" to $TMP/CONFIG
run() {
  local cfg=$1
  shift
  local out ms lost=0 bytes=0 post=0 waker=0
  case $cfg in
    bare) out=$("$PROG" "$@") ;;
    cpu-only | offcpu | offcpu-32k)
      local extra=()
      [[ $cfg == cpu-only ]] && extra=(--cpu-only)
      [[ $cfg == offcpu-32k ]] && extra=(--off-cpu-stack-size 32768)
      out=$("$FXPROF" record -v -q --save-only --no-symbolicate "${extra[@]}" -o "$TMP/p.json.gz" -- "$PROG" "$@" \
        2>"$TMP/err")
      lost=$(sed -n 's/.* \([0-9]*\) lost records.*/\1/p' "$TMP/err" | tail -1)
      # -v: "eBPF waker tracer: N wakeups, S waker stacks unwound (futex wakes), L lost, ring at most K of 16384
      # KiB full; R runs, U us a run"
      local wakes_lost
      wakes_lost=$(sed -n 's/.*eBPF waker tracer: .*, \([0-9]*\) lost.*/\1/p' "$TMP/err" | tail -1)
      lost=$((${lost:-0} + ${wakes_lost:-0}))
      waker=$(sed -n 's/.*runs, \([0-9.]*\) us a run.*/\1/p' "$TMP/err" | tail -1)
      [[ -s $TMP/p.json.gz ]] || { echo "bench/offcpu.sh: fxprof record failed: $(cat "$TMP/err")" >&2; exit 1; }
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
      # offcputime attaches to a running pid: the program waits on a fifo until the tracer is ready (with
      # -f it prints nothing until the end: ready is its kprobe's perf event fd, opened when it attaches),
      # so no switch goes unseen; bcc's post-processing is its symbolization at Ctrl-C.
      rm -f "$TMP/go"
      mkfifo "$TMP/go"
      (read -r _ <"$TMP/go" && exec "$PROG" "$@") >"$TMP/bcc.out" &
      local pid=$! t0 t1
      offcputime-bpfcc -f -p "$pid" >"$TMP/bcc.txt" 2>/dev/null &
      local tracer=$!
      for ((w = 0; w < 600; w++)); do
        ls -l "/proc/$tracer/fd" 2>/dev/null | grep -q 'perf_event' && break
        kill -0 "$tracer" 2>/dev/null || break
        sleep 0.1
      done
      echo go >"$TMP/go"
      wait "$pid"
      out=$(cat "$TMP/bcc.out")
      t0=$(date +%s%N)
      kill -INT "$tracer" 2>/dev/null || true
      wait "$tracer" 2>/dev/null || true
      t1=$(date +%s%N)
      post=$(((t1 - t0) / 1000000))
      bytes=$(stat -c %s "$TMP/bcc.txt" 2>/dev/null || echo 0)
      ;;
  esac
  ms=$(echo "$out" | awk 'NR==1 {print $1}')
  cpu=$(echo "$out" | awk 'NR==1 {print $3}')
  sys=$(echo "$out" | awk 'NR==1 {print $4}')
  echo "$ms ${lost:-0} ${bytes:-0} ${post:-0} ${sys:-0} ${cpu:-0} ${waker:-0}" >>"$TMP/$cfg"
}

scenario() {
  local title=$1
  shift
  local configs=(bare cpu-only offcpu offcpu-32k perf)
  [[ -n $BCC ]] && configs+=(bcc)
  rm -f "$TMP"/bare "$TMP"/cpu-only "$TMP"/offcpu "$TMP"/offcpu-32k "$TMP"/perf "$TMP"/bcc
  for ((i = 0; i < RUNS; i++)); do
    for c in "${configs[@]}"; do run "$c" "$@"; done
  done
  local rate
  rate=$("$PROG" "$@" | awk '{print $2}')
  echo "== $title: $* (bare: ~$rate switches/s), median of $RUNS"
  printf '%-10s %10s %8s %8s %8s %10s %12s %10s %9s\n' config program_ms x_bare cpu_ms sys_ms lost output_MB post_ms \
    waker_us
  local base
  base=$(awk '{print $1}' "$TMP/bare" | median)
  for c in "${configs[@]}"; do
    local ms lost mb post sys cpu
    ms=$(awk '{print $1}' "$TMP/$c" | median)
    sys=$(awk '{print $5}' "$TMP/$c" | median)
    cpu=$(awk '{print $6}' "$TMP/$c" | median)
    lost=$(awk '{print $2}' "$TMP/$c" | median)
    mb=$(awk '{print $3 / 1e6}' "$TMP/$c" | median)
    post=$(awk '{print $4}' "$TMP/$c" | median)
    waker=$(awk '{print $7}' "$TMP/$c" | median)
    printf '%-10s %10.1f %8.2f %8.0f %8.0f %10s %12.2f %10s %9s\n' "$c" "$ms" "$(echo "$ms / $base" | bc -l)" "$cpu" \
      "$sys" "$lost" "$mb" "$post" "$waker"
  done
}

# bcc's offcputime: run only where it works. It compiles its BPF program at start against the running
# kernel's headers (/lib/modules/$(uname -r)/build or CONFIG_IKHEADERS) and attaches a kprobe on
# finish_task_switch; where either is missing (this VM: no headers for its kernel, no kprobes) one line says
# why instead of a column of failures.
BCC=
if ! command -v offcputime-bpfcc >/dev/null; then
  echo "bcc: not run: offcputime-bpfcc is not installed (Debian: apt-get install bpfcc-tools)"
elif [[ $(id -u) != 0 ]]; then
  echo "bcc: not run: offcputime-bpfcc needs root"
elif timeout 60 offcputime-bpfcc -f 1 >"$TMP/bcc.probe" 2>&1; then
  BCC=1
  echo "bcc: offcputime-bpfcc $(dpkg-query -W -f '${Version}' bpfcc-tools 2>/dev/null) runs here: the bcc rows below"
else
  # Its last words name the cause ("Unable to find kernel headers...", "cannot attach kprobe..."), after a
  # Python traceback.
  why=$(grep -iE -m1 'unable|kprobe|permission|not permitted' "$TMP/bcc.probe" || true)
  echo "bcc: not run: offcputime-bpfcc fails on kernel $(uname -r): ${why:-$(grep -v '^[[:space:]]*$' "$TMP/bcc.probe" | tail -1)}"
fi

scenario "as fast as it goes" 50000
scenario "rate-limited" 20000 20
# CPU-bound: one thread busy at a time, a fixed 4M-iteration slice per round (~5 ms here), a few hundred
# switches/s: what off-CPU capture adds to a program that hardly waits is offcpu / cpu-only (the goal: at
# most 1.05).
scenario "CPU-bound" 300 0 4000000
# Futex: every wake a futex system call, so fxprof's eBPF program copies each waker's registers and stack
# (ids only for the pipe scenarios): offcpu's cpu_ms and waker_us here against the first scenario's show
# what the waker stacks cost the program.
scenario "futex" 50000 0 0 futex
