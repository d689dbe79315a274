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
#include "tests/recorder/unwind/unwinder_fixtures.h"

using fxprof::recorder::UnwindEnd;
using fxprof::recorder::Unwinder;
using fxprof::unwind_test::Capture;
using fxprof::unwind_test::Record;
using fxprof::unwind_test::Symbolizer;

using namespace fxprof::test::unwind_fixtures;

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
