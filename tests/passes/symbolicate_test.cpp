// Tests of passes/symbolicate.h: the model symbolicated by the real symbolizer from a real ELF file (the
// -O2 -g test program with known inlines), checked against nm's addresses.
#include "passes/symbolicate.h"

#include <catch2/catch.hpp>
#include <sstream>

#include "base/fd.h"
#include "elf/elf.h"
#include "tests/support/support.h"

namespace m = fxprof::model;
using fxprof::test::run;
using fxprof::test::test_program;

namespace {

uint64_t nm_address(const std::string& path, const std::string& symbol, uint64_t* size = nullptr) {
  auto r = run({"nm", "-S", "--defined-only", path});
  REQUIRE(r.status == 0);
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string a, b, c, d;
    ls >> a >> b >> c >> d;
    if (d == symbol) {
      if (size) *size = std::stoull(b, nullptr, 16);
      return std::stoull(a, nullptr, 16);
    }
  }
  FAIL("no symbol " << symbol);
  return 0;
}

}  // namespace

TEST_CASE("symbolicate names the frames samples use, inlines expanded, from the real binary", "[passes]") {
  const std::string path = test_program("sym_inline");
  auto elf = fxprof::elf::read_file(path);
  REQUIRE(elf);
  constexpr uint64_t kBase = 0x555555554000;
  m::Profile p;
  m::Process proc;
  proc.pid = 42;
  proc.libs.push_back({kBase + 0x1000, kBase + 0x100000, 0x1000, "sym_inline", path, "sym_inline", path,
                       fxprof::elf::breakpad_id(elf->build_id), fxprof::elf::hex(elf->build_id)});
  proc.threads.push_back({});
  uint64_t hot_size = 0;
  const uint64_t hot = nm_address(path, "_Z11compute_hoti", &hot_size);
  const uint64_t main_addr = nm_address(path, "main");
  // main calls compute_hot: a return address a few bytes into main, and every byte of compute_hot as a leaf.
  m::FrameId caller = p.native_frame(kBase + main_addr + 8);
  for (uint64_t a = hot; a < hot + hot_size; ++a) {
    m::StackId s = p.stacks.intern_path(std::vector<m::FrameId>{caller, p.native_frame(kBase + a)});
    proc.threads[0].samples.push_back({a, s, -1});
  }
  p.processes.push_back(std::move(proc));

  fxprof::symbolizer::Options opts;
  opts.debug_dirs = {};
  opts.use_debuginfod = false;
  fxprof::symbolizer::Symbolizer symbols(opts);
  auto stats = fxprof::passes::symbolicate(p, symbols);
  CHECK(stats.binaries == 1);
  CHECK(stats.addresses == hot_size + 1);
  CHECK(stats.resolved == stats.addresses);

  bool saw_chain = false;
  for (const m::Sample& s : p.processes[0].threads[0].samples) {
    std::vector<const m::Frame*> frames;
    for (m::StackId q = s.stack; q != m::kNoStack; q = p.stacks.prefix(q))
      frames.insert(frames.begin(), &p.frames.get(p.stacks.frame(q)));
    REQUIRE(frames.size() >= 2);
    CHECK(p.strings.get(frames[0]->name) == "main");
    CHECK(p.strings.get(frames[1]->name) == "compute_hot(int)");
    CHECK(frames[1]->inline_depth == 0);
    CHECK(frames[1]->file != m::kNoString);
    CHECK(p.strings.get(frames[1]->file).ends_with("sym_inline.cpp"));
    CHECK(frames[1]->address == s.time_ns);  // the leaf's binary-relative address
    if (frames.size() == 4) {
      CHECK(p.strings.get(frames[2]->name) == "mid_helper");
      CHECK(p.strings.get(frames[3]->name) == "leaf_helper");
      CHECK(frames[3]->inline_depth == 2);
      CHECK(frames[3]->line > 0);
      saw_chain = true;
    }
  }
  CHECK(saw_chain);
}

