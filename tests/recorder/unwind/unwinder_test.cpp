// Unwinder tests through the real path: a perf event (cpu-clock, REGS_USER + STACK_USER) on a child program
// built -O2 without frame pointers, its MMAP2/COMM/FORK records fed to the Unwinder, every sample unwound and
// its frames named from the binaries' ELF symbols; cross-checked against `perf record --call-graph dwarf`.
#include "recorder/unwind/unwinder.h"

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
#include "tests/recorder/unwind/capture.h"

using fxprof::recorder::UnwindEnd;
using fxprof::recorder::Unwinder;
using fxprof::unwind_test::Capture;
using fxprof::unwind_test::Record;
using fxprof::unwind_test::Symbolizer;

namespace {

const std::string kProg = std::string(FXPROF_TEST_PROGRAMS_DIR) + "/unw_prog";
const std::string kLib = std::string(FXPROF_TEST_PROGRAMS_DIR) + "/libunw_lib.so";

struct Stack {
  uint32_t pid, tid;
  UnwindEnd end;
  std::vector<std::string> names;  // innermost first
  std::string module0;             // the binary of frame 0
  uint64_t time = 0;
  std::string str() const {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : " <- ") + n;
    return s + (end == UnwindEnd::Complete ? "" : end == UnwindEnd::Truncated ? " [truncated]" : " [failed]");
  }
  // Index of the first frame named n, or -1.
  int find(std::string_view n) const {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == n) return static_cast<int>(i);
    return -1;
  }
  // True when the frames from index i on start with `seq`.
  bool at(int i, std::initializer_list<std::string_view> seq) const {
    if (i < 0) return false;
    size_t k = static_cast<size_t>(i);
    for (std::string_view s : seq) {
      if (k >= names.size() || names[k] != s) return false;
      ++k;
    }
    return true;
  }
};

bool is_entry(const std::string& n) {
  return n == "_start" || n == "clone3" || n == "__clone3" || n == "start_thread" || n == "clone" ||
         n == "__clone";
}
bool reaches_entry(const Stack& s) {
  return s.end == UnwindEnd::Complete && !s.names.empty() && is_entry(s.names.back());
}

struct Run {
  Capture cap;
  std::vector<Stack> stacks;
  fxprof::recorder::UnwindStats stats;
};

Run unwind_capture(Capture cap) {
  Run run;
  run.cap = std::move(cap);
  Symbolizer sym(run.cap);
  Unwinder u;
  fxprof::unwind_test::replay(run.cap, u, [&](const Record& r, auto res, std::span<const uint64_t> frames) {
    Stack s{r.pid, r.tid, res.end, {}, frames.empty() ? "" : sym.module(r.pid, frames[0]), r.time};
    bool after_sigreturn = false;
    for (size_t i = 0; i < frames.size(); ++i) {
      // Frame 0 and the frame a signal interrupted are exact addresses, the others return addresses.
      std::string exact = sym.name(r.pid, frames[i], false);
      bool is_ret = i > 0 && !after_sigreturn;
      std::string n = exact == "__restore_rt" ? exact : sym.name(r.pid, frames[i], is_ret);
      after_sigreturn = n == "__restore_rt";
      s.names.push_back(n);
    }
    run.stacks.push_back(std::move(s));
  });
  run.stats = u.stats();
  if (std::getenv("FXPROF_UNWIND_DUMP"))  // debugging aid: every unwound stack
    for (const Stack& s : run.stacks) std::fprintf(stderr, "%u/%u %s\n", s.pid, s.tid, s.str().c_str());
  return run;
}

// 4 kHz: enough samples in a few hundred ms even when the two CPUs are shared with other tests.
Run record_and_unwind(std::vector<std::string> argv, double hz = 4000) {
  auto cap = fxprof::unwind_test::capture_command(argv, {hz, 32768});
  REQUIRE(cap.ok());
  REQUIRE(cap->exit_status == 0);
  return unwind_capture(std::move(cap.value()));
}

// Stacks containing `fn`, with a few printed when a check fails.
std::vector<const Stack*> with(const Run& run, std::string_view fn) {
  std::vector<const Stack*> out;
  for (const Stack& s : run.stacks)
    if (s.find(fn) >= 0) out.push_back(&s);
  return out;
}

std::string examples(const std::vector<const Stack*>& v, size_t n = 5) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < n; ++i) s += v[i]->str() + "\n";
  return s;
}

}  // namespace

