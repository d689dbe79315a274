#!/bin/sh
# Runs every libFuzzer harness of a fuzz build for SECONDS each, starting from the seeds in fuzz/corpus/<name>/
# (new inputs go to BUILD/fuzz-corpus/<name>/, never into the repository). Exit status: non-zero on the first
# harness that finds a crash, a leak or a timeout; its input is in BUILD/fuzz-crashes/.
# Usage: fuzz/run.sh BUILD SECONDS
set -eu
build=$1
seconds=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$build/fuzz-crashes"
for seeds in "$here"/corpus/*/; do
  name=$(basename "$seeds")
  bin="$build/fuzz/$name"
  [ -x "$bin" ] || { echo "fuzz: $bin is not built" >&2; exit 1; }
  work="$build/fuzz-corpus/$name"
  mkdir -p "$work"
  log="$build/fuzz-$name.log"
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/fuzz-crashes/$name-" "$work" "$seeds" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "fuzz: $name failed (log: $log, input: $build/fuzz-crashes/)" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
  echo "fuzz: $name ok: ${runs:-?} runs, ${cov:-cov: ?} in ${seconds} s"
done
