#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>

#include "base/byte_reader.h"
#include "base/fd.h"
#include "heap/heap.h"
#include "heap/source_internal.h"
#include "heap/tables.h"
#include "heap/wire.h"

namespace fxprof::heap {

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Event {
  uint64_t time;
  uint64_t addr;
  int64_t size;
  uint32_t pid, tid;
  uint32_t stack;  // index into Impl::stacks
  wire::Kind kind;
  bool tsc;    // time is in TSC ticks until map_tsc()
  bool freed;  // finish(): an allocation whose free was seen; `addr` then holds the free's event index
};

struct ClockPair {
  uint64_t tsc, ns;
};

// Saves an environment variable and restores it on destruction.
class EnvOverride {
 public:
  EnvOverride(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~EnvOverride() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  EnvOverride(const EnvOverride&) = delete;
  EnvOverride& operator=(const EnvOverride&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

constexpr uint32_t kMaxStackIds = uint32_t{1} << 26;

struct HeapSource::Impl {
  Options opt;
  UniqueFd read_fd, write_fd, stop_fd;
  std::vector<std::unique_ptr<EnvOverride>> env;
  std::thread reader;
  std::atomic<uint64_t> deadline{0};  // set by finish(): stop reading then even without EOF

  // Filled by the reader thread; read by finish() after joining it.
  std::vector<Event, HugeAllocator<Event>> events;
  std::vector<std::vector<uint64_t>> stacks;  // leaf first
  std::unordered_map<uint64_t, std::vector<uint32_t>>
      stack_ids;  // (pid<<32|tid) -> [id] -> index (ids are dense)
  std::map<std::pair<uint64_t, uint32_t>, uint32_t>
      external_ids;  // (thread, id from kExternalStackIds) -> index
  uint64_t lost = 0;
  bool desync = false;
  std::vector<ClockPair> clocks;    // from every chunk with TSC times
  std::vector<std::byte> external;  // chunks of calls recorded outside the shim (add_external)

  void parse_chunk(const wire::ChunkHeader& h, const std::byte* p) {
    const uint64_t thread = uint64_t{h.pid} << 32 | h.tid;
    auto& ids = stack_ids[thread];
    const std::span<const std::byte> chunk(p, h.bytes);
    size_t off = 0;
    bool tsc = false;
    while (off < h.bytes) {
      switch (static_cast<wire::Kind>(p[off])) {
        case wire::Kind::Alloc: {
          wire::AllocRecord r;
          if (!read_at(chunk, off, r)) return;
          off += sizeof r;
          uint32_t s = r.stack < ids.size() ? ids[r.stack] : UINT32_MAX;
          if (r.stack >= wire::kExternalStackIds) {
            auto it = external_ids.find({thread, uint32_t{r.stack}});
            if (it != external_ids.end()) s = it->second;
          }
          events.push_back(
              {r.time, r.addr, static_cast<int64_t>(r.size), h.pid, h.tid, s, wire::Kind::Alloc, tsc, false});
          continue;
        }
        case wire::Kind::Free: {
          wire::FreeRecord r;
          if (!read_at(chunk, off, r)) return;
          off += sizeof r;
          events.push_back({r.time, r.addr, static_cast<int64_t>(r.temporary), h.pid, h.tid, UINT32_MAX,
                            wire::Kind::Free, tsc, false});  // size: the temporary flag
          continue;
        }
        default:
          break;
      }
      wire::Record r;
      if (!read_at(chunk, off, r)) return;
      off += sizeof r;
      switch (static_cast<wire::Kind>(r.kind)) {
        case wire::Kind::StackDef: {
          size_t n = std::min<uint64_t>(r.addr, wire::kMaxFrames);
          if (off + n * 8 > h.bytes) return;
          std::vector<uint64_t> frames(n);
          std::memcpy(frames.data(), p + off, n * 8);
          off += n * 8;
          if (r.stack >= wire::kExternalStackIds) {
            external_ids[{thread, r.stack}] = static_cast<uint32_t>(stacks.size());
          } else if (r.stack < kMaxStackIds) {  // the shim's (it counts from 0 per thread); others ignored
            if (r.stack >= ids.size()) ids.resize(size_t{r.stack} + 1, UINT32_MAX);
            ids[r.stack] = static_cast<uint32_t>(stacks.size());
          } else {
            break;
          }
          stacks.push_back(std::move(frames));
          break;
        }
        case wire::Kind::Lost:
          lost += r.size;
          break;
        case wire::Kind::Clock:
          tsc = true;
          clocks.push_back({r.addr, r.time});
          break;
        default:
          return;
      }
    }
  }

  // The stream as read, parsed after recording. The reader does nothing else while the program runs (one
  // copy per byte, into a mapping that grows by mremap and fills with one fault per 2 MiB), so that it keeps
  // up: parsing there, into a growing event list, cost ~450 ns of CPU per event in relocations and 4 KiB page
  // faults, and a program in --heap=full spent 70% of its time blocked on the full pipe.
  Mapping stream;
  size_t used = 0;        // bytes read into stream
  size_t scanned = 0;     // of which whole chunks
  size_t pipe_bytes = 0;  // the pipe's capacity

  void run() {
    for (;;) {
      if (stream.size() - used < 16 * wire::kChunkMax) {
        if (!grow_anonymous(stream, std::max<size_t>(4 * kHugePageBytes, 2 * stream.size()))) {
          desync = true;  // out of memory: stop reading (the program then waits on the pipe until the end)
          break;
        }
      }
      auto* base = static_cast<std::byte*>(stream.data());
      ssize_t n = read(read_fd.get(), base + used, stream.size() - used);
      if (n > 0) {
        used += static_cast<size_t>(n);
        while (used - scanned >= sizeof(wire::ChunkHeader)) {
          wire::ChunkHeader h;
          std::memcpy(&h, base + scanned, sizeof h);
          if (h.magic != wire::kMagic || h.bytes > wire::kChunkMax) {
            desync = true;  // cannot happen with atomic chunk writes; never misread what follows
            return;
          }
          if (used - scanned < sizeof h + h.bytes) break;
          scanned += sizeof h + h.bytes;
        }
        // A read that found the pipe nearly empty: let chunks gather for 1 ms (a 1 MiB pipe holds ~12 ms of
        // python's stream) rather than wake for each 4 KiB one, switching the CPU with the program each time.
        if (pipe_bytes >= (512 << 10) && static_cast<size_t>(n) < (64 << 10)) {
          pollfd stop{stop_fd.get(), POLLIN, 0};
          poll(&stop, 1, 1);
        }
        continue;
      }
      if (n == 0) return;  // every writer is gone
      if (n < 0 && errno != EAGAIN && errno != EINTR) return;
      uint64_t d = deadline.load();
      if (d != 0 && now_ns() > d) return;  // a process that outlives the recording still holds the pipe
      pollfd fds[2] = {{read_fd.get(), POLLIN, 0}, {stop_fd.get(), POLLIN, 0}};
      poll(fds, 2, 50);
    }
  }

  // After the reader is done: the whole chunks into events and stacks.
  void parse_all() {
    events.reserve(scanned / sizeof(wire::FreeRecord));
    auto* base = static_cast<const std::byte*>(stream.data());
    size_t pos = 0, released = 0;
    const std::span<const std::byte> chunks(base, scanned);
    wire::ChunkHeader h;
    while (read_at(chunks, pos, h)) {
      parse_chunk(h, base + pos + sizeof h);
      pos += sizeof h + h.bytes;
      // The stream's pages go back as they are parsed: the events (40 bytes each) and the stream (32) were
      // both held, 760 MB for python's 10.4M events.
      if (pos - released >= 4 * kHugePageBytes) {
        const size_t upto = pos / kHugePageBytes * kHugePageBytes;
        madvise(const_cast<std::byte*>(base) + released, upto - released, MADV_DONTNEED);
        released = upto;
      }
    }
    stream = Mapping();
    used = scanned = 0;
    for (size_t at = 0; at + sizeof(wire::ChunkHeader) <= external.size();) {
      wire::ChunkHeader h;
      std::memcpy(&h, external.data() + at, sizeof h);
      parse_chunk(h, external.data() + at + sizeof h);
      at += sizeof h + h.bytes;
    }
    external = {};
    map_tsc();
  }

  // TSC times to CLOCK_MONOTONIC: piecewise linear through the clock pairs of all chunks, thinned to pairs
  // at least 1 ms apart (a pair's two reads are ~100 ns apart, so a slope over 1 ms is right to 1e-4) and
  // increasing in both clocks, so the mapping increases and keeps the events' order; outside the pairs the
  // nearest segment's slope continues.
  void map_tsc() {
    if (clocks.empty()) return;
    std::sort(clocks.begin(), clocks.end(),
              [](const ClockPair& a, const ClockPair& b) { return a.tsc < b.tsc; });
    std::vector<ClockPair> knots{clocks.front()};
    for (size_t i = 1; i < clocks.size(); ++i) {
      const ClockPair& c = clocks[i];
      const ClockPair& k = knots.back();
      if (c.tsc > k.tsc && c.ns > k.ns && (c.ns - k.ns >= 1000000 || i + 1 == clocks.size()))
        knots.push_back(c);
    }
    auto map = [&](uint64_t t) -> uint64_t {
      if (knots.size() == 1) return knots[0].ns;  // one instant: nothing to scale by
      auto it = std::upper_bound(knots.begin(), knots.end(), t,
                                 [](uint64_t v, const ClockPair& k) { return v < k.tsc; });
      size_t hi = std::clamp<size_t>(static_cast<size_t>(it - knots.begin()), 1, knots.size() - 1);
      const ClockPair& a = knots[hi - 1];
      const ClockPair& b = knots[hi];
      const double slope = double(b.ns - a.ns) / double(b.tsc - a.tsc);
      const double ns = double(a.ns) + (double(t) - double(a.tsc)) * slope;
      return ns <= 0 ? 0 : static_cast<uint64_t>(ns);
    };
    for (Event& e : events)
      if (e.tsc) {
        e.time = map(e.time);
        e.tsc = false;
      }
    clocks.clear();
  }
};

HeapSource::HeapSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HeapSource::~HeapSource() {
  if (impl_ && impl_->reader.joinable()) {
    impl_->deadline.store(1);
    impl_->reader.join();
  }
}

Result<std::unique_ptr<HeapSource>> HeapSource::start(const Options& options) {
  auto impl = std::make_unique<Impl>();
  impl->opt = options;
  std::string shim = options.shim_path;
  if (shim.empty()) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return Err("cannot find fxprof's own path: " + errno_text(errno));
    std::string dir(exe, static_cast<size_t>(n));
    dir.resize(dir.rfind('/'));
    shim = dir + "/libfxprof_heap.so";
  }
  if (access(shim.c_str(), R_OK) != 0)
    return Err("--heap needs the heap library " + shim +
               " (built and installed next to fxprof): " + errno_text(errno));
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Err("cannot create the heap pipe: " + errno_text(errno));
  impl->read_fd.reset(fds[0]);
  impl->write_fd.reset(fds[1]);
  // The write end goes to the program; a larger pipe lets it run ahead of the reader by 1 MiB.
  fcntl(fds[1], F_SETFD, 0);
  fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
  impl->pipe_bytes = static_cast<size_t>(std::max(0, fcntl(fds[0], F_GETPIPE_SZ)));
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  impl->stop_fd.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));