TEST_CASE("unwind: -O2 no-frame-pointer program unwinds to the thread entry", "[unwind]") {
  Run run = record_and_unwind({kProg, "mixed", "70", kLib});
  REQUIRE(run.stacks.size() >= 50);
  std::vector<const Stack*> bad;
  for (const Stack& s : run.stacks)
    if (!reaches_entry(s)) bad.push_back(&s);
  double complete = 1.0 - static_cast<double>(bad.size()) / static_cast<double>(run.stacks.size());
  INFO("samples " << run.stacks.size() << ", complete " << complete * 100 << " %, lost " << run.cap.lost
                  << "\nincomplete examples:\n"
                  << examples(bad, 10));
  CHECK(complete >= 0.97);
  CHECK(run.stats.stacks == run.stacks.size());
  CHECK(run.stats.cache_hits > run.stats.cache_misses);
}

TEST_CASE("unwind: recursion of a known depth comes out exactly", "[unwind]") {
  Run run = record_and_unwind({kProg, "recurse", "250"});
  auto leaf = with(run, "recurse_leaf");
  REQUIRE(leaf.size() >= 30);
  size_t exact = 0;
  std::vector<const Stack*> bad;
  for (const Stack* s : leaf) {
    int i = s->find("recurse_leaf");
    bool ok = reaches_entry(*s) && s->at(i + 21, {"run_recurse", "main"});
    for (int k = 1; k <= 20; ++k) ok = ok && s->at(i + k, {"recurse"});
    ok = ok && !s->at(i + 21, {"recurse"});
    if (ok)
      ++exact;
    else
      bad.push_back(s);
  }
  INFO("exact " << exact << " of " << leaf.size() << "\n" << examples(bad));
  CHECK(exact >= leaf.size() * 97 / 100);
}

TEST_CASE("unwind: a stack copy too small for the stack ends Truncated, with the frames it had", "[unwind]") {
  auto cap = fxprof::unwind_test::capture_command({kProg, "recurse", "150"}, {4000, 192});
  REQUIRE(cap.ok());
  Run run = unwind_capture(std::move(cap.value()));
  auto leaf = with(run, "recurse_leaf");
  REQUIRE(leaf.size() >= 30);
  size_t truncated_prefix = 0;
  std::vector<const Stack*> bad;
  for (const Stack* s : leaf) {
    int i = s->find("recurse_leaf");
    // 192 bytes hold a few of the 20 recursion frames (16 bytes each): never the whole stack.
    bool ok = s->end == UnwindEnd::Truncated && s->names.size() > static_cast<size_t>(i) + 2;
    for (size_t k = static_cast<size_t>(i) + 1; ok && k < s->names.size(); ++k) ok = s->names[k] == "recurse";
    if (ok)
      ++truncated_prefix;
    else
      bad.push_back(s);
  }
  INFO("truncated with a correct prefix: " << truncated_prefix << " of " << leaf.size() << "\n"
                                           << examples(bad));
  CHECK(truncated_prefix >= leaf.size() * 97 / 100);
}

TEST_CASE("unwind: a callback called from libc's qsort", "[unwind]") {
  Run run = record_and_unwind({kProg, "qsort", "250"});
  auto cmp = with(run, "compare_slow");
  REQUIRE(cmp.size() >= 30);
  size_t exact = 0;
  std::vector<const Stack*> bad;
  for (const Stack* s : cmp) {
    int i = s->find("compare_slow");
    int q = s->find("run_qsort");
    // compare_slow <- libc's sorting frames (msort_with_tmp..., qsort_r) <- run_qsort <- main
    bool ok = reaches_entry(*s) && q > i + 1 && s->at(q, {"run_qsort", "main"});
    bool saw_qsort = false;
    for (int k = i + 1; ok && k < q; ++k) {
      const std::string& n = s->names[static_cast<size_t>(k)];
      saw_qsort = saw_qsort || n.find("qsort") != std::string::npos;
      ok = n != "main" && n != "?";
    }
    if (ok && saw_qsort)
      ++exact;
    else
      bad.push_back(s);
  }
  INFO("exact " << exact << " of " << cmp.size() << "\n" << examples(bad));
  CHECK(exact >= cmp.size() * 97 / 100);
}

