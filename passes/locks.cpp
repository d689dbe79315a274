// The lock passes after symbolication (design in passes/locks.h).
#include "passes/locks.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/terminal.h"
#include "model/waits.h"

namespace fxprof::passes {

bool is_lock_plumbing(std::string_view binary, std::string_view function) {
  for (std::string_view lib : {"libc.so", "libc-", "libpthread", "ld-linux", "ld.so", "libstdc++.so"})
    if (binary.starts_with(lib)) return true;
  for (std::string_view prefix :
       {"std::sys::", "std::sys_common::", "<std::sys", "std::sync::", "<std::sync::",
        "core::ptr::drop_in_place<std::sync::", "parking_lot::", "<parking_lot::", "futex", "__lll_",
        "__GI___lll_", "lll_", "pthread_mutex_", "__pthread_mutex_", "pthread_cond_", "__pthread_cond_",
        "std::mutex::", "std::__1::mutex::", "syscall",
        // C++ lock wrappers, inlined into the program: the code that held the lock is their caller.
        "__gthread_", "__gthrw_", "std::lock_guard<", "std::unique_lock<", "std::scoped_lock<",
        "std::__1::lock_guard<", "std::__1::unique_lock<", "std::__1::scoped_lock<", "std::recursive_mutex::",
        "std::timed_mutex::", "std::recursive_timed_mutex::", "std::shared_mutex::", "std::__shared_mutex_",
        "std::shared_lock<", "std::condition_variable::", "std::__condvar::", "__gnu_cxx::__mutex::",
        "__gnu_cxx::__scoped_lock::", "std::__mutex_base::", "pthread_rwlock_", "__pthread_rwlock_",
        "pthread_spin_", "__pthread_spin_",
        // Semaphores (a static libc's, or called through the PLT: LockCode's call names).
        "sem_post", "sem_wait", "sem_timedwait", "sem_clockwait", "sem_trywait", "__new_sem_",
        // postgres's lightweight locks: their release walks the lock's wait queue and posts each waiter's
        // semaphore (PGSemaphoreUnlock, a thin wrapper), no wrapper of its own.
        "LWLockAcquire", "LWLockRelease", "LWLockWaitForVar", "LWLockUpdateVar", "LWLockConditionalAcquire"})
    if (function.starts_with(prefix)) return true;
  return false;
}

namespace {

// Whether a stack has a frame whose function's name starts with one of `prefixes`, leaf first.
bool has_function(const model::Profile& profile, model::StackId stack,
                  std::span<const std::string_view> prefixes) {
  for (model::StackId s = stack; s != model::kNoStack; s = profile.stacks.prefix(s)) {
    const model::Frame& f = profile.frames.get(profile.stacks.frame(s));
    if (f.kind == model::FrameKind::Label || f.name == model::kNoString) continue;
    const std::string_view name = profile.strings.get(f.name);
    for (std::string_view p : prefixes)
      if (name.starts_with(p)) return true;
  }
  return false;
}

}  // namespace

FutexWait classify_futex_wait(const model::Profile& profile, model::StackId stack, model::StackId waker) {
  // Prefixes of function names (glibc's exported names with their internal spellings, libstdc++, Rust std).
  static constexpr std::string_view kLock[] = {"__lll_lock_wait",           "lll_lock_wait",
                                               "pthread_mutex_lock",        "__pthread_mutex_lock",
                                               "___pthread_mutex_lock",     "pthread_mutex_timedlock",
                                               "pthread_mutex_clocklock",   "__pthread_mutex_clocklock",
                                               "__pthread_mutex_cond_lock", "pthread_rwlock_",
                                               "__pthread_rwlock_",         "___pthread_rwlock_",
                                               "std::mutex::lock",          "std::sys::sync::mutex::",
                                               "std::sys::sync::rwlock::",  "std::sys::locks::",
                                               "std::sync::mutex::",        "std::sync::poison::mutex::",
                                               "std::sync::rwlock::",       "parking_lot::raw_mutex::",
                                               "parking_lot::raw_rwlock::", "<parking_lot::raw_mutex",
                                               "<parking_lot::raw_rwlock"};
  static constexpr std::string_view kCondition[] = {"pthread_cond_wait",
                                                    "__pthread_cond_wait",
                                                    "___pthread_cond_wait",
                                                    "pthread_cond_timedwait",
                                                    "__pthread_cond_timedwait",
                                                    "___pthread_cond_timedwait",
                                                    "pthread_cond_clockwait",
                                                    "__pthread_cond_clockwait",
                                                    "__condvar_",
                                                    "std::condition_variable::",
                                                    "std::_V2::condition_variable_any",
                                                    "std::condition_variable_any::",
                                                    "std::sys::sync::condvar::",
                                                    "std::sys::locks::condvar",
                                                    "std::sync::condvar::",
                                                    "std::sync::poison::condvar::",
                                                    "parking_lot::condvar::",
                                                    "<parking_lot::condvar",
                                                    "std::sync::mpmc::",
                                                    "std::sync::mpsc::",
                                                    "std::sync::barrier::",
                                                    "std::thread::park",
                                                    "std::sys::sync::thread_parking::",
                                                    "std::sys::pal::unix::thread_parking::"};
  static constexpr std::string_view kJoin[] = {"pthread_join",
                                               "__pthread_join",
                                               "___pthread_join",
                                               "__pthread_clockjoin_ex",
                                               "pthread_timedjoin_np",
                                               "pthread_clockjoin_np",
                                               "pthread_tryjoin_np",
                                               "std::thread::JoinInner",
                                               "std::thread::JoinHandle",
                                               "std::thread::scoped::",
                                               "std::thread::Thread::join",
                                               "std::sys::pal::unix::thread::Thread::join",
                                               "std::sys::thread::unix::Thread::join",
                                               "std::thread::join"};
  // glibc's sem_wait and its internal spellings, and CPython's lock acquire (a semaphore, or a mutex and a
  // condition variable on other builds) when libc's frames are unnamed.
  static constexpr std::string_view kSemaphore[] = {
      "sem_wait",   "sem_timedwait",  "sem_clockwait",        "__new_sem_wait",
      "__sem_wait", "__old_sem_wait", "PyThread_acquire_lock"};
  // Locks built on a semaphore per waiter: postgres's LWLocks (a backend sleeps on its own semaphore until
  // the lock's releaser posts it), a lock wait whose holder is the releaser.
  static constexpr std::string_view kSemaphoreLock[] = {"LWLockAcquire", "LWLockWaitForVar"};
  // CPython (3.11, 3.12) posts a thread's lock when the thread ends: Thread.join's wait.
  static constexpr std::string_view kThreadExitPost[] = {"release_sentinel"};
  auto any = [](std::string_view name, std::span<const std::string_view> prefixes) {
    return std::any_of(prefixes.begin(), prefixes.end(),
                       [&](std::string_view p) { return name.starts_with(p); });
  };
  for (model::StackId s = stack; s != model::kNoStack; s = profile.stacks.prefix(s)) {
    const model::Frame& f = profile.frames.get(profile.stacks.frame(s));
    if (f.kind == model::FrameKind::Label || f.kind == model::FrameKind::Kernel || f.name == model::kNoString)
      continue;
    const std::string_view name = profile.strings.get(f.name);
    if (any(name, kLock)) return FutexWait::Lock;
    if (any(name, kCondition)) return FutexWait::Condition;
    if (any(name, kJoin)) return FutexWait::Join;
    if (any(name, kSemaphore)) {
      if (has_function(profile, s, kSemaphoreLock)) return FutexWait::Lock;
      return waker != model::kNoStack && has_function(profile, waker, kThreadExitPost) ? FutexWait::Join
                                                                                       : FutexWait::Semaphore;
    }
  }
  return FutexWait::Unknown;
}

namespace {

bool is_lock_wait(const model::Wait& w) { return w.reason == model::WaitReason::Futex && w.lock; }

}  // namespace

void classify_futex_waits(model::Profile& profile,
                          const std::function<FutexWait(model::StackId, model::StackId)>& classify_of) {
  std::unordered_map<uint64_t, FutexWait> seen;  // by (wait stack, waker stack)
  std::vector<const model::Wait*> changed;       // those whose waker's Wakeup marker shows the lock
  bool any = false;
  for (model::Process& proc : profile.processes)
    for (model::Thread& t : proc.threads)
      for (model::Wait& w : t.waits) {
        if (!is_lock_wait(w) || w.marker >= t.markers.size()) continue;
        const model::StackId stack = t.markers[w.marker].stack;  // the blocking stack
        const model::StackId waker = w.waker == model::Waker::Thread ? w.waker_stack : model::kNoStack;
        auto [it, fresh] = seen.try_emplace(uint64_t{stack} << 32 | waker, FutexWait::Unknown);
        if (fresh && stack != model::kNoStack)
          it->second = classify_of ? classify_of(stack, waker) : classify_futex_wait(profile, stack, waker);
        if (it->second == FutexWait::Unknown || it->second == FutexWait::Lock) continue;
        w.reason = it->second == FutexWait::Join        ? model::WaitReason::Join
                   : it->second == FutexWait::Semaphore ? model::WaitReason::Semaphore
                                                        : model::WaitReason::Condition;
        w.lock = 0;
        model::make_wait_marker(profile, t, w);
        any = true;
        if (w.waker == model::Waker::Thread && w.waker_stack != model::kNoStack) changed.push_back(&w);
      }
  if (!any) return;
  // The Wakeups that ended them released no lock either: no lock address.
  std::unordered_multimap<uint32_t, model::Thread*> by_tid;
  for (model::Process& proc : profile.processes)
    for (model::Thread& t : proc.threads) by_tid.emplace(t.tid, &t);
  const model::StringId wakeup = profile.strings.intern("Wakeup"), lock_key = profile.strings.intern("lock");
  for (const model::Wait* w : changed)
    for (auto [it, end] = by_tid.equal_range(w->waker_tid); it != end; ++it)
      for (model::Marker& m : it->second->markers)
        if (m.name == wakeup && m.stack == w->waker_stack && m.start_ns <= w->end_ns &&
            m.start_ns + 1'000'000 >= w->start_ns)  // a wake stamped up to 1 ms before the switch-out
          std::erase_if(m.fields, [&](const model::MarkerField& f) { return f.key == lock_key; });
  // The counters counted these waits: made again from the lock waits left.
  for (model::Process& proc : profile.processes)
    std::erase_if(proc.counters, [](const model::Counter& c) { return c.name == "Threads waiting"; });
  model::add_waiting_counters(profile, static_cast<uint64_t>(profile.meta.interval_ms * 1e6));
}

void add_lock_holders(model::Profile& profile, LockCode* code, const LockNames& names) {
  classify_futex_waits(profile);
  // Each name once per stack (thousands of waits share a few stacks; a wrapper's test reads code).
  std::unordered_map<model::StackId, model::StringId> holders, waiters;
  auto name = [&](auto& cache, model::StackId s, const auto& by_names, auto walk) {
    auto [it, fresh] = cache.try_emplace(s, model::kNoString);
    if (fresh) {
      const std::string n = by_names ? by_names(s) : std::string(walk(profile, s, code));
      if (!n.empty()) it->second = profile.strings.intern(n);
    }
    return it->second;
  };
  // Each lock wait ended by a thread whose stack at the wake was recorded: the function that released it;
  // each with a stack: the function that waited.
  for (model::Process& proc : profile.processes)
    for (model::Thread& t : proc.threads)
      for (model::Wait& w : t.waits) {
        if (!is_lock_wait(w)) continue;
        const model::StackId stack =
            w.marker < t.markers.size() ? t.markers[w.marker].stack : model::kNoStack;
        const model::StringId holder = w.waker_stack == model::kNoStack
                                           ? model::kNoString
                                           : name(holders, w.waker_stack, names.holder, lock_holder);
        const model::StringId waiter =
            stack == model::kNoStack ? model::kNoString : name(waiters, stack, names.waiter, lock_waiter);
        if (holder == model::kNoString && waiter == model::kNoString) continue;
        if (holder != model::kNoString) w.holder = holder;
        w.waiter = waiter;
        model::make_wait_marker(profile, t, w);
      }
}

namespace {

struct Lock {
  std::string label;  // the address as the markers show it, or "N locks waited in F"
  uint64_t ns = 0, waits = 0, addresses = 1;
  std::set<uint32_t> threads;
  std::map<std::string_view, uint64_t> holders, waiters;  // function -> waits it released, waited in