  std::string preload = shim;
  if (const char* old = getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  impl->env.push_back(std::make_unique<EnvOverride>("LD_PRELOAD", preload));
  impl->env.push_back(std::make_unique<EnvOverride>(wire::kFdEnv, std::to_string(fds[1])));
  impl->env.push_back(
      std::make_unique<EnvOverride>(wire::kModeEnv, options.mode == Mode::Full ? "full" : "sampled"));
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.0f", options.rate_bytes);
  impl->env.push_back(std::make_unique<EnvOverride>(wire::kRateEnv, rate));
  Impl* raw = impl.get();
  impl->reader = std::thread([raw] { raw->run(); });
  return std::unique_ptr<HeapSource>(new HeapSource(std::move(impl)));
}

using internal::Counters;
using internal::ThreadCache;

void HeapSource::add_external(std::span<const ExternalCall> calls) {
  std::vector<std::byte> chunks = external_chunks(calls, impl_->opt.mode, impl_->opt.rate_bytes);
  impl_->external.insert(impl_->external.end(), chunks.begin(), chunks.end());
}

Summary HeapSource::finish(model::Profile& prof) {
  Impl& im = *impl_;
  im.env.clear();       // nothing fxprof starts from now on is recorded
  im.write_fd.reset();  // our copy: EOF comes when the program and its children are gone
  im.deadline.store(now_ns() + 1000000000ull);
  if (im.reader.joinable()) im.reader.join();
  im.parse_all();

  Summary sum;
  sum.mode = im.opt.mode;
  sum.lost_chunks = im.lost;
  sum.events = im.events.size();
  auto& ev = im.events;
  // One thread's events are in order already (its chunks are): only several threads need the sort.
  auto by_time = [](const Event& a, const Event& b) { return a.time < b.time; };
  merge_runs(ev, by_time);

  model::Meta::HeapStats stats;
  stats.sampled = im.opt.mode == Mode::Sampled;
  stats.rate_bytes = stats.sampled ? im.opt.rate_bytes : 0;
  Counters counters(prof);
  ThreadCache where(prof);
  // Pass 1, in time order: match frees to their blocks (an allocation event then holds its process and
  // thread indices and the index of its free), the Memory counters, the peak, temporaries, sizes.
  LiveBlocks live;
  // Sampled mode: a block of s bytes was taken with probability p = 1 - exp(-s/rate) and stands for s/p
  // bytes and 1/p blocks (Horvitz-Thompson: unbiased for every total). The records carry s; weighed here.
  const bool sampled = stats.sampled;
  const double rate = im.opt.rate_bytes;
  auto chance = [&](int64_t s) { return -std::expm1(-static_cast<double>(std::max<int64_t>(s, 1)) / rate); };
  auto bytes = [&](const Event& e) {
    return sampled ? std::llround(static_cast<double>(std::max<int64_t>(e.size, 1)) / chance(e.size))
                   : e.size;
  };
  auto end_block = [&](Event& a, uint32_t at, uint64_t t) {
    a.freed = true;
    a.addr = at;
    counters.add(a.pid, t, -bytes(a));
  };
  // The peak of a noisy in-use estimate is the highest of its noise too: the plain maximum was 17% high on a
  // plateau whose blocks turn over (tests/heap/sampling_test.cpp). Cross-fitted instead: the samples split at
  // random into two halves (each weighed twice), the time of one half's highest point is read off the other
  // half, which did not choose it, and the two readings are averaged. That leans low only by how far the
  // chosen times are from the true peak.
  int64_t total = 0, half[2] = {0, 0}, half_high[2] = {0, 0}, cross[2] = {0, 0};
  int64_t live_blocks = 0, live_at_peak = 0;
  // By the allocation's place in the events (a hash of it): the same split for the same samples.
  auto half_of = [&](const Event& e) {
    uint64_t h = static_cast<uint64_t>(&e - ev.data()) + 0x9E3779B97F4A7C15ull;  // splitmix64: no pattern
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    return static_cast<int>((h ^ (h >> 31)) & 1);
  };
  auto move_halves = [&](const Event& a, int64_t d) {
    const int k = half_of(a);
    half[k] += 2 * d;
    if (half[k] > half_high[k]) {
      half_high[k] = half[k];
      cross[k] = half[1 - k];
    }
  };
  double temporary = 0, temporary_var = 0;
  size_t peak_index = SIZE_MAX;
  std::array<model::Meta::HeapStats::SizeBin, 65> bins{};
  std::array<double, 65> bin_counts{};
  constexpr uint32_t kAhead = 16;
  for (uint32_t i = 0; i < ev.size(); ++i) {
    if (i + kAhead < ev.size()) live.prefetch(ev[i + kAhead].pid, ev[i + kAhead].addr);
    Event& e = ev[i];
    if (e.kind == wire::Kind::Alloc) {
      auto [pi, ti] = where.get(e.pid, e.tid, e.time);
      if (auto [slot, fresh] = live.insert(e.pid, e.addr, i); !fresh) {  // its free was not seen (reentrant)
        Event& old = ev[live.event(slot)];
        total -= bytes(old);
        move_halves(old, -bytes(old));
        end_block(old, i, e.time);
        --live_blocks;
        live.event(slot) = i;
      }
      where.entry(e.pid, e.tid).last_alloc = e.addr;
      e.pid = pi;
      e.tid = ti;
      const int64_t w = bytes(e);
      counters.add(pi, e.time, w);
      ++live_blocks;
      total += w;
      move_halves(e, w);
      if (total > stats.peak_bytes) {
        stats.peak_bytes = total;
        stats.peak_time_ns = e.time;
        peak_index = i;
        live_at_peak = live_blocks;
      }
      const size_t b =
          static_cast<size_t>(std::bit_width(static_cast<uint64_t>(std::max<int64_t>(e.size, 1) - 1)));
      bin_counts[b] += sampled ? 1 / chance(e.size) : 1;
      bins[b].bytes += static_cast<uint64_t>(w);
    } else if (e.kind == wire::Kind::Free) {
      const size_t slot = live.find(e.pid, e.addr);
      if (slot == LiveBlocks::kNone) continue;  // not seen allocated (before the shim, or unsampled)
      Event& a = ev[live.event(slot)];
      total -= bytes(a);
      move_halves(a, -bytes(a));
      // Temporary: the thread's next event after allocating the block is its free (as heaptrack counts). In
      // sampled mode the shim, which sees the allocations between, says so in the free.
      uint64_t& last = where.entry(e.pid, e.tid).last_alloc;
      if (sampled ? e.size == 1 : last == e.addr) {
        const double c = sampled ? 1 / chance(a.size) : 1;
        temporary += c;
        temporary_var += c * (c - 1);
      }
      last = 0;
      end_block(a, i, e.time);
      live.erase(slot);
      --live_blocks;
    }
  }
  stats.temporary = static_cast<uint64_t>(std::llround(temporary));
  stats.temporary_error = static_cast<uint64_t>(std::llround(std::sqrt(temporary_var)));
  // With few samples held at the peak the halves are too thin (one can hold none then): sqlite3's 5 MB peak
  // (~10 samples) came out 20% low and once 0, where the plain maximum was 12% high. Below 64 the maximum.
  if (sampled && live_at_peak >= 64) stats.peak_bytes = (cross[0] + cross[1]) / 2;
  for (size_t b = 0; b < bins.size(); ++b)
    if (bin_counts[b] > 0)
      bins[b].count = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(bin_counts[b])));
  if (sampled)  // the rows carry weighed bytes from here on
    for (Event& e : ev)
      if (e.kind == wire::Kind::Alloc) e.size = bytes(e);
  counters.finish();
  for (size_t b = 0; b < bins.size(); ++b) {
    if (bins[b].count == 0) continue;
    bins[b].max_size = b == 0 ? 1 : b >= 64 ? UINT64_MAX : uint64_t{1} << b;
    stats.sizes.push_back(bins[b]);
  }
  prof.meta.heap = std::move(stats);
  live = LiveBlocks();

