#!/bin/sh
# Builds the symbolizer tests' variants of one -O2 -g binary (run by CMake):
#   OUT/debuglink/sym_linked         stripped, .gnu_debuglink -> sym_inline.debug beside it
#   OUT/buildid/sym_stripped         stripped, debug file only in OUT/buildid/debug/.build-id/xx/rest.debug
#   OUT/mini/sym_mini                stripped, .symtab only in .gnu_debugdata (MiniDebugInfo, xz)
# usage: make_variants.sh BINARY OUT
set -eu
bin=$1
out=$2
name=$(basename "$bin")
rm -rf "$out/debuglink" "$out/buildid" "$out/mini"
mkdir -p "$out/debuglink" "$out/buildid" "$out/mini"

objcopy --only-keep-debug "$bin" "$out/debuglink/$name.debug"
objcopy --strip-all --add-gnu-debuglink="$out/debuglink/$name.debug" "$bin" "$out/debuglink/sym_linked"

id=$(readelf -n "$bin" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p' | head -1)
[ -n "$id" ] || { echo "no build ID in $bin" >&2; exit 1; }
prefix=$(echo "$id" | cut -c1-2)
rest=$(echo "$id" | cut -c3-)
mkdir -p "$out/buildid/debug/.build-id/$prefix"
objcopy --only-keep-debug "$bin" "$out/buildid/debug/.build-id/$prefix/$rest.debug"
objcopy --strip-all "$bin" "$out/buildid/sym_stripped"

objcopy --only-keep-debug "$bin" "$out/mini/full.debug"
objcopy --strip-debug --remove-section=.comment --remove-section=.gdb_index "$out/mini/full.debug" "$out/mini/mini.elf"
xz -f "$out/mini/mini.elf"
objcopy --strip-all "$bin" "$out/mini/sym_mini"
objcopy --add-section .gnu_debugdata="$out/mini/mini.elf.xz" "$out/mini/sym_mini"
rm -f "$out/mini/full.debug" "$out/mini/mini.elf.xz"
