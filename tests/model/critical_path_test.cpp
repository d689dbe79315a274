// model/critical_path.h on hand-made profiles with known answers: the walk follows wakes back through the
// waking threads, ends waits that no thread ended in leaves of their own, and says when no waker was
// recorded.
#include "model/critical_path.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "model/waits.h"

using namespace fxprof::model;

namespace {

constexpr uint64_t ms = 1'000'000;

struct Fixture {
  Profile p;
  Thread* a;
  Thread* b;
  Thread* c;
  StackId compute, a_main;
  Fixture() {
    Process& proc = p.processes.emplace_back();
    proc.pid = 1;
    proc.threads.resize(3);
    a = &proc.threads[0];
    b = &proc.threads[1];
    c = &proc.threads[2];
    a->tid = 10;
    a->name = "A";
    a->is_main = true;
    b->tid = 11;
    b->name = "B";
    c->tid = 12;
    c->name = "C";
    auto fn = [&](const char* name) {
      return p.frames.intern({0, p.strings.intern(name), FrameKind::Label, Category::User});
    };
    compute = p.stacks.intern_path(std::vector<FrameId>{fn("main_c"), fn("compute")});
    a_main = p.stacks.intern_path(std::vector<FrameId>{fn("main_a")});
  }
  // A wait of `t` over [from, to] ms, woken by `waker` (nullptr: none recorded) at its end.
  void wait(Thread& t, double from, double to, Thread* waker, WaitReason reason = WaitReason::Futex,
            Waker kind = Waker::Thread) {
    Wait w;
    w.start_ns = static_cast<uint64_t>(from * ms);
    w.end_ns = w.wake_ns = static_cast<uint64_t>(to * ms);
    w.reason = reason;
    w.waker = waker ? kind : kind == Waker::Thread ? Waker::None : kind;
    if (waker) w.waker_tid = waker->tid;
    t.waits.push_back(w);
  }
  void samples(Thread& t, double from, double to, StackId s) {
    for (double x = from; x <= to; x += 1) t.samples.push_back({static_cast<uint64_t>(x * ms), s, 1000000});
  }
  // Time per (thread, kind) on the path.
  std::map<std::pair<uint32_t, PathKind>, double> by_kind(const CriticalPath& path) {
    std::map<std::pair<uint32_t, PathKind>, double> out;
    for (const PathSegment& s : path.segments) out[{s.tid, s.kind}] += double(s.end_ns - s.start_ns) / ms;
    return out;
  }
};

}  // namespace

TEST_CASE("critical path: A waits on B, B on C, C computes: the path is C's compute", "[model][critical]") {
  Fixture f;
  f.wait(*f.a, 50, 410, f.b);  // A waits for B's hand-over at 410
  f.wait(*f.b, 60, 405, f.c);  // B waits for C's at 405
  f.samples(*f.c, 100, 400, f.compute);
  f.samples(*f.a, 1, 49, f.a_main);
  const CriticalPath path = critical_path(f.p, f.p.processes[0], *f.a, 0, 420 * ms);
  // The segments tile the interval.
  uint64_t t = 0;
  for (const PathSegment& s : path.segments) {
    CHECK(s.start_ns == t);
    t = s.end_ns;
  }
  CHECK(t == 420 * ms);
  auto k = f.by_kind(path);
  CHECK(k[{12, PathKind::Cpu}] == Approx(345));     // C ran from B's wait's start (60) to its wake (405)
  CHECK(k[{10, PathKind::Cpu}] == Approx(50));      // A's own samples before its wait
  CHECK(k[{10, PathKind::Running}] == Approx(10));  // A ran after its wake, unsampled
  CHECK(k[{11, PathKind::Running}] == Approx(15));  // B between its wake and A's, and before its wait
  for (const PathSegment& s : path.segments)
    if (s.tid == 12) CHECK(s.hops == 2);
}

TEST_CASE("critical path: waits no thread ended are leaves; a wait without its waker is said",
          "[model][critical]") {
  Fixture f;
  f.wait(*f.a, 0, 10, nullptr, WaitReason::Sleep, Waker::Timer);
  f.wait(*f.a, 10, 20, nullptr, WaitReason::Io, Waker::Interrupt);
  f.wait(*f.a, 20, 30, nullptr, WaitReason::Preempted, Waker::None);
  f.wait(*f.a, 30, 40, nullptr, WaitReason::Futex, Waker::Thread);  // no waker recorded
  f.wait(*f.a, 40, 50, nullptr, WaitReason::Sleep, Waker::Thread);  // a sleep ends by its timer
  auto k = f.by_kind(critical_path(f.p, f.p.processes[0], *f.a, 0, 50 * ms));
  CHECK(k[{10, PathKind::Sleep}] == Approx(20));
  CHECK(k[{10, PathKind::Io}] == Approx(10));
  CHECK(k[{10, PathKind::Preempted}] == Approx(10));
  CHECK(k[{10, PathKind::NoWaker}] == Approx(10));
  CHECK(path_kind_label(PathKind::NoWaker) == "no waker recorded");
}

