// fxprof USDT probes: the SystemTap SDT notes (.note.stapsdt) that <sys/sdt.h>'s DTRACE_PROBE/STAP_PROBE
// macros leave in a binary, what perf, bpftrace and bcc attach to. Each note names a provider and a probe,
// the probe's address (a nop in the code), an optional semaphore (a counter the program checks before it
// computes costly arguments: a tracer raises it while attached) and the arguments' locations as the
// assembler saw them ("-4@%edi 8@16(%rsp) 8@$42": size, signed when negative, then a register, memory
// through a register, or a constant).
//
// The addresses are the link-time ones corrected as SystemTap and libbpf do: when the binary was prelinked
// (its .stapsdt.base section moved) every address moves by the same amount.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace fxprof::elf {

struct UsdtArgument {
  int size = 8;  // bytes, 1, 2, 4 or 8
  bool is_signed = false;
  std::string location;  // as written: "%rdi", "-8(%rbp)", "$42"
};

struct UsdtProbe {
  std::string provider, name;
  uint64_t address = 0;    // the probe's instruction (a virtual address of the binary)
  uint64_t semaphore = 0;  // its semaphore's virtual address, 0 when it has none
  std::string arguments;   // the note's text, for listing
  std::vector<UsdtArgument> args;
};

// The probes of an ELF image, in the notes' order. Err for an image that is not ELF or whose notes lie
// about their sizes; an ELF without probes gives an empty list.
Result<std::vector<UsdtProbe>> parse_usdt_probes(std::span<const std::byte> image);
// The same for a file (mapped read-only; only a regular file is read).
Result<std::vector<UsdtProbe>> read_usdt_probes(const std::string& path);

// The libraries `program` loads at its start, as ld.so finds them (its interpreter, then DT_NEEDED
// recursively, by DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH and the system folders; not /etc/ld.so.conf's
// others), as real paths: the binaries whose probes it has from its first instruction. Those not found are
// left out.
std::vector<std::string> linked_libraries(const std::string& program);

// "-4@%edi 8@16(%rsp)" into its arguments; Err names the first one that is not `SIZE@LOCATION`.
Result<std::vector<UsdtArgument>> parse_usdt_arguments(std::string_view text);

}  // namespace fxprof::elf
