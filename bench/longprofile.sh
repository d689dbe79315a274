#!/usr/bin/env bash
# Memory of a long profile (issue 15's goal: an hour of 8 busy threads at 1 kHz, 28.8M samples, is read and
# symbolicated in < 1.2 GB, <= 40 bytes per sample at the peak). fxprof_longprofile_bench writes the profile
# synthetically through fxprof's own model and Gecko writer (bench/longprofile_bench.cpp says how it is
# shaped); then each command that reads it runs under /usr/bin/time, and its peak RSS is printed per sample.
#
#   bench/longprofile.sh [BUILD_DIR]
#   LONGPROFILE_SECONDS=60 bench/longprofile.sh build     # a quick run (8 threads x 60 s: 480k samples)
#   LONGPROFILE_BASELINE=/other/build/fxprof bench/longprofile.sh build   # the same commands of another
#                                                                         # fxprof on the same file
#
# Steps: writing (the bench program: the model, then the peak while the writer streams it out, gzip),
# `symbolicate` (read, symbolicate, write), `export folded` (read, symbolicate, aggregate), `export folded
# --no-symbolicate` (the read path and a sink alone) and `report`. The peak includes the process's fixed
# cost (~10 MB), which a short run's figures per sample carry more of.
set -uo pipefail
BUILD=${1:-build}
SECS=${LONGPROFILE_SECONDS:-3600}
THREADS=${LONGPROFILE_THREADS:-8}
GOAL=40
FXPROF=$BUILD/fxprof
GEN=$BUILD/bench/fxprof_longprofile_bench
for f in "$FXPROF" "$GEN"; do
  [[ -x $f ]] || { echo "bench/longprofile.sh: $f is missing (build fxprof and fxprof_longprofile_bench)" >&2; exit 1; }
done
[[ -x /usr/bin/time ]] || { echo "bench/longprofile.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PROFILE=$TMP/long.json.gz

t0=$(date +%s.%N)
if ! "$GEN" "$PROFILE" "$SECS" "$THREADS" >"$TMP/gen.out" 2>"$TMP/gen.err"; then
  echo "fxprof_longprofile_bench failed: $(tail -n 1 "$TMP/gen.err")"
  exit 1
fi
t1=$(date +%s.%N)
read -r _ samples _ model_kb _ peak_kb _ stacks _ frames <"$TMP/gen.out"
per() { echo "scale=1; $1 * 1024 / $samples" | bc -l; }
printf '%d threads x %d s at 1 kHz: %d samples, %d distinct stacks, %d frames; %s MB gzipped\n' "$THREADS" \
  "$SECS" "$samples" "$stacks" "$frames" "$(echo "scale=1; $(stat -c %s "$PROFILE") / 1048576" | bc -l)"
printf '%-44s %9s %10s %8s\n' step "peak MB" "B/sample" seconds
printf '%-44s %9d %10s %8s\n' "write: the model alone" $((model_kb / 1024)) "$(per "$model_kb")" -
printf '%-44s %9d %10s %8.1f\n' "write: model + Gecko writer (record's side)" $((peak_kb / 1024)) \
  "$(per "$peak_kb")" "$(echo "$t1 - $t0" | bc -l)"

# run LABEL BINARY ARGS...: one command under /usr/bin/time; prints its line or why it has none.
run() {
  local label=$1 bin=$2
  shift 2
  if ! /usr/bin/time -f '%M %e' -o "$TMP/time" "$bin" "$@" >/dev/null 2>"$TMP/err"; then
    printf '%-44s failed: %s\n' "$label" "$(grep -v '^[[:space:]]*$' "$TMP/err" | tail -n 1)"
    return
  fi
  local kb secs over=""
  read -r kb secs <"$TMP/time"
  [[ $(echo "$kb * 1024 > $GOAL * $samples" | bc -l) == 1 ]] && over="  over the goal ($GOAL)"
  printf '%-44s %9d %10s %8.1f%s\n' "$label" $((kb / 1024)) "$(per "$kb")" "$secs" "$over"
}
commands() {
  local tag=$1 bin=$2
  run "${tag}symbolicate" "$bin" symbolicate "$PROFILE" -o "$TMP/sym.json.gz"
  run "${tag}export folded" "$bin" export folded "$PROFILE" -o "$TMP/out.folded"
  run "${tag}export folded --no-symbolicate" "$bin" export folded --no-symbolicate "$PROFILE" -o "$TMP/out.folded"
  run "${tag}report" "$bin" report "$PROFILE"
}
commands "" "$FXPROF"
if [[ -n ${LONGPROFILE_BASELINE:-} ]]; then
  commands "baseline: " "$LONGPROFILE_BASELINE"
fi
echo "goal: <= $GOAL B/sample for the commands that read (issue 15)"
exit 0
