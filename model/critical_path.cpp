// The critical path of a thread (model/critical_path.h).
#include "model/critical_path.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>
#include <unordered_map>

namespace fxprof::model {

namespace {

struct ThreadRef {
  const Process* proc = nullptr;
  const Thread* thread = nullptr;
};

// Walks waits back in time, one thread at a time; segments are collected in any order and sorted at the end.
class Walker {
 public:
  explicit Walker(const Profile& p) : p_(p) {
    for (const Process& proc : p.processes)
      for (const Thread& t : proc.threads) by_tid_.emplace(t.tid, ThreadRef{&proc, &t});
  }

  // The path on `r` over [lo, hi].
  void walk(ThreadRef r, uint64_t lo, uint64_t hi, uint32_t hops) {
    const std::vector<Wait>& waits = r.thread->waits;
    // The last wait that starts before `cur`.
    uint64_t cur = hi;
    auto it = std::lower_bound(waits.begin(), waits.end(), cur,
                               [](const Wait& w, uint64_t t) { return w.start_ns < t; });
    while (cur > lo) {
      if (it == waits.begin()) {
        running(r, lo, cur, hops);
        break;
      }
      const Wait& w = *--it;
      if (w.end_ns < cur) {  // it ran from the wait's end on
        const uint64_t from = std::max(w.end_ns, lo);
        running(r, from, cur, hops);
        cur = from;
        ++it;  // the same wait again, now with `cur` at its end
        if (cur <= lo) break;
        continue;
      }
      const uint64_t a = std::max(w.start_ns, lo);
      wait(r, w, a, cur, hops);
      cur = a;
    }
  }

  std::vector<PathSegment> take() {
    std::sort(out_.begin(), out_.end(),
              [](const PathSegment& x, const PathSegment& y) { return x.start_ns < y.start_ns; });
    return std::move(out_);
  }
  std::vector<WaitEnd> take_ends() { return std::move(ends_); }

 private:
  void emit(ThreadRef r, uint64_t a, uint64_t b, PathKind kind, StackId stack, WaitReason reason,
            uint32_t hops) {
    if (b <= a) return;
    out_.push_back({a, b, kind, r.proc->pid, r.thread->tid, stack, reason, hops});
  }

  // The part [a, b] of wait `w` of `r`: a leaf, or the waker's path up to the wake.
  void wait(ThreadRef r, const Wait& w, uint64_t a, uint64_t b, uint32_t hops) {
    const StackId stack = w.marker < r.thread->markers.size() ? r.thread->markers[w.marker].stack : kNoStack;
    auto leaf = [&](PathKind k) {
      emit(r, a, b, k, stack, w.reason, hops);
      if (k != PathKind::Preempted)
        ends_.push_back({b - a, w.waker, w.waker_pid, w.waker_tid, kNoStack, w.reason});
    };
    if (w.reason == WaitReason::Preempted) return leaf(PathKind::Preempted);
    switch (w.waker) {
      case Waker::Thread:
        break;
      case Waker::Timer:
        return leaf(w.reason == WaitReason::Sleep ? PathKind::Sleep : PathKind::Timer);
      case Waker::Interrupt:
        return leaf(w.reason == WaitReason::Io      ? PathKind::Io
                    : w.reason == WaitReason::Sleep ? PathKind::Sleep
                                                    : PathKind::Interrupt);
      case Waker::Untraced:
        return leaf(PathKind::Untraced);
      case Waker::None:
        // A sleep ends by its timer whoever is recorded; anything else is not guessed.
        return leaf(w.reason == WaitReason::Sleep ? PathKind::Sleep : PathKind::NoWaker);
    }
    const ThreadRef waker = thread_at(w.waker_tid, w.wake_ns);
    if (!waker.thread || waker.thread == r.thread) return leaf(PathKind::NoWaker);
    // Woken before `b`: runnable from the wake on (the recorder splits that part off as a Preempted wait; a
    // wake stamped before the switch-out makes the whole wait so).
    const uint64_t wake = std::clamp(w.wake_ns, a, b);
    emit(r, wake, b, PathKind::Preempted, stack, w.reason, hops);
    if (wake > a)
      ends_.push_back({wake - a, Waker::Thread, w.waker_pid, w.waker_tid, w.waker_stack, w.reason});
    if (hops + 1 >= kMaxHops) {
      emit(r, a, wake, PathKind::TooDeep, stack, w.reason, hops);
      return;
    }
    walk(waker, a, wake, hops + 1);
  }

