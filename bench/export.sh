#!/usr/bin/env bash
# Export speed: `fxprof export folded|pprof` of a ~100k-sample profile against perf's own pipeline for the
# same program, measured in one run (this VM is noisy: compare ratios, not absolute times).
#
#   bench/export.sh [BUILD_DIR] [RUNS]
#
# The program is rec_busy spinning 12.5 s of CPU on 2 threads at 4 kHz (~100k samples), recorded three times:
#  - `fxprof record --save-only --cpu-only`: DWARF-unwound full stacks, symbols baked in. --cpu-only because
#    perf samples on-CPU time only (fxprof's default wall-clock profile adds off-CPU samples);
#  - `perf record -g` (fp): frame pointers. rec_busy is built without them, so perf's stacks stop after a
#    frame or two: cheap, but not the same stacks;
#  - `perf record --call-graph dwarf` (dwarf): perf copies 8 KiB of user stack per sample and unwinds it at
#    `perf script` time: the same full stacks as fxprof's, the fair comparison.
# fxprof's times include reading the .json.gz, symbolicating and writing; perf's are `perf script` piped
# into perf's bundled stackcollapse (`perf script report stackcollapse`; Debian has no flamegraph package
# with stackcollapse-perf.pl) and into inferno-collapse-perf when it is on the PATH. Ratios are per sample
# (the recordings differ a little in sample count); "frames/sample" shows how deep each tool's stacks are.
# Also prints the pprof size against the .json.gz (the goal: no larger).
#
# Every step prints its figure or one line saying why it has none; the script never stops silently.
set -uo pipefail
BUILD=${1:-build}
RUNS=${2:-3}
SPIN_MS=${SPIN_MS:-12500}  # CPU milliseconds per thread (12500 at 4 kHz on 2 threads: ~100k samples)
FXPROF=$BUILD/fxprof
source "$(dirname "$0")/programs.sh"
PROGRAMS=$(test_programs "$BUILD")
BUSY=$PROGRAMS/rec_busy
for f in "$FXPROF" "$BUSY"; do
  [[ -x $f ]] || { echo "bench/export.sh: $f is missing (build fxprof and fxprof_test_programs)" >&2; exit 1; }
