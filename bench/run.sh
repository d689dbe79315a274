#!/usr/bin/env bash
# Runs every benchmark (`make bench`): recording overhead against perf, unwinding throughput and DWARF
# recording overhead, symbolication against llvm-symbolizer and eu-addr2line, export against perf's stack collapsing. Each prints ratios measured
# in the same run; this machine is noisy, so compare ratios, not absolute times.
#   bench/run.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
cmake --build "$build" --target fxprof fxprof_demo fxprof_test_programs benches >/dev/null
echo "== recording (bench/record.sh)"
bash "$here/record.sh" "$build"
echo
echo "== what the user waits for after the program's exit (bench/latency.sh)"
bash "$here/latency.sh" "$build"
echo
echo "== unwinding (bench/unwind.sh)"
sh "$here/unwind.sh" "$build"
echo
echo "== symbolication (bench/symbolize.sh)"
sh "$here/symbolize.sh" "$build"
echo
echo "== export (bench/export.sh)"
bash "$here/export.sh" "$build"
echo "== local server (bench/http_bench.cpp)"
"$build/bench/fxprof_http_bench" 3
echo
echo "== off-CPU capture (bench/offcpu.sh)"
bash "$here/offcpu.sh" "$build"
echo
echo "== memory of an hour-long profile (bench/longprofile.sh; LONGPROFILE_SECONDS=60 for a quick run)"
bash "$here/longprofile.sh" "$build"

echo "== fxprof load of a big profile: time to serving (bench/load.sh)"
bash "$here/load.sh" "$build"
echo
echo "== JIT names over time (bench/jit.sh)"
bash "$here/jit.sh" "$build" 1
echo
echo "== the marker header's cost per marker (bench/markers.sh)"
bash "$here/markers.sh" "$build"