  // [a, b] while `r` ran: each on-CPU sample in it stands for the time since the previous one (or since
  // `a`), the last one also for the rest up to `b`.
  void running(ThreadRef r, uint64_t a, uint64_t b, uint32_t hops) {
    const std::vector<uint32_t>& cpu = on_cpu(*r.thread);
    const std::vector<Sample>& s = r.thread->samples;
    auto it =
        std::lower_bound(cpu.begin(), cpu.end(), a, [&](uint32_t i, uint64_t t) { return s[i].time_ns < t; });
    if (it == cpu.end() || s[*it].time_ns > b) {
      emit(r, a, b, PathKind::Running, kNoStack, WaitReason::Unknown, hops);
      return;
    }
    uint64_t from = a;
    for (; it != cpu.end() && s[*it].time_ns <= b; ++it) {
      const bool last = std::next(it) == cpu.end() || s[*std::next(it)].time_ns > b;
      const uint64_t to = last ? b : s[*it].time_ns;
      emit(r, from, to, PathKind::Cpu, s[*it].stack, WaitReason::Unknown, hops);
      from = to;
    }
  }

  // The thread's on-CPU samples (not the off-CPU ones, whose leaf is an Idle label) by time.
  const std::vector<uint32_t>& on_cpu(const Thread& t) {
    auto [it, fresh] = on_cpu_.try_emplace(&t);
    if (!fresh) return it->second;
    for (uint32_t i = 0; i < t.samples.size(); ++i) {
      const StackId st = t.samples[i].stack;
      if (st == kNoStack || p_.off_cpu(st)) continue;
      it->second.push_back(i);
    }
    std::stable_sort(it->second.begin(), it->second.end(),
                     [&](uint32_t x, uint32_t y) { return t.samples[x].time_ns < t.samples[y].time_ns; });
    return it->second;
  }

  // The thread `tid` alive at `time` (a tid may be reused), else any of that tid.
  ThreadRef thread_at(uint32_t tid, uint64_t time) const {
    ThreadRef found, any;
    for (auto [it, end] = by_tid_.equal_range(tid); it != end; ++it) {
      any = it->second;
      const Thread& t = *it->second.thread;
      if (t.start_ns <= time && (!t.end_ns || time <= *t.end_ns)) found = it->second;
    }
    return found.thread ? found : any;
  }

  const Profile& p_;
  std::unordered_multimap<uint32_t, ThreadRef> by_tid_;
  std::unordered_map<const Thread*, std::vector<uint32_t>> on_cpu_;
  std::vector<PathSegment> out_;
  std::vector<WaitEnd> ends_;
};

}  // namespace

std::string_view path_kind_label(PathKind k) {
  switch (k) {
    case PathKind::Cpu:
      return "CPU";
    case PathKind::Running:
      return "running (not sampled)";
    case PathKind::Preempted:
      return "[preempted]";
    case PathKind::Sleep:
      return "sleep";
    case PathKind::Io:
      return "disk/network I/O";
    case PathKind::Timer:
      return "timer";
    case PathKind::Interrupt:
      return "interrupt";
    case PathKind::Untraced:
      return "woken by a process not recorded";
    case PathKind::NoWaker:
      return "no waker recorded";
    case PathKind::TooDeep:
      return "(chain too long)";
  }
  return "?";
}

CriticalPath critical_path(const Profile& p, const Process& proc, const Thread& t, uint64_t from_ns,
                           uint64_t to_ns) {
  CriticalPath path{proc.pid, t.tid, from_ns, to_ns, {}};
  if (to_ns <= from_ns) return path;
  Walker walker(p);
  walker.walk({&proc, &t}, from_ns, to_ns, 0);
  path.segments = walker.take();
  path.wait_ends = walker.take_ends();
  return path;
}

std::string frame_name(const Profile& p, FrameId id) {
  const Frame& f = p.frames.get(id);
  if (f.name != kNoString) return std::string(p.strings.get(f.name));
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(f.address));
  return buf;
}

