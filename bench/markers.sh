#!/usr/bin/env bash
# The marker header's cost per marker (bench/markers_bench.cpp): not recording, then recording (FXPROF_MARKERS
# set as `fxprof record` sets it, to a private folder removed afterwards).
#   bench/markers.sh [BUILD_DIR] [N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
n=${2:-1000000}
bin="$build/bench/fxprof_markers_bench"
env -u FXPROF_MARKERS "$bin" "$n"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
FXPROF_MARKERS="$dir" "$bin" "$n"
echo "marker file: $(du -sh --apparent-size "$dir" | cut -f1) apparent, $(du -sh "$dir" | cut -f1) on disk"