TEST_CASE("unwind: samples in a signal handler unwind through the trampoline", "[unwind]") {
  Run run = record_and_unwind({kProg, "signal", "300"});
  auto in_handler = with(run, "handler_work");
  REQUIRE(in_handler.size() >= 10);
  size_t exact = 0;
  std::vector<const Stack*> bad;
  for (const Stack* s : in_handler) {
    int i = s->find("handler_work");
    // The signal may have interrupted sig_victim's clock read (in the vDSO, or in the kernel where the
    // VM's clock source makes it a system call, and the signal is delivered on its return): exact too.
    int victim = s->find("sig_victim");
    const int interrupted = victim < 0 ? 0 : victim - (i + 3);
    bool in_clock = interrupted >= 0 && interrupted <= 2;
    for (int k = i + 3; in_clock && k < victim; ++k)
      in_clock = s->names[static_cast<size_t>(k)].find("clock_gettime") != std::string::npos;
    if (reaches_entry(*s) && in_clock && s->at(i, {"handler_work", "on_signal", "__restore_rt"}) &&
        s->at(victim, {"sig_victim", "run_signal", "main"}))
      ++exact;
    else
      bad.push_back(s);
  }
  INFO("exact " << exact << " of " << in_handler.size() << ", signal frames " << run.stats.signal_frames
                << "\n"
                << examples(bad));
  CHECK(exact >= in_handler.size() * 97 / 100);
  CHECK(run.stats.signal_frames >= exact);
  // And the interrupted function itself, outside the handler.
  auto victim = with(run, "sig_victim");
  size_t direct = 0;
  for (const Stack* s : victim)
    if (s->find("handler_work") < 0 && s->at(0, {"sig_victim", "run_signal", "main"}) && reaches_entry(*s))
      ++direct;
  CHECK(direct >= 10);
}

TEST_CASE("unwind: a thread created with pthread_create", "[unwind]") {
  Run run = record_and_unwind({kProg, "thread", "250"});
  std::vector<const Stack*> thread;
  for (const Stack& s : run.stacks)
    if (s.tid != s.pid) thread.push_back(&s);
  REQUIRE(thread.size() >= 30);
  size_t exact = 0, working = 0, complete = 0;
  std::vector<const Stack*> bad;
  for (const Stack* s : thread) {
    complete += reaches_entry(*s);  // thread start-up and exit included
    int i = s->find("thread_work");
    if (i < 0) continue;
    ++working;
    // thread_work <- thread_main <- start_thread <- clone3, and nothing after.
    if (s->at(i, {"thread_work", "thread_main", "start_thread"}) &&
        static_cast<size_t>(i) + 4 == s->names.size() && reaches_entry(*s))
      ++exact;
    else
      bad.push_back(s);
  }
  INFO("thread samples " << thread.size() << ", complete " << complete << ", exact " << exact << " of "
                         << working << "\n"
                         << examples(bad));
  CHECK(complete >= thread.size() * 97 / 100);
  REQUIRE(working >= 20);
  CHECK(exact >= working * 97 / 100);
}

TEST_CASE("unwind: code in a dlopen'ed library", "[unwind]") {
  Run run = record_and_unwind({kProg, "dlopen", "250", kLib});
  auto inner = with(run, "lib_inner");
  REQUIRE(inner.size() >= 30);
  size_t exact = 0;
  std::vector<const Stack*> bad;
  for (const Stack* s : inner) {
    if (reaches_entry(*s) && s->at(0, {"lib_inner", "lib_outer", "run_dlopen", "main"}))
      ++exact;
    else
      bad.push_back(s);
  }
  INFO("exact " << exact << " of " << inner.size() << "\n" << examples(bad));
  CHECK(exact >= inner.size() * 97 / 100);
}

namespace {
// The frames of our own test binaries (same names in perf's output and ours), innermost first, joined.
std::string app_key(const std::vector<std::string>& names) {
  static const std::set<std::string> app = {"recurse_leaf", "recurse",      "run_recurse", "compare_slow",
                                            "run_qsort",    "handler_work", "on_signal",   "sig_victim",
                                            "run_signal",   "thread_work",  "thread_main", "run_thread",
                                            "lib_inner",    "lib_outer",    "run_dlopen",  "main"};
  std::string k;
  for (const auto& n : names)
    if (app.count(n)) k += n + ";";
  return k;
}

}  // namespace