namespace {

const Lib* lib_at(const Process& proc, uint64_t address) {
  for (const Lib& l : proc.libs)
    if (l.start <= address && address < l.end) return &l;
  return nullptr;
}

// A raw native frame of `from`'s code as a thread of `host` can show it: as it is when `host` maps the same
// file at the same place (a forked child), else binary-relative (a front end would locate the raw address in
// `host`'s libs, naming some other function).
class ForeignFrames {
 public:
  ForeignFrames(Profile& p, const Process* host) : p_(p), host_(host) {}

  FrameId map(const Process* from, FrameId id) {
    const Frame& f = p_.frames.get(id);
    if (from == host_ || !host_ || f.kind != FrameKind::Native || f.binary != kNoBinary) return id;
    auto [it, fresh] = made_.try_emplace({from->pid, id}, id);
    if (!fresh) return it->second;
    const Lib* lib = lib_at(*from, f.address);
    if (!lib) return id;
    const Lib* mine = lib_at(*host_, f.address);
    if (mine && mine->start == lib->start && mine->offset == lib->offset && mine->path == lib->path)
      return id;
    Frame rel = f;
    rel.address = f.address - (lib->start - lib->offset);
    rel.binary = p_.intern_binary(*lib);
    it->second = p_.frames.intern(rel);
    return it->second;
  }

 private:
  Profile& p_;
  const Process* host_;
  std::map<std::pair<uint32_t, FrameId>, FrameId> made_;
};

const Process* process_of(const Profile& p, uint32_t pid) {
  for (const Process& proc : p.processes)
    if (proc.pid == pid) return &proc;
  return nullptr;
}

}  // namespace

Thread critical_path_thread(Profile& p, const CriticalPath& path, std::string_view name,
                            uint64_t interval_ns) {
  Thread out;
  out.name = "critical path of " + std::string(name);
  out.tid = path.tid;
  out.start_ns = path.start_ns;
  out.end_ns = path.end_ns;
  if (interval_ns == 0 || path.segments.empty()) return out;
  std::unordered_map<uint64_t, std::string> names;  // tid -> "NAME (tid N)"
  for (const Process& proc : p.processes)
    for (const Thread& t : proc.threads)
      names.try_emplace(t.tid, t.name + " (tid " + std::to_string(t.tid) + ")");
  std::map<std::tuple<uint32_t, PathKind, StackId>, StackId> made;  // (tid, kind, stack) -> synthetic stack
  std::vector<FrameId> frames;
  ForeignFrames foreign(p, process_of(p, path.pid));
  auto stack_of = [&](const PathSegment& s) {
    const auto key = std::make_tuple(s.tid, s.kind, s.stack);
    if (auto it = made.find(key); it != made.end()) return it->second;
    frames.clear();
    const Process* from = process_of(p, s.pid);
    for (StackId st = s.stack; st != kNoStack; st = p.stacks.prefix(st))
      frames.push_back(from ? foreign.map(from, p.stacks.frame(st)) : p.stacks.frame(st));
    frames.push_back(p.label_frame(names[s.tid]));
    std::reverse(frames.begin(), frames.end());
    if (s.kind != PathKind::Cpu) {
      const std::string_view label = path_kind_label(s.kind);
      const std::string leaf = label.starts_with("[") ? std::string(label) : "[" + std::string(label) + "]";
      frames.push_back(p.label_frame(leaf, s.kind == PathKind::Running ? Category::Other : Category::Idle));
    }
    const StackId st = p.stacks.intern_path(frames);
    made.emplace(key, st);
    return st;
  };
  size_t i = 0;
  for (uint64_t t = path.start_ns + interval_ns / 2; t < path.end_ns; t += interval_ns) {
    while (i + 1 < path.segments.size() && path.segments[i].end_ns <= t) ++i;
    const PathSegment& s = path.segments[i];
    const int32_t cpu = s.kind == PathKind::Cpu ? saturate_cpu_delta(static_cast<int64_t>(interval_ns)) : 0;
    out.samples.push_back({t, stack_of(s), cpu});
  }
  return out;
}

}  // namespace fxprof::model
