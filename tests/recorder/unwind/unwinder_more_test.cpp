// Unwinder tests of the less common sources of unwind information and of bad input, through the same real
// path as unwinder_test.cpp: .debug_frame (in the binary or its debug file), frame pointers, /proc maps in
// attach mode, garbage, lazy PLT binding, JIT code (fixtures: unwinder_fixtures.h).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/fd.h"
#include "recorder/unwind/unwinder.h"
#include "tests/recorder/unwind/capture.h"
#include "tests/recorder/unwind/unwinder_fixtures.h"

using fxprof::recorder::UnwindEnd;
using fxprof::recorder::Unwinder;
using fxprof::unwind_test::Capture;
using fxprof::unwind_test::Record;
using fxprof::unwind_test::Symbolizer;
using namespace fxprof::test::unwind_fixtures;

namespace {
void check_nocfi(const std::string& prog, double min_share, bool want_debug_frame, bool want_fp) {
  Run run = record_and_unwind({std::string(FXPROF_TEST_PROGRAMS_DIR) + "/" + prog, "250"});
  auto leaf = with(run, "nocfi_leaf");
  REQUIRE(leaf.size() >= 30);
  size_t exact = 0;
  std::vector<const Stack*> bad;
  for (const Stack* s : leaf) {
    int i = s->find("nocfi_leaf");
    if (reaches_entry(*s) && s->at(i, {"nocfi_leaf", "nocfi_mid", "nocfi_outer", "main"}))
      ++exact;
    else
      bad.push_back(s);
  }
  INFO(prog << ": exact " << exact << " of " << leaf.size() << ", debug_frame rules "
            << run.stats.debug_frame_rules << ", fp frames " << run.stats.fp_frames << "\n"
            << examples(bad));
  CHECK(static_cast<double>(exact) >= static_cast<double>(leaf.size()) * min_share);
  if (want_debug_frame) CHECK(run.stats.debug_frame_rules > 0);
  if (want_fp) CHECK(run.stats.fp_frames > 0);
}
}  // namespace

TEST_CASE("unwind: .debug_frame in the binary", "[unwind]") {
  check_nocfi("unw_dbgframe", 0.97, true, false);
}

TEST_CASE("unwind: .debug_frame in a separate debug file", "[unwind]") {
  check_nocfi("unw_split", 0.97, true, false);
}

TEST_CASE("unwind: frame-pointer fallback for code without unwind information", "[unwind]") {
  // Samples that land in a prologue or epilogue lose a frame with frame pointers: a looser bound.
  check_nocfi("unw_fp", 0.90, false, true);
}

namespace {
// Captures this thread's registers and copies its stack from there up, as perf would (ASan would flag the
// copy of its own redzones, hence no_sanitize).
__attribute__((noinline, no_sanitize_address)) size_t snapshot_stack(fxprof::recorder::UserRegs& regs,
                                                                     uint64_t stack_top, std::byte* out,
                                                                     size_t cap) {
  uint64_t ip, sp, bp;
  asm volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(ip), "=r"(sp), "=r"(bp));
  regs = {ip, sp, bp};
  size_t n = std::min<uint64_t>(cap, stack_top - sp);
  const volatile std::byte* src = reinterpret_cast<const std::byte*>(sp);
  for (size_t i = 0; i < n; ++i) out[i] = src[i];
  return n;
}
}  // namespace

TEST_CASE("unwind: attach mode reads /proc/PID/maps (our own stack)", "[unwind]") {
  auto maps = fxprof::read_file("/proc/self/maps");
  REQUIRE(maps.ok());
  uint64_t stack_top = 0;
  std::istringstream in(maps.value());
  for (std::string line; std::getline(in, line);)
    if (line.find("[stack]") != std::string::npos)
      stack_top = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
  REQUIRE(stack_top != 0);
  Unwinder u;
  REQUIRE(u.load_proc_maps(static_cast<uint32_t>(getpid())).ok());
  CHECK(u.stats().modules >= 3);  // this test, libc, ld.so, the vDSO...
  std::vector<std::byte> copy(65536);
  fxprof::recorder::UserRegs regs;
  size_t n = snapshot_stack(regs, stack_top, copy.data(), copy.size());
  std::vector<uint64_t> out(256);
  auto res = u.unwind(static_cast<uint32_t>(getpid()), regs, std::span(copy).first(n), out);
  INFO("frames " << res.count << ", stack " << n << " bytes");
  CHECK(res.end == UnwindEnd::Complete);
  CHECK(res.count >= 5);  // snapshot_stack <- this test <- Catch's runner... <- main <- libc <- _start
  CHECK(u.stats().fp_frames == 0);
  CHECK(!u.load_proc_maps(999999999).ok());
}

