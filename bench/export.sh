#!/usr/bin/env bash
# Export speed: `fxprof export folded|pprof` of a ~100k-sample profile against perf's own pipeline for the
# same kind of recording, measured in one run (this VM is noisy: compare ratios, not absolute times).
#
#   bench/export.sh [BUILD_DIR] [RUNS]
#
# The program is rec_busy spinning 12.5 s of CPU on 2 threads, recorded at 4 kHz (~100k samples) once by
# `fxprof record --save-only` (symbols baked in) and once by `perf record -g`. fxprof's times include reading
# the .json.gz, symbolicating and writing; perf's are `perf script | stackcollapse` - perf's bundled
# `perf script report stackcollapse` (Debian has no flamegraph package with stackcollapse-perf.pl; inferno's
# collapse is used too when inferno-collapse-perf is on the PATH). Also prints the pprof size against the
# .json.gz (the goal: no larger).
set -euo pipefail
BUILD=${1:-build}
RUNS=${2:-3}
FXPROF=$BUILD/fxprof
BUSY=$BUILD/tests/programs/rec_busy
for f in "$FXPROF" "$BUSY"; do
  [[ -x $f ]] || { echo "bench/export.sh: $f is missing (build fxprof and fxprof_test_programs)" >&2; exit 1; }
done
command -v perf >/dev/null || { echo "bench/export.sh: perf is missing (apt-get install linux-perf)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

now() { date +%s.%N; }
wall() {
  local t0 t1
  t0=$(now)
  "$@" >/dev/null 2>&1
  t1=$(now)
  echo "$t1 - $t0" | bc -l
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

"$FXPROF" record --save-only -F 4000 -o "$TMP/p.json.gz" -- "$BUSY" spin 12500 2 2>"$TMP/rec.err" || { cat "$TMP/rec.err"; exit 1; }
perf record -q -F 4000 -g -o "$TMP/perf.data" -- "$BUSY" spin 12500 2 >/dev/null 2>&1
fx_samples=$("$FXPROF" report --json "$TMP/p.json.gz" | sed -n 's/^{"samples":\([0-9]*\).*/\1/p')
perf_samples=$(perf script -i "$TMP/perf.data" -F period 2>/dev/null | wc -l)

collapse_perf() { perf script -i "$TMP/perf.data" report stackcollapse >"$TMP/perf.folded"; }
collapse_inferno() { perf script -i "$TMP/perf.data" | inferno-collapse-perf >"$TMP/inferno.folded"; }
fx_folded() { "$FXPROF" export folded "$TMP/p.json.gz" -o "$TMP/p.folded"; }
fx_pprof() { "$FXPROF" export pprof "$TMP/p.json.gz" -o "$TMP/p.pb.gz"; }

declare -A t
for name in fx_folded fx_pprof collapse_perf; do
  for _ in $(seq "$RUNS"); do wall "$name"; done | median >"$TMP/$name.t"
  t[$name]=$(cat "$TMP/$name.t")
done
have_inferno=0
if command -v inferno-collapse-perf >/dev/null; then
  have_inferno=1
  t[collapse_inferno]=$(for _ in $(seq "$RUNS"); do wall collapse_inferno; done | median)
fi

per_sample_us() { echo "scale=2; $1 * 1000000 / $2" | bc -l; }
printf 'samples: fxprof %s, perf %s\n' "$fx_samples" "$perf_samples"
printf '%-44s %8.3f s  %6s us/sample\n' "fxprof export folded (read+symbolicate+write)" "${t[fx_folded]}" "$(per_sample_us "${t[fx_folded]}" "$fx_samples")"
printf '%-44s %8.3f s  %6s us/sample\n' "fxprof export pprof" "${t[fx_pprof]}" "$(per_sample_us "${t[fx_pprof]}" "$fx_samples")"
printf '%-44s %8.3f s  %6s us/sample\n' "perf script report stackcollapse" "${t[collapse_perf]}" "$(per_sample_us "${t[collapse_perf]}" "$perf_samples")"
[[ $have_inferno == 1 ]] && printf '%-44s %8.3f s  %6s us/sample\n' "perf script | inferno-collapse-perf" "${t[collapse_inferno]}" "$(per_sample_us "${t[collapse_inferno]}" "$perf_samples")"
# Ratios per sample (the two recordings differ a little in sample count).
ratio() { echo "scale=1; ($1 / $2) / ($3 / $4)" | bc -l; }
printf 'perf stackcollapse / fxprof folded: %sx   perf stackcollapse / fxprof pprof: %sx (per sample, same run)\n' \
  "$(ratio "${t[collapse_perf]}" "$perf_samples" "${t[fx_folded]}" "$fx_samples")" \
  "$(ratio "${t[collapse_perf]}" "$perf_samples" "${t[fx_pprof]}" "$fx_samples")"
[[ $have_inferno == 1 ]] && printf 'inferno collapse / fxprof folded: %sx\n' "$(ratio "${t[collapse_inferno]}" "$perf_samples" "${t[fx_folded]}" "$fx_samples")"
json_size=$(stat -c %s "$TMP/p.json.gz")
pb_size=$(stat -c %s "$TMP/p.pb.gz")
printf 'sizes: profile.json.gz %d bytes, pprof %d bytes (%s of the .json.gz)\n' "$json_size" "$pb_size" \
  "$(echo "scale=2; $pb_size / $json_size" | bc -l)"
