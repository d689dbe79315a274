#!/usr/bin/env bash
# Time from `fxprof load FILE` to serving: the first 200 of /profile.json (its head, not the whole body) and
# of /symbolicate/v5 (a library of the profile's head), on a big profile made by fxprof_longprofile_bench
# (8 threads x 1 h at 1 kHz: 28.8M samples, ~315 MB gzipped) or on the FILE given.
#
#   bench/load.sh [BUILD_DIR] [FILE]
set -uo pipefail
BUILD=${1:-build}
FXPROF=$BUILD/fxprof
GEN=$BUILD/bench/fxprof_longprofile_bench
TMP=$(mktemp -d)
LOAD_PID=
trap '[[ -n $LOAD_PID ]] && kill -INT $LOAD_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT
for t in curl python3; do
  command -v $t >/dev/null || { echo "bench/load.sh: $t is missing (apt-get install $t)" >&2; exit 1; }
done
PROFILE=${2:-}
if [[ -z $PROFILE ]]; then
  [[ -x $GEN ]] || { echo "bench/load.sh: $GEN is missing (build fxprof_longprofile_bench)" >&2; exit 1; }
  PROFILE=$TMP/long.json.gz
  "$GEN" "$PROFILE" "${LONGPROFILE_SECONDS:-3600}" 8 >/dev/null || { echo "bench/load.sh: the generator failed" >&2; exit 1; }
fi
[[ -x $FXPROF ]] || { echo "bench/load.sh: $FXPROF is missing" >&2; exit 1; }
mkfifo "$TMP/out"
t0=$(date +%s.%N)
"$FXPROF" load -n -P 0 "$PROFILE" >"$TMP/out" 2>"$TMP/err" &
LOAD_PID=$!
read -r url <"$TMP/out" || { echo "bench/load.sh: fxprof load printed no URL: $(head -n 1 "$TMP/err")" >&2; exit 1; }
t_url=$(date +%s.%N)
# The profile and symbol server URLs, decoded from the printed Firefox Profiler URL.
read -r profile server < <(python3 -c 'import sys, urllib.parse as u
s = sys.argv[1].split("/from-url/", 1)[1]; p, q = s.split("/?symbolServer=", 1)
print(u.unquote(p), u.unquote(q.split("&")[0]))' "$url")
t_ask=$(date +%s.%N)
code=$(curl -s -I -o /dev/null -w '%{http_code}' "$profile")  # HEAD: the answer's head, not 315 MB
t_profile=$(date +%s.%N)
# A library of the profile's head, as the front end would ask for it.
lib=$(python3 -c 'import gzip, json, sys, re
head = (gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rb").read(1 << 20).decode("utf-8", "replace")
m = re.search(r"\"debugName\":\"([^\"]*)\".{0,400}?\"breakpadId\":\"([^\"]*)\"", head)
print(m.group(1), m.group(2))' "$PROFILE")
read -r name id <<<"$lib"
t_ask2=$(date +%s.%N)
scode=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
  -d "{\"jobs\":[{\"memoryMap\":[[\"$name\",\"$id\"]],\"stacks\":[[[0,4096]]]}]}" "$server/symbolicate/v5")
t_sym=$(date +%s.%N)
ms() { echo "($1 - $t0) * 1000" | bc -l; }
# The requests' own times are printed too: this script's python and curl start-ups are not the server's.
printf 'fxprof load of %s (%.0f MB): URL at %.0f ms; HEAD /profile.json %s in %.0f ms; POST /symbolicate/v5 %s in %.0f ms (done %.0f ms after the start)\n' \
  "$(basename "$PROFILE")" "$(echo "$(stat -c %s "$PROFILE") / 1048576" | bc -l)" "$(ms "$t_url")" \
  "$code" "$(echo "($t_profile - $t_ask) * 1000" | bc -l)" "$scode" "$(echo "($t_sym - $t_ask2) * 1000" | bc -l)" "$(ms "$t_sym")"
