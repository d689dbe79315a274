// recorder/kallsyms.h against this machine's own /proc/kallsyms (the tests run as root, so addresses show):
// a frame inside a function gets its name, and of several names at one address the one perf shows (the last
// listed, e.g. `__x86_indirect_thunk_rax` rather than `__pi___x86_indirect_thunk_rax`).
#include "recorder/kallsyms.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace m = fxprof::model;

namespace {

struct Sym {
  uint64_t addr;
  char type;
  std::string name;
};

std::vector<Sym> text_symbols() {
  std::ifstream in("/proc/kallsyms");
  std::vector<Sym> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string a, t, n;
    ls >> a >> t >> n;
    if (t != "t" && t != "T" && t != "w" && t != "W") continue;
    out.push_back({std::stoull(a, nullptr, 16), t[0], n});
  }
  return out;
}

}  // namespace

TEST_CASE("kernel frames: the function around the address, the alias perf shows", "[recorder]") {
  auto syms = text_symbols();
  REQUIRE(syms.size() > 1000);
  REQUIRE(syms[0].addr != 0);  // root sees addresses (kptr_restrict)
  // An address with several names (the retpoline thunks have their __pi_ aliases), and one function with a
  // single name whose frame lies inside it.
  const Sym* alias_last = nullptr;
  const Sym* alias_first = nullptr;
  const Sym* single = nullptr;
  for (size_t i = 1; i + 1 < syms.size(); ++i) {
    if (!alias_last && syms[i].addr == syms[i - 1].addr && syms[i + 1].addr > syms[i].addr &&
        syms[i].name.find("__x86_indirect_thunk_") == 0) {
      alias_last = &syms[i];
      alias_first = &syms[i - 1];
    }
    if (!single && syms[i - 1].addr < syms[i].addr && syms[i].addr + 0x10 < syms[i + 1].addr &&
        syms[i].name == "schedule")
      single = &syms[i];
  }
  REQUIRE(alias_last);
  REQUIRE(single);
  INFO(alias_first->name << " / " << alias_last->name);
  m::Profile p;
  m::FrameId fa = p.kernel_frame(alias_last->addr + 1), fs = p.kernel_frame(single->addr + 8);
  CHECK(fxprof::recorder::name_kernel_frames(p, fxprof::recorder::live_procfs()) == 2);
  CHECK(p.strings.get(p.frames.get(fa).name) == alias_last->name);
  CHECK(p.strings.get(p.frames.get(fs).name) == "schedule");
}

TEST_CASE("kernel frames: a prefetched kallsyms names them as a read at the end does", "[recorder]") {
  auto syms = text_symbols();
  REQUIRE(syms.size() > 1000);
  // Every 97th symbol, asked inside it, and one below every kernel symbol.
  std::vector<uint64_t> addrs = {1};
  for (size_t i = 0; i < syms.size(); i += 97) addrs.push_back(syms[i].addr + 1);
  std::sort(addrs.begin(), addrs.end());
  addrs.erase(std::unique(addrs.begin(), addrs.end()), addrs.end());
  const std::vector<std::string> direct = fxprof::recorder::read_kallsyms(addrs);
  REQUIRE(direct.size() == addrs.size());
  CHECK(direct[0].empty());
  size_t named = 0;
  for (const std::string& n : direct) named += !n.empty();
  CHECK(named + 1 == addrs.size());

  fxprof::recorder::Procfs& live = fxprof::recorder::live_procfs();
  live.prefetch_kernel_symbols();
  CHECK(live.kernel_symbols(addrs) == direct);  // the table the background thread read
  CHECK(live.kernel_symbols(addrs) == direct);  // taken by the first call: this one reads kallsyms again
  // A table left unused (a recording without kernel frames) is replaced by the next one.
  live.prefetch_kernel_symbols();
  live.prefetch_kernel_symbols();
  CHECK(live.kernel_symbols(addrs) == direct);
}

TEST_CASE("kernel frames: the table read while the program runs stays small", "[recorder]") {
  // It is alive when record's memory peaks (the ring buffers): deflated blocks, not 120k strings.
  const auto table = fxprof::recorder::KernelSymbols::read();
  REQUIRE(table.size() > 1000);
  WARN(table.size() << " symbols in " << table.memory_bytes() << " bytes");
  CHECK(table.memory_bytes() < table.size() * 12);  // 122k symbols here: 1.5 MB at most
}
