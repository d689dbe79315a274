#!/usr/bin/env bash
# The cost of a USDT probe hit under `fxprof record --usdt` (root): our probe (bench/usdt_bench.cpp), numbers
# only and with a string read, against the same loop untraced (a nop); then python3's function__entry/return
# per Python call, against python3 alone and, when perf can, against `perf record -e sdt_python:*`.
#   bench/usdt.sh [BUILD_DIR] [N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
n=${2:-1000000}
fxprof="$build/fxprof"
bin="$build/bench/fxprof_usdt_bench"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
rec() { "$fxprof" record --save-only --no-symbolicate -q -o "$dir/p.json.gz" "$@" 2>"$dir/err" || { cat "$dir/err" >&2; return 1; }; }
echo "untraced:                 $("$bin" "$n")"
echo "--usdt fxbench:hit:       $(rec --usdt fxbench:hit -- "$bin" "$n")"
echo "--usdt ...=%d,%s:         $(rec --usdt 'fxbench:hit=i:%d,name:%s' -- "$bin" "$n")"
grep "usdt:" "$dir/err" || true
# python3: a million calls of an empty function, CPU time of the process.
calls=$((n / 2))
script="import time
def f(): pass
t = time.process_time()
for _ in range($calls): f()
print(f'{(time.process_time() - t) * 1e9 / $calls:.0f} ns a call')"
echo "python3 untraced:         $(python3 -c "$script")"
echo "python3 --usdt-pair:      $(rec --usdt 'python:function__entry=-,name:%s' --usdt-pair -- python3 -c "$script")"
grep "usdt:" "$dir/err" || true
if perf probe -x "$(readlink -f "$(command -v python3)")" sdt_python:function__entry >/dev/null 2>&1 &&
  perf probe -x "$(readlink -f "$(command -v python3)")" sdt_python:function__return >/dev/null 2>&1; then
  echo "python3 perf record -e:   $(perf record -q -o "$dir/perf.data" -e sdt_python:function__entry \
    -e sdt_python:function__return -- python3 -c "$script" 2>/dev/null)"
  perf probe -d 'sdt_python:*' >/dev/null 2>&1 || true
else
  echo "python3 perf record -e:   (perf probe cannot add sdt_python probes here)"
fi
