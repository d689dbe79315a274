// Off-CPU time, end to end: `fxprof record` (wall-clock by default) on programs that sleep, wait for a pipe,
// spin and contend on a mutex; the blocked time in the profile is compared with what the programs measured
// themselves (tests/programs/offcpu/wall_log.h), real kernel events throughout.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "base/fd.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/offcpu_views.h"

using namespace fxprof::test;

namespace {

// The wait for a CPU right after the wait `m` of `t` ended by a wake (a Preempted marker that starts where
// it ends, as root: the eBPF waker tracer times the wake), in ms; 0 without one. A program that measures
// its own wait counts both.
double run_queue_after(const ThreadView& t, const MarkerView& m) {
  for (const MarkerView& p : t.markers)
    if (p.name == "Preempted" && std::abs(p.start - m.end) < 1e-6) return p.end - p.start;
  return 0;
}

void require_lint_clean(const std::string& text) {
  auto problems = lint_gecko_profile(text);
  for (const auto& p : problems) UNSCOPED_INFO(p);
  REQUIRE(problems.empty());
}

#define CHECK_WITHIN(got, expected, tolerance)                                                     \
  do {                                                                                             \
    const double fx_got_ = (got), fx_exp_ = (expected);                                            \
    INFO(#got << " = " << fx_got_ << ", expected " << fx_exp_ << " +-" << (tolerance)*100 << "%"); \
    CHECK(fx_exp_ > 0);                                                                            \
    CHECK(fx_got_ >= (1 - (tolerance)) * fx_exp_);                                                 \
    CHECK(fx_got_ <= (1 + (tolerance)) * fx_exp_);                                                 \
  } while (0)

}  // namespace

TEST_CASE("off-CPU: sleep, pipe wait and spin each get their real time, blocked samples use no CPU",
          "[e2e][offcpu][serial]") {
  TempDir dir;
  CpuLog log;
  CmdOptions opts;
  opts.env[CpuLog::kVariable] = log.path();
  std::string out = dir.file("phases.json.gz");
  // --save-only bakes the names in (1 kHz: one sample per millisecond).
  auto r = run({fxprof_bin(), "record", "--save-only", "-o", out, "--", test_program("offcpu_phases")}, opts);
  INFO(r.err << log.text());
  REQUIRE(r.status == 0);
  std::string text = read_profile_text(out);
  require_lint_clean(text);
  auto threads = threads_of(text);
  REQUIRE(!threads.empty());
  const ThreadView& main_t = threads[0];  // the launched program's main thread is written first
  REQUIRE(main_t.name == "GeckoMain");

  double sleep_n = 0, pipe_n = 0, spin_n = 0, spin_cpu_us = 0;
  size_t blocked = 0;
  for (const SampleView& s : main_t.samples) {
    const std::string leaf = s.leaf();
    const bool off = leaf.starts_with("[blocked") || leaf == "[preempted]";
    if (off) {
      ++blocked;
      INFO(leaf);
      CHECK(s.cpu_delta == 0);
    }
    // After the wake, the wait for a CPU is [preempted] over the same stack: the program measured both.
    const bool runq = leaf == "[preempted]";
    if ((leaf == "[blocked: sleep]" || (runq && s.has("nanosleep"))) && s.has("offcpu_sleep_phase"))
      ++sleep_n;
    if ((leaf == "[blocked: I/O]" || (runq && s.has("pipe_read"))) && s.has("offcpu_pipe_phase")) ++pipe_n;
    if (!off && s.has("offcpu_spin_phase")) {
      ++spin_n;
      spin_cpu_us += static_cast<double>(std::max<int64_t>(s.cpu_delta, 0));
    }
  }
  CHECK(blocked > 0);
  CHECK_WITHIN(sleep_n, log.ms("sleep"), 0.15);
  CHECK_WITHIN(pipe_n, log.ms("pipe"), 0.15);
  CHECK_WITHIN(spin_n, log.ms("spin"), 0.15);
  // The CPU graph: the spin's samples carry its CPU time.
  CHECK_WITHIN(spin_cpu_us / 1000, log.ms("spin"), 0.15);

  // A marker per wait, with its reason and the stack it waited in.
  double sleep_marked = 0, pipe_marked = 0;
  for (const MarkerView& m : main_t.markers) {
    auto has = [&](std::string_view fn) {
      for (const auto& f : m.cause)
        if (f.find(fn) != std::string::npos) return true;
      return false;
    };
    const double d = m.end - m.start + run_queue_after(main_t, m);
    if (m.reason == "sleep" && has("offcpu_sleep_phase")) sleep_marked += d;
    if (m.reason == "I/O" && has("offcpu_pipe_phase")) pipe_marked += d;
  }
  CHECK_WITHIN(sleep_marked, log.ms("sleep"), 0.15);
  CHECK_WITHIN(pipe_marked, log.ms("pipe"), 0.15);

  // The Firefox Profiler's own code, through our server: the waits under their functions in the call tree
  // (profiler-cli leaves Idle samples out unless asked), and the markers.
  ProfilerCli cli;
  auto server = load_through_fxprof(cli, out);
  REQUIRE(cli.select_thread("GeckoMain"));
  auto tree = cli.cmd({"thread", "samples-top-down", "--include-idle"});
  INFO(tree.out << tree.err);
  REQUIRE(tree.status == 0);
  for (const char* s : {"offcpu_sleep_phase", "[blocked: sleep]", "offcpu_pipe_phase", "[blocked: I/O]",
                        "offcpu_spin_phase", "do_nanosleep", "pipe_read"})
    CHECK(tree.out.find(s) != std::string::npos);
  auto cpu_tree = cli.cmd({"thread", "samples-top-down"});
  CHECK(cpu_tree.out.find("[blocked: sleep]") == std::string::npos);
  auto markers = cli.cmd({"thread", "markers"});
  INFO(markers.out << markers.err);
  CHECK(markers.out.find("Blocked") != std::string::npos);
}

TEST_CASE("off-CPU: attached to a program asleep the whole time, its wait is there", "[e2e][offcpu]") {
  CpuLog log;
  CmdOptions opts;
  opts.env[CpuLog::kVariable] = log.path();
  Background prog({test_program("offcpu_phases"), "asleep"}, opts);
  REQUIRE(log.wait_for("ready"));
  TempDir dir;
  std::string out = dir.file("attach.json.gz");
  auto r =
      run({fxprof_bin(), "record", "--save-only", "-d", "0.5", "-o", out, "-p", std::to_string(prog.pid())});
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::string text = read_profile_text(out);
  require_lint_clean(text);
  auto threads = threads_of(text);
  REQUIRE(!threads.empty());
  // No switch-out was seen: the wait counts from the attach, its reason from the wait channel.
  double asleep = 0;
  for (const SampleView& s : threads[0].samples)
    if (s.leaf() == "[blocked: sleep]") ++asleep;
  // The recording's duration as fxprof measured it ("recorded 0.50 s"; a loaded machine may stop late).
  const size_t at = r.err.find("recorded ");
  REQUIRE(at != std::string::npos);
  const double recorded_ms = std::stod(r.err.substr(at + 9)) * 1000;
  CHECK_WITHIN(asleep, recorded_ms, 0.15);
}

TEST_CASE("off-CPU: --cpu-only records on-CPU samples only", "[e2e][offcpu]") {
  TempDir dir;
  CpuLog log;
  CmdOptions opts;
  opts.env[CpuLog::kVariable] = log.path();
  std::string out = dir.file("cpu.json.gz");
  auto r = record(out, {test_program("offcpu_phases")}, {"--cpu-only"}, opts);
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::string text = read_profile_text(out);
  require_lint_clean(text);
  auto threads = summarize(text);
  const ThreadSummary* main_t = find_thread(threads, "GeckoMain");
  REQUIRE(main_t != nullptr);
  CHECK(main_t->off_cpu_samples == 0);
  CHECK(text.find("OffCpu") == std::string::npos);
}

TEST_CASE("off-CPU: waits for major page faults are [blocked: page fault] under the function that touched",
          "[e2e][offcpu]") {
  // The program's file goes in the build folder: on disk, where dropping its pages makes each touch read
  // the disk (tmpfs, a usual TMPDIR, keeps them in memory and there would be no major fault to wait for).
  TempDir dir;
  CpuLog log;
  CmdOptions opts;
  opts.env[CpuLog::kVariable] = log.path();
  std::string out = dir.file("faults.json.gz");
  auto r = run(
      {fxprof_bin(), "record", "--save-only", "-o", out, "--", test_program("offcpu_faults"), build_dir()},
      opts);
  INFO(r.err << log.text());
  REQUIRE(r.status == 0);
  // The precondition, from the program itself: its file's pages were dropped and it took major faults.
  INFO("resident > 0 or majflt 0: the build folder's file system kept the file in memory (tmpfs?)");
  REQUIRE(log.count("majflt") == 1);
  REQUIRE(log.ms("resident") == 0);
  REQUIRE(log.ms("majflt") > 0);
  std::string text = read_profile_text(out);
  require_lint_clean(text);
  auto threads = threads_of(text);
  REQUIRE(!threads.empty());
  size_t faults = 0, other_blocked = 0;
  for (const SampleView& s : threads[0].samples) {
    if (!s.has("offcpu_fault_phase")) continue;
    if (s.leaf() == "[blocked: page fault]") {
      ++faults;
      CHECK(s.cpu_delta == 0);
      // The kernel part says how: the fault handler that read the page in.
      CHECK((s.has("filemap_fault") || s.has("handle_mm_fault")));
    } else if (s.leaf().starts_with("[blocked")) {
      ++other_blocked;
    }
  }
  INFO(faults << " page-fault samples, " << other_blocked
              << " other blocked samples under offcpu_fault_phase");
  CHECK(faults > 0);
  CHECK(other_blocked == 0);  // a fault's wait for the disk is a page fault, not I/O
}

TEST_CASE("off-CPU: --off-cpu-stack-size sets the copy at switches; cut off-CPU stacks are reported",
          "[e2e][offcpu]") {
  // A 200 ms sleep under ~26 KiB of stack: the default 8 KiB copy cuts it, 65528 bytes holds it.
  TempDir dir;
  auto sleeps = [](const std::string& text) {
    std::vector<SampleView> out;
    auto threads = threads_of(text);
    if (!threads.empty())
      for (const SampleView& s : threads[0].samples)
        if (s.leaf() == "[blocked: sleep]" && s.has("offcpu_deep_recurse")) out.push_back(s);
    return out;
  };
  const std::string cut_out = dir.file("cut.json.gz");
  auto cut = run({fxprof_bin(), "record", "--save-only", "-o", cut_out, "--", test_program("offcpu_deep")});
  INFO(cut.err);
  REQUIRE(cut.status == 0);
  auto cut_sleeps = sleeps(read_profile_text(cut_out));
  REQUIRE(!cut_sleeps.empty());
  for (const SampleView& s : cut_sleeps) {
    CHECK(s.has("(stack truncated)"));
    CHECK(!s.has("main"));
  }
  CHECK(cut.err.find("of the off-CPU stacks are incomplete") != std::string::npos);
  CHECK(cut.err.find("--off-cpu-stack-size") != std::string::npos);

  const std::string whole_out = dir.file("whole.json.gz");
  auto whole = run({fxprof_bin(), "record", "--save-only", "--off-cpu-stack-size", "65528", "-o", whole_out,
                    "--", test_program("offcpu_deep")});
  INFO(whole.err);
  REQUIRE(whole.status == 0);
  auto whole_sleeps = sleeps(read_profile_text(whole_out));
  REQUIRE(!whole_sleeps.empty());
  for (const SampleView& s : whole_sleeps) {
    CHECK(!s.has("(stack truncated)"));
    CHECK(s.has("main"));
  }
  CHECK(whole.err.find("off-CPU stacks are incomplete") == std::string::npos);
}

TEST_CASE(
    "off-CPU: four threads on one mutex give Lock wait markers with its address, the waited time and "
    "the function that held it",
    "[e2e][offcpu][serial]") {
  TempDir dir;
  CpuLog log;
  CmdOptions opts;
  opts.env[CpuLog::kVariable] = log.path();
  std::string out = dir.file("locks.json.gz");
  // Threshold 0: a marker for every wait, so that they add up to what the program measured.
  auto r = run({fxprof_bin(), "record", "--save-only", "--off-cpu-threshold", "0", kWakersFromStart, "-o",
                out, "--", test_program("offcpu_locks")},
               opts);
  INFO(r.out << r.err << log.text());
  REQUIRE(r.status == 0);
  REQUIRE(log.count("wait") == 4);
  const size_t at = r.out.find("mutex 0x");
  REQUIRE(at != std::string::npos);
  const std::string address = r.out.substr(at + 6, r.out.find('\n', at) - at - 6);
  std::string text = read_profile_text(out);
  require_lint_clean(text);

  double waited = 0, waited_any_lock = 0;
  double in_lock_calls = 0,
         off_cpu_in_lock_calls = 0;  // the program's lock calls and the off-CPU time in them
  size_t markers = 0, in_contender = 0, other_reason = 0, woken_by_other = 0, lock_waits = 0, held_by = 0,
         with_holder = 0;
  size_t wakeups = 0, wakeups_in_holder = 0, wakeups_elsewhere = 0;
  std::ostringstream unwoken;  // the markers not woken by another contender, for the failure's message
  std::set<int64_t> waiters;   // threads that waited for the mutex (all four, unless a loaded machine ran one
                               // thread's locks before another thread started)
  for (const ThreadView& t : threads_of(text))
    for (const MarkerView& call : t.program) {
      if (call.name != "lock call") continue;
      in_lock_calls += call.end - call.start;
      for (const MarkerView& m : t.markers)  // every off-CPU span: the lock's wait, a preemption around it
        off_cpu_in_lock_calls += std::max(0.0, std::min(m.end, call.end) - std::max(m.start, call.start));
    }
  for (const ThreadView& t : threads_of(text))
    for (const MarkerView& m : t.markers) {
      if (m.name == "Lock wait") {
        ++lock_waits;
        waited_any_lock += m.end - m.start;
      }
      if (m.lock != address) continue;
      waiters.insert(t.tid);
      if (m.name != "Lock wait" || m.reason != "futex") ++other_reason;
      // The eBPF waker tracer: the thread that unlocked, another contender ("offcpu_locks TID").
      const size_t sp = m.waker.rfind(' ');
      if (m.waker.starts_with("offcpu_locks ") && sp != std::string::npos &&
          std::stoll(m.waker.substr(sp + 1)) != t.tid)
        ++woken_by_other;
      else
        unwoken << "\n  thread " << t.tid << " " << m.start << "-" << m.end << " ms woken by '" << m.waker
                << "'";
      ++markers;
      if (m.holder == "offcpu_hold_lock") ++held_by;
      if (!m.holder.empty()) ++with_holder;
      if (!m.holder.empty() && m.holder != "offcpu_hold_lock")
        unwoken << "\n  thread " << t.tid << " " << m.start << "-" << m.end << " ms held by '" << m.holder
                << "', woken by '" << m.waker << "'";
      waited += m.end - m.start + run_queue_after(t, m);
      for (const auto& f : m.cause)
        if (f.find("offcpu_contender") != std::string::npos) {
          ++in_contender;
          break;
        }
    }
  // The holders' side (eBPF at the futex wake): a Wakeup marker on the thread that released the lock, with
  // the stack it released it in (unwound from the waker's registers and stack copy, like a sample's), and
  // the wait it ended names that stack's first function outside libc: the function that held the lock.
  for (const ThreadView& t : threads_of(text))
    for (const MarkerView& w : t.wakeups) {
      if (w.lock != address) continue;
      ++wakeups;
      if (w.wakee.ends_with(" " + std::to_string(t.tid))) ++wakeups_elsewhere;  // never itself
      for (const auto& f : w.cause)
        if (f.find("offcpu_hold_lock") != std::string::npos) {
          ++wakeups_in_holder;
          break;
        }
    }
  INFO("address " << address << ", " << markers << " markers, " << held_by << " held by offcpu_hold_lock, "
                  << wakeups << " wakeups, " << wakeups_in_holder << " in offcpu_hold_lock" << unwoken.str());
  CHECK(markers > 0);
  CHECK(other_reason == 0);
  CHECK(in_contender == markers);
  CHECK(woken_by_other == markers);
  CHECK(r.err.find("waker tracer") == std::string::npos);  // it loaded (root, BTF)
  // The program's own measure of its waiting is its lock calls, as markers on the same timeline: the off-CPU
  // spans recorded cover them. Whether a contender waits in the futex or is preempted around it depends on
  // the machine's load (at load 25 a third of it was run-queue time), so it is all off-CPU time that is
  // compared, and the lock's waits are most of it.
  CHECK_WITHIN(in_lock_calls, log.ms("wait"), 0.01);
  CHECK_WITHIN(off_cpu_in_lock_calls, in_lock_calls, 0.15);
  CHECK(waited <= off_cpu_in_lock_calls * 1.05 + 1);
  CHECK(waited >= off_cpu_in_lock_calls * 0.5);
  // Every wait was ended by an unlock, a futex wake: one Wakeup each (a stack copy or an unwind may fail:
  // 90 %), each in the holder's function.
  CHECK(wakeups <= markers);
  CHECK(wakeups * 10 >= markers * 9);
  CHECK(wakeups_elsewhere == 0);
  CHECK(wakeups_in_holder == wakeups);
  // The holders named are the right one. A wake is paired with the wait it ended by time, and the kernel
  // may order a wake before the waiter's switch-out (a loaded machine does, now and then: 47 of 48), so
  // the pairs are 90 % of the wakes, as the wakes are of the waits; a pair made wrong names another
  // function (CI once: 65 of 66, the other listed above as "held by").
  CHECK(held_by * 10 >= with_holder * 9);
  CHECK(held_by <= wakeups);
  CHECK(held_by * 10 >= wakeups * 9);

  // The process's "Threads waiting" track: each thread counts in every sampling interval that one of its lock
  // waits touches, so the track's area is at least the time waited and at most two intervals more per wait.
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, text);
  const double interval = double(doc["meta"]["interval"]);
  double area = 0;
  int64_t peak = 0;
  size_t tracks = 0;
  for (simdjson::dom::element c : simdjson::dom::array(doc["counters"])) {
    if (std::string_view(c["name"]) != "Threads waiting") continue;
    ++tracks;
    for (simdjson::dom::element row : simdjson::dom::array(c["samples"]["data"])) {
      area += double(int64_t(row.at(1))) * interval;
      peak = std::max(peak, int64_t(row.at(1)));
    }
  }
  INFO(lock_waits << " lock waits, " << waited_any_lock << " ms, track area " << area << " ms, peak "
                  << peak);
  REQUIRE(tracks == 1);
  CHECK(area >= waited_any_lock);
  CHECK(area <= waited_any_lock + 2 * interval * static_cast<double>(lock_waits));
  CHECK(peak >= 2);  // four threads on one mutex: several wait at once
  CHECK(peak <= 5);  // the contenders and the main thread joining them
  // The Firefox Profiler's own code draws it as a track of the program's process (a line graph of the count).
  ProfilerCli cli;
  auto load = cli.load(out);
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  auto list = cli.cmd({"counter", "list", "--json"});
  INFO(list.out << list.err);
  REQUIRE(list.status == 0);
  simdjson::dom::parser list_parser;
  size_t listed = 0;
  for (simdjson::dom::element c : simdjson::dom::array(parse_json(list_parser, list.out)["counters"]))
    if (std::string_view(c["name"]) == "Threads waiting") ++listed;
  CHECK(listed == 1);
  // The summary after recording names the lock among the three waited for most (the main thread's joins
  // are not lock waits).
  const size_t line = r.err.find("fxprof: lock waits: ");
  REQUIRE(line != std::string::npos);
  const std::string summary = r.err.substr(line, r.err.find('\n', line) - line);
  CHECK(summary.find(address + " ") != std::string::npos);
  // ... and the function that held it.
  REQUIRE(waiters.size() >= 2);
  CHECK(summary.find(" by " + std::to_string(waiters.size()) + " threads held by offcpu_hold_lock") !=
        std::string::npos);
}

