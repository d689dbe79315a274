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
#include <utility>
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

// What ended a wait on the path, and how much of the path's time it stands for: up to the wake (the
// run-queue delay after it is [preempted], nobody's wake), or the whole part of a wait no thread ended.
struct WaitEnd {
  uint64_t ns = 0;
  Waker waker = Waker::None;
  uint32_t pid = 0, tid = 0;  // the waking thread (Waker::Thread)
  StackId stack = kNoStack;   // its stack at the wake (one of its process's stacks), when recorded
  WaitReason reason = WaitReason::Unknown;
};

struct CriticalPath {
  uint32_t pid = 0, tid = 0;
  uint64_t start_ns = 0, end_ns = 0;
  std::vector<PathSegment> segments;  // in time order, covering [start_ns, end_ns]
  std::vector<WaitEnd> wait_ends;     // each wait on the path (of any thread on it), in no order
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
// It belongs to the process of path.pid: native frames of another process's code that this process does not
// map alike become binary-relative (a front end locates a thread's raw addresses in its own process's libs).
Thread critical_path_thread(Profile& p, const CriticalPath& path, std::string_view name,
                            uint64_t interval_ns);

// A thread's span: its first to its last sample or wait (a launched program's thread is registered at the
// launch, and recorded from its exec on: the time before is none of the program's).
std::pair<uint64_t, uint64_t> thread_span(const Thread& t);

// A thread made from the recorded ones, for the front end only: the Gecko writer writes it after the
// recorded threads of processes[process], marked, and the reader leaves it out (its samples were not
// recorded: no sink may total them), so it is no thread of the model.
struct SyntheticThread {
  size_t process = 0;
  Thread thread;
};

// The tracks `fxprof record` writes: for each process with a thread that waited, "critical path of T" of its
// busiest thread T (the most CPU, else samples) over T's span, and per name of the program's interval markers
// on T (the first kMarkerTracks names) "critical path of T: NAME" over those intervals; one sample per
// `interval_ns`. Only paths that went through another thread (else the track would be T's samples again).
inline constexpr size_t kMarkerTracks = 4;
std::vector<SyntheticThread> critical_path_tracks(Profile& p, uint64_t interval_ns);

}  // namespace fxprof::model
