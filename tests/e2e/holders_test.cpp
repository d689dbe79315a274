// Who held a lock, and what is no lock (issue 38 item 6): a holder whose unlock is a tail call (GCC -O2's
// `jmp pthread_mutex_unlock`) is still named, and Python's waits on its own locks (Thread.join, queue.get:
// semaphores a post ends) are no lock contention.
#include <catch2/catch.hpp>
#include <fstream>

#include "tests/e2e/e2e.h"
#include "tests/e2e/offcpu_views.h"

using namespace fxprof::test;

namespace {

bool in_stack(const MarkerView& m, std::string_view fn) {
  for (const std::string& f : m.cause)
    if (f.find(fn) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("holders: a tail-called unlock names the function that held the lock, not its caller",
          "[e2e][offcpu]") {
  TempDir dir;
  const std::string out = dir.file("tail.json.gz");
  auto r = run({fxprof_bin(), "record", "--save-only", "--off-cpu-threshold", "0", kWakersFromStart, "-o",
                out, "--", test_program("tail_unlock")});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const size_t at = r.out.find("mutex 0x");
  REQUIRE(at != std::string::npos);
  const std::string address = r.out.substr(at + 6, r.out.find('\n', at) - at - 6);
  size_t waits = 0, held = 0, caller = 0, wakeups = 0, restored = 0;
  for (const ThreadView& t : threads_of(read_profile_text(out))) {
    for (const MarkerView& m : t.markers) {
      if (m.name != "Lock wait" || m.lock != address) continue;
      ++waits;
      held += m.holder.find("tail_update_table") != std::string::npos;
      caller += m.holder.find("tail_locker") != std::string::npos;
    }
    // The Wakeup's stack has the frame the tail call took off, between the unlock and its caller.
    for (const MarkerView& w : t.wakeups) {
      if (w.lock != address) continue;
      ++wakeups;
      for (size_t i = 0; i + 1 < w.cause.size(); ++i)
        if (w.cause[i].find("tail_update_table") != std::string::npos &&
            w.cause[i + 1].find("tail_locker") != std::string::npos && i > 0 &&
            w.cause[i - 1].find("pthread_mutex_unlock") != std::string::npos)
          ++restored;
    }
  }
  INFO(waits << " waits for " << address << ": " << held << " held by tail_update_table, " << caller
             << " by tail_locker; " << restored << " of " << wakeups << " Wakeup stacks restored");
  CHECK(waits > 0);
  CHECK(held * 10 >= waits * 8);  // a waker's stack copy or unwind may fail
  CHECK(caller == 0);
  CHECK(wakeups > 0);
  CHECK(restored * 10 >= wakeups * 8);
  CHECK(r.err.find("held by tail_update_table") != std::string::npos);
}

TEST_CASE("holders: python's Thread.join and queue.get are no lock waits", "[e2e][offcpu]") {
  TempDir dir;
  const std::string script = dir.file("waits.py"), out = dir.file("py.json.gz");
  // The main thread waits in queue.get for items a producer makes every 5 ms of its CPU time (and acks each
  // one before the next is made), then joins a
  // thread that spins 50 ms of CPU time: both are waits on CPython locks (semaphores), released by a post.
  std::ofstream(script) << "import queue, threading, time\n"
                           "def spin(s):\n"
                           "    end = time.thread_time() + s\n"
                           "    while time.thread_time() < end: pass\n"
                           "q, ack = queue.Queue(), queue.Queue()\n"
                           "def producer():\n"
                           "    for i in range(20):\n"
                           "        spin(0.005)\n"
                           "        q.put(i)\n"
                           "        ack.get()\n"
                           "p = threading.Thread(target=producer)\n"
                           "p.start()\n"
                           "for _ in range(20):\n"
                           "    q.get()\n"
                           "    ack.put(0)\n"
                           "w = threading.Thread(target=spin, args=(0.05,))\n"
                           "w.start()\n"
                           "w.join()\n"
                           "p.join()\n";
  auto r = run({fxprof_bin(), "record", "--save-only", "--off-cpu-threshold", "0", kWakersFromStart, "-o",
                out, "--", "/usr/bin/python3", script});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  size_t python_locks = 0, posted = 0;
  for (const ThreadView& t : threads_of(read_profile_text(out)))
    for (const MarkerView& m : t.markers) {
      if (!in_stack(m, "PyThread_acquire_lock")) continue;
      INFO(m.name << " " << m.reason << " held by " << m.holder);
      if (m.name == "Lock wait") ++python_locks;
      if (m.name == "Blocked" && (m.reason == "semaphore" || m.reason == "join")) ++posted;
    }
  INFO(python_locks << " lock waits and " << posted << " semaphore or join waits in CPython's lock acquire");
  CHECK(python_locks == 0);
  // Each round, the consumer's get waits for the producer's put or the producer's get waits for the
  // consumer's ack (a handshake: which one depends on the scheduler, not whether one does).
  CHECK(posted >= 20);
  CHECK(r.err.find("PyThread_release_lock") == std::string::npos);
}

// Issue 34 item 5: the program's own thin Mutex wrapper (store::port::Mutex::Unlock, out of line, a call to
// pthread_mutex_unlock) is lock code by what its machine code does: the holders are its callers, the two
// functions that computed under the lock, and so are the waiters.
TEST_CASE("holders: a program's own thin mutex wrapper is not the holder, its callers are", "[e2e][offcpu]") {
  TempDir dir;
  const std::string out = dir.file("wrapper.json.gz");
  auto r = run({fxprof_bin(), "record", "--save-only", "--off-cpu-threshold", "0", kWakersFromStart, "-o",
                out, "--", test_program("mutex_wrapper")});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const size_t at = r.out.find("mutex 0x");
  REQUIRE(at != std::string::npos);
  const std::string address = r.out.substr(at + 6, r.out.find('\n', at) - at - 6);
  size_t waits = 0, held = 0, by_callers = 0, by_wrapper = 0, waited_in_callers = 0, waited_in_wrapper = 0;
  for (const ThreadView& t : threads_of(read_profile_text(out)))
    for (const MarkerView& m : t.markers) {
      if (m.name != "Lock wait" || m.lock != address) continue;
      ++waits;
      held += !m.holder.empty();
      by_callers += m.holder.starts_with("append_journal") || m.holder.starts_with("compact_index");
      by_wrapper += m.holder.find("Mutex::") != std::string::npos;
      waited_in_callers += m.waiter.starts_with("append_journal") || m.waiter.starts_with("compact_index");
      waited_in_wrapper += m.waiter.find("Mutex::") != std::string::npos;
    }
  INFO(waits << " waits for " << address << ": " << held << " with a holder, " << by_callers
             << " held by append_journal or compact_index, " << by_wrapper << " by the wrapper; "
             << waited_in_callers << " waited in the callers, " << waited_in_wrapper << " in the wrapper");
  REQUIRE(waits > 0);
  CHECK(held * 10 >= waits * 8);  // a waker's stack copy or unwind may fail
  CHECK(by_wrapper == 0);
  CHECK(by_callers == held);
  CHECK(waited_in_wrapper == 0);
  CHECK(waited_in_callers * 10 >= waits * 8);
  CHECK(r.err.find("Mutex::Unlock") == std::string::npos);
}

// Issue 34 item 5: stdio's lock is released in buffered_vfprintf, whose 8 KiB buffer is on the stack: the
// waker's stack copy reaches the function that called fprintf.
TEST_CASE("holders: stdio's lock is held by the function that called fprintf", "[e2e][offcpu]") {
  TempDir dir;
  const std::string out = dir.file("stdio.json.gz");
  auto r = run({fxprof_bin(), "record", "--save-only", "--off-cpu-threshold", "0", kWakersFromStart, "-o",
                out, "--", test_program("stdio_contend")});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const size_t at = r.out.find("file lock 0x");
  REQUIRE(at != std::string::npos);
  const std::string address = r.out.substr(at + 10, r.out.find('\n', at) - at - 10);
  size_t waits = 0, held = 0, by_print_rows = 0;
  for (const ThreadView& t : threads_of(read_profile_text(out)))
    for (const MarkerView& m : t.markers) {
      if (m.name != "Lock wait" || m.lock != address) continue;
      ++waits;
      held += !m.holder.empty();
      by_print_rows += m.holder.starts_with("print_rows");
    }
  INFO(waits << " waits for " << address << ": " << held << " with a holder, " << by_print_rows
             << " held by print_rows");
  REQUIRE(waits > 0);
  CHECK(by_print_rows * 10 >= waits * 8);
  CHECK(by_print_rows == held);
}