TEST_CASE(
    "off-CPU: a join and idle condition-variable waits are no lock contention; a timer's wake names no "
    "thread; the wait for a CPU after a wake is [preempted]",
    "[e2e][offcpu][serial]") {
  TempDir dir;
  CpuLog log;
  CmdOptions opts;
  opts.env[CpuLog::kVariable] = log.path();
  std::string out = dir.file("waits.json.gz");
  auto r = run({fxprof_bin(), "record", "--save-only", "--off-cpu-threshold", "0", kWakersFromStart, "-o",
                out, "--", test_program("offcpu_waits")},
               opts);
  INFO(r.out << r.err << log.text());
  REQUIRE(r.status == 0);
  REQUIRE(log.count("join") == 1);
  REQUIRE(log.count("late_wait") == 1);
  CHECK(r.err.find("waker tracer") == std::string::npos);  // it loaded (root, BTF)
  std::string text = read_profile_text(out);
  require_lint_clean(text);
  auto in = [](const MarkerView& m, std::string_view fn) {
    return std::any_of(m.cause.begin(), m.cause.end(),
                       [&](const std::string& f) { return f.find(fn) != std::string::npos; });
  };
  double joined = 0, pool_waits = 0, late_preempted = 0, slept = 0;
  size_t join_markers = 0, pool_markers = 0, sleeps = 0, timer_woken = 0, woken_by_busy = 0;
  size_t false_lock_waits = 0, lock_waits = 0;
  for (const ThreadView& t : threads_of(text)) {
    for (const MarkerView& m : t.markers) {
      if (m.name == "Lock wait") {
        ++lock_waits;
        // Only a real contention may be one: the pool's re-lock of its mutex after the broadcast.
        if (!in(m, "lll_lock_wait") && !in(m, "pthread_mutex_lock")) ++false_lock_waits;
      }
      if (in(m, "offcpu_join_phase") && m.reason == "join") {
        ++join_markers;
        joined += m.end - m.start;
        CHECK(m.name == "Blocked");
        CHECK(m.lock.empty());
      }
      if (in(m, "offcpu_pool_worker") && m.reason == "condition variable") {
        ++pool_markers;
        pool_waits += m.end - m.start;
        CHECK(m.name == "Blocked");
      }
      if (t.name == "sleeper" && m.reason == "sleep") {
        ++sleeps;
        slept += m.end - m.start;
        if (m.waker == "timer") ++timer_woken;
        if (m.waker.starts_with("busy ")) ++woken_by_busy;
      }
      if (t.name == "late" && m.name == "Preempted")
        late_preempted = std::max(late_preempted, m.end - m.start);
    }
  }
  INFO(join_markers << " join markers (" << joined << " ms), " << pool_markers << " pool waits ("
                    << pool_waits << " ms), " << sleeps << " sleeps, " << timer_woken
                    << " woken by the timer, " << woken_by_busy << " by busy, " << lock_waits
                    << " lock waits (" << false_lock_waits << " false), late preempted " << late_preempted
                    << " ms");
  // The join is one wait (perhaps cut by a preemption) as long as the program measured it.
  CHECK(join_markers >= 1);
  CHECK(joined <= log.ms("join") * 1.05 + 1);
  CHECK(joined >= log.ms("join") * 0.5);
  // The three idle workers waited on their condition variable for most of the run.
  CHECK(pool_markers >= 3);
  CHECK(pool_waits >= 3 * log.ms("join") * 0.9);
  CHECK(false_lock_waits == 0);
  // 20 sleeps of 5 ms, each ended by its timer's interrupt, never by the thread it interrupted.
  CHECK(sleeps >= 18);
  CHECK(woken_by_busy == 0);
  CHECK(timer_woken * 10 >= sleeps * 9);
  // Asleep 100 ms in all: the time each waited for a CPU after its timer is [preempted], not sleep (a round
  // of records may hold several of its sleeps: each ends at its own wake).
  INFO("slept " << slept << " ms");
  CHECK(slept <= 100 * 1.3 + 5);
  CHECK(slept >= 100 * 0.9);
  // "late" was woken at 10 ms and ran when the SCHED_FIFO hog let go, ~50 ms later: that was a wait for a
  // CPU.
  CHECK(late_preempted >= (log.ms("late_wait") - 10) * 0.6);
  // A Wakeup names a lock only when it ended a Lock wait on it (the condition variable's wakes name none).
  std::set<std::string> locks;
  size_t wakeups = 0, wakeups_with_lock = 0;
  for (const ThreadView& t : threads_of(text))
    for (const MarkerView& m : t.markers)
      if (m.name == "Lock wait") locks.insert(m.lock);
  for (const ThreadView& t : threads_of(text))
    for (const MarkerView& w : t.wakeups) {
      ++wakeups;
      if (w.lock.empty()) continue;
      ++wakeups_with_lock;
      INFO("Wakeup of " << w.wakee << " names lock " << w.lock);
      CHECK(locks.count(w.lock) == 1);
    }
  INFO(wakeups << " wakeups, " << wakeups_with_lock << " with a lock");
  CHECK(wakeups >= 3);  // the broadcast to the pool, the joined threads' exits
  // Not lock contention: no lock summary unless the pool's re-lock really contended, and then no join.
  const size_t line = r.err.find("fxprof: lock waits: ");
  CHECK((line == std::string::npos) == (lock_waits == 0));
  // The Threads waiting track counts lock waits only.
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, text);
  size_t tracks = 0;
  for (simdjson::dom::element c : simdjson::dom::array(doc["counters"]))
    if (std::string_view(c["name"]) == "Threads waiting") ++tracks;
  CHECK(tracks == (lock_waits == 0 ? 0u : 1u));
}