TEST_CASE("unwind: modules no process maps are evicted; mapped again, they are loaded again", "[unwind]") {
  // A continuous recording's cut (recorder/window.h): what only ended processes mapped is unmapped.
  auto maps = fxprof::read_file("/proc/self/maps");
  REQUIRE(maps.ok());
  uint64_t stack_top = 0;
  std::istringstream in(maps.value());
  for (std::string line; std::getline(in, line);)
    if (line.find("[stack]") != std::string::npos)
      stack_top = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
  REQUIRE(stack_top != 0);
  const auto me = static_cast<uint32_t>(getpid());
  auto keep_none = [](const fxprof::recorder::Binary&) { return false; };
  Unwinder u;
  std::vector<std::byte> copy(65536);
  std::vector<uint64_t> out(256);
  for (int pass = 0; pass < 2; ++pass) {
    REQUIRE(u.load_proc_maps(me).ok());
    const size_t opened = u.binaries().opened();
    CHECK(opened >= 3);
    CHECK(u.evict_unmapped(keep_none) == 0);  // all mapped by a live process: nothing goes
    fxprof::recorder::UserRegs regs;
    const size_t n = snapshot_stack(regs, stack_top, copy.data(), copy.size());
    auto res = u.unwind(me, regs, std::span(copy).first(n), out);
    INFO("pass " << pass << ": frames " << res.count);
    CHECK(res.end == UnwindEnd::Complete);  // the second time with modules (and rule cache ids) anew
    CHECK(res.count >= 5);
    u.on_exit(me);
    CHECK(u.evict_unmapped(keep_none) == opened);
    CHECK(u.binaries().opened() == 0);
  }
}

TEST_CASE("unwind: garbage registers, stacks and binaries never crash", "[unwind]") {
  Unwinder u;
  // A file that is not ELF, and a truncated copy of a real binary, mapped as executable code.
  char dir[] = "/tmp/fxprof-unwind-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string junk = std::string(dir) + "/junk", half = std::string(dir) + "/half";
  {
    std::string bytes(8192, '\0');
    uint64_t x = 88172645463325252ull;
    for (char& c : bytes) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      c = static_cast<char>(x);
    }
    std::memcpy(bytes.data(),
                "\x7f"
                "ELF\x02\x01\x01",
                7);
    FILE* f = std::fopen(junk.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
    auto prog = fxprof::read_file(kProg);
    REQUIRE(prog.ok());
    f = std::fopen(half.c_str(), "wb");
    std::fwrite(prog->data(), 1, prog->size() / 2, f);
    std::fclose(f);
  }
  u.on_mmap(1, 0x400000, 0x10000, 0, junk);
  u.on_mmap(1, 0x500000, 0x10000, 0, half);
  u.on_mmap(1, 0x600000, 0x10000, 0, "/nonexistent/lib.so");
  u.on_mmap(1, 0x700000, 0x2000, 0, "[vdso]");
  std::vector<std::byte> stack(4096);
  std::vector<uint64_t> out(64);
  uint64_t x = 1;
  auto next = [&] { return x = x * 6364136223846793005ull + 1442695040888963407ull; };
  for (int round = 0; round < 3000; ++round) {
    for (size_t i = 0; i < stack.size(); i += 8) {
      uint64_t v = next();
      // Plausible values: addresses in the mappings above and in the stack itself.
      if ((v & 3) == 0) v = 0x400000 + (v >> 8) % 0x400000;
      if ((v & 3) == 1) v = 0x7ff000000000 + (v >> 8) % 8192;
      std::memcpy(stack.data() + i, &v, 8);
    }
    fxprof::recorder::UserRegs regs{0x400000 + next() % 0x400000, 0x7ff000000000,
                                    0x7ff000000000 + next() % 8192};
    size_t n = next() % stack.size();
    auto res = u.unwind(round % 2 ? 1 : 2, regs, std::span(stack).first(n), out);
    REQUIRE(res.count >= 1);
    REQUIRE(res.count <= out.size());
    REQUIRE(out[0] == regs.ip);
  }
  // An empty output span and an empty stack are answered, not crashed on.
  CHECK(u.unwind(1, {0x400100, 0x1000, 0}, {}, {}).count == 0);
  CHECK(u.unwind(1, {0x400100, 0x1000, 0}, {}, out).count == 1);
  u.on_exit(1);
  CHECK(u.stats().modules == 4);
  CHECK(u.stats().modules_failed >= 2);
  std::system(("rm -rf " + std::string(dir)).c_str());
}

