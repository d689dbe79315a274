// The eBPF ring buffer reader (recorder/bpf_ring.h): the kernel's record protocol on a synthetic ring, and a
// real ring buffer map mapped once (its RSS is the ring's size, not twice it as with libbpf's reader).
#include "recorder/bpf_ring.h"

#include <bpf/bpf.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using fxprof::recorder::BpfRing;
using fxprof::recorder::consume_ring;
using fxprof::recorder::RingView;

namespace {

constexpr uint32_t kBusy = 1u << 31, kDiscard = 1u << 30;

// Writes a record's header (`len` with `bits`) at position `pos` and its bytes (0x10 + i) after it, wrapping.
void put(std::vector<std::byte>& data, uint64_t pos, uint32_t len, uint32_t bits = 0) {
  const size_t mask = data.size() - 1;
  const uint32_t word = len | bits;
  std::memcpy(data.data() + (pos & mask), &word, 4);
  for (uint32_t i = 0; i < len; ++i) data[(pos + 8 + i) & mask] = static_cast<std::byte>(0x10 + i);
}

std::vector<std::vector<int>> drain(const RingView& v, std::vector<std::byte>& scratch) {
  std::vector<std::vector<int>> got;
  consume_ring(v, scratch, [&](std::span<const std::byte> r) {
    std::vector<int> bytes;
    for (std::byte b : r) bytes.push_back(static_cast<int>(b));
    got.push_back(bytes);
  });
  return got;
}

long rss_kb() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.starts_with("VmRSS:")) return std::stol(line.substr(6));
  return -1;
}

}  // namespace

TEST_CASE("bpf ring: records in order, discarded ones skipped, a wrapping one whole, a busy one waits",
          "[recorder][waker]") {
  std::vector<std::byte> data(128);
  uint64_t consumer = 80, producer = 0;
  put(data, 80, 3);            // bytes 88..90 -> next at 96
  put(data, 96, 4, kDiscard);  // skipped -> next at 112
  put(data, 112, 30);          // bytes 120..127 then 0..21: wraps -> next at 152
  put(data, 152, 10);          // header at 24, bytes 32..41 -> next at 176
  producer = 176;
  const RingView v{&consumer, &producer, data};
  std::vector<std::byte> scratch;
  const auto got = drain(v, scratch);
  REQUIRE(got.size() == 3);
  CHECK(got[0] == std::vector<int>{0x10, 0x11, 0x12});
  REQUIRE(got[1].size() == 30);  // the wrapping record, copied whole
  for (int i = 0; i < 30; ++i) CHECK(got[1][static_cast<size_t>(i)] == 0x10 + i);
  CHECK(got[2].size() == 10);
  CHECK(consumer == 176);

  // A record still being written stops the reader there; once committed it is read.
  put(data, 176, 5, kBusy);
  producer = 192;
  CHECK(drain(v, scratch).empty());
  CHECK(consumer == 176);
  put(data, 176, 5);
  CHECK(drain(v, scratch).size() == 1);
  CHECK(consumer == 192);
}

TEST_CASE("bpf ring: a ring buffer map is mapped once (RSS grows by its size, not twice it)",
          "[recorder][waker]") {
  REQUIRE(geteuid() == 0);  // the suite runs as root: BPF maps can be created
  constexpr size_t kSize = size_t{4} << 20;
  const int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "fxprof_test", 0, 0, kSize, nullptr);
  REQUIRE(fd >= 0);
  const long before = rss_kb();
  auto ring = BpfRing::open(fd, kSize);
  REQUIRE(ring.ok());
  const long grown = rss_kb() - before;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  CHECK(ring->mapped_bytes() == kSize + 2 * page);
  CHECK(grown >= static_cast<long>(kSize / 1024));
  CHECK(grown < static_cast<long>(kSize / 1024 * 5 / 4));  // libbpf's ring_buffer: 2 x kSize
  CHECK_FALSE(ring->wait(0));                              // nothing written
  CHECK(ring->consume([](std::span<const std::byte>) {}) == 0);
  CHECK(ring->high_water() == 0);
  CHECK(ring->size() == kSize);
  close(fd);

  CHECK(BpfRing::open(fd, 3 << 20).error() ==
        "the BPF ring buffer's size 3145728 is not a power-of-two number of pages");
}