TEST_CASE("critical path: a cycle of wakes stops at the hop limit, the interval still tiled",
          "[model][critical]") {
  Fixture f;
  // A and B wake each other over and over: each wait of one is ended by the other.
  for (int i = 0; i < 200; ++i) {
    f.wait(*f.a, i * 2.0, i * 2.0 + 1.5, f.b);
    f.wait(*f.b, i * 2.0 + 0.5, i * 2.0 + 1.4, f.a);
  }
  const CriticalPath path = critical_path(f.p, f.p.processes[0], *f.a, 0, 400 * ms);
  double total = 0;
  for (const PathSegment& s : path.segments) total += double(s.end_ns - s.start_ns) / ms;
  CHECK(total == Approx(400));
}

TEST_CASE("critical path: the synthetic thread samples the path's stacks under the thread they ran on",
          "[model][critical]") {
  Fixture f;
  f.wait(*f.a, 0, 100, f.c);
  f.samples(*f.c, 1, 100, f.compute);
  const CriticalPath path = critical_path(f.p, f.p.processes[0], *f.a, 0, 100 * ms);
  Thread t = critical_path_thread(f.p, path, "A", ms);
  CHECK(t.name == "critical path of A");
  REQUIRE(t.samples.size() == 100);
  size_t in_compute = 0;
  for (const Sample& s : t.samples) {
    StackId root = s.stack;
    while (f.p.stacks.prefix(root) != kNoStack) root = f.p.stacks.prefix(root);
    CHECK(frame_name(f.p, f.p.stacks.frame(root)) == "C (tid 12)");
    in_compute += frame_name(f.p, f.p.stacks.frame(s.stack)) == "compute";
  }
  CHECK(in_compute == 100);
}

TEST_CASE("critical path: record's tracks are of each process's busiest thread, per marker name too",
          "[model][critical]") {
  Fixture f;
  f.wait(*f.a, 0, 100, f.c);
  f.samples(*f.c, 1, 100, f.compute);
  f.samples(*f.a, 101, 300, f.a_main);  // A: the most CPU
  Marker m;
  m.name = f.p.strings.intern("request");
  m.phase = MarkerPhase::Interval;
  m.program = true;
  m.start_ns = 0;
  m.end_ns = 100 * ms;
  f.a->markers.push_back(m);
  Process& idle = f.p.processes.emplace_back();  // no waits: no track
  idle.pid = 2;
  idle.threads.emplace_back().tid = 20;
  f.samples(idle.threads[0], 1, 10, f.a_main);
  Process& sleeper = f.p.processes.emplace_back();  // waits no other thread ended: its own samples, no track
  sleeper.pid = 3;
  Thread& st = sleeper.threads.emplace_back();
  st.tid = 30;
  f.samples(st, 1, 10, f.a_main);
  f.wait(st, 20, 40, nullptr, WaitReason::Sleep, Waker::Timer);
  const std::vector<SyntheticThread> tracks = critical_path_tracks(f.p, ms);
  REQUIRE(tracks.size() == 2);
  CHECK(tracks[0].process == 0);
  CHECK(tracks[0].thread.name == "critical path of A");
  CHECK(tracks[1].thread.name == "critical path of A: request");
  // The marker's track is the interval's path: C's compute only.
  REQUIRE(tracks[1].thread.samples.size() == 100);
  for (const Sample& s : tracks[1].thread.samples)
    CHECK(frame_name(f.p, f.p.stacks.frame(s.stack)) == "compute");
}

TEST_CASE("critical path: another process's raw frames become binary-relative unless mapped alike",
          "[model][critical]") {
  Fixture f;
  Lib lib{0x1000, 0x9000, 0, "prog", "/bin/prog", "prog", "/bin/prog", "ABC0", "abc", "x86_64", ""};
  f.p.processes[0].libs.push_back(lib);
  Process& child = f.p.processes.emplace_back();
  child.pid = 2;
  Thread& ct = child.threads.emplace_back();
  ct.tid = 20;
  ct.name = "child";
  const StackId same = f.p.stacks.intern_path(std::vector<FrameId>{f.p.native_frame(0x1234)});
  const StackId other = f.p.stacks.intern_path(std::vector<FrameId>{f.p.native_frame(0x5234)});
  SECTION("a forked child: the same mapping, the raw address stays") {
    child.libs.push_back(lib);
    f.samples(ct, 1, 50, same);
  }
  SECTION("an exec'd child: mapped elsewhere, binary-relative") {
    lib.start = 0x5000;
    lib.end = 0x6000;
    lib.offset = 0x200;
    child.libs.push_back(lib);
    f.samples(ct, 1, 50, other);
  }
  Wait w;
  w.end_ns = w.wake_ns = 50 * ms;
  w.waker = Waker::Thread;
  w.waker_tid = 20;
  w.waker_pid = 2;
  f.a->waits.push_back(w);
  const CriticalPath path = critical_path(f.p, f.p.processes[0], *f.a, 0, 50 * ms);
  const Thread t = critical_path_thread(f.p, path, "A", ms);
  REQUIRE(!t.samples.empty());
  const Frame& leaf = f.p.frames.get(f.p.stacks.frame(t.samples[10].stack));
  if (child.libs[0].start == 0x1000) {
    CHECK(leaf.binary == kNoBinary);
    CHECK(leaf.address == 0x1234);
  } else {
    REQUIRE(leaf.binary != kNoBinary);
    CHECK(f.p.binaries[leaf.binary].name == "prog");
    CHECK(leaf.address == 0x5234 - 0x5000 + 0x200);
  }
}
