#!/usr/bin/env bash
# Symbolization benchmark: fxprof's /symbolicate/v5 cold and warm against llvm-symbolizer and eu-addr2line on the
# same 10,000 addresses, for a large symbol table (libLLVM, llvm-14 package) and a large binary with full DWARF.
#   bench/symbolize.sh [BUILD_DIR]     (default: build; DWARF_BIN=FILE picks the DWARF binary)
# Times are CPU time (user + system) of each tool, measured in the same run: the machine is shared.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
build=${1:-$src/build}
bench=$build/bench/symbolizer/fxprof_symbolize_bench
if grep -q fxprof_symbolize_bench "$build/build.ninja" 2>/dev/null; then
  cmake --build "$build" --target fxprof_symbolize_bench >/dev/null
else
  # bench/symbolizer is not added to the build yet: compile the bench against the build's libraries.
  cmake --build "$build" --target fxprof_server fxprof_symbolizer fxprof_model >/dev/null
  mkdir -p "$build/bench/symbolizer"
  g++ -std=c++20 -O2 -I"$src" "$src/bench/symbolize_bench.cpp" -o "$bench" \
    "$build/server/libfxprof_server.a" "$build/symbolizer/libfxprof_symbolizer.a" "$build/elf/libfxprof_elf.a" \
    "$build/model/libfxprof_model.a" "$build/base/libfxprof_base.a" \
    $(pkg-config --libs libdw libelf capstone liblzma simdjson zlib) -liberty -ldl -lpthread
fi
command -v llvm-symbolizer >/dev/null || echo "note: llvm-symbolizer missing (apt-get install llvm-14)"
command -v eu-addr2line >/dev/null || echo "note: eu-addr2line missing (apt-get install elfutils)"

llvm_lib=$(ls /usr/lib/llvm-14/lib/libLLVM-14.so.1 /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1 2>/dev/null | head -1 || true)
if [ -n "$llvm_lib" ]; then
  echo "== large symbol table: $llvm_lib"
  "$bench" "$(readlink -f "$llvm_lib")" --count 10000
fi
# A large -O2 -g C++ binary (Catch2, simdjson, the symbolizer): the symbolizer's own test program.
dwarf_bin=${DWARF_BIN:-$build/tests/symbolizer/test_symbolizer}
[ -f "$dwarf_bin" ] || cmake --build "$build" --target test_symbolizer >/dev/null 2>&1 || true
[ -f "$dwarf_bin" ] || dwarf_bin=$build/fxprof
if [ -f "$dwarf_bin" ]; then
  echo "== full DWARF: $dwarf_bin"
  "$bench" "$dwarf_bin" --count 10000
fi
