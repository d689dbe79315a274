#!/usr/bin/env bash
# What `fxprof record -a` costs the machine, against `perf record -a`, while both cores are busy (two
# rec_busy spinners, as a build would keep them): the CPU time of the recorder itself (user + system, its
# reading thread and what it starts, from /usr/bin/time) over the recording's wall time, as a share of one
# core. The two alternate, RUNS times each, and medians are printed; the recorder's work ends with its
# profile written (fxprof: --no-symbolicate, the default served case; perf: perf.data).
#
#   bench/record_all.sh [BUILD_DIR] [RUNS] [SECONDS]
#
# Rows: fxprof -a (defaults: DWARF stacks, on-CPU), fxprof -a --call-graph fp, perf record -a -g
# (frame pointers, perf's usual), perf record -a --call-graph dwarf. All at 1000 Hz, as root.
set -euo pipefail

BUILD=${1:-build}
RUNS=${2:-3}
SECS=${3:-10}
FXPROF=$BUILD/fxprof
source "$(dirname "$0")/programs.sh"
BUSY=$(test_programs "$BUILD")/rec_busy
for f in "$FXPROF" "$BUSY" /usr/bin/time; do
  [[ -x $f ]] || { echo "bench/record_all.sh: $f is missing (build fxprof and rec_busy; apt-get install time)" >&2; exit 1; }
done
command -v perf >/dev/null || { echo "bench/record_all.sh: perf is missing (apt-get install linux-perf)" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "bench/record_all.sh: record -a needs root" >&2; exit 1; }

TMP=$(mktemp -d)
spinners=()
cleanup() {
  ((${#spinners[@]})) && kill "${spinners[@]}" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
# Both cores busy for the whole bench (each spinner has far more CPU to burn than the bench lasts).
for _ in 1 2; do
  "$BUSY" spin 100000000 >/dev/null 2>&1 &
  spinners+=($!)
done

# cost NAME COMMAND...: "CPU_SECONDS WALL_SECONDS" of one run (the recorder's user + system time).
cost() {
  /usr/bin/time -f '%U %S %e' -o "$TMP/time" "$@" >/dev/null 2>"$TMP/err" || {
    echo "bench/record_all.sh: failed: $*" >&2
    cat "$TMP/err" >&2
    return 1
  }
  awk '{printf "%.3f %.3f\n", $1 + $2, $3}' "$TMP/time"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

declare -A share
names=("fxprof -a" "fxprof -a --call-graph fp" "perf record -a -g" "perf record -a --call-graph dwarf")
for ((i = 0; i < RUNS; i++)); do
  for n in "${names[@]}"; do
    case $n in
    "fxprof -a") r=$(cost "$FXPROF" record -a --duration "$SECS" --save-only --no-symbolicate -q -o "$TMP/p.json.gz") ;;
    "fxprof -a --call-graph fp") r=$(cost "$FXPROF" record -a --duration "$SECS" --call-graph fp --save-only \
      --no-symbolicate -q -o "$TMP/p.json.gz") ;;
    "perf record -a -g") r=$(cost perf record -a -g -F 1000 -q -o "$TMP/perf.data" -- sleep "$SECS") ;;
    *) r=$(cost perf record -a --call-graph dwarf -F 1000 -q -o "$TMP/perf.data" -- sleep "$SECS") ;;
    esac
    share[$n]+="$(echo "$r" | awk '{printf "%.2f", 100 * $1 / $2}') "
  done
done

printf '%-40s %s\n' "recorder ($SECS s, 1000 Hz, both cores busy)" "its CPU, % of one core (median of $RUNS runs)"
for n in "${names[@]}"; do
  m=$(tr ' ' '\n' <<<"${share[$n]}" | grep . | median)
  printf '%-40s %6.2f   (%s)\n' "$n" "$m" "${share[$n]% }"
done
