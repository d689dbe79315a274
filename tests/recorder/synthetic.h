// Synthetic perf records for the recorder's tests: records built field by field, and a RecordSource that
// hands them to feed_round as a ring buffer would (no perf, no root, no timing).
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "recorder/host.h"
#include "recorder/records.h"

namespace fxprof::test {

// A record in 8-byte aligned storage, as the ring buffer holds it.
class Rec {
 public:
  Rec(uint32_t type, uint16_t misc = 0) : type_(type), misc_(misc) {}
  Rec& u64(uint64_t v) {
    put(&v, 8);
    return *this;
  }
  Rec& u32x2(uint32_t a, uint32_t b) { return u64(a | uint64_t{b} << 32); }
  Rec& str(const std::string& s) {  // NUL-terminated, padded to 8 bytes
    std::string p = s;
    p.resize((s.size() / 8 + 1) * 8, '\0');
    put(p.data(), p.size());
    return *this;
  }
  Rec& trailer(uint32_t pid, uint32_t tid, uint64_t time) { return u32x2(pid, tid).u64(time).u64(0); }
  // The record, its size cut to `size` when given.
  const perf_event_header* h(size_t size = 0) {
    words_.assign((body_.size() + 8 + 7) / 8, 0);
    perf_event_header hd{type_, misc_, static_cast<uint16_t>(size ? size : body_.size() + 8)};
    std::memcpy(words_.data(), &hd, sizeof hd);
    std::memcpy(reinterpret_cast<char*>(words_.data()) + 8, body_.data(), body_.size());
    return reinterpret_cast<const perf_event_header*>(words_.data());
  }

 private:
  void put(const void* p, size_t n) { body_.append(static_cast<const char*>(p), n); }
  uint32_t type_;
  uint16_t misc_;
  std::string body_;
  std::vector<uint64_t> words_;
};

// A sample's fixed start and callchain: ip, pid/tid, time, cpu, period, nr, the chain.
inline Rec sample_start(uint32_t pid, uint32_t tid, uint64_t time, const std::vector<uint64_t>& chain) {
  Rec r(PERF_RECORD_SAMPLE);
  r.u64(chain.empty() ? 0 : chain.back()).u32x2(pid, tid).u64(time).u64(0).u64(1000).u64(chain.size());
  for (uint64_t a : chain) r.u64(a);
  return r;
}

// A /proc that knows nothing (a process gone before it was asked about).
class NoProcfs final : public recorder::Procfs {
 public:
  Result<std::string> read(const std::string& path) override { return Err(path + ": none"); }
  std::vector<uint32_t> list(const std::string&) override { return {}; }
  std::vector<std::string> kernel_symbols(std::span<const uint64_t>) override { return {}; }
};

// Records handed out from memory, as one ring buffer would, each round once.
class Records final : public recorder::RecordSource {
 public:
  void add(Rec& r, bool switch_event = false) {
    const perf_event_header* h = r.h();
    std::vector<uint64_t> words((h->size + 7) / 8);
    std::memcpy(words.data(), h, h->size);
    records_.push_back({std::move(words), switch_event});
  }
  void collect(std::vector<recorder::RecordRef>& out, uint64_t) override {
    for (const auto& [words, sw] : records_) {
      auto* h = reinterpret_cast<const perf_event_header*>(words.data());
      out.push_back({recorder::record_time(h), h, sw});
    }
  }
  void release() override { records_.clear(); }

 private:
  struct Stored {
    std::vector<uint64_t> words;
    bool switch_event;
  };
  std::vector<Stored> records_;
};

}  // namespace fxprof::test
