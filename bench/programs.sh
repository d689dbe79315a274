# Sourced by the benchmark scripts: test_programs BUILD prints the folder the test programs are built in
# (FXPROF_TEST_PROGRAMS_BINARY_DIR, tests/CMakeLists.txt: one folder shared by a source tree's builds).
test_programs() { sed -n 's/^FXPROF_TEST_PROGRAMS_BINARY_DIR:PATH=//p' "$1/CMakeCache.txt"; }