TEST_CASE("off-CPU: the Wakeup markers' stacks are symbolicated through our server like samples'",
          "[e2e][offcpu][serial]") {
  TempDir dir;
  std::string out = dir.file("locks.json.gz");
  auto r = record(out, {test_program("offcpu_locks")}, {"--off-cpu-threshold", "0", kWakersFromStart});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const size_t at = r.out.find("mutex 0x");
  REQUIRE(at != std::string::npos);
  const std::string address = r.out.substr(at + 6, r.out.find('\n', at) - at - 6);
  // The Firefox Profiler's own code: the markers of every thread, then the stack of the lock's first Wakeup,
  // named by our symbol server.
  ProfilerCli cli;
  auto server = load_through_fxprof(cli, out);
  auto list = cli.cmd({"profile", "markers", "--search", "Wakeup", "--json"});
  INFO(list.out << list.err);
  REQUIRE(list.status == 0);
  simdjson::dom::parser parser;
  std::string handle;
  size_t listed = 0;
  for (simdjson::dom::element m : simdjson::dom::array(parse_json(parser, list.out)["markers"])) {
    std::string_view lock;
    if (std::string_view(m["name"]) != "Wakeup" || m["data"]["lock"].get(lock) || lock != address) continue;
    ++listed;
    CHECK(bool(m["hasStack"]));
    if (handle.empty()) handle = std::string(std::string_view(m["handle"]));
  }
  REQUIRE(listed > 0);
  auto stack = cli.cmd({"marker", "stack", handle, "--json"});
  INFO(stack.out << stack.err);
  REQUIRE(stack.status == 0);
  simdjson::dom::parser stack_parser;
  std::vector<std::string> names;
  for (simdjson::dom::element f :
       simdjson::dom::array(parse_json(stack_parser, stack.out)["stack"]["frames"]))
    names.emplace_back(std::string_view(f["name"]));
  // Leaf first: the futex wake in libc, pthread_mutex_unlock, the holder, its caller.
  auto pos = [&](std::string_view fn) { return std::find(names.begin(), names.end(), fn) - names.begin(); };
  CHECK(pos("offcpu_hold_lock") < pos("offcpu_contender"));
  CHECK(pos("offcpu_contender") < static_cast<long>(names.size()));
}

