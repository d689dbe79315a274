// HeapSource's worker, in process (no program, no shim): chunks of the wire format written into its pipe as
// the shim would, folded while "the program runs", and folded again, sorted, when a thread's events arrive
// after later ones of another thread were folded. Also built by the ThreadSanitizer build (the reader, the
// worker and finish() share the stream).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "heap/heap.h"
#include "heap/wire.h"
#include "model/profile.h"

namespace fxprof::heap {
namespace {

using namespace std::chrono_literals;

// One chunk of the stream: records appended, then written with one write(2).
class Chunk {
 public:
  Chunk(uint32_t pid, uint32_t tid) : pid_(pid), tid_(tid) {}
  Chunk& stack(uint32_t id, std::vector<uint64_t> frames) {
    wire::Record r{static_cast<uint8_t>(wire::Kind::StackDef), {}, id, 0, frames.size(), 0};
    put(&r, sizeof r);
    put(frames.data(), frames.size() * 8);
    return *this;
  }
  Chunk& alloc(uint64_t time, uint64_t addr, uint64_t size, uint32_t stack = 0) {
    const wire::AllocRecord r{static_cast<uint8_t>(wire::Kind::Alloc), stack, time, addr, size};
    put(&r, sizeof r);
    return *this;
  }
  Chunk& free(uint64_t time, uint64_t addr) {
    const wire::FreeRecord r{static_cast<uint8_t>(wire::Kind::Free), time, addr, 0};
    put(&r, sizeof r);
    return *this;
  }
  Chunk& end() {  // the thread's last chunk (the shim's, at thread exit)
    const wire::Record r{static_cast<uint8_t>(wire::Kind::End), {}, 0, 0, 0, 0};
    put(&r, sizeof r);
    return *this;
  }
  void send() const {
    const wire::ChunkHeader h{wire::kMagic, pid_, tid_, static_cast<uint32_t>(body_.size())};
    std::vector<char> all(sizeof h + body_.size());
    std::memcpy(all.data(), &h, sizeof h);
    if (!body_.empty()) std::memcpy(all.data() + sizeof h, body_.data(), body_.size());  // (a hello has none)
    const int fd = std::atoi(std::getenv(wire::kFdEnv));
    REQUIRE(write(fd, all.data(), all.size()) == static_cast<ssize_t>(all.size()));
  }

 private:
  void put(const void* p, size_t n) {
    const auto* c = static_cast<const char*>(p);
    body_.insert(body_.end(), c, c + n);
  }
  uint32_t pid_, tid_;
  std::vector<char> body_;
};

std::unique_ptr<HeapSource> start_full() {
  Options o;
  o.mode = Mode::Full;
  o.shim_path = "/dev/null";  // nothing is launched: only the pipe and the threads are wanted
  auto s = HeapSource::start(o);
  REQUIRE(s);
  return std::move(*s);
}

int64_t net_bytes(const model::Profile& prof) {
  int64_t n = 0;
  for (const model::Process& p : prof.processes)
    for (const model::Thread& t : p.threads)
      for (const model::Allocation& a : t.allocations) n += a.bytes;
  return n;
}

TEST_CASE("heap worker: a thread's events are folded while the program runs, exactly", "[heap]") {
  auto source = start_full();
  Chunk(10, 10)
      .stack(0, {0x401000, 0x402000})
      .alloc(1000, 0x1000, 100)
      .alloc(2000, 0x2000, 50)
      .free(3000, 0x1000)
      .send();
  Chunk(10, 10).alloc(4000, 0x3000, 10).free(5000, 0x3000).send();
  // All five are folded before finish() is called: it has only the model left to fill.
  REQUIRE(source->wait_folded(5, 20s));
  model::Profile prof;
  const Summary sum = source->finish(prof);
  CHECK(sum.events == 5);
  CHECK(sum.folded_while_running == 5);
  CHECK_FALSE(sum.refolded);
  REQUIRE(prof.meta.heap);
  CHECK(prof.meta.heap->peak_bytes == 150);
  CHECK(prof.meta.heap->peak_time_ns == 2000);
  CHECK(prof.meta.heap->temporary == 1);
  CHECK(net_bytes(prof) == 50);  // the block at 0x2000 is still allocated
}

TEST_CASE("heap worker: a thread's events that arrive after later ones were folded are folded again, sorted",
          "[heap]") {
  auto source = start_full();
  Chunk(10, 10).stack(0, {0x401000}).alloc(1000, 0x1000, 100).alloc(5000, 0x2000, 30).send();
  REQUIRE(source->wait_folded(2, 20s));
  // Another thread's first chunk, sent late: it freed the first block at 3000, before the second allocation.
  Chunk(10, 11).stack(0, {0x403000}).free(3000, 0x1000).alloc(4000, 0x4000, 7).send();
  model::Profile prof;
  const Summary sum = source->finish(prof);
  CHECK(sum.refolded);
  CHECK(sum.events == 4);
  REQUIRE(prof.meta.heap);
  // In time order the heap never held both blocks: folded in arrival order its peak would be 130 at 5000.
  CHECK(prof.meta.heap->peak_bytes == 100);
  CHECK(prof.meta.heap->peak_time_ns == 1000);
  CHECK(net_bytes(prof) == 37);
}

TEST_CASE("heap worker: threads whose events interleave are folded while running, in time order", "[heap]") {
  auto source = start_full();
  // As the shim sends them: each thread's first chunk (no records: times in ns) before its first event is
  // timed, so thread 11 is known before thread 10's event at 3000, later than thread 11's first, arrives.
  Chunk(10, 10).send();
  Chunk(10, 10).stack(0, {0x401000}).alloc(1000, 0x1000, 100).send();
  Chunk(10, 11).send();
  Chunk(10, 10).alloc(3000, 0x2000, 50).send();
  // Thread 11 allocates at 2000, frees thread 10's block at 2500 and exits: it holds nothing back after.
  Chunk(10, 11).stack(0, {0x403000}).alloc(2000, 0x3000, 70).free(2500, 0x1000).end().send();
  Chunk(10, 10).alloc(4000, 0x4000, 5).free(4500, 0x3000).send();
  // All six before finish(), though thread 11's last mark is 2500: it ended.
  REQUIRE(source->wait_folded(6, 20s));
  model::Profile prof;
  const Summary sum = source->finish(prof);
  CHECK(sum.events == 6);
  CHECK(sum.folded_while_running == 6);
  CHECK_FALSE(sum.refolded);
  REQUIRE(prof.meta.heap);
  // In time order: 100, 170 at 2000, 70, 120, 125, 55. Folded in arrival order the peak would be 220.
  CHECK(prof.meta.heap->peak_bytes == 170);
  CHECK(prof.meta.heap->peak_time_ns == 2000);
  CHECK(prof.meta.heap->temporary == 0);
  CHECK(net_bytes(prof) == 55);
}

}  // namespace
}  // namespace fxprof::heap
