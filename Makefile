# fxprof's one entry point.  make: install missing packages and build build/fxprof.  make demo: profile the
# bundled demo program.  make test: build and run every test, then again under ASan+UBSan.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
JOBS       ?= $(shell nproc)
# ccache (CMakeLists.txt uses it where installed) keys objects by paths relative to the source tree, so the
# build folders of one clone, and other clones on the machine, share what they compiled.
export CCACHE_BASEDIR ?= $(CURDIR)
# The tests' precompiled Catch2 header: ccache caches its users only with these (ccache manual, "Precompiled
# headers"); the header's own time stamps never matter to a build that starts from scratch.
export CCACHE_SLOPPINESS ?= pch_defines,time_macros,include_file_mtime,include_file_ctime
DEPS       := g++ cmake ninja-build pkg-config libbpf-dev libsimdjson-dev zlib1g-dev libcpp-httplib-dev catch2 \
              libdw-dev libelf-dev libdebuginfod-dev libcapstone-dev liblzma-dev libdeflate-dev libprotozero-dev libzstd-dev \
              libunwind-dev libiberty-dev libcurl4-openssl-dev clang valgrind
# The tests use every tool they need, none is optional (a missing one fails the suite, never skips a test):
# perf for the unwinder's cross-check, lld for lld-linked binaries, rustc for Rust programs (rustup's in
# ~/.cargo/bin is preferred when present), nodejs for JIT-named frames and profiler-cli, libc6-dbg for
# libc's debug info, dwz for the dwz'd DWARF test, go for `go tool pprof` reading our pprof, xmllint and chromium for the SVG flame graphs,
# clang and its libFuzzer runtime for the fuzzers' smoke run, binutils' dwp, llvm's llvm-dwp and clang for the
# split DWARF package tests, systemtap-sdt-dev's <sys/sdt.h> for a program with USDT probes, strace to count the
# files `record --share` opens, libmimalloc-dev for a program calling mimalloc's own API, libomp-14-dev and
# libtbb-dev for programs on LLVM's OpenMP runtime and oneTBB, whose ITT clients report their parallel
# regions and thread names to the NVTX/ITT injection library. (valgrind, in DEPS: `fxprof stat --cache-sim`.)
TEST_DEPS  := linux-perf elfutils binutils llvm libc6-dbg lld dwz rustc nodejs golang-go libxml2-utils chromium strace \
              clang libclang-rt-14-dev systemtap-sdt-dev libmimalloc-dev libomp-14-dev libtbb-dev
PCLI_DIR   := tests/.profiler-cli

.PHONY: all deps test-deps build demo test test-release asan-build test-asan tsan-build test-tsan fuzz fuzz-build fuzz-smoke bench format clean

all: build

deps:
	@third_party/install-deps.sh $(DEPS)

test-deps: deps
	@third_party/install-deps.sh $(TEST_DEPS)
	@third_party/install-profiler-cli.sh $(PCLI_DIR)

build: deps
	@[ -f $(BUILD)/build.ninja ] || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target fxprof fxprof_demo

# Interactive: record, then serve and open the Firefox Profiler (Ctrl+C stops).  Not a terminal: record a
# self-contained profile and say how to open it.
demo: build
	@if [ -t 1 ]; then $(BUILD)/fxprof record -o demo-profile.json.gz -- $(BUILD)/examples/demo/fxprof_demo; \
	else $(BUILD)/fxprof record --save-only -o demo-profile.json.gz -- $(BUILD)/examples/demo/fxprof_demo; fi

test: test-deps
	@$(MAKE) --no-print-directory test-asan
	@$(MAKE) --no-print-directory test-tsan
	@$(MAKE) --no-print-directory test-release UNIT_TESTS=OFF
	@$(MAKE) --no-print-directory fuzz-smoke

# The test builds link with lld (a test dependency): it links the test binaries 4x faster than ld.bfd.
LLD_FLAGS  := -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld

# UNIT_TESTS=OFF (what `make test` passes): the optimised build has only the tests marked OPTIMIZED; every other
# test ran in the sanitizer build (tests/CMakeLists.txt, FXPROF_UNIT_TESTS). Changing it reconfigures.
UNIT_TESTS ?= ON
test-release:
	@[ -f $(BUILD)/build.ninja ] || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(LLD_FLAGS) \
	  -DFXPROF_UNIT_TESTS=$(UNIT_TESTS) >/dev/null
	@grep -qx 'FXPROF_UNIT_TESTS:BOOL=$(UNIT_TESTS)' $(BUILD)/CMakeCache.txt || \
	  cmake -S . -B $(BUILD) -DFXPROF_UNIT_TESTS=$(UNIT_TESTS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	@cd $(BUILD) && ctest -j $(JOBS) --output-on-failure

# The sanitizer build uses clang: it compiles in half GCC's time, and it also holds the fuzz harnesses that
# `make test`'s fuzz smoke runs (so they are not compiled a third time).
asan-build:
	@[ -f $(ASAN_BUILD)/build.ninja ] || CC=clang CXX=clang++ cmake -S . -B $(ASAN_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O0 -gline-tables-only" \
	  -DCMAKE_CXX_FLAGS_DEBUG="-O0 -gline-tables-only" -DFXPROF_SANITIZE=ON $(LLD_FLAGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

test-asan: asan-build
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest -j $(JOBS) --output-on-failure

# ThreadSanitizer for the multi-threaded parts: only the in-process tests of the server, the symbolizer, the gzip
# writer and the heap recorder's worker that start threads (tests/CMakeLists.txt, FXPROF_TSAN_TESTS), built by clang -O1
# (TSan's own advice: -O0 runs several times slower).
tsan-build:
	@[ -f $(TSAN_BUILD)/build.ninja ] || CC=clang CXX=clang++ cmake -S . -B $(TSAN_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -gline-tables-only" \
	  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" -DFXPROF_TSAN=ON $(LLD_FLAGS) >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target fxprof_tests

test-tsan: tsan-build
	@cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest -j $(JOBS) --output-on-failure

# libFuzzer harnesses (fuzz/): `make fuzz` explores with each for FUZZ_SECONDS in an optimised build of its
# own; `make test` replays a fixed seed and number of inputs per harness (fuzz/run.sh smoke) with the
# sanitizer build's harnesses, so its verdict is the same on every machine.
fuzz-build:
	@[ -f $(FUZZ_BUILD)/build.ninja ] || CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFXPROF_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS)

fuzz: test-deps fuzz-build
	@fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

fuzz-smoke: asan-build
	@JOBS=$(JOBS) fuzz/run.sh $(ASAN_BUILD) smoke

bench: build test-deps
	@bench/run.sh $(BUILD)

format:
	@git ls-files '*.cpp' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
