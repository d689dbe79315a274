#!/usr/bin/env bash
# The cost of a USDT probe hit under `fxprof record --usdt` (root): our probe (bench/usdt_bench.cpp), numbers
# only and with a string read, against the same loop untraced (a nop); then python3's function__return per
# Python call, against python3 alone and against perf counting (`perf stat -e sdt_python:...`: the uprobe
# trap alone) and recording it. The trap dominates: compare with perf's, not with the untraced nop.
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
# Debian's python3 (its probes; pyenv's have none): calls of an empty function, the process's CPU time a
# call, untraced, under --usdt function__return (3.11's function__entry never fires) and under perf.
py=/usr/bin/python3
calls=$((n / 2))
script="import time
def f(): pass
t = time.process_time()
for _ in range($calls): f()
print(f'{(time.process_time() - t) * 1e9 / $calls:.0f} ns a call')"
echo "python3 untraced:         $("$py" -c "$script")"
echo "python3 --usdt return:    $(rec --usdt 'python:function__return=-,name:%s' -- "$py" -c "$script")"
grep "usdt:" "$dir/err" || true
real=$(readlink -f "$py")
if perf buildid-cache --add "$real" >/dev/null 2>&1 && perf probe -x "$real" sdt_python:function__return >/dev/null 2>&1; then
  echo "python3 perf stat -e:     $(perf stat -o /dev/null -e sdt_python:function__return -- "$py" -c "$script")"
  echo "python3 perf record -e:   $(perf record -q -o "$dir/perf.data" -e sdt_python:function__return -- "$py" -c "$script" 2>/dev/null)"
  perf probe -d 'sdt_python:*' >/dev/null 2>&1 || true
else
  echo "python3 perf:             (perf probe cannot add sdt_python:function__return here)"
fi