done
command -v perf >/dev/null || { echo "bench/export.sh: perf is missing (apt-get install linux-perf)" >&2; exit 1; }
command -v bc >/dev/null || { echo "bench/export.sh: bc is missing (apt-get install bc)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# The last non-empty line a failed step wrote on stderr: the "why" of its line in the output.
why() { grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1; }

# measure NAME: runs the function NAME $RUNS times; t[NAME] = median seconds, or unset with fail[NAME] set.
declare -A t fail
measure() {
  local name=$1 times="" t0 t1
  for _ in $(seq "$RUNS"); do
    t0=$(now)
    if ! "$name" >/dev/null 2>"$TMP/$name.err"; then
      fail[$name]="failed: $(why "$TMP/$name.err")"
      return 1
    fi
    t1=$(now)
    times+="$(echo "$t1 - $t0" | bc -l)"$'\n'
  done
  t[$name]=$(printf '%s' "$times" | median)
}

# Weighted mean number of frames per sample in a folded file.
depth() { awk '{n = $NF; $NF = ""; d += n * split($0, parts, ";"); s += n} END {if (s) printf "%.1f", d / s}' "$1"; }
samples_in() { awk '{s += $NF} END {print s + 0}' "$1"; }

# ---- recordings ----
have_fx=1 have_fp=1 have_dwarf=1
if ! "$FXPROF" record --save-only --cpu-only -q -F 4000 -o "$TMP/p.json.gz" -- "$BUSY" spin "$SPIN_MS" 2 \
  >/dev/null 2>"$TMP/rec_fx.err"; then
  have_fx=0
  echo "fxprof record failed: $(why "$TMP/rec_fx.err")"
fi
if ! perf record -q -F 4000 -g -o "$TMP/fp.data" -- "$BUSY" spin "$SPIN_MS" 2 >/dev/null 2>"$TMP/rec_fp.err"; then
  have_fp=0
  echo "perf record -g failed: $(why "$TMP/rec_fp.err")"
fi
if ! perf record -q -F 4000 --call-graph dwarf -o "$TMP/dwarf.data" -- "$BUSY" spin "$SPIN_MS" 2 \
  >/dev/null 2>"$TMP/rec_dwarf.err"; then
  have_dwarf=0
  echo "perf record --call-graph dwarf failed: $(why "$TMP/rec_dwarf.err")"
fi

# ---- the steps ----
# perf script passes the options after the report name to the script: `-i` before `report` would be
# perf script's own and the report would read ./perf.data (or fail without one).
collapse_fp() { perf script report stackcollapse -i "$TMP/fp.data" >"$TMP/fp.folded"; }
collapse_dwarf() { perf script report stackcollapse -i "$TMP/dwarf.data" >"$TMP/dwarf.folded"; }
inferno_fp() { perf script -i "$TMP/fp.data" | inferno-collapse-perf >"$TMP/fp.inferno.folded"; }
inferno_dwarf() { perf script -i "$TMP/dwarf.data" | inferno-collapse-perf >"$TMP/dwarf.inferno.folded"; }
fx_folded() { "$FXPROF" export folded "$TMP/p.json.gz" -o "$TMP/p.folded"; }
fx_pprof() { "$FXPROF" export pprof "$TMP/p.json.gz" -o "$TMP/p.pb.gz"; }

have_inferno=0
command -v inferno-collapse-perf >/dev/null && have_inferno=1
steps=()
[[ $have_fx == 1 ]] && steps+=(fx_folded fx_pprof)
[[ $have_fp == 1 ]] && steps+=(collapse_fp)
[[ $have_dwarf == 1 ]] && steps+=(collapse_dwarf)
[[ $have_inferno == 1 && $have_fp == 1 ]] && steps+=(inferno_fp)
[[ $have_inferno == 1 && $have_dwarf == 1 ]] && steps+=(inferno_dwarf)
for name in "${steps[@]}"; do measure "$name"; done

# Sample counts: fxprof's from its report, perf's from its own folded output (every sample is one count).
declare -A samples frames
if [[ $have_fx == 1 ]]; then
  samples[fx]=$("$FXPROF" report --json "$TMP/p.json.gz" 2>/dev/null | sed -n 's/^{"samples":\([0-9]*\).*/\1/p')
  [[ -f $TMP/p.folded ]] && frames[fx]=$(depth "$TMP/p.folded")
fi
for v in fp dwarf; do
  if [[ -s $TMP/$v.folded ]]; then
    samples[$v]=$(samples_in "$TMP/$v.folded")
    frames[$v]=$(depth "$TMP/$v.folded")
  fi
done

# ---- report ----
per_sample_us() { echo "scale=2; $1 * 1000000 / $2" | bc -l; }
# line LABEL STEP SAMPLE_KEY
line() {
  local label=$1 step=$2 key=$3
  if [[ -n ${t[$step]:-} && -n ${samples[$key]:-} && ${samples[$key]} != 0 ]]; then
    printf '%-58s %8.3f s  %6s us/sample  %5s frames/sample\n' "$label" "${t[$step]}" \
      "$(per_sample_us "${t[$step]}" "${samples[$key]}")" "${frames[$key]:-?}"
  elif [[ -n ${fail[$step]:-} ]]; then
    printf '%-58s %s\n' "$label" "${fail[$step]}"
  else
    printf '%-58s %s\n' "$label" "not measured (its recording failed or the tool is not installed)"
  fi
}
printf 'samples: fxprof %s, perf fp %s, perf dwarf %s\n' "${samples[fx]:-?}" "${samples[fp]:-?}" \
  "${samples[dwarf]:-?}"
line "fxprof export folded (read+symbolicate+write)" fx_folded fx
line "fxprof export pprof" fx_pprof fx
line "perf fp:    perf script report stackcollapse" collapse_fp fp
line "perf dwarf: perf script report stackcollapse" collapse_dwarf dwarf
if [[ $have_inferno == 1 ]]; then
  line "perf fp:    perf script | inferno-collapse-perf" inferno_fp fp
  line "perf dwarf: perf script | inferno-collapse-perf" inferno_dwarf dwarf
else
  echo "inferno-collapse-perf: not installed (cargo install inferno), not measured"
fi

# ratio LABEL PERF_STEP PERF_KEY FX_STEP: (perf time per sample) / (fxprof time per sample).
ratio() {
  local label=$1 ps=$2 pk=$3 fs=$4
  if [[ -n ${t[$ps]:-} && -n ${t[$fs]:-} && -n ${samples[$pk]:-} && -n ${samples[fx]:-} ]]; then
    printf '%-50s %6sx\n' "$label" \
      "$(echo "scale=1; (${t[$ps]} * ${samples[fx]}) / (${t[$fs]} * ${samples[$pk]})" | bc -l)"
  else
    printf '%-50s %s\n' "$label" "n/a (a step above has no figure)"
  fi
}
echo "per sample, same run (goal: >= 10x against perf's pipeline):"
ratio "  perf fp stackcollapse / fxprof folded" collapse_fp fp fx_folded
ratio "  perf dwarf stackcollapse / fxprof folded" collapse_dwarf dwarf fx_folded
ratio "  perf fp stackcollapse / fxprof pprof" collapse_fp fp fx_pprof
ratio "  perf dwarf stackcollapse / fxprof pprof" collapse_dwarf dwarf fx_pprof
if [[ $have_inferno == 1 ]]; then
  ratio "  perf fp | inferno / fxprof folded" inferno_fp fp fx_folded
  ratio "  perf dwarf | inferno / fxprof folded" inferno_dwarf dwarf fx_folded
fi

if [[ -f $TMP/p.json.gz && -f $TMP/p.pb.gz ]]; then
  json_size=$(stat -c %s "$TMP/p.json.gz")
  pb_size=$(stat -c %s "$TMP/p.pb.gz")
  printf 'sizes: profile.json.gz %d bytes, pprof %d bytes (%s of the .json.gz; goal: no larger)\n' \
    "$json_size" "$pb_size" "$(echo "scale=3; $pb_size / $json_size" | bc -l)"
else
  echo "sizes: not measured (no profile or no pprof output)"
fi
for v in fp dwarf; do
  [[ -f $TMP/$v.data ]] && printf 'perf.data (%s): %d bytes\n' "$v" "$(stat -c %s "$TMP/$v.data")"
done
exit 0
