// passes/locks.h: the lock passes after symbolication, on hand-made profiles.
#include "passes/locks.h"

#include <catch2/catch.hpp>
#include <string_view>
#include <tuple>
#include <vector>

#include "model/profile.h"
#include "model/waits.h"

using namespace fxprof::passes;

TEST_CASE("off-CPU: the function that held a lock is the waker stack's first one outside the lock code",
          "[passes]") {
  CHECK(is_lock_plumbing("libc.so.6", "__GI___lll_lock_wake"));
  CHECK(is_lock_plumbing("libc.so.6", "start_thread"));  // the whole of libc
  CHECK(is_lock_plumbing("app", "std::sys::sync::mutex::futex::Mutex::wake"));
  CHECK(is_lock_plumbing("app", "std::sys_common::mutex::MovableMutex::raw_unlock"));  // rustc before 1.72
  CHECK(is_lock_plumbing("app", "pthread_mutex_unlock"));
  CHECK(!is_lock_plumbing("app", "update_table"));
  // C++ lock wrappers inlined into the program (std::lock_guard's destructor): their caller held the lock.
  CHECK(is_lock_plumbing("app", "__gthread_mutex_unlock(pthread_mutex_t*)"));
  CHECK(is_lock_plumbing("app", "std::mutex::unlock()"));
  CHECK(is_lock_plumbing("app", "std::lock_guard<std::mutex>::~lock_guard()"));
  CHECK(is_lock_plumbing("app", "std::unique_lock<std::mutex>::unlock()"));
  CHECK(!is_lock_plumbing("app", "std::vector<int>::push_back(int const&)"));
  CHECK(!is_lock_plumbing("libapp.so", "std::vector<int>::push_back"));

  using namespace fxprof::model;
  Profile p;
  p.binaries.push_back({.name = "libc.so.6"});
  p.binaries.push_back({.name = "app"});
  auto frame = [&](BinaryId b, const char* name) {
    Frame f;
    f.address = p.frames.size() + 1;
    f.binary = b;
    f.name = name ? p.strings.intern(name) : kNoString;
    return p.frames.intern(f);
  };
  // Root first: start_thread, worker, update_table, pthread_mutex_unlock, __lll_lock_wake.
  const std::vector<FrameId> path = {frame(0, "start_thread"), frame(1, "worker"), frame(1, "update_table"),
                                     frame(0, "pthread_mutex_unlock"), frame(0, "__lll_lock_wake")};
  const StackId waker = p.stacks.intern_path(path);
  CHECK(lock_holder(p, waker) == "update_table");
  // Not symbolicated: no name rather than a wrong one.
  const StackId raw =
      p.stacks.intern_path(std::vector<FrameId>{frame(1, "worker"), frame(kNoBinary, nullptr)});
  CHECK(lock_holder(p, raw).empty());

  // add_lock_holders: the Lock wait that the Wakeup ended (the wakee's, containing its time) gets "holder";
  // lock_wait_summary names it.
  Process& proc = p.processes.emplace_back();
  proc.threads.resize(2);
  Thread& holder = proc.threads[0];
  holder.tid = 20;
  holder.name = "app";
  Thread& waiter = proc.threads[1];
  waiter.tid = 21;
  waiter.name = "app";
  // Two lock waits on 0x1000, as the recorder makes them (typed waits, their markers made from them); the
  // first ended by thread 20 with the waker's stack.
  const StringId lock_key = p.strings.intern("lock"), addr = p.strings.intern("0x1000");
  for (uint64_t start : {100, 300}) {
    Marker m;
    m.start_ns = start;
    m.end_ns = start + 100;
    m.phase = MarkerPhase::Interval;
    m.type = p.strings.intern("OffCpu");
    Wait wt;
    wt.start_ns = start;
    wt.end_ns = wt.wake_ns = start + 100;
    wt.reason = WaitReason::Futex;
    wt.lock = 0x1000;
    wt.marker = static_cast<uint32_t>(waiter.markers.size());
    if (start == 100) {
      wt.waker = Waker::Thread;
      wt.waker_tid = 20;
      wt.waker_name = p.strings.intern("app");
      wt.wake_ns = 190;
      wt.waker_stack = waker;
    }
    waiter.markers.push_back(m);
    waiter.waits.push_back(wt);
    make_wait_marker(p, waiter, wt);
  }
  CHECK(p.strings.get(waiter.markers[0].name) == "Lock wait");
  Marker w;
  w.name = p.strings.intern("Wakeup");
  w.start_ns = 190;  // ends the first wait only
  w.stack = waker;
  w.fields.push_back({p.strings.intern("wakee"), true, 0, p.strings.intern("app 21")});
  w.fields.push_back({lock_key, true, 0, addr});
  holder.markers.push_back(w);
  // The same waits read back from the markers alone (what the Gecko reader does): the same typed facts.
  Profile read = p;
  read_waits(read);
  REQUIRE(read.processes[0].threads[1].waits.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const Wait &x = waiter.waits[i], &y = read.processes[0].threads[1].waits[i];
    CHECK(std::tie(x.start_ns, x.end_ns, x.reason, x.waker, x.lock, x.waker_tid, x.waker_name, x.wake_ns,
                   x.waker_stack, x.marker) == std::tie(y.start_ns, y.end_ns, y.reason, y.waker, y.lock,
                                                        y.waker_tid, y.waker_name, y.wake_ns, y.waker_stack,
                                                        y.marker));
  }
  add_lock_holders(p);
  add_lock_holders(p);  // idempotent
  add_lock_holders(read);
  CHECK(read.processes[0].threads[1].markers[0].fields.size() == waiter.markers[0].fields.size());
  auto holder_of = [&](const Marker& m) {
    std::vector<std::string_view> out;
    for (const MarkerField& f : m.fields)
      if (p.strings.get(f.key) == "holder") out.push_back(p.strings.get(f.string));
    return out;
  };
  CHECK(holder_of(waiter.markers[0]) == std::vector<std::string_view>{"update_table"});
  CHECK(p.strings.get(waiter.waits[0].holder) == "update_table");
  CHECK(holder_of(read.processes[0].threads[1].markers[0]) == std::vector<std::string_view>{"update_table"});
  CHECK(holder_of(waiter.markers[1]).empty());
  CHECK(lock_wait_summary(p, 3) == "0x1000 0.0 ms in 2 waits by 1 thread held by update_table");
}