TEST_CASE("off-CPU as an ordinary user: one line, blocked spans as markers, the program's exit code",
          "[e2e][offcpu][unprivileged]") {
  REQUIRE(geteuid() == 0);  // the suite runs as root and drops to the test user here
  auto paranoid = fxprof::read_file("/proc/sys/kernel/perf_event_paranoid");
  REQUIRE(paranoid);
  REQUIRE(std::stoi(*paranoid) == 2);
  TempDir dir;
  CmdOptions opts = as_test_user(dir);
  CpuLog log;
  opts.env[CpuLog::kVariable] = log.path();
  std::string out = dir.file("user.json.gz");
  auto r = record(out, {test_program("offcpu_phases"), "7"}, {}, opts);
  INFO(r.err);
  CHECK(r.status == 7);
  const std::string line =
      "fxprof: off-CPU stacks need `sudo sysctl kernel.perf_event_paranoid=1` or root: blocked time is shown "
      "as markers without stacks\n";
  const size_t first = r.err.find(line);
  CHECK(first != std::string::npos);
  CHECK(r.err.find(line, first + 1) == std::string::npos);
  std::string text = read_profile_text(out);
  require_lint_clean(text);
  auto threads = threads_of(text);
  REQUIRE(!threads.empty());
  double blocked = 0;
  for (const MarkerView& m : threads[0].markers)
    if (m.name == "Blocked") blocked += m.end - m.start;
  CHECK_WITHIN(blocked, log.ms("sleep") + log.ms("pipe"), 0.15);
}