  void add(const Lock& o) {
    ns += o.ns;
    waits += o.waits;
    addresses += o.addresses;
    threads.insert(o.threads.begin(), o.threads.end());
    for (const auto& [fn, count] : o.holders) holders[fn] += count;
  }
};

// The key of the map with the largest count ("" for none).
std::string_view most(const std::map<std::string_view, uint64_t>& counts) {
  std::string_view best;
  uint64_t top = 0;
  for (const auto& [key, count] : counts)
    if (count > top) std::tie(best, top) = std::pair{key, count};
  return best;
}

// Each lock address's waits; then the addresses only one thread waited on (each waiter its own semaphore,
// as postgres's backends under an LWLock) grouped by the function that waited.
std::vector<Lock> lock_groups(const model::Profile& profile) {
  std::map<uint64_t, Lock> by_address;
  for (const model::Process& proc : profile.processes)
    for (const model::Thread& t : proc.threads)
      for (const model::Wait& w : t.waits) {
        if (!is_lock_wait(w)) continue;
        Lock& l = by_address[w.lock];
        l.ns += w.end_ns > w.start_ns ? w.end_ns - w.start_ns : 0;
        ++l.waits;
        l.threads.insert(t.tid);
        if (w.holder != model::kNoString) ++l.holders[profile.strings.get(w.holder)];
        if (w.waiter != model::kNoString) ++l.waiters[profile.strings.get(w.waiter)];
      }
  std::vector<Lock> out;
  std::map<std::string_view, Lock> by_waiter;
  char address[24];
  for (auto& [addr, l] : by_address) {
    std::snprintf(address, sizeof address, "0x%llx", static_cast<unsigned long long>(addr));
    l.label = address;
    const std::string_view waiter = most(l.waiters);
    if (l.threads.size() != 1 || waiter.empty()) {
      out.push_back(std::move(l));
      continue;
    }
    auto [it, fresh] = by_waiter.try_emplace(waiter);
    if (fresh) {
      it->second = std::move(l);
      it->second.waiters.clear();
    } else {
      it->second.add(l);
    }
  }
  for (auto& [waiter, l] : by_waiter) {
    if (l.addresses > 1)  // a function name, printed on the terminal
      l.label = std::to_string(l.addresses) + " locks waited in " + terminal_safe(waiter.substr(0, 80));
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace

std::string lock_wait_summary(const model::Profile& profile, size_t n) {
  std::vector<Lock> locks = lock_groups(profile);
  std::sort(locks.begin(), locks.end(), [](const Lock& a, const Lock& b) { return a.ns > b.ns; });
  std::string out;
  char buf[160];
  for (size_t i = 0; i < locks.size() && i < n; ++i) {
    const Lock& l = locks[i];
    std::snprintf(buf, sizeof buf, " %.1f ms in %llu wait%s by %zu thread%s", static_cast<double>(l.ns) / 1e6,
                  static_cast<unsigned long long>(l.waits), l.waits == 1 ? "" : "s", l.threads.size(),
                  l.threads.size() == 1 ? "" : "s");
    out += (out.empty() ? "" : ", ") + l.label + buf;
    std::vector<std::pair<uint64_t, std::string_view>> by_count;
    for (const auto& [fn, count] : l.holders) by_count.emplace_back(count, fn);
    std::sort(by_count.begin(), by_count.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t h = 0; h < by_count.size() && h < 2; ++h) {
      out += h == 0 ? " held by " : " and ";
      out += terminal_safe(by_count[h].second.substr(0, 80));  // a name, printed on the terminal
    }
  }
  return out;
}

}  // namespace fxprof::passes
