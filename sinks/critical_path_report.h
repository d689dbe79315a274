// fxprof sinks: `fxprof report --critical-path`: the breakdown of a thread's critical path over an interval
// (model/critical_path.h): its own CPU, the other threads' CPU by function, each kind of wait, with their
// time and share of the interval, and the longest chains of wakes followed, with the function at their end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json_writer.h"
#include "model/critical_path.h"
#include "model/profile.h"

namespace fxprof::sinks {

struct CriticalPathReport {
  std::string thread;  // "NAME (tid N)" of the thread asked about
  uint32_t pid = 0, tid = 0;
  std::string interval;  // what the interval is: "the whole thread", "marker NAME (3 intervals)", ...
  uint64_t total_ns = 0;
  struct Part {  // a kind: "own CPU", "other threads' CPU", "sleep", "[preempted]", ...
    std::string kind;
    uint64_t ns = 0;
  };
  std::vector<Part> parts;  // by time, descending
  struct Function {
    std::string function, thread;  // the leaf function, "NAME (tid N)" of the thread it ran on
    uint32_t tid = 0;
    bool own = false;       // on the thread asked about
    uint64_t self_ns = 0;   // the leaf of the path's stacks
    uint64_t total_ns = 0;  // anywhere on them
  };
  std::vector<Function> functions;  // by total time, descending, at most `limit`
  struct Chain {                    // one wait of the thread followed through its wakers
    uint64_t start_ns = 0, ns = 0;
    std::vector<std::string> threads;  // the wakers followed, in order
    std::string function;              // where most of its time went (a function, or a wait's kind)
    std::vector<std::string> stack;    // that function's stack, leaf first (at most 8 frames)
  };
  std::vector<Chain> chains;  // the longest, at most `limit`
};

// The report of `paths` (one per interval, all of one thread), `interval` naming them.
CriticalPathReport make_critical_path_report(const model::Profile& p,
                                             const std::vector<model::CriticalPath>& paths,
                                             std::string interval, size_t limit);
std::string format_critical_path_report(const CriticalPathReport& r);
void write_critical_path_report_json(const CriticalPathReport& r, JsonWriter& w);

// `fxprof report --wait-blame`: the same walk inverted, "who made us wait": each wait on the paths (of the
// thread asked about, and of the threads the path went through) goes to what ended it, the waking thread's
// stack at the wake (grouped by thread and the stack's functions), up to the wake. A wait the path followed
// into a waker that itself waited counts at both levels (A's wait ended by B's put, B's by C's): shares are
// of the interval, and rows may add up to more. Waits a timer or an
// interrupt ended are left out unless `include_irq` (then rows "[timer]", "[interrupt]"); waits with no
// waker recorded are a row of their own, never guessed.
struct WaitBlame {
  std::string thread;  // "NAME (tid N)" of the thread asked about
  uint32_t pid = 0, tid = 0;
  std::string interval;
  uint64_t total_ns = 0;     // the intervals' length
  uint64_t waiting_ns = 0;   // the waits' time on the paths, up to their wakes, every waker
  uint64_t left_out_ns = 0;  // of it, ended by a timer or an interrupt, left out
  struct Waker {
    std::string waker;  // "NAME (tid N)", or "[timer]", "[interrupt]", "[no waker recorded]", ...
    uint32_t tid = 0;
    std::vector<std::string> stack;  // the waker's stack at the wake, leaf first (at most 12 frames)
    uint64_t ns = 0;
    size_t waits = 0;
  };
  std::vector<Waker> wakers;  // by time, descending, at most `limit`
};

WaitBlame make_wait_blame(const model::Profile& p, const std::vector<model::CriticalPath>& paths,
                          std::string interval, bool include_irq, size_t limit);
std::string format_wait_blame(const WaitBlame& r);
void write_wait_blame_json(const WaitBlame& r, JsonWriter& w);

}  // namespace fxprof::sinks
