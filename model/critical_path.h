// fxprof model: the critical path of a thread over an interval, from the typed waits (model/waits.h) and the
// samples alone, so that it works alike on a recording and on a saved profile.
//
// Walking back from the interval's end: while the thread runs, the path is its own on-CPU samples; when it
// waits, the path jumps to the thread that woke it at the wake's time and continues there, back to the
// wait's start, recursively. A wait ended by a timer, an interrupt or I/O completion is a leaf of its own,
// run-queue delay is [preempted], and a wait whose waker was not recorded is said, never guessed.
// (After WPA's readying-thread walk and wPerf's wait-for graphs; neither puts sampled stacks on the path.)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/profile.h"

namespace fxprof::model {

enum class PathKind : uint8_t {
  Cpu,        // a thread on the path ran: its sample's stack
  Running,    // it ran, no sample fell there (a sliver shorter than the sampling interval)
  Preempted,  // runnable, waiting for a CPU
  Sleep,      // a sleep (its timer ended it)
  Io,         // disk or network I/O that an interrupt completed
  Timer,      // a timeout other than a sleep
  Interrupt,  // another wait an interrupt ended
  Untraced,   // woken by a process not recorded
  NoWaker,    // the waker was not recorded (no eBPF waker tracer, attach mid-wait, lost records)
  TooDeep,    // the walk stopped following wakes (kMaxHops)
};

// "own CPU" / "CPU", "running (not sampled)", "[preempted]", "sleep", "disk/network I/O", "timer",
// "interrupt", "woken by a process not recorded", "no waker recorded", "(chain too long)".
std::string_view path_kind_label(PathKind k);

struct PathSegment {
  uint64_t start_ns = 0, end_ns = 0;
  PathKind kind = PathKind::Cpu;
  uint32_t pid = 0, tid = 0;  // the thread the path is on
  StackId stack = kNoStack;   // Cpu: the sample's stack; a wait: its blocking stack (its marker's)
  WaitReason reason = WaitReason::Unknown;  // a wait's
  uint32_t hops = 0;                        // wakes followed from the thread asked about
};

struct CriticalPath {
  uint32_t pid = 0, tid = 0;
  uint64_t start_ns = 0, end_ns = 0;
  std::vector<PathSegment> segments;  // in time order, covering [start_ns, end_ns]
};

inline constexpr uint32_t kMaxHops = 64;

// The critical path of `t` (a thread of `proc`) over [from_ns, to_ns].
CriticalPath critical_path(const Profile& p, const Process& proc, const Thread& t, uint64_t from_ns,
                           uint64_t to_ns);

// A frame's name as the path shows it: the function, a kernel symbol, a label, or "0x..." unnamed.
std::string frame_name(const Profile& p, FrameId f);

// The thread "critical path of NAME" whose samples are the path's stacks, one per `interval_ns` of the
// interval: each under a root frame naming the thread it is on ("NAME (tid N)"), a wait's with a leaf
// naming its kind. For the Firefox Profiler's call tree, flame graph and stack chart, and folded exports.
Thread critical_path_thread(Profile& p, const CriticalPath& path, std::string_view name,
                            uint64_t interval_ns);

}  // namespace fxprof::model