TEST_CASE("a binary whose file is gone stays binary-relative, with one warning", "[passes]") {
  m::Profile p;
  m::Process proc;
  proc.libs.push_back({0x400000, 0x500000, 0, "gone", "/nonexistent/gone", "gone", "/nonexistent/gone",
                       "0123456789ABCDEF0123456789ABCDEF0", "0123"});
  proc.threads.push_back({});
  proc.threads[0].samples.push_back(
      {1, p.stacks.intern_path(std::vector<m::FrameId>{p.native_frame(0x401234)}), -1});
  p.processes.push_back(std::move(proc));
  fxprof::symbolizer::Options opts;
  opts.debug_dirs = {};
  opts.use_debuginfod = false;
  fxprof::symbolizer::Symbolizer symbols(opts);
  auto stats = fxprof::passes::symbolicate(p, symbols);
  CHECK(stats.resolved == 0);
  const m::Frame& f = p.frames.get(p.stacks.frame(p.processes[0].threads[0].samples[0].stack));
  CHECK(f.name == m::kNoString);
  CHECK(f.address == 0x1234);
  CHECK(p.binaries[f.binary].name == "gone");
}

TEST_CASE("a stripped binary's functions named by their FDE are named again once symbols are found",
          "[passes]") {
  // What `fxprof report --heap --symbol-dir D` reads back: a profile symbolicated at record time, without
  // D, where the stripped binary's functions got their FDE names ("heap_prog_stripped+0x2cd0").
  const std::string path = test_program("heap_prog_stripped");
  const std::string syms = test_program("heap_syms");
  auto elf = fxprof::elf::read_file(path);
  REQUIRE(elf);
  const uint64_t leak = nm_address(syms + "/heap_prog_stripped.debug", "leak_blocks");
  const uint64_t main_addr = nm_address(syms + "/heap_prog_stripped.debug", "main");
  constexpr uint64_t kBase = 0x555555554000;
  m::Profile p;
  m::Process proc;
  proc.libs.push_back({kBase, kBase + 0x100000, 0, "heap_prog_stripped", path, "heap_prog_stripped", path,
                       fxprof::elf::breakpad_id(elf->build_id), fxprof::elf::hex(elf->build_id)});
  proc.threads.push_back({});
  // An allocation in leak_blocks called from main: return addresses only, as the heap's stacks are.
  const m::StackId stack = p.stacks.intern_path(
      std::vector<m::FrameId>{p.native_frame(kBase + main_addr + 8), p.native_frame(kBase + leak + 8)});
  proc.threads[0].allocations.push_back({1, stack, 64, 0x1000, 1});
  p.processes.push_back(std::move(proc));
  auto names = [&] {
    std::vector<std::string> out;  // root first
    for (m::StackId q = p.processes[0].threads[0].allocations[0].stack; q != m::kNoStack;
         q = p.stacks.prefix(q)) {
      const m::Frame& f = p.frames.get(p.stacks.frame(q));
      out.insert(out.begin(), f.name == m::kNoString ? "?" : std::string(p.strings.get(f.name)));
    }
    return out;
  };
  auto symbolicate = [&](std::vector<std::string> symbol_dirs) {
    fxprof::symbolizer::Options opts;
    opts.symbol_dirs = std::move(symbol_dirs);
    opts.debug_dirs = {};
    opts.use_debuginfod = false;
    fxprof::symbolizer::Symbolizer symbols(opts);
    return fxprof::passes::symbolicate(p, symbols);
  };

  symbolicate({});
  auto fde_name = [](uint64_t start) {
    std::ostringstream s;
    s << "heap_prog_stripped+0x" << std::hex << start;
    return s.str();
  };
  const std::vector<std::string> by_fde{fde_name(main_addr), fde_name(leak)};
  REQUIRE(names() == by_fde);
  // Again without symbols: asked again, and still the FDE names (not bare addresses).
  auto again = symbolicate({});
  CHECK(again.addresses == 2);
  CHECK(names() == by_fde);
  // With the folder that has its debug file: the functions' names.
  auto named = symbolicate({syms});
  CHECK(named.resolved == 2);
  CHECK(names() == std::vector<std::string>{"main", "leak_blocks"});
}
