# Build glue for the system libraries fxprof uses (Debian package names in the Makefile's DEPS list).
# Each becomes an imported target so folders link them by name.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)                        # zlib1g-dev: .json.gz profiles
find_package(simdjson REQUIRED)                    # libsimdjson-dev: every JSON we read
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)   # libcpp-httplib-dev: the local server
pkg_check_modules(LIBBPF REQUIRED IMPORTED_TARGET libbpf)         # libbpf-dev: eBPF parts of the recorder
pkg_check_modules(LIBDW REQUIRED IMPORTED_TARGET libdw)           # libdw-dev: DWARF (lines, inlines)
pkg_check_modules(LIBELF REQUIRED IMPORTED_TARGET libelf)         # libelf-dev: ELF sections and notes
pkg_check_modules(LIBDEBUGINFOD REQUIRED IMPORTED_TARGET libdebuginfod)  # libdebuginfod-dev
pkg_check_modules(CAPSTONE REQUIRED IMPORTED_TARGET capstone)     # libcapstone-dev: /asm/v1 disassembly
pkg_check_modules(LZMA REQUIRED IMPORTED_TARGET liblzma)          # liblzma-dev: MiniDebugInfo
pkg_check_modules(LIBDEFLATE REQUIRED IMPORTED_TARGET libdeflate)  # libdeflate-dev: the kallsyms table, kept deflated while the program runs; compressed debug sections (symbolizer/dwarf_image.h)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)          # libcurl4-openssl-dev: share and push (HTTPS)
# libprotozero-dev: header-only protobuf encoder for the pprof export (no generated code, no runtime library).
find_path(PROTOZERO_INCLUDE_DIR protozero/pbf_writer.hpp REQUIRED)
add_library(protozero INTERFACE IMPORTED)
target_include_directories(protozero SYSTEM INTERFACE ${PROTOZERO_INCLUDE_DIR})
find_package(Catch2 2 REQUIRED)                    # catch2: the tests
# libiberty-dev: binutils' demangler (cplus_demangle) for Rust symbols; a static library without pkg-config.
find_path(LIBIBERTY_INCLUDE_DIR libiberty/demangle.h REQUIRED)
find_library(LIBIBERTY_LIBRARY NAMES libiberty.a iberty REQUIRED)
add_library(libiberty STATIC IMPORTED)
set_target_properties(libiberty PROPERTIES IMPORTED_LOCATION ${LIBIBERTY_LIBRARY})
target_include_directories(libiberty SYSTEM INTERFACE ${LIBIBERTY_INCLUDE_DIR})