TEST_CASE("off-CPU: Rust std::sync::Mutex waits attribute to the Rust function that locks",
          "[e2e][offcpu][serial]") {
  TempDir dir;
  CpuLog log;
  CmdOptions opts;
  opts.env[CpuLog::kVariable] = log.path();
  std::string out = dir.file("rust.json.gz");
  auto r = run({fxprof_bin(), "record", "--save-only", kWakersFromStart, "-o", out, "--",
                test_program("offcpu_mutex")},
               opts);
  INFO(r.err << log.text());
  REQUIRE(r.status == 0);
  REQUIRE(log.count("wait") == 4);
  std::string text = read_profile_text(out);
  require_lint_clean(text);
  double futex_samples = 0;
  size_t lock_markers = 0, held_in_waiter = 0;
  for (const ThreadView& t : threads_of(text)) {
    if (!t.name.starts_with("rust-waiter-")) continue;
    // The wait for a CPU after the wake (a [preempted] leaf over the futex wait's stack) is part of the
    // time the program measured.
    for (const SampleView& s : t.samples)
      if (s.has("rust_lock_waiter") &&
          (s.leaf() == "[blocked: futex]" || (s.leaf() == "[preempted]" && s.has("futex_wait"))))
        ++futex_samples;
    for (const MarkerView& m : t.markers) {
      if (m.name != "Lock wait") continue;
      ++lock_markers;
      bool in_waiter = false;
      for (const auto& f : m.cause) in_waiter = in_waiter || f.find("rust_lock_waiter") != std::string::npos;
      CHECK(in_waiter);
      CHECK(!m.lock.empty());
      // The guard drops at the end of each loop turn in rust_lock_waiter: std's unlock (std::sys::...) is
      // lock plumbing, so the holder is the Rust function around it.
      if (m.holder == "offcpu_mutex::rust_lock_waiter") ++held_in_waiter;
    }
  }
  CHECK(lock_markers > 0);
  INFO(held_in_waiter << " of " << lock_markers << " waits held by offcpu_mutex::rust_lock_waiter");
  CHECK(held_in_waiter * 10 >= lock_markers * 9);
  CHECK(r.err.find(" held by offcpu_mutex::rust_lock_waiter") != std::string::npos);
  // 1 kHz: one sample per millisecond of waiting.
  CHECK_WITHIN(futex_samples, log.ms("wait"), 0.20);
}