TEST_CASE("unwind: agrees with perf record --call-graph dwarf, sample by sample", "[unwind][perf]") {
  INFO("perf comes with `make test-deps` (Debian's linux-perf)");
  REQUIRE(access("/usr/bin/perf", X_OK) == 0);
  char dir[] = "/tmp/fxprof-unwind-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string data = std::string(dir) + "/perf.data", script = std::string(dir) + "/perf.txt";
  std::string cmd = "perf record -q -e cpu-clock:u -F 4000 --call-graph dwarf,32768 -o " + data + " " +
                    kProg + " mixed 50 " + kLib + " >/dev/null 2>&1 && perf script -i " + data +
                    " -F tid,time,ip,sym --no-inline > " + script + " 2>/dev/null";
  int rc = std::system(cmd.c_str());
  auto text = fxprof::read_file(script);
  auto cap = fxprof::unwind_test::read_perf_data(data);
  std::system(("rm -rf " + std::string(dir)).c_str());
  INFO("perf record or perf script failed");
  REQUIRE(rc == 0);
  REQUIRE(text.ok());
  REQUIRE(cap.ok());
  // Our unwinder on exactly the samples (registers + stack copies) perf recorded.
  Run run = unwind_capture(std::move(cap.value()));
  std::map<std::string, const Stack*> ours;  // "tid seconds.micros" -> stack
  for (const Stack& s : run.stacks) {
    char key[64];
    std::snprintf(key, sizeof key, "%u %llu.%06llu", s.tid,
                  static_cast<unsigned long long>(s.time / 1000000000),
                  static_cast<unsigned long long>(s.time % 1000000000 / 1000));
    ours[key] = &s;
  }
  // perf script: "  TID  SECONDS.MICROS: " line, then "\t  addr sym" frames, then a blank line.
  size_t compared = 0, agree = 0, perf_complete = 0, ours_complete = 0;
  std::string mismatches;
  std::vector<std::string> frames;
  std::string key;
  auto flush = [&] {
    if (!key.empty() && !frames.empty() && is_entry(frames.back())) {
      ++perf_complete;
      auto it = ours.find(key);
      if (it != ours.end() && reaches_entry(*it->second)) {
        ++compared;
        std::string theirs = app_key(frames), mine = app_key(it->second->names);
        if (theirs == mine)
          ++agree;
        else if (mismatches.size() < 2000)
          mismatches += "perf: " + theirs + "\nours: " + mine + "\n";
      }
    }
    frames.clear();
    key.clear();
  };
  std::istringstream in(text.value());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) {
      flush();
    } else if (line[0] == '\t') {
      std::istringstream ls(line);
      std::string addr, name;
      ls >> addr >> name;
      frames.push_back(name);
    } else {
      flush();
      std::istringstream ls(line);
      std::string tid, time;
      ls >> tid >> time;
      if (!time.empty() && time.back() == ':') time.pop_back();
      key = tid + " " + time;
    }
  }
  flush();
  for (const Stack& s : run.stacks) ours_complete += reaches_entry(s);
  INFO("samples " << run.stacks.size() << ", complete: perf " << perf_complete << ", ours " << ours_complete
                  << "; compared " << compared << ", same functions " << agree << "\n"
                  << mismatches);
  REQUIRE(compared >= 30);
  CHECK(agree * 100 >= compared * 99);
  CHECK(ours_complete >= perf_complete * 97 / 100);  // and we complete (about) as many as perf
}

TEST_CASE("unwind: PLT stubs (the CFA expression)", "[unwind]") {
  // Deterministic: the real binary's .plt, whose FDE says CFA = rsp + 8 + ((rip & 15) >= 11 ? 8 : 0).
  auto plt = fxprof::unwind_test::section_range(kProg, ".plt");
  REQUIRE(plt.ok());
  REQUIRE(plt->second - plt->first >= 32);
  Unwinder u;
  const uint64_t base = 0x555555554000;  // the PIE mapped whole at a typical address (file offset 0 at base)
  u.on_mmap(7, base, 0x100000, 0, kProg);
  const uint64_t sp = 0x7ffd00000000;
  uint64_t words[4] = {0x1111, 0x2222, 0x3333, 0x4444};
  auto stack = std::as_bytes(std::span(words));
  uint64_t out[8];
  uint64_t stub = base + plt->first + 16;                // the first entry after PLT0
  auto at_jmp = u.unwind(7, {stub, sp, 0}, stack, out);  // `jmp *GOT`: return address at [rsp]
  REQUIRE(at_jmp.count >= 2);
  CHECK(out[1] == 0x1111);
  auto after_push = u.unwind(7, {stub + 11, sp, 0}, stack, out);  // after `push $index`: at [rsp+8]
  REQUIRE(after_push.count >= 2);
  CHECK(out[1] == 0x2222);
  auto plt0 = u.unwind(7, {base + plt->first + 6, sp, 0}, stack, out);  // PLT0 after its push: [rsp+16]
  REQUIRE(plt0.count >= 2);
  CHECK(out[1] == 0x3333);

  // And recorded: the stacks of a loop calling through the PLT are complete.
  Run run = record_and_unwind({kProg, "plt", "200"});
  auto in_run = with(run, "run_plt");
  REQUIRE(in_run.size() >= 30);
  std::vector<const Stack*> bad;
  for (const Stack* s : in_run)
    if (!reaches_entry(*s) || s->find("main") != s->find("run_plt") + 1) bad.push_back(s);
  INFO(examples(bad));
  CHECK(bad.size() * 100 <= in_run.size() * 3);
}

