// Calls recorded outside the shim, as the shim's stream (heap/source_internal.h, external_chunks).
#include <cmath>
#include <cstring>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "heap/source_internal.h"
#include "heap/wire.h"

namespace fxprof::heap {

std::vector<std::byte> external_chunks(std::span<const ExternalCall> calls, Mode mode, double rate) {
  struct ThreadState {
    int64_t countdown = 0;
    uint64_t allocations = 0;   // seen so far
    uint64_t last_sampled = 0;  // the thread's last sampled block
    uint64_t allocations_then = 0;
    uint64_t frees = 0, frees_then = 0;
    std::unordered_map<uint64_t, uint32_t> stacks;  // a stack's hash -> its id
  };
  std::unordered_map<uint64_t, ThreadState> threads;                   // pid << 32 | tid
  std::unordered_map<uint32_t, std::unordered_set<uint64_t>> sampled;  // pid -> live sampled blocks
  std::mt19937_64 rng(0x9E3779B97F4A7C15ull);
  std::exponential_distribution<double> draw(1.0 / rate);
  auto next = [&] { return std::max<int64_t>(1, std::llround(draw(rng))); };
  std::vector<std::byte> out;
  // One chunk per call: [header][stack definition + frames][record]. Ids from wire::kExternalStackIds up,
  // apart from the shim's own (which count from 0 on the same thread).
  auto emit = [&](const ExternalCall& c, const void* r, size_t r_size, uint32_t stack,
                  const std::vector<uint64_t>* frames) {
    const size_t n = frames ? std::min<size_t>(frames->size(), wire::kMaxFrames) : 0;
    const uint32_t bytes =
        static_cast<uint32_t>(r_size + (frames ? sizeof(wire::Record) + n * sizeof(uint64_t) : 0));
    const wire::ChunkHeader h{wire::kMagic, c.pid, c.tid, bytes};
    const size_t at = out.size();
    out.resize(at + sizeof h + bytes);
    std::byte* p = out.data() + at;
    std::memcpy(p, &h, sizeof h);
    p += sizeof h;
    if (frames) {
      const wire::Record def{static_cast<uint8_t>(wire::Kind::StackDef), {}, stack, 0, n, 0};
      std::memcpy(p, &def, sizeof def);
      p += sizeof def;
      std::memcpy(p, frames->data(), n * sizeof(uint64_t));
      p += n * sizeof(uint64_t);
    }
    std::memcpy(p, r, r_size);
  };
  for (const ExternalCall& c : calls) {
    ThreadState& t = threads[uint64_t{c.pid} << 32 | c.tid];
    if (c.alloc) {
      ++t.allocations;
      if (mode == Mode::Sampled) {
        if (t.countdown == 0) t.countdown = next();  // the thread's first call
        t.countdown -= static_cast<int64_t>(c.size);
        if (t.countdown > 0) continue;
        t.countdown = next();
        sampled[c.pid].insert(c.addr);
        t.last_sampled = c.addr;
        t.allocations_then = t.allocations;
        t.frees_then = t.frees;
      }
      uint64_t hash = 1469598103934665603ull;
      for (uint64_t f : c.stack) hash = (hash ^ f) * 1099511628211ull;
      auto [it, fresh] =
          t.stacks.try_emplace(hash, wire::kExternalStackIds + static_cast<uint32_t>(t.stacks.size()));
      const wire::AllocRecord r{static_cast<uint8_t>(wire::Kind::Alloc), it->second, c.time, c.addr, c.size};
      emit(c, &r, sizeof r, it->second, fresh ? &c.stack : nullptr);
    } else {
      bool temporary = false;
      ++t.frees;
      if (mode == Mode::Sampled) {
        if (!sampled[c.pid].erase(c.addr)) continue;
        temporary =
            t.last_sampled == c.addr && t.allocations == t.allocations_then && t.frees == t.frees_then + 1;
        if (t.last_sampled == c.addr) t.last_sampled = 0;
      }
      const wire::FreeRecord r{static_cast<uint8_t>(wire::Kind::Free), c.time, c.addr, temporary};
      emit(c, &r, sizeof r, 0, nullptr);
    }
  }
  return out;
}

}  // namespace fxprof::heap
