// Tests of model/symbols.h: which addresses the model asks for (front-end rules: per-process mappings,
// callers at -1, only what samples use) and how it applies answers (inline chains, unresolved frames made
// binary-relative, topological stacks, samples remapped).
#include "model/symbols.h"

#include <catch2/catch.hpp>
#include <cstdio>

namespace m = fxprof::model;

namespace {

// One process with two mappings of "app" (r-x at 0x555555555000, file offset 0x1000) and libc; a second
// process maps a different binary at the same addresses (exec'd programs reuse them).
m::Profile make_profile() {
  m::Profile p;
  m::Process a;
  a.pid = 1;
  a.libs.push_back(
      {0x555555555000, 0x555555556000, 0x1000, "app", "/tmp/app", "app", "/tmp/app", "AAAA0", "aa"});
  a.libs.push_back({0x7f0000001000, 0x7f0000009000, 0x1000, "libc.so.6", "/lib/libc.so.6", "libc.so.6",
                    "/lib/libc.so.6", "CCCC0", "cc"});
  a.libs.push_back({0x7fff00000000, 0x7fff00001000, 0, "[vdso]", "[vdso]", "", "", "", ""});
  m::Process b;
  b.pid = 2;
  b.libs.push_back(
      {0x555555555000, 0x555555556000, 0x1000, "other", "/tmp/other", "other", "/tmp/other", "BBBB0", "bb"});
  p.processes = {a, b};
  return p;
}

std::string name_of(const m::Profile& p, m::FrameId f) {
  const m::Frame& fr = p.frames.get(f);
  return fr.name == m::kNoString ? std::string() : std::string(p.strings.get(fr.name));
}

// Frames of a stack, root first.
std::vector<m::FrameId> path(const m::Profile& p, m::StackId s) {
  std::vector<m::FrameId> out;
  for (; s != m::kNoStack; s = p.stacks.prefix(s)) out.insert(out.begin(), p.stacks.frame(s));
  return out;
}

const m::SymbolRequest& request_for(const std::vector<m::SymbolRequest>& rs, const m::Profile& p,
                                    const std::string& name) {
  for (const auto& r : rs)
    if (p.binaries[r.binary].name == name) return r;
  FAIL("no request for " << name);
  return rs.front();
}

}  // namespace

TEST_CASE("the model asks per binary for what samples use, callers at -1", "[model]") {
  m::Profile p = make_profile();
  // app: main (0x555555555100) calls work (leaf 0x555555555200); libc frame in between.
  m::FrameId main_f = p.native_frame(0x555555555100), libc_f = p.native_frame(0x7f0000002345),
             work_f = p.native_frame(0x555555555200), vdso_f = p.native_frame(0x7fff00000010),
             stray = p.native_frame(0x1234), unused = p.native_frame(0x555555555999);
  m::FrameId kern = p.kernel_frame(0xffffffff81000000);
  std::vector<m::FrameId> s1{main_f, libc_f, work_f};
  std::vector<m::FrameId> s2{main_f, vdso_f, stray, kern};
  m::StackId leaf1 = p.stacks.intern_path(s1), leaf2 = p.stacks.intern_path(s2);
  p.stacks.intern_path(std::vector<m::FrameId>{unused});  // interned, never sampled: not asked
  p.processes[0].threads.push_back({});
  p.processes[0].threads[0].samples = {{1, leaf1, -1}, {2, leaf2, -1}, {3, leaf1, -1}};
  // Process 2: the same absolute address as `work`, but it is "other" there; used as a leaf and a caller.
  m::StackId o_leaf = p.stacks.intern_path(std::vector<m::FrameId>{work_f});
  m::StackId o_deeper = p.stacks.intern(o_leaf, main_f);
  p.processes[1].threads.push_back({});
  p.processes[1].threads[0].samples = {{1, o_leaf, -1}, {2, o_deeper, -1}};

  auto reqs = m::symbol_requests(p);
  REQUIRE(reqs.size() == 3);  // app, libc, other; [vdso] has no identity; 0x1234 is in no mapping
  CHECK(request_for(reqs, p, "app").addresses == std::vector<uint64_t>{0x10ff, 0x1200});
  CHECK(request_for(reqs, p, "libc.so.6").addresses == std::vector<uint64_t>{0x2344});
  // main is the leaf there (exact), work both a caller (-1) and a leaf.
  CHECK(request_for(reqs, p, "other").addresses == std::vector<uint64_t>{0x1100, 0x11ff, 0x1200});
}