TEST_CASE("unwind: every address of a function steps one frame (prologues, epilogues)", "[unwind]") {
  // At every byte of these functions the CFI gives a rule; in epilogues, after `pop %rbp`, it still says
  // "rbp saved at CFA-n", a slot below SP that is not in the stack copy: that must not stop the unwind.
  Unwinder u;
  const uint64_t base = 0x555555554000;
  u.on_mmap(7, base, 0x100000, 0, kProg);
  const uint64_t sp = 0x7ffd00000000;
  uint64_t words[64];
  for (size_t i = 0; i < 64; ++i) words[i] = 0x10000 + i;
  auto stack = std::as_bytes(std::span(words));
  uint64_t out[4];
  for (const char* fn : {"run_plt", "run_qsort", "recurse", "run_dlopen", "sig_victim"}) {
    auto range = Symbolizer::symbol_range(kProg, fn);
    REQUIRE(range.ok());
    size_t bad = 0;
    std::string where;
    for (uint64_t a = range->first; a < range->second; ++a) {
      auto res = u.unwind(7, {base + a, sp, 0x5}, stack, out);
      // One frame up: a return address read from the copy (then the fake caller has no module: FP fails).
      if (res.count < 2 || out[1] < 0x10000 || out[1] >= 0x10000 + 64) {
        ++bad;
        if (where.size() < 200) where += std::to_string(a - range->first) + " ";
      }
    }
    INFO(fn << ": failed at offsets " << where);
    CHECK(bad == 0);
  }
}

TEST_CASE("unwind: the vDSO (read from our own process)", "[unwind]") {
  Run run = record_and_unwind({kProg, "vdso", "200"});
  std::vector<const Stack*> vdso;
  for (const Stack& s : run.stacks)
    if (s.module0 == "[vdso]") vdso.push_back(&s);
  REQUIRE(vdso.size() >= 30);
  size_t exact = 0;
  std::vector<const Stack*> bad;
  for (const Stack* s : vdso) {
    int i = s->find("run_vdso");
    if (reaches_entry(*s) && i >= 2 && s->at(i - 1, {"__clock_gettime", "run_vdso", "main"}))
      ++exact;
    else
      bad.push_back(s);
  }
  INFO("exact " << exact << " of " << vdso.size() << "\n" << examples(bad));
  CHECK(exact >= vdso.size() * 97 / 100);
}

TEST_CASE("unwind: a forked child keeps the parent's mappings", "[unwind]") {
  Run run = record_and_unwind({kProg, "fork", "200"});
  std::vector<const Stack*> child, working, bad;
  for (const Stack& s : run.stacks)
    if (s.pid != run.cap.pid) child.push_back(&s);
  REQUIRE(child.size() >= 30);
  size_t complete = 0, exact = 0;
  for (const Stack* s : child) {
    complete += reaches_entry(*s);
    // The child also runs a little of fork() and _exit(); its work is child_work.
    int i = s->find("child_work");
    if (i < 0) continue;
    working.push_back(s);
    if (reaches_entry(*s) && s->at(i, {"child_work", "run_fork", "main"}))
      ++exact;
    else
      bad.push_back(s);
  }
  INFO("child samples " << child.size() << ", complete " << complete << ", in child_work " << working.size()
                        << ", exact " << exact << "\n"
                        << examples(bad));
  CHECK(complete >= child.size() * 97 / 100);
  REQUIRE(working.size() >= 20);
  CHECK(exact >= working.size() * 97 / 100);
}

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