  // Pass 2: the rows. Blocks of one thread and stack allocated in one time bucket and freed in one (or not
  // freed) share a row and its free row (model::Allocation), split by whether they were live at the peak:
  // every per-stack sum the front end and `report --heap` take stays exact, and a profile of millions of
  // allocations keeps a few rows per call site and bucket. 128 buckets over the recording (at least 1 ms).
  // Model stacks, interned as the groups come (in time order): each starts from the longest root-side prefix
  // it shares with the previous one, so a deep stack costs the frames it does not share (interning every
  // frame of every stack was 17% of cc1plus's recording).
  std::vector<model::StackId> model_stack(im.stacks.size(), model::kNoStack);
  std::vector<uint64_t> prev_addrs;      // the previous stack, root first
  std::vector<model::StackId> prev_ids;  // its prefixes
  auto stack_of = [&](uint32_t s) {
    if (s == UINT32_MAX) return model::kNoStack;
    if (model_stack[s] != model::kNoStack) return model_stack[s];
    const auto& f = im.stacks[s];  // leaf first
    const size_t n = f.size();
    size_t k = 0;
    while (k < n && k < prev_addrs.size() && prev_addrs[k] == f[n - 1 - k]) ++k;
    prev_addrs.resize(k);
    prev_ids.resize(k);
    model::StackId id = k ? prev_ids[k - 1] : model::kNoStack;
    for (size_t d = k; d < n; ++d) {
      id = prof.stacks.intern(id, prof.native_frame(f[n - 1 - d]));
      prev_addrs.push_back(f[n - 1 - d]);
      prev_ids.push_back(id);
    }
    model_stack[s] = id;
    return id;
  };
  const uint64_t t0 = ev.empty() ? 0 : ev.front().time;
  const uint64_t width = std::max<uint64_t>(1000000, ev.empty() ? 1 : (ev.back().time - t0) / 128 + 1);
  struct Key {
    uint32_t proc, thread, stack, born, died;
    bool peak;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept {
      uint64_t h = (uint64_t{k.proc} << 40) ^ (uint64_t{k.thread} << 20) ^ k.stack;
      h = (h ^ (uint64_t{k.born} << 32 | k.died)) * 0x9E3779B97F4A7C15ull;
      return static_cast<size_t>(h ^ (h >> 29) ^ k.peak);
    }
  };
  struct Group {
    Key key;
    uint64_t first = 0, last_free = 0;
    int64_t bytes = 0;
    uint32_t count = 0;
  };
  // Key -> the group being filled: open addressing over group indices, doubled at half full (a node-based
  // map's allocation and cache miss per allocation event was a tenth of finish() on python).
  class GroupIndex {
   public:
    enum : uint32_t { kEmpty = UINT32_MAX };
    // The slot holding `k`'s group, or the empty slot where it goes.
    uint32_t& find(const Key& k, const std::vector<Group>& groups) {
      for (size_t i = home(k);; i = (i + 1) & (slots_.size() - 1))
        if (slots_[i] == kEmpty || groups[slots_[i]].key == k) return slots_[i];
    }
    // A key was just given a slot: grow if the table is half full.
    void added(const std::vector<Group>& groups) {
      if (++used_ * 2 <= slots_.size()) return;
      std::vector<uint32_t> old(slots_.size() * 2, kEmpty);
      old.swap(slots_);
      for (uint32_t g : old)
        if (g != kEmpty) find(groups[g].key, groups) = g;
    }

