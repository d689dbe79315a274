#!/usr/bin/env bash
# The NVTX/ITT injection library's cost per range (bench/inject_bench.cpp): without the library, loaded but not
# recording, and recording (FXPROF_MARKERS set as `fxprof record` sets it, to a private folder removed after).
#   bench/inject.sh [BUILD_DIR] [N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
n=${2:-1000000}
bin="$build/bench/fxprof_inject_bench"
lib="$build/libfxprof_inject.so"
env -u FXPROF_MARKERS "$bin" - "$n"
env -u FXPROF_MARKERS "$bin" "$lib" "$n"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
FXPROF_MARKERS="$dir" "$bin" "$lib" "$n"
