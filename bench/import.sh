#!/usr/bin/env bash
# `fxprof import` against perf's own readers on the same perf.data files: `perf report --stdio` (the call
# graph perf prints) and `perf script` (what stackcollapse scripts read), frame-pointer (-g) and DWARF
# (--call-graph dwarf) files of python3 running for SECONDS. Medians of ROUNDS alternated runs (this machine
# is noisy: compare the ratios), with each file's size and throughput.
#   bench/import.sh [BUILD_DIR] [SECONDS] [ROUNDS]     (default: build, 3, 3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
seconds=${2:-3}
rounds=${3:-3}
fxprof=$build/fxprof
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py="import time
t = time.process_time()
while time.process_time() - t < $seconds: sorted(str(i) for i in range(2000))"

# Median wall seconds of a command run $rounds times.
median() {
  local times=()
  for _ in $(seq "$rounds"); do
    local s e
    s=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    e=$(date +%s.%N)
    times+=("$(echo "$e - $s" | bc)")
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((rounds + 1) / 2))p"
}

for mode in fp dwarf; do
  data=$tmp/$mode.data
  if [ "$mode" = fp ]; then g=(-g); else g=(--call-graph dwarf); fi
  perf record -q "${g[@]}" -o "$data" python3 -c "$py" >/dev/null 2>&1
  mb=$(echo "scale=1; $(stat -c %s "$data") / 1048576" | bc)
  samples=$(perf script -i "$data" -F tid 2>/dev/null | wc -l)
  fx=$(median "$fxprof" import -s -q --no-symbolicate -o "$tmp/p.json.gz" "$data")
  fxs=$(median "$fxprof" import -s -q -o "$tmp/p.json.gz" "$data")
  rep=$(median perf report -i "$data" --stdio)
  scr=$(median perf script -i "$data")
  echo "$mode: $mb MB, $samples samples: fxprof import ${fx}s (with symbols ${fxs}s), perf report --stdio ${rep}s, perf script ${scr}s"
  echo "$mode: import $(echo "scale=1; $mb / $fx" | bc) MB/s; perf script / import $(echo "scale=1; $scr / $fx" | bc)x, perf report / import $(echo "scale=1; $rep / $fx" | bc)x"
done