   private:
    size_t home(const Key& k) const {
      return static_cast<size_t>((KeyHash()(k) * 0x9E3779B97F4A7C15ull) >> 20) & (slots_.size() - 1);
    }
    std::vector<uint32_t> slots_ = std::vector<uint32_t>(size_t{1} << 12, kEmpty);
    size_t used_ = 0;
  };
  GroupIndex index;
  std::vector<Group> groups;
  for (uint32_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    if (e.kind != wire::Kind::Alloc) continue;
    const uint64_t died_at = e.freed ? ev[e.addr].time : 0;
    const bool peak = peak_index != SIZE_MAX && i <= peak_index && (!e.freed || e.addr > peak_index);
    Key k{e.pid,
          e.tid,
          e.stack,
          static_cast<uint32_t>((e.time - t0) / width),
          e.freed ? static_cast<uint32_t>((died_at - t0) / width) : UINT32_MAX,
          peak};
    uint32_t& slot = index.find(k, groups);
    uint32_t gi = slot;
    if (gi == GroupIndex::kEmpty || groups[gi].count == UINT32_MAX) {  // a new group (or a full one's next)
      const bool fresh = gi == GroupIndex::kEmpty;
      gi = slot = static_cast<uint32_t>(groups.size());
      groups.push_back({k, e.time, 0, 0, 0});
      if (fresh) index.added(groups);  // may move the slots: `slot` is not used after this
    }
    Group& g = groups[gi];
    g.last_free = std::max(g.last_free, died_at);
    g.bytes += e.size;
    ++g.count;
  }
  index = GroupIndex();
  ev.clear();
  ev.shrink_to_fit();
  std::vector<std::pair<uint32_t, uint32_t>> touched;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const Group& g = groups[gi];
    model::Thread& th = prof.processes[g.key.proc].threads[g.key.thread];
    if (th.allocations.empty()) touched.push_back({g.key.proc, g.key.thread});
    const model::StackId stack = stack_of(g.key.stack);
    const uint64_t tag = gi + 1;  // the row's "address": pairs it with its free row, nothing else
    th.allocations.push_back({g.first, stack, g.bytes, tag, th.tid, g.count, g.key.peak});
    if (g.key.died != UINT32_MAX)
      th.allocations.push_back({g.last_free, stack, -g.bytes, tag, th.tid, g.count, false});
  }
  for (auto [pi, ti] : touched) {
    auto& rows = prof.processes[pi].threads[ti].allocations;
    std::stable_sort(rows.begin(), rows.end(), [](const model::Allocation& a, const model::Allocation& b) {
      return a.time_ns < b.time_ns;
    });
  }
  return sum;
}

}  // namespace fxprof::heap
