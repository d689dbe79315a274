#!/bin/sh
# Builds the symbolizer tests' split DWARF programs of one source (run by CMake), each with its .dwo moved
# into a dwo/ folder (so libdw does not find it by DW_AT_comp_dir) and its package(s) beside it:
#   OUT/split/gcc4/sym_split4      g++ -gdwarf-4 -gsplit-dwarf (GNU's split DWARF, version 2 package index)
#                  sym_split4.dwp       packaged by binutils' dwp
#                  sym_split4.llvm.dwp  packaged by llvm-dwp
#                  dwo/sym_split4.dwo
#   OUT/split/clang5/sym_split5    clang++ -gsplit-dwarf (DWARF 5, version 5 package index)
#                  sym_split5.llvm.dwp  packaged by llvm-dwp
#                  dwo/sym_split5.dwo
#   OUT/split/gcc4/contig4, OUT/split/clang5/contig5 (and .dwp, .llvm.dwp, dwo/ alike): CONTIG, a C program
#                  whose unit is one contiguous range (DWARF 4 range lists relative to the skeleton's low_pc)
# g++'s default DWARF 5 split units are not packaged: binutils 2.40's dwp writes an empty package of them and
# llvm-dwp 14 (and 16) never finishes on them.
# usage: make_split_variants.sh SOURCE CONTIG OUT
set -eu
src=$1
contig=$2
out=$3/split
rm -rf "$out"
mkdir -p "$out/gcc4/dwo" "$out/clang5/dwo"
cd "$out/gcc4"
g++ -O2 -g -gdwarf-4 -gsplit-dwarf -c "$src" -o sym_split4.o
g++ sym_split4.o -o sym_split4
dwp -e sym_split4 -o sym_split4.dwp
llvm-dwp -e sym_split4 -o sym_split4.llvm.dwp
mv sym_split4.dwo dwo/
rm sym_split4.o
gcc -O2 -g -gdwarf-4 -gsplit-dwarf -fno-reorder-functions -c "$contig" -o contig4.o
gcc contig4.o -o contig4
dwp -e contig4 -o contig4.dwp
llvm-dwp -e contig4 -o contig4.llvm.dwp
mv contig4.dwo dwo/
rm contig4.o
cd "$out/clang5"
clang++ -O2 -g -gsplit-dwarf -c "$src" -o sym_split5.o
clang++ sym_split5.o -o sym_split5
llvm-dwp -e sym_split5 -o sym_split5.llvm.dwp
mv sym_split5.dwo dwo/
rm sym_split5.o
clang -O2 -g -gsplit-dwarf -c "$contig" -o contig5.o  # clang keeps main in .text
clang contig5.o -o contig5
llvm-dwp -e contig5 -o contig5.llvm.dwp
mv contig5.dwo dwo/
rm contig5.o