TEST_CASE("answers become named frames with inline chains; the rest becomes binary-relative", "[model]") {
  m::Profile p = make_profile();
  m::FrameId main_f = p.native_frame(0x555555555100), work_f = p.native_frame(0x555555555200),
             libc_f = p.native_frame(0x7f0000002345), vdso_f = p.native_frame(0x7fff00000010);
  m::FrameId label = p.label_frame("(stack truncated)");
  m::StackId leaf = p.stacks.intern_path(std::vector<m::FrameId>{label, main_f, libc_f, work_f});
  m::StackId leaf_vdso = p.stacks.intern_path(std::vector<m::FrameId>{label, main_f, vdso_f});
  p.processes[0].threads.push_back({});
  p.processes[0].threads[0].samples = {{1, leaf, 500}, {2, leaf_vdso, -1}, {3, m::kNoStack, -1}};

  auto reqs = m::symbol_requests(p);
  for (auto& r : reqs) {
    if (p.binaries[r.binary].name != "app") continue;  // libc: no answers (no symbols)
    REQUIRE(r.addresses == std::vector<uint64_t>{0x10ff, 0x1200});
    r.answers.push_back({{"main", "/src/app.c", 10}});
    r.answers.push_back(
        {{"work", "/src/app.c", 20}, {"helper", "/src/util.h", 5}, {"inner", "/src/util.h", 7}});
  }
  m::apply_symbols(p, reqs);

  const auto& samples = p.processes[0].threads[0].samples;
  CHECK(samples[2].stack == m::kNoStack);
  CHECK(samples[0].cpu_delta_ns == 500);
  auto frames = path(p, samples[0].stack);
  REQUIRE(frames.size() == 6);  // label, main, libc (unresolved), work, helper, inner
  CHECK(name_of(p, frames[0]) == "(stack truncated)");
  CHECK(name_of(p, frames[1]) == "main");
  const m::Frame& mf = p.frames.get(frames[1]);
  CHECK(p.binaries[mf.binary].name == "app");
  CHECK(mf.address == 0x1100);  // the frame keeps the return address; the lookup used 0x10ff
  CHECK(std::string(p.strings.get(mf.file)) == "/src/app.c");
  CHECK(mf.line == 10);
  const m::Frame& lf = p.frames.get(frames[2]);
  CHECK(lf.name == m::kNoString);
  CHECK(lf.address == 0x2345);  // binary-relative now, the same in every process and run
  CHECK(p.binaries[lf.binary].name == "libc.so.6");
  CHECK(name_of(p, frames[3]) == "work");
  CHECK(name_of(p, frames[4]) == "helper");
  CHECK(name_of(p, frames[5]) == "inner");
  CHECK(p.frames.get(frames[3]).inline_depth == 0);
  CHECK(p.frames.get(frames[4]).inline_depth == 1);
  CHECK(p.frames.get(frames[5]).inline_depth == 2);
  CHECK(p.frames.get(frames[5]).line == 7);
  // The [vdso] frame has a mapping but no identity: binary-relative, unnamed.
  auto v = path(p, samples[1].stack);
  REQUIRE(v.size() == 3);
  CHECK(p.frames.get(v[2]).address == 0x10);
  // Topological order and no stacks the samples do not use.
  for (m::StackId s = 0; s < p.stacks.size(); ++s) {
    if (p.stacks.prefix(s) != m::kNoStack) CHECK(p.stacks.prefix(s) < s);
  }
  CHECK(p.stacks.size() == 7);  // 6 on the first path, 1 more for [vdso] (label and main are shared)
  // Named frames are not asked again; what stayed unresolved is (another symbol dir may have it).
  auto again = m::symbol_requests(p);
  REQUIRE(again.size() == 1);
  CHECK(p.binaries[again[0].binary].name == "libc.so.6");
  CHECK(again[0].addresses == std::vector<uint64_t>{0x2344});
}

TEST_CASE("a frame sampled as a leaf and used as a caller gets both answers", "[model]") {
  m::Profile p = make_profile();
  m::FrameId f = p.native_frame(0x555555555100), g = p.native_frame(0x555555555200);
  m::StackId as_leaf = p.stacks.intern_path(std::vector<m::FrameId>{f});
  m::StackId deeper = p.stacks.intern(as_leaf, g);
  p.processes[0].threads.push_back({});
  p.processes[0].threads[0].samples = {{1, as_leaf, -1}, {2, deeper, -1}};
  auto reqs = m::symbol_requests(p);
  REQUIRE(reqs.size() == 1);
  REQUIRE(reqs[0].addresses == std::vector<uint64_t>{0x10ff, 0x1100, 0x1200});
  reqs[0].answers = {{{"before", "", 0}}, {{"at", "", 0}}, {{"leaf", "", 0}}};
  m::apply_symbols(p, reqs);
  const auto& s = p.processes[0].threads[0].samples;
  CHECK(name_of(p, p.stacks.frame(s[0].stack)) == "at");
  auto d = path(p, s[1].stack);
  REQUIRE(d.size() == 2);
  CHECK(name_of(p, d[0]) == "before");
  CHECK(name_of(p, d[1]) == "leaf");
}

