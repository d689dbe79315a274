// tests for driver/: the driver's rounds over sources (driver.h) and the perf buffers as a source
// (sources.h), with fake sources and a sink that writes down what it was given.
#include "driver/driver.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "driver/sources.h"

using namespace fxprof;
using driver::RecordRef;

namespace {

// Writes down each call: "w<time>" per wakeup, "r<time>" per record, "|" at each round's end.
class Log final : public driver::RecordSink {
 public:
  void on_launched(uint32_t pid, const std::string&, uint64_t) override { add("L" + std::to_string(pid)); }
  void on_attached(uint32_t, uint64_t) override {}
  void on_attached_thread(uint32_t, uint32_t, uint64_t) override {}
  void on_wakings(std::span<driver::Waking> w) override {
    for (const driver::Waking& k : w) add("w" + std::to_string(k.time));
  }
  void on_records(std::span<const RecordRef> round) override {
    for (const RecordRef& r : round) add((r.switch_event ? "s" : "r") + std::to_string(r.time));
    add("|");
  }
  void on_end(uint64_t t) override { add("E" + std::to_string(t)); }
  std::string text;

 private:
  void add(const std::string& s) { text += (text.empty() ? "" : " ") + s; }
};

// Gives its rounds' record times (and wakeups), one list per round, then ends; counts its releases.
class Fake final : public driver::Source {
 public:
  Fake(std::vector<std::vector<uint64_t>> rounds, std::vector<uint64_t> wakes = {})
      : rounds_(std::move(rounds)), wakes_(std::move(wakes)) {}
  bool next(driver::Round& round, driver::RecordSink& sink) override {
    ++asked;
    if (at_ == 0 && launch_) sink.on_launched(launch_, "p", 0);
    for (uint64_t w : wakes_) round.wakings.emplace_back().time = w;
    wakes_.clear();
    if (at_ < rounds_.size())
      for (uint64_t t : rounds_[at_]) round.records.push_back({t, nullptr, mark});
    return ++at_ < rounds_.size();
  }
  void release() override { ++released; }
  int asked = 0, released = 0;
  uint32_t launch_ = 0;
  bool mark = false;  // its records say "s" in the log

 private:
  std::vector<std::vector<uint64_t>> rounds_;
  std::vector<uint64_t> wakes_;
  size_t at_ = 0;
};

}  // namespace

TEST_CASE("driver: sources' records merged by time, the earlier source's first at one time", "[driver]") {
  Log log;
  driver::Driver d(log);
  Fake a({{10, 30, 30}, {50}}), b({{20, 30, 40}});
  b.mark = true;
  a.launch_ = 7;  // a file source's own call comes where its file has it: before its first round
  d.add(a);
  d.add(b);
  CHECK(d.round() == 6);
  // b has ended: only a is asked for the next round; both gave back the space of the first.
  CHECK(d.round() == 1);
  d.end(99);
  CHECK(log.text == "L7 r10 s20 r30 r30 s30 s40 | r50 | E99");
  CHECK(a.asked == 2);
  CHECK(b.asked == 1);
  CHECK(a.released == 2);
  CHECK(b.released == 1);
}

TEST_CASE("driver: a round's wakeups reach the sink before its records, and run() stops when all end",
          "[driver]") {
  Log log;
  driver::Driver d(log);
  Fake records({{5}, {15}, {25}}), waker({{}}, {12});
  d.add(records);
  d.add(waker);
  d.run();
  CHECK(log.text == "w12 r5 | r15 | r25 |");
  CHECK(records.asked == 3);
}

namespace {

// A source whose events never go through the rounds (as the heap pipe's): it writes "F<name>" into the
// sink's log when the driver finishes.
class Folded final : public driver::Source {
 public:
  Folded(Log& log, std::string name) : log_(log), name_(std::move(name)) {}
  bool next(driver::Round&, driver::RecordSink&) override { return true; }
  void finish() override { log_.text += " F" + name_; }

 private:
  Log& log_;
  std::string name_;
};

}  // namespace

TEST_CASE("driver: a source outside the rounds hands its events over at finish, after the end, in order",
          "[driver]") {
  Log log;
  driver::Driver d(log);
  Fake records({{5}, {15}});
  Folded heap(log, "heap"), other(log, "other");
  d.add(records);
  d.add(heap);
  d.add(other);
  CHECK(d.round() == 1);
  CHECK(d.round() == 1);
  d.end(20);
  CHECK(log.text == "r5 | r15 | E20");  // nothing of theirs before the finish
  d.finish();
  CHECK(log.text == "r5 | r15 | E20 Fheap Fother");
}

namespace {

// Buffers in memory, as the ring buffers would hand them out: each round what was added since.
class Buffers final : public driver::RecordSource {
 public:
  void collect(std::vector<RecordRef>& out) override {
    for (const RecordRef& r : pending) out.push_back(r);
  }
  void release() override {
    pending.clear();
    ++released;
  }
  std::vector<RecordRef> pending;
  int released = 0;
};

}  // namespace

TEST_CASE("perf buffers source: each round what the buffers hold, by time, a switch-out's sample first",
          "[driver]") {
  Log log;
  Buffers bufs;
  // Buffer one (times 10, 30), then buffer two (20, and at 30 a switch buffer's sample).
  bufs.pending = {{10, nullptr, false}, {30, nullptr, false}, {20, nullptr, false}, {30, nullptr, true}};
  CHECK(driver::feed_round(bufs, log) == 4);
  CHECK(bufs.released == 1);
  // A live round with nothing in the buffers still reaches the sink (the builder releases at its end).
  CHECK(driver::feed_round(bufs, log) == 0);
  CHECK(log.text == "r10 r20 s30 r30 | |");
}