// Issue 21 item 6: the served profile of `fxprof record` is unsymbolicated, and "Held by" is a marker field
// written with the file: the Wakeup stacks are named before it is written. The lock is a C++ std::mutex
// taken through std::lock_guard, whose inlined unlock (std::mutex::unlock, __gthread_mutex_unlock) is not
// the holder: cxx_update_table is.
TEST_CASE("off-CPU: a std::mutex's Lock waits name the function that held it in the lazy profile too",
          "[e2e][offcpu]") {
  TempDir dir;
  const std::string out = dir.file("lazy.json.gz");
  auto r = run({fxprof_bin(), "record", "--save-only", "--no-symbolicate", "--off-cpu-threshold", "0",
                kWakersFromStart, "-o", out, "--", test_program("views_cxx_mutex")});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const size_t at = r.out.find("mutex 0x");
  REQUIRE(at != std::string::npos);
  const std::string address = r.out.substr(at + 6, r.out.find('\n', at) - at - 6);
  const std::string text = read_profile_text(out);
  require_lint_clean(text);
  size_t waits = 0, held = 0, wrappers = 0;
  for (const ThreadView& t : threads_of(text))
    for (const MarkerView& m : t.markers) {
      if (m.name != "Lock wait" || m.lock != address) continue;
      ++waits;
      if (m.holder.starts_with("cxx_update_table")) ++held;
      if (!m.holder.empty() && !m.holder.starts_with("cxx_update_table")) ++wrappers;
    }
  INFO(waits << " waits for " << address << ", " << held << " held by cxx_update_table, " << wrappers
             << " by something else");
  CHECK(waits > 0);
  CHECK(held * 10 >= waits * 8);  // a waker's stack copy or unwind may fail
  CHECK(wrappers == 0);
  const size_t line = r.err.find("fxprof: lock waits: ");
  REQUIRE(line != std::string::npos);
  CHECK(r.err.substr(line, r.err.find('\n', line) - line).find(address + " ") != std::string::npos);
  CHECK(r.err.find("held by cxx_update_table") != std::string::npos);

  // Through the front end's own code, served as `fxprof record` serves it.
  ProfilerCli cli;
  auto server = load_through_fxprof(cli, out);
  int64_t shown = 0;
  for (const char* handle : {"t-0", "t-1", "t-2", "t-3"}) {
    auto sel = cli.cmd({"thread", "select", handle});
    REQUIRE(sel.status == 0);
    auto m = cli.cmd({"thread", "markers", "--search", "holder:cxx_update_table", "--json"});
    INFO(m.out << m.err);
    REQUIRE(m.status == 0);
    simdjson::dom::parser parser;
    shown += int64_t(parse_json(parser, m.out)["filteredMarkerCount"]);
  }
  CHECK(static_cast<size_t>(shown) == held);
}
