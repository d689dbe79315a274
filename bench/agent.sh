#!/usr/bin/env bash
# What `fxprof agent` costs a busy machine over time: the whole machine sampled at its default 19 Hz, a
# window every 10 s pushed to a loopback Pyroscope stand-in (bench/push_stand_in.py: answers every Push with
# 200 and logs when each arrived), while both cores are busy (two rec_busy spinners, as a build would keep
# them) and, when BUILD_TOO=1, a real compile of fxprof's own sources runs in a loop beside them.
#
#   bench/agent.sh [BUILD_DIR] [MINUTES]      (default 10 minutes; the issue's goal is measured over an hour)
#   AGENT_ARGS="--symbol-cache 128" bench/agent.sh ...   (options given to the agent as well)
#   BUSY_LOOPS=0 bench/agent.sh ...   (no spinners: the machine is kept busy by something else, e.g. builds)
#
# Printed: every 10 s the agent's RSS and peak RSS (VmRSS, VmHWM from /proc) and its CPU so far; at the end
# its CPU time over the wall time as a share of one core (utime + stime from /proc/PID/stat, threads
# included), the windows the stand-in received, and how late they came (the gaps between arrivals against
# the 10 s window: windows "on time" arrive within 2 s of their period).
set -euo pipefail

BUILD=${1:-build}
MINUTES=${2:-10}
FXPROF=$(cd "$(dirname "$BUILD/fxprof")" && pwd)/fxprof
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/programs.sh"
BUSY=$(test_programs "$BUILD")/rec_busy
for f in "$FXPROF" "$BUSY"; do
  [[ -x $f ]] || { echo "bench/agent.sh: $f is missing (build fxprof and rec_busy)" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "bench/agent.sh: python3 is missing" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "bench/agent.sh: the agent samples the whole machine: run as root" >&2; exit 1; }

TMP=$(mktemp -d)
pids=()
cleanup() {
  ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
for ((i = 0; i < ${BUSY_LOOPS:-2}; i++)); do
  "$BUSY" spin 100000000 >/dev/null 2>&1 &
  pids+=($!)
done
if [[ ${BUILD_TOO:-0} == 1 ]]; then
  (while :; do g++ -std=c++20 -O2 -I"$HERE/.." -c "$HERE/../sinks/pprof.cpp" -o "$TMP/x.o" 2>/dev/null || true; done) &
  pids+=($!)
fi

mkfifo "$TMP/port"
python3 "$HERE/push_stand_in.py" "$TMP/arrivals" >"$TMP/port" &
pids+=($!)
read -r PORT <"$TMP/port"

# shellcheck disable=SC2086 # AGENT_ARGS: words on purpose
"$FXPROF" agent --pyroscope "http://127.0.0.1:$PORT" ${AGENT_ARGS:-} >"$TMP/agent.out" 2>"$TMP/agent.err" &
AGENT=$!
pids+=($AGENT)
HZ=$(getconf CLK_TCK)
start=$(date +%s.%N)
cpu_s() { awk -v hz="$HZ" '{sub(/^.*\) /, ""); print ($12 + $13) / hz}' "/proc/$AGENT/stat"; }
kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$AGENT/status"; }
printf '%8s %10s %10s %10s\n' "t (s)" "RSS (MB)" "peak (MB)" "CPU (s)"
end=$((SECONDS + MINUTES * 60))
while ((SECONDS < end)); do
  sleep 10
  kill -0 "$AGENT" 2>/dev/null || { echo "bench/agent.sh: the agent died:" >&2; cat "$TMP/agent.err" >&2; exit 1; }
  now=$(date +%s.%N)
  printf '%8.0f %10.1f %10.1f %10.2f\n' "$(echo "$now - $start" | bc)" "$(echo "$(kb VmRSS) / 1024" | bc -l)" \
    "$(echo "$(kb VmHWM) / 1024" | bc -l)" "$(cpu_s)"
done
cpu=$(cpu_s)
wall=$(echo "$(date +%s.%N) - $start" | bc)
kill -TERM "$AGENT"
wait "$AGENT" || { echo "bench/agent.sh: the agent's exit status was $?" >&2; exit 1; }
tail -1 "$TMP/agent.err"
printf 'agent CPU: %.2f s over %.0f s of wall time: %.3f %% of one core (goal: under 1 %%)\n' "$cpu" "$wall" \
  "$(echo "100 * $cpu / $wall" | bc -l)"
awk 'NR > 1 {gap = $1 - prev; n++; if (gap > 12 || gap < 8) late++; if (gap > max) max = gap}
     {prev = $1}
     END {printf "windows received: %d; gaps between them: at most %.1f s, %d of %d outside 8-12 s\n",
          NR, max, late, n}' "$TMP/arrivals"