TEST_CASE("off-CPU: a semaphore's wait is no lock, and one the waker's thread end posted is a join",
          "[passes]") {
  using namespace fxprof::model;
  Profile p;
  p.binaries.push_back({.name = "libc.so.6"});
  p.binaries.push_back({.name = "libpython3.11.so.1.0"});
  auto stack = [&](std::vector<std::pair<BinaryId, const char*>> root_first) {
    std::vector<FrameId> path;
    for (auto [b, name] : root_first) {
      Frame f;
      f.address = p.frames.size() + 1;
      f.binary = b;
      f.name = p.strings.intern(name);
      path.push_back(p.frames.intern(f));
    }
    return p.stacks.intern_path(path);
  };
  // CPython's lock acquire (Thread.join, queue.get, Condition.wait, Lock.acquire): a semaphore.
  const StackId wait = stack({{1, "lock_PyThread_acquire_lock"},
                              {1, "PyThread_acquire_lock_timed"},
                              {0, "__new_sem_wait_slow64.constprop.0"},
                              {0, "__futex_abstimed_wait_common"}});
  const StackId post = stack({{1, "lock_PyThread_release_lock"},
                              {1, "PyThread_release_lock"},
                              {0, "__new_sem_post"},
                              {0, "futex_wake"}});
  const StackId exit_post = stack({{1, "tstate_delete_common"},
                                   {1, "release_sentinel"},
                                   {1, "PyThread_release_lock"},
                                   {0, "__new_sem_post"},
                                   {0, "futex_wake"}});
  CHECK(classify_futex_wait(p, wait) == FutexWait::Semaphore);
  CHECK(classify_futex_wait(p, wait, post) == FutexWait::Semaphore);
  CHECK(classify_futex_wait(p, wait, exit_post) == FutexWait::Join);
  // The GIL's mutex (a condition variable's re-lock) stays a lock.
  const StackId gil = stack({{1, "take_gil"},
                             {0, "__pthread_cond_wait_common"},
                             {0, "__pthread_mutex_cond_lock"},
                             {0, "__GI___lll_lock_wait"}});
  CHECK(classify_futex_wait(p, gil) == FutexWait::Lock);

  // The marker: Blocked, reason "semaphore", no lock address.
  Process& proc = p.processes.emplace_back();
  Thread& t = proc.threads.emplace_back();
  t.tid = 7;
  Marker m;
  m.start_ns = 100;
  m.end_ns = 200;
  m.phase = MarkerPhase::Interval;
  m.type = p.strings.intern("OffCpu");
  m.stack = wait;
  Wait w;
  w.start_ns = 100;
  w.end_ns = 200;
  w.reason = WaitReason::Futex;
  w.lock = 0x2000;
  w.marker = 0;
  t.markers.push_back(m);
  t.waits.push_back(w);
  make_wait_marker(p, t, w);
  classify_futex_waits(p);
  CHECK(t.waits[0].reason == WaitReason::Semaphore);
  CHECK(t.waits[0].lock == 0);
  CHECK(p.strings.get(t.markers[0].name) == "Blocked");
  CHECK(lock_wait_summary(p, 3).empty());
}