// Allocation stacks (heap shim) hold return addresses only, like marker backtraces: asked at -1 and remapped
// with the samples, so a baked --heap profile keeps each allocation on its own call site.
TEST_CASE("allocation stacks are asked as callers and remapped with the samples", "[model]") {
  m::Profile p = make_profile();
  m::FrameId site = p.native_frame(0x555555555300), hot = p.native_frame(0x555555555400);
  m::StackId alloc_stack = p.stacks.intern_path(std::vector<m::FrameId>{site});
  m::StackId sample_stack = p.stacks.intern_path(std::vector<m::FrameId>{hot});
  p.processes[0].threads.push_back({});
  auto& t = p.processes[0].threads[0];
  t.samples = {{1, sample_stack, -1}};
  t.allocations = {{5, alloc_stack, 64, 0x1000, 1}};
  auto reqs = m::symbol_requests(p);
  REQUIRE(reqs.size() == 1);
  REQUIRE(reqs[0].addresses == std::vector<uint64_t>{0x12ff, 0x1400});
  reqs[0].answers = {{{"leak_site", "", 0}}, {{"hot_loop", "", 0}}};
  m::apply_symbols(p, reqs);
  CHECK(name_of(p, p.stacks.frame(t.allocations[0].stack)) == "leak_site");
  CHECK(name_of(p, p.stacks.frame(t.samples[0].stack)) == "hot_loop");
}

TEST_CASE("JIT code is named from the process's own table; other frames stay raw", "[model][jit]") {
  m::Profile p = make_profile();
  // Process 1 ran JIT code at 0x10000..0x10100 ("fast") and 0x10100..0x10200 ("slow"); process 2 has the
  // same addresses, but no JIT table: its frames there stay raw.
  p.processes[0].jit = {{0x10000, 0x10100, "fast"}, {0x10100, 0x10200, "slow"}};
  p.processes[0].jit_source = "/tmp/perf-1.map";
  m::FrameId main_f = p.native_frame(0x555555555100), fast_leaf = p.native_frame(0x10010),
             slow_ret = p.native_frame(0x10100),  // a return address right after a call at the end of "fast"
      libc_f = p.native_frame(0x7f0000002345), outside = p.native_frame(0x20000);
  std::vector<m::FrameId> s1{main_f, fast_leaf}, s2{main_f, slow_ret, libc_f}, s3{main_f, outside};
  p.processes[0].threads.push_back({});
  p.processes[0].threads[0].samples = {
      {1, p.stacks.intern_path(s1)}, {2, p.stacks.intern_path(s2)}, {3, p.stacks.intern_path(s3)}};
  p.processes[1].threads.push_back({});
  p.processes[1].threads[0].samples = {{1, p.stacks.intern_path(s1)}};

  m::name_jit_frames(p);

  auto names = [&](m::StackId s) {
    std::vector<std::string> out;
    for (m::FrameId f : path(p, s)) {
      const m::Frame& fr = p.frames.get(f);
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(fr.address));
      std::string n = fr.name == m::kNoString ? hex : name_of(p, f);
      if (fr.binary != m::kNoBinary) n += " (in " + p.binaries[fr.binary].name + ")";
      out.push_back(n);
    }
    return out;
  };
  const auto& t1 = p.processes[0].threads[0].samples;
  // The leaf at its address; the caller's return address 0x10100 at 0x100ff: still "fast" (the call).
  CHECK(names(t1[0].stack) == std::vector<std::string>{"0x555555555100", "fast (in perf-1.map)"});
  CHECK(names(t1[1].stack) ==
        std::vector<std::string>{"0x555555555100", "fast (in perf-1.map)", "0x7f0000002345"});
  CHECK(names(t1[2].stack) == std::vector<std::string>{"0x555555555100", "0x20000"});
  CHECK(names(p.processes[1].threads[0].samples[0].stack) ==
        std::vector<std::string>{"0x555555555100", "0x10010"});
  // Named frames are never asked again; the libs' addresses are, as before.
  auto reqs = m::symbol_requests(p);
  for (const auto& r : reqs) CHECK(p.binaries[r.binary].name != "perf-1.map");
  CHECK(request_for(reqs, p, "app").addresses.size() == 1);
}

