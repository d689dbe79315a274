// fxprof ELF identity: the one place that says which binary a mapping is, how its runtime addresses map to
// the ELF's virtual addresses, and where its debug file is. The recorder (libs, unwinder) and the symbolizer
// both use it, so an address means the same thing to the profile, the unwinder and the symbol server.
//
// Design:
//  - Identity = build ID, PT_LOAD segments (with their R/W/X flags), base SVMA (p_vaddr of the first
//    PT_LOAD) and .gnu_debuglink. Read from the program headers and notes of a mapped file (a few KiB touched
//    of a lazily mmap'ed file, ~10 us a binary), never the symbol tables, so recording stays cheap.
//  - One address mapping: a mapping [start, end) of file offset `pgoff` with protection `prot` maps the
//    PT_LOAD the kernel mapped there. lld puts the read-only segment (file offset 0) and the first bytes of
//    the executable one in the same file page, so pgoff alone matches two segments and picking the first
//    shifts every name by 0x1000 and misses every CFI lookup (issue 10). The segment whose flags match the
//    mapping's protection is the one the kernel mapped, whatever the linker (GNU ld with or without
//    -z separate-code, lld, mold, rust-lld).
//  - One debug-file locator: build-ID trees (<root>/.build-id/xx/rest.debug), .gnu_debuglink beside the
//    binary, in its .debug/ and <root>/<dir>/ (CRC32 checked, except for a dwz'd file: dwz rewrites debug
//    files after their debuglinks were made, as `dwz -m common.debug a.debug b.debug` does, and libdw takes
//    them by build ID), the --symbol-dir folders, then debuginfod
//    when DEBUGINFOD_URLS is set. Every candidate must carry the wanted build ID: a rebuilt binary gives
//    "not found", never wrong names or wrong unwind rules. The caller decides what makes a file useful
//    (the symbolizer wants .debug_info or .symtab, the unwinder .debug_frame). elfutils' libdwfl was
//    considered: its locator does the same search but owns the Elf handles and cannot take our symbol
//    folders per request nor an acceptance test, and costs ~1 ms of setup per module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace fxprof::elf {

struct Segment {
  uint64_t vaddr = 0, offset = 0, filesz = 0, memsz = 0;
  uint32_t flags = 0;  // PF_R | PF_W | PF_X
};

struct Identity {
  std::vector<uint8_t> build_id;  // empty if the file has none
  std::vector<Segment> loads;     // PT_LOAD segments in file order
  uint64_t base_svma = 0;         // p_vaddr of the first PT_LOAD
  uint16_t machine = 0;           // e_machine
  uint64_t entry = 0;             // e_entry: where an exec starts (ld.so's for a dynamic program)
  uint64_t init = 0, fini = 0;    // DT_INIT, DT_FINI: functions without unwind information (0: none)
  std::string debuglink;          // .gnu_debuglink file name ("" if none)
  uint32_t debuglink_crc = 0;
  bool dwz_altlink = false;  // has a .gnu_debugaltlink: dwz rewrote it (after any debuglink's CRC was made)

  // The ELF virtual address of the first byte of a mapping of file offset `pgoff` with protection `prot`
  // (PROT_READ/PROT_WRITE/PROT_EXEC bits, as in MMAP2 records). nullopt when no segment covers pgoff.
  std::optional<uint64_t> mapping_svma(uint64_t pgoff, uint32_t prot) const;
  // model::Lib::offset for that mapping: address - (start - offset) is then SVMA - base SVMA, the relative
  // address the symbol server understands. pgoff when no segment covers it.
  uint64_t lib_offset(uint64_t pgoff, uint32_t prot) const;
};

// Parses an ELF64 image in memory (a mapped file or the vDSO); nullopt if it is not one.
std::optional<Identity> parse(std::span<const std::byte> image);
std::optional<Identity> read_file(const std::string& path);
// Our own vDSO (same kernel, so the same image as in every process we record), from getauxval.
const std::optional<Identity>& own_vdso();
// The vDSO's bytes in our own process (empty if there is none).
std::span<const std::byte> own_vdso_image();

// CRC32 (the .gnu_debuglink checksum) of a whole file; nullopt when it cannot be read.
std::optional<uint32_t> file_crc32(const std::string& path);
// A build ID's two forms in profiles: the code ID is its lowercase hex (hex); the Breakpad debug ID is 33
// uppercase hex chars: the first 16 bytes as a GUID with its first three fields byte-swapped, then age 0.
std::string hex(std::span<const uint8_t> bytes);
std::string breakpad_id(std::span<const uint8_t> build_id);

// perf's build-ID caches, as perf finds its own: $PERF_BUILDID_DIR when set, and $HOME/.debug. `perf record`
// copies each binary it saw there: ROOT/.build-id/xx/yyyy... links to ROOT/PATH/<build ID>/, which holds
// `elf` (the binary) and `debug` (its debug file, when perf found one).
std::vector<std::string> default_perf_caches();

// The files of `build_id_hex` in the caches `roots` (`elf`, `debug`, or the file an older perf linked
// straight to; by `recorded_path` too when the link is missing), each a regular file inside its cache
// folder: a link is followed only while it stays inside (perf's own layout), and a cache folder another user
// owns or may write to is not read. Their build IDs are the caller's to check.
std::vector<std::string> perf_cache_files(const std::vector<std::string>& roots,
                                          const std::string& build_id_hex, const std::string& recorded_path);

struct LocatorOptions {
  std::vector<std::string> symbol_dirs;                          // --symbol-dir
  std::vector<std::string> debug_dirs = {"/usr/lib/debug"};      // roots of the gdb conventions
  bool use_debuginfod = true;                                    // only when DEBUGINFOD_URLS is set
  std::vector<std::string> perf_caches = default_perf_caches();  // perf's ~/.debug
};

struct DebugQuery {
  std::string binary_path;        // the binary as opened ("" if only its build ID is known)
  std::vector<uint8_t> build_id;  // required: candidates must carry it
  std::string debuglink;          // from the binary's .gnu_debuglink
  uint32_t debuglink_crc = 0;
  std::string debug_name;  // a plain file name looked up as <symbol dir>/<debug_name>.debug
  // A .gnu_debugaltlink path (dwz's alt file; binary_path is then the file that names it): as recorded,
  // relative to binary_path's folder, and its file name in the --symbol-dir folders. Debian records
  // /usr/lib/debug/.dwz/<triplet>/<package>.debug; build-ID trees and debuginfod find it by build ID too.
  std::string altlink;
};

// The first candidate debug file that has the wanted build ID, passes its debuglink CRC and that `accept`
// takes (accept may keep the file open). Refused candidates are explained in `notes` when given.
std::optional<std::string> locate_debug_file(const DebugQuery& query, const LocatorOptions& options,
                                             const std::function<bool(const std::string& path)>& accept,
                                             std::vector<std::string>* notes = nullptr);

}  // namespace fxprof::elf