TEST_CASE("unwind: lazy PLT binding sampled mid-resolution (CFA from RBX)", "[unwind]") {
  // Before the callee-saved registers were sampled, every sample inside _dl_runtime_resolve_xsavec (and
  // the _dl_fixup/_dl_lookup_symbol_x it calls) ended there: its CFA is RBX-based.
  Run run = record_and_unwind(
      {std::string(FXPROF_TEST_PROGRAMS_DIR) + "/unw_lazy", "400", std::string(FXPROF_TEST_PROGRAMS_DIR)});
  std::vector<const Stack*> in_ld, bad;
  size_t resolving = 0, resolving_ok = 0;
  for (const Stack& s : run.stacks) {
    if (s.module0.find("/ld-linux") == std::string::npos) continue;
    in_ld.push_back(&s);
    if (!reaches_entry(s)) bad.push_back(&s);
    bool trampoline = false;
    for (const auto& n : s.names) trampoline = trampoline || n.starts_with("_dl_runtime_resolve");
    if (!trampoline) continue;
    ++resolving;
    int i = s.find("lazy_call_all");
    if (reaches_entry(s) && s.at(i, {"lazy_call_all", "run_lazy", "main"})) ++resolving_ok;
  }
  INFO("samples " << run.stacks.size() << ", leaf in ld.so " << in_ld.size() << ", incomplete " << bad.size()
                  << ", under the resolver " << resolving << " (" << resolving_ok << " exact)\n"
                  << examples(bad, 8));
  REQUIRE(resolving >= 20);
  CHECK(resolving_ok >= resolving * 97 / 100);
  CHECK(bad.size() <= in_ld.size() * 3 / 100);
}

TEST_CASE("unwind: JIT code (anonymous memory) by checked frame pointers, then a return-address scan",
          "[unwind][jit]") {
  // Two JIT regions (MMAP2 names anonymous code "//anon"), and a file that cannot be read (no CFI).
  Unwinder u;
  u.on_mmap(1, 0x10000, 0x1000, 0, "//anon");
  u.on_mmap(1, 0x20000, 0x1000, 0, "//anon");
  u.on_mmap(1, 0x30000, 0x1000, 0, "/nonexistent/no-cfi.so");
  const uint64_t sp = 0x7ff000000000;
  std::vector<uint64_t> words(1024, 0);  // an 8 KiB stack copy at sp
  auto at = [&](uint64_t addr) -> uint64_t& { return words[(addr - sp) / 8]; };
  auto walk = [&](fxprof::recorder::UserRegs regs, size_t copy_words = 1024) {
    std::vector<uint64_t> out(16);
    auto bytes = std::as_bytes(std::span(words)).first(copy_words * 8);
    auto res = u.unwind(1, regs, bytes, out);
    out.resize(res.count);
    return std::pair{res, out};
  };

  SECTION("a frame pointer whose return address is JIT code") {
    at(sp + 32) = 0;        // the caller's bp: 0, the end of the chain
    at(sp + 40) = 0x20020;  // return address into the other JIT region
    auto [res, out] = walk({0x10010, sp, sp + 32});
    CHECK(out == std::vector<uint64_t>{0x10010, 0x20020});
    CHECK(res.end == UnwindEnd::Complete);
    CHECK(res.heuristic);
    CHECK(u.stats().fp_stacks == 1);
    CHECK(u.stats().scanned_stacks == 0);
  }
  SECTION("a frame pointer pointing at data is refused; the scan finds the return address") {
    at(sp + 32) = sp + 64;
    at(sp + 40) = 0x999999;  // no code there
    at(sp + 16) = 0x20030;   // the first word into known code, above sp
    auto [res, out] = walk({0x10010, sp, sp + 32});
    REQUIRE(out.size() >= 2);
    CHECK(out[1] == 0x20030);
    CHECK(res.heuristic);
    CHECK(u.stats().scanned_stacks == 1);
    CHECK(u.stats().scanned_frames >= 1);
  }
  SECTION("rbp = 0 in JIT code is not the end of the stack: scanned") {
    at(sp + 8) = 0x10040;
    auto [res, out] = walk({0x20010, sp, 0});
    REQUIRE(out.size() >= 2);
    CHECK(out[1] == 0x10040);
    CHECK(u.stats().scanned_stacks == 1);
  }
  SECTION("the scan reads at most 4 KiB") {
    at(sp + 4096 + 8) = 0x10040;
    auto [res, out] = walk({0x20010, sp, 0});
    CHECK(out == std::vector<uint64_t>{0x20010});
    CHECK(res.end == UnwindEnd::Complete);
    CHECK(u.stats().scanned_stacks == 0);
  }
  SECTION("code in a file without CFI is not scanned: the walk fails there") {
    at(sp + 16) = 0x20030;
    auto [res, out] = walk({0x30010, sp, sp + 8 * 1000 + 3});  // an unaligned bp: garbage
    CHECK(out == std::vector<uint64_t>{0x30010});
    CHECK(res.end == UnwindEnd::Failed);
    CHECK(!res.heuristic);
  }
  SECTION("a frame pointer past the end of the copy: truncated, for the kernel's chain to continue") {
    auto [res, out] = walk({0x10010, sp, sp + 2048}, 128);
    CHECK(out == std::vector<uint64_t>{0x10010});
    CHECK(res.end == UnwindEnd::Truncated);
  }
}
