// tests/recorder/unwind's fixtures: a recorded run of a test program unwound and named (record_and_unwind),
// its stacks and how they end (unwinder_test.cpp, unwinder_more_test.cpp).
#pragma once

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

namespace fxprof::test::unwind_fixtures {

using fxprof::recorder::UnwindEnd;
using fxprof::recorder::Unwinder;
using fxprof::unwind_test::Capture;
using fxprof::unwind_test::Record;
using fxprof::unwind_test::Symbolizer;

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

inline bool is_entry(const std::string& n) {
  return n == "_start" || n == "clone3" || n == "__clone3" || n == "start_thread" || n == "clone" ||
         n == "__clone";
}
inline bool reaches_entry(const Stack& s) {
  return s.end == UnwindEnd::Complete && !s.names.empty() && is_entry(s.names.back());
}

struct Run {
  Capture cap;
  std::vector<Stack> stacks;
  fxprof::recorder::UnwindStats stats;
};

inline Run unwind_capture(Capture cap) {
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
inline Run record_and_unwind(std::vector<std::string> argv, double hz = 4000) {
  auto cap = fxprof::unwind_test::capture_command(argv, {hz, 32768});
  REQUIRE(cap.ok());
  REQUIRE(cap->exit_status == 0);
  return unwind_capture(std::move(cap.value()));
}

// Stacks containing `fn`, with a few printed when a check fails.
inline std::vector<const Stack*> with(const Run& run, std::string_view fn) {
  std::vector<const Stack*> out;
  for (const Stack& s : run.stacks)
    if (s.find(fn) >= 0) out.push_back(&s);
  return out;
}

inline std::string examples(const std::vector<const Stack*>& v, size_t n = 5) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < n; ++i) s += v[i]->str() + "\n";
  return s;
}

}  // namespace fxprof::test::unwind_fixtures
