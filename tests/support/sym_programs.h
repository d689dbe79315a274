// The symbolizer test programs (tests/programs/symbolizer: an -O2 -g program with known inlines, its stripped
// variants, a rebuilt copy with another build ID, Rust programs) as a symbolizer knows them, and binutils'
// view of the same files (nm, objdump), for the tests of symbolizer/ and of the server's APIs.
#pragma once

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "elf/elf.h"
#include "model/profile.h"
#include "symbolizer/symbolizer.h"
#include "tests/support/support.h"

namespace fxprof::test::sym_programs {

namespace sym = fxprof::symbolizer;

struct NmSym {
  uint64_t addr = 0;
  uint64_t size = 0;
};

// Defined symbols of a file by mangled name, as binutils' nm sees them.
inline std::map<std::string, NmSym> nm_symbols(const std::string& path) {
  auto r = run({"nm", "-S", "--defined-only", path});
  REQUIRE(r.status == 0);
  std::map<std::string, NmSym> out;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string a, b, c, d;
    ls >> a >> b >> c >> d;
    if (d.empty()) continue;  // no size
    out[d] = {std::stoull(a, nullptr, 16), std::stoull(b, nullptr, 16)};
  }
  return out;
}

struct FdeRange {
  uint64_t begin = 0, end = 0;
};
// The .eh_frame FDE ranges of a file ([pc_begin, pc_end)), as readelf sees them.
inline std::vector<FdeRange> fde_ranges(const std::string& path) {
  auto r = run({"readelf", "--debug-dump=frames", path});
  REQUIRE(r.status == 0);
  std::vector<FdeRange> out;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    size_t pc = line.find(" FDE ");
    if (pc == std::string::npos || (pc = line.find("pc=", pc)) == std::string::npos) continue;
    size_t dots = line.find("..", pc);
    if (dots == std::string::npos) continue;
    out.push_back({std::stoull(line.substr(pc + 3, dots - pc - 3), nullptr, 16),
                   std::stoull(line.substr(dots + 2), nullptr, 16)});
  }
  return out;
}

// Address of "name@plt" from objdump's disassembly of .plt.
inline uint64_t plt_address(const std::string& path, const std::string& name) {
  auto r = run({"objdump", "-d", "-j", ".plt", path});
  REQUIRE(r.status == 0);
  std::string needle = "<" + name + "@plt>:";
  size_t p = r.out.find(needle);
  REQUIRE(p != std::string::npos);
  size_t bol = r.out.rfind('\n', p);
  return std::stoull(r.out.substr(bol + 1, p - bol - 1), nullptr, 16);
}

// The line number of the "// LINE:tag" marker in the test program's source.
inline uint32_t marker_line(const std::string& tag) {
  std::ifstream in(source_dir() + "/tests/programs/symbolizer/sym_inline.cpp");
  std::string line;
  uint32_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find("// LINE:" + tag) != std::string::npos) return n;
  }
  FAIL("marker " << tag << " not found");
  return 0;
}

struct Prog {
  std::string path;
  std::string breakpad;
  std::string code_id;
};

inline Prog prog(const std::string& path) {
  auto id = elf::read_file(path);
  REQUIRE(id);
  REQUIRE(!id->build_id.empty());
  return {path, elf::breakpad_id(id->build_id), elf::hex(id->build_id)};
}

inline sym::KnownLib known(const Prog& p, const std::string& path,
                           const std::string& debug_name = "sym_inline") {
  sym::KnownLib k;
  k.debug_name = debug_name;
  k.name = debug_name;
  k.breakpad_id = p.breakpad;
  k.code_id = p.code_id;
  k.path = path;
  k.arch = "x86_64";
  return k;
}

inline sym::Options no_system_debug() {
  sym::Options o;
  o.debug_dirs = {};
  o.use_debuginfod = false;
  return o;
}

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Checks the inline chains of compute_hot(int) against the source markers: every byte resolves with an exact
// offset, and some address shows leaf_helper inlined into mid_helper inlined into compute_hot.
inline void check_compute_hot(sym::Symbolizer& s, const Prog& original, bool expect_lines) {
  auto syms = nm_symbols(original.path);
  const NmSym hot = syms.at("_Z11compute_hoti");
  std::vector<uint64_t> addrs;
  for (uint64_t a = hot.addr; a < hot.addr + hot.size; ++a) addrs.push_back(a);
  auto r = s.lookup("sym_inline", original.breakpad, addrs);
  REQUIRE(r.ok());
  REQUIRE(r->size() == addrs.size());
  bool saw_full_chain = false;
  for (size_t i = 0; i < addrs.size(); ++i) {
    const sym::SymbolInfo& info = (*r)[i];
    INFO("address 0x" << std::hex << addrs[i]);
    REQUIRE(info.found);
    CHECK(info.function == "compute_hot(int)");
    CHECK(info.function_offset == addrs[i] - hot.addr);
    CHECK(info.function_size == hot.size);
    if (!expect_lines) {
      CHECK(info.inlines.empty());
      CHECK(info.file.empty());
      continue;
    }
    CHECK(ends_with(info.file, "tests/programs/symbolizer/sym_inline.cpp"));
    if (info.inlines.size() == 2 && info.inlines[0].function.rfind("leaf_helper", 0) == 0) {
      saw_full_chain = true;
      CHECK(info.inlines[1].function.rfind("mid_helper", 0) == 0);
      CHECK(info.inlines[0].line >= marker_line("leaf_begin"));
      CHECK(info.inlines[0].line <= marker_line("leaf_end"));
      CHECK(ends_with(info.inlines[0].file, "sym_inline.cpp"));
      CHECK(info.inlines[1].line == marker_line("call_leaf"));  // where mid_helper calls leaf_helper
      CHECK(info.line == marker_line("call_mid"));              // where compute_hot calls mid_helper
    }
  }
  if (expect_lines) CHECK(saw_full_chain);
}

inline std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// How many instructions objdump decodes in [addr, addr + size) of a file (Intel syntax), to compare with.
inline size_t objdump_instruction_count(const std::string& path, uint64_t addr, uint64_t size) {
  auto od = run({"objdump", "-d", "-M", "intel", "--no-show-raw-insn", "--start-address=" + hex(addr),
                 "--stop-address=" + hex(addr + size), path});
  REQUIRE(od.status == 0);
  size_t count = 0;
  std::istringstream in(od.out);
  std::string line;
  while (std::getline(in, line))
    if (line.size() > 2 && line[0] == ' ' && line.find(":\t") != std::string::npos) ++count;
  return count;
}

}  // namespace fxprof::test::sym_programs