TEST_CASE("off-CPU: postgres's LWLock waits are lock waits, grouped by the function that waited",
          "[passes]") {
  using namespace fxprof::model;
  Profile p;
  p.binaries.push_back({.name = "libc.so.6"});
  p.binaries.push_back({.name = "postgres"});
  auto stack = [&](std::vector<std::pair<BinaryId, const char*>> root_first) {
    std::vector<FrameId> path;
    for (auto [b, name] : root_first) {
      Frame f;
      f.address = p.frames.size() + 1;
      f.binary = b;
      f.name = p.strings.intern(name);
      path.push_back(p.frames.intern(f));
    }
    return p.stacks.intern_path(path);
  };
  // As recorded from pgbench's backends: each sleeps on its own semaphore in LWLockAcquireOrWait (the WAL
  // write lock), and the backend that flushed posts it from LWLockRelease through PGSemaphoreUnlock.
  const StackId wait = stack({{1, "CommitTransaction"},
                              {1, "XLogFlush"},
                              {1, "LWLockAcquireOrWait"},
                              {1, "PGSemaphoreLock"},
                              {0, "__new_sem_wait_slow64.constprop.0"},
                              {0, "__futex_abstimed_wait_common"}});
  const StackId post = stack({{1, "CommitTransaction"},
                              {1, "XLogFlush"},
                              {1, "LWLockRelease"},
                              {1, "PGSemaphoreUnlock"},
                              {0, "__new_sem_post"},
                              {0, "futex_wake"}});
  CHECK(classify_futex_wait(p, wait, post) == FutexWait::Lock);
  // Without the wrapper's code (no symbolizer here), PGSemaphoreUnlock and PGSemaphoreLock are the
  // program's: lock_code_test.cpp reads a real wrapper's code.
  CHECK(lock_holder(p, post) == "PGSemaphoreUnlock");
  Process& proc = p.processes.emplace_back();
  proc.pid = 1;
  for (uint32_t tid = 10; tid < 13; ++tid) {  // three backends, three semaphores
    Thread& t = proc.threads.emplace_back();
    t.tid = tid;
    for (uint64_t start : {100, 300}) {
      Marker m;
      m.start_ns = start;
      m.end_ns = start + 100'000'000;
      m.phase = MarkerPhase::Interval;
      m.type = p.strings.intern("OffCpu");
      m.stack = wait;
      Wait w;
      w.start_ns = m.start_ns;
      w.end_ns = m.end_ns;
      w.reason = WaitReason::Futex;
      w.lock = 0x1000 * tid;
      w.waker = Waker::Thread;
      w.waker_tid = tid == 12 ? 10 : tid + 1;
      w.waker_stack = post;
      w.marker = static_cast<uint32_t>(t.markers.size());
      t.markers.push_back(m);
      t.waits.push_back(w);
      make_wait_marker(p, t, w);
    }
  }
  add_lock_holders(p);
  add_lock_holders(p);  // idempotent: one waiter field
  const Thread& t = proc.threads[0];
  CHECK(p.strings.get(t.markers[0].name) == "Lock wait");
  CHECK(p.strings.get(t.waits[0].waiter) == "PGSemaphoreLock");
  size_t waiter_fields = 0;
  for (const MarkerField& f : t.markers[0].fields) waiter_fields += p.strings.get(f.key) == "waiter";
  CHECK(waiter_fields == 1);
  // Read back from the markers alone (the Gecko reader): the same typed waiter, and the same summary.
  Profile back = p;
  read_waits(back);
  CHECK(back.strings.get(back.processes.back().threads[0].waits[0].waiter) == "PGSemaphoreLock");
  CHECK(lock_wait_summary(p, 3) ==
        "3 locks waited in PGSemaphoreLock 600.0 ms in 6 waits by 3 threads held by PGSemaphoreUnlock");
  // One lock several threads wait on stays its address.
  for (Thread& th : proc.threads)
    for (Wait& w : th.waits) {
      w.lock = 0x5000;
      make_wait_marker(p, th, w);
    }
  add_lock_holders(p);
  CHECK(lock_wait_summary(p, 3) == "0x5000 600.0 ms in 6 waits by 3 threads held by PGSemaphoreUnlock");
}