TEST_CASE("JIT code reused over time: each sample gets the code at its address at its time", "[model][jit]") {
  m::Profile p = make_profile();
  // 0x10000 held "early" from t=100 until it moved at t=300, then "late" from t=400; "always" at 0x20000
  // never changed; "stamped" (a perf map line read at t=50) is named for samples before 50 too.
  p.processes[0].jit = {{0x10000, 0x10100, "early", 100, 300},
                        {0x10000, 0x10100, "late", 400},
                        {0x20000, 0x20100, "always", 0},
                        {0x30000, 0x30100, "stamped", 50}};
  p.processes[0].jit_source = "/tmp/jit-1.dump";
  m::FrameId main_f = p.native_frame(0x555555555100), reused = p.native_frame(0x10010),
             always = p.native_frame(0x20010), stamped = p.native_frame(0x30010);
  std::vector<m::FrameId> s1{main_f, always, reused}, s2{main_f, stamped};
  const m::StackId st1 = p.stacks.intern_path(s1), st2 = p.stacks.intern_path(s2);
  p.processes[0].threads.push_back({});
  auto& t = p.processes[0].threads[0];
  t.samples = {{150, st1}, {200, st1}, {350, st1}, {500, st1}, {10, st2}, {60, st2}};
  // A marker's backtrace at t=450: every frame a return address.
  t.markers.push_back({});
  t.markers[0].start_ns = 450;
  t.markers[0].stack = st1;

  m::name_jit_frames(p);

  auto leaf = [&](m::StackId s) { return name_of(p, p.stacks.frame(s)); };
  auto caller = [&](m::StackId s) { return name_of(p, p.stacks.frame(p.stacks.prefix(s))); };
  CHECK(leaf(t.samples[0].stack) == "early");
  CHECK(leaf(t.samples[1].stack) == "early");
  CHECK(t.samples[0].stack == t.samples[1].stack);  // the same renamed stack, not a copy per sample
  // Between the move and the next load nothing was there: the next code loaded names it.
  CHECK(leaf(t.samples[2].stack) == "late");
  CHECK(leaf(t.samples[3].stack) == "late");
  for (size_t i = 0; i < 4; ++i) CHECK(caller(t.samples[i].stack) == "always");
  CHECK(leaf(t.samples[4].stack) == "stamped");
  CHECK(leaf(t.samples[5].stack) == "stamped");
  CHECK(leaf(t.markers[0].stack) == "late");
  CHECK(p.binaries[p.frames.get(p.stacks.frame(t.samples[0].stack)).binary].name == "jit-1.dump");
}

TEST_CASE("a caller frame at the first byte of a JIT function, none before it, is dropped", "[model][jit]") {
  m::Profile p = make_profile();
  // Python 3.13's trampolines: 11 bytes each in 16-byte slots. The scan found a stale pointer to the
  // trampoline at 0x10010 (a function's first byte, the slot's padding before it) and the return address
  // 0x10006 inside the one at 0x10000.
  p.processes[0].jit = {{0x10000, 0x1000b, "py::outer"}, {0x10010, 0x1001b, "py::inner"}};
  p.processes[0].jit_source = "/tmp/perf-1.map";
  m::FrameId main_f = p.native_frame(0x555555555100), stale = p.native_frame(0x10010),
             ret = p.native_frame(0x10006), leaf = p.native_frame(0x555555555200);
  std::vector<m::FrameId> s{main_f, stale, ret, leaf}, as_leaf{main_f, stale};
  p.processes[0].threads.push_back({});
  p.processes[0].threads[0].samples = {{1, p.stacks.intern_path(s)}, {2, p.stacks.intern_path(as_leaf)}};
  m::name_jit_frames(p);
  const auto& smp = p.processes[0].threads[0].samples;
  std::vector<std::string> names;
  for (m::FrameId f : path(p, smp[0].stack))
    names.push_back(p.frames.get(f).name == m::kNoString ? "raw" : name_of(p, f));
  CHECK(names == std::vector<std::string>{"raw", "py::outer", "raw"});
  // A sampled leaf there is the function itself.
  CHECK(name_of(p, p.stacks.frame(smp[1].stack)) == "py::inner");
}
