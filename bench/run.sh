#!/usr/bin/env bash
# Runs every benchmark (`make bench`): recording overhead against perf, unwinding throughput and DWARF
# recording overhead, symbolication against llvm-symbolizer and eu-addr2line, export against perf's stack
# collapsing, record's wall/CPU/RSS against perf record at two loads, the server, off-CPU capture, the agent over time, the critical path's walk, long profiles, load, JIT names, heap profiling against heaptrack.
# Each prints ratios measured in the same run; this machine is noisy, so compare ratios, not absolute times.
# Every bench runs to the end even when one before it failed; a bench that could not measure (a missing
# tool, a failed run) is named at the end and the exit status is 1.
#   bench/run.sh [BUILD_DIR]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
cmake --build "$build" --target fxprof fxprof_demo fxprof_test_programs benches >/dev/null || exit 1
failed=()
# bench TITLE COMMAND...: runs one bench under bash (they use bash's `source`, arrays and [[ ]]).
bench() {
  local title=$1
  shift
  echo "== $title"
  if ! "$@"; then
    echo "bench/run.sh: FAILED: $title" >&2
    failed+=("$title")
  fi
  echo
}
bench "recording (bench/record.sh)" bash "$here/record.sh" "$build"
bench "record -a against perf record -a, both cores busy (bench/record_all.sh)" bash "$here/record_all.sh" "$build"
bench "fxprof agent at 19 Hz over time, both cores busy: CPU share, RSS, windows on time (bench/agent.sh; AGENT_MINUTES, default 10)" \
  bash "$here/agent.sh" "$build" "${AGENT_MINUTES:-10}"
bench "what the user waits for after the program's exit (bench/latency.sh)" bash "$here/latency.sh" "$build"
bench "record against perf record (dwarf, -g) on short and real programs, idle and with two busy loops: wall, CPU after the exit, peak RSS (bench/record_cost.py)" \
  python3 "$here/record_cost.py" "$build"
bench "unwinding (bench/unwind.sh)" bash "$here/unwind.sh" "$build"
bench "symbolication (bench/symbolize.sh)" bash "$here/symbolize.sh" "$build"
bench "export (bench/export.sh)" bash "$here/export.sh" "$build"
bench "local server (bench/http_bench.cpp)" "$build/bench/fxprof_http_bench" 3
bench "the critical path, its track and --latency on a 60 s, 16-thread model (bench/critical_path_bench.cpp)" \
  "$build/bench/fxprof_critical_path_bench"
bench "off-CPU capture (bench/offcpu.sh)" bash "$here/offcpu.sh" "$build"
bench "memory of an hour-long profile (bench/longprofile.sh; LONGPROFILE_SECONDS=60 for a quick run)" \
  bash "$here/longprofile.sh" "$build"
bench "fxprof import against perf report and perf script (bench/import.sh)" bash "$here/import.sh" "$build"
bench "fxprof load of a big profile: time to serving (bench/load.sh)" bash "$here/load.sh" "$build"
bench "JIT names over time (bench/jit.sh)" bash "$here/jit.sh" "$build" 1
bench "heap profiling overhead against heaptrack (bench/heap.sh)" bash "$here/heap.sh" "$build"
bench "heap profiling of real programs against heaptrack (bench/heap_real.sh)" bash "$here/heap_real.sh" "$build"
bench "the marker header's cost per marker (bench/markers.sh)" bash "$here/markers.sh" "$build"
bench "the NVTX/ITT injection library's cost per range (bench/inject.sh)" bash "$here/inject.sh" "$build"
bench "a USDT probe hit's cost under record --usdt (bench/usdt.sh)" bash "$here/usdt.sh" "$build"
if ((${#failed[@]})); then
  echo "bench/run.sh: ${#failed[@]} bench(es) could not measure:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