TEST_CASE("off-CPU: an inlined lock operation right above lock code is lock code too", "[passes]") {
  using namespace fxprof::model;
  Profile p;
  p.binaries.push_back({.name = "libc.so.6"});
  p.binaries.push_back({.name = "db_bench"});
  auto frame = [&](BinaryId b, const char* name, uint8_t depth) {
    Frame f;
    f.address = p.frames.size() + 1;
    f.binary = b;
    f.inline_depth = depth;
    f.name = p.strings.intern(name);
    return p.frames.intern(f);
  };
  // leveldb built with -O2 -g: port::Mutex::Unlock inlined into DBImpl::Write, named from DWARF.
  const StackId waker = p.stacks.intern_path(std::vector<FrameId>{
      frame(1, "leveldb::DB::Put(leveldb::WriteOptions const&, leveldb::Slice const&, leveldb::Slice const&)",
            0),
      frame(1, "leveldb::DBImpl::Write(leveldb::WriteOptions const&, leveldb::WriteBatch*)", 0),
      frame(1, "leveldb::port::Mutex::Unlock()", 1), frame(0, "pthread_mutex_unlock", 0),
      frame(0, "__lll_lock_wake", 0)});
  CHECK(lock_holder(p, waker) ==
        "leveldb::DBImpl::Write(leveldb::WriteOptions const&, leveldb::WriteBatch*)");
  // An inlined function of another name is the program's code: it held the lock.
  const StackId other = p.stacks.intern_path(std::vector<FrameId>{
      frame(1, "leveldb::DBImpl::Write(leveldb::WriteOptions const&, leveldb::WriteBatch*)", 0),
      frame(1, "leveldb::DBImpl::MakeRoomForWrite(bool)", 1), frame(0, "pthread_mutex_unlock", 0)});
  CHECK(lock_holder(p, other) == "leveldb::DBImpl::MakeRoomForWrite(bool)");
}
