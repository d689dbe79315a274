#!/usr/bin/env bash
# Heap profiling on real programs, end to end (program start to profile written), side by side with
# heaptrack, the runs alternated: CPython with PYTHONMALLOC=malloc building and serialising a dict, Debian's
# sqlite3 running 100k INSERTs, and g++'s compiler proper (cc1plus) parsing <bits/stdc++.h>. For each: bare,
# `fxprof record --heap` (sampled), `--heap=full`, heaptrack; the best (lowest) of RUNS runs of wall time and
# of CPU time (user+sys of everything the run started: the recorder, heaptrack_interpret) as multiples of the
# bare run, and the sizes of the files. CPU time is the steadier figure on a shared machine; wall time is what the user waits.
#
#   bench/heap_real.sh [BUILD_DIR] [RUNS] [PROGRAMS...]   (PROGRAMS: python sqlite gcc; default all three)
set -euo pipefail
BUILD=$(realpath "${1:-build}")
RUNS=${2:-3}
shift $(($# > 2 ? 2 : $#))
PROGS=("${@:-python sqlite gcc}")
read -ra PROGS <<<"${PROGS[*]}"
FXPROF=$BUILD/fxprof
[[ -x $FXPROF ]] || { echo "bench/heap_real.sh: $FXPROF is missing (build the fxprof target)" >&2; exit 1; }
for t in heaptrack sqlite3 g++ /usr/bin/python3 /usr/bin/time; do
  command -v "$t" >/dev/null || { echo "bench/heap_real.sh: $t is missing" >&2; exit 1; }
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cat >"$TMP/alloc.py" <<'EOF'
import json
d = {}
for i in range(150000):
    d["k%d" % i] = [i, str(i) * 3, (i, i + 1)]
s = json.dumps(d)
back = json.loads(s)
keep = [x for x in back.items() if x[1][0] % 7 == 0]
print(len(s), len(keep))
EOF
/usr/bin/python3 - "$TMP/ins.sql" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write("CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL);\nBEGIN;\n")
    for i in range(100000):
        f.write("INSERT INTO t(b,c) VALUES('row %d %s', %d.5);\n" % (i, "x" * (i % 40), i))
    f.write("COMMIT;\nSELECT count(*), sum(length(b)) FROM t;\n")
EOF
printf '#include <bits/stdc++.h>\nint main() { std::map<std::string, std::vector<int>> m; return m.size(); }\n' \
  >"$TMP/big.cpp"

# g++'s own work is cc1plus's, a child the driver forks and execs; heaptrack does not follow it there, so every
# tool runs cc1plus directly, with the arguments the driver gives it.
CC1=$(cd "$TMP" && g++ -std=c++20 -fsyntax-only big.cpp -### 2>&1 | grep cc1plus | head -1)
CC1=${CC1/ big.cpp / $TMP\/big.cpp }

cmd_of() {
  case $1 in
    python) echo "/usr/bin/python3 $TMP/alloc.py" ;;  # PYTHONMALLOC=malloc: exported below
    sqlite) echo "sqlite3 :memory: '.read $TMP/ins.sql'" ;;
    gcc) echo "$CC1" ;;
  esac
}

# Runs "$@" and appends "wall cpu" (seconds) to the named list.
measure() {
  local name=$1
  shift
  /usr/bin/time -f "%e %U %S" -o "$TMP/t" "$@" >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
  read -r wall user sys <"$TMP/t"
  echo "$wall $(echo "$user + $sys" | bc -l)" >>"$TMP/$name"
}
best() { sort -g -k"$2" "$TMP/$1" | head -1 | awk -v c="$2" '{print $c}'; }

# Every allocation of CPython through malloc (else pymalloc's arenas hide most of them); the program itself is
# what each tool starts (heaptrack does not follow an exec by `env`).
export PYTHONMALLOC=malloc
printf "%-8s %-10s %9s %9s %9s %9s %10s\n" program mode wall_s cpu_s wall_x cpu_x file_MB
for prog in "${PROGS[@]}"; do
  cmd=$(cmd_of "$prog")
  for ((r = 0; r < RUNS; r++)); do
    eval "measure $prog.bare $cmd"
    eval "measure $prog.sampled $FXPROF record --heap -s -o $TMP/s.json.gz -- $cmd"
    eval "measure $prog.full $FXPROF record --heap=full -s -o $TMP/f.json.gz -- $cmd"
    rm -f "$TMP"/ht.*
    eval "measure $prog.heaptrack heaptrack -o $TMP/ht $cmd"
  done
  bw=$(best "$prog.bare" 1)
  bc_=$(best "$prog.bare" 2)
  for mode in bare sampled full heaptrack; do
    w=$(best "$prog.$mode" 1)
    c=$(best "$prog.$mode" 2)
    size=""
    [[ $mode == sampled ]] && size=$(stat -c %s "$TMP/s.json.gz")
    [[ $mode == full ]] && size=$(stat -c %s "$TMP/f.json.gz")
    [[ $mode == heaptrack ]] && size=$(stat -c %s "$TMP"/ht.*)
    printf "%-8s %-10s %9.2f %9.2f %9.2f %9.2f %10s\n" "$prog" "$mode" "$w" "$c" "$(echo "$w / $bw" | bc -l)" \
      "$(echo "$c / $bc_" | bc -l)" "${size:+$(echo "scale=2; $size / 1000000" | bc -l)}"
  done
done
