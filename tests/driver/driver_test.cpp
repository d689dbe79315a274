// tests for driver/: the driver's rounds over sources (driver.h) and the perf buffers as a source
// (sources.h), with fake sources, ring buffers in memory and a sink that writes down what it was given.
#include "driver/driver.h"

#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/fd.h"
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
  void collect(std::vector<RecordRef>& out, uint64_t) override {
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

namespace {

// A ring buffer in memory, as perf maps one (a metadata page, then the data pages): the test writes records
// and publishes data_head as the kernel does; the RingSet reads it through its own mapping of the memfd.
class MemRing {
 public:
  MemRing() : fd_(memfd_create("ring", MFD_CLOEXEC)), page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    REQUIRE(fd_.valid());
    REQUIRE(ftruncate(fd_.get(), static_cast<off_t>(2 * page_)) == 0);
    void* p = mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    REQUIRE(p != MAP_FAILED);
    map_ = Mapping(p, 2 * page_);
  }
  perf::RingBuffer buffer() {
    auto rb = perf::RingBuffer::map(fd_.get(), 1, 1);
    REQUIRE(rb);
    return std::move(*rb);
  }
  // A record of 16 bytes: its header, then its time (MemRing::time reads it back).
  void write(uint64_t time) {
    auto* meta = static_cast<perf_event_mmap_page*>(map_.data());
    std::byte* at = static_cast<std::byte*>(map_.data()) + page_ + (head_ % page_);
    const perf_event_header h{PERF_RECORD_SAMPLE, 0, 16};
    std::memcpy(at, &h, sizeof h);
    std::memcpy(at + 8, &time, 8);
    head_ += 16;
    __atomic_store_n(&meta->data_head, head_, __ATOMIC_RELEASE);
  }
  uint64_t tail() const {
    return __atomic_load_n(&static_cast<perf_event_mmap_page*>(map_.data())->data_tail, __ATOMIC_ACQUIRE);
  }
  static uint64_t time(const perf_event_header* h) {
    uint64_t t = 0;
    std::memcpy(&t, reinterpret_cast<const std::byte*>(h) + 8, 8);
    return t;
  }

 private:
  UniqueFd fd_;
  size_t page_;
  Mapping map_;
  uint64_t head_ = 0;
};

}  // namespace

TEST_CASE("perf buffers source: a round takes what is not newer than its watermark, the rest comes next",
          "[driver]") {
  MemRing cpu0, cpu1;
  driver::RingSet rings(&MemRing::time);
  rings.add(cpu0.buffer(), false);
  rings.add(cpu1.buffer(), false);
  Log log;
  driver::Driver d(log);
  const std::unique_ptr<driver::Source> source = driver::buffer_source(rings);
  d.add(*source);
  // The round begins at 50: buffer 0 was read before its record of 40 was published, which comes in the
  // next round with buffer 1's 60 (newer than the watermark: held back, and what follows it too).
  cpu0.write(10);
  cpu1.write(20);
  cpu1.write(60);
  cpu1.write(45);  // written after a newer record: stays behind it
  CHECK(d.round(50) == 2);
  CHECK(cpu1.tail() == 16);  // the held records' space is not given back
  cpu0.write(40);
  cpu0.write(0);  // no time (stat's records): never held back
  CHECK(d.round(100) == 4);
  CHECK(log.text == "r10 r20 | r0 r40 r45 r60 |");
  CHECK(cpu1.tail() == 48);
  // The end of a recording takes everything.
  cpu0.write(500);
  cpu1.write(0);
  CHECK(d.round(200) == 1);
  CHECK(cpu0.tail() == 48);
  CHECK(d.round() == 1);
  CHECK(cpu0.tail() == 64);
  CHECK(log.text == "r10 r20 | r0 r40 r45 r60 | r0 | r500 |");
}
