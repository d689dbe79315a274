#!/bin/sh
# Runs every libFuzzer harness of a fuzz build from the seeds in fuzz/corpus/<name>/ (new inputs go to
# BUILD/fuzz-corpus/<name>/, never into the repository). Exit status: non-zero on the first harness that
# finds a crash, a leak or a timeout; its input is in BUILD/fuzz-crashes/ (add it to the seeds once fixed).
#
#   fuzz/run.sh BUILD SECONDS   explore: each harness for SECONDS, growing BUILD/fuzz-corpus (`make fuzz`)
#   fuzz/run.sh BUILD smoke     the test command's run: a fixed seed and a fixed number of inputs per harness
#                               from the repository's seeds only, so every machine replays the same inputs
#                               (a few seconds each here) and CI's verdict does not depend on luck or speed
#   fuzz/run.sh BUILD MODE NAME one harness (what the two above run, JOBS harnesses at a time: default nproc)
set -eu
build=$1
mode=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$build/fuzz-crashes"
# About 5 s each in the sanitizer build (-O0), 40 s of CPU in all: exploring is `make fuzz`'s job.
smoke_runs() {
  case $1 in
    fuzz_perf_records) echo 150 ;;   # each input builds a profile and reads /proc/kallsyms
    fuzz_records) echo 40000 ;;      # decoding alone: about 2 s
    fuzz_perf_data) echo 20000 ;;    # a whole file read, sorted and decoded
    fuzz_pprof) echo 20000 ;;        # decoded, checked and built into a profile
    fuzz_elf) echo 15000 ;;
    fuzz_gecko_reader) echo 8000 ;;  # each input is read twice: whole and in chunks of a few bytes
    fuzz_demangle) echo 700000 ;;
    fuzz_cfi) echo 300000 ;;
    fuzz_http_requests) echo 60000 ;;  # each input is decoded twice: whole and a few bytes at a time
    *) echo 120000 ;;
  esac
}
run_one() {
  name=$1
  seeds="$here/corpus/$name/"
  bin="$build/fuzz/$name"
  [ -x "$bin" ] || { echo "fuzz: $bin is not built" >&2; exit 1; }
  work="$build/fuzz-corpus/$name"
  if [ "$mode" = smoke ]; then
    rm -rf "$work"
    limit="-seed=1 -runs=$(smoke_runs "$name")"
  else
    limit="-max_total_time=$mode"
  fi
  mkdir -p "$work"
  log="$build/fuzz-$name.log"
  # shellcheck disable=SC2086
  if ! "$bin" $limit -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/fuzz-crashes/$name-" "$work" "$seeds" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "fuzz: $name failed (log: $log, input: $build/fuzz-crashes/)" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
  echo "fuzz: $name ok: ${runs:-?} runs, ${cov:-cov: ?}"
}
if [ $# -ge 3 ]; then
  run_one "$3"
  exit
fi
# Harnesses are single-threaded: run JOBS of them at once; xargs stops with a non-zero status if one fails.
ls "$here/corpus" | xargs -P "${JOBS:-$(nproc)}" -I{} sh "$0" "$build" "$mode" {}
