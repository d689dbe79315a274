#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "base/byte_reader.h"
#include "base/fd.h"
#include "heap/heap.h"
#include "heap/source_fold.h"
#include "heap/source_internal.h"
#include "heap/stream_ends.h"
#include "heap/tables.h"
#include "heap/wire.h"

namespace fxprof::heap {

namespace {

using internal::FoldEvent;
using internal::TimeMap;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t now_tsc() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return 0;
#endif
}

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

constexpr uint32_t kMaxStackIds = uint32_t{1} << 26;
constexpr uint64_t kNever = UINT64_MAX;

// The stream's records, decoded: stack definitions per thread (ids scoped to (pid, tid)), process instances
// (a pid's stack ids starting again at 0 on its main thread: it exec'd), lost counts.
struct Parser {
  StackTrie stacks;  // every stack defined (a stack id's value: its node)
  std::unordered_map<uint64_t, std::vector<uint32_t>> stack_ids;   // (pid<<32|tid) -> [id] -> index (dense)
  std::unordered_map<uint64_t, std::vector<uint32_t>> paths;       // (pid<<32|tid) -> its last definition
  std::map<std::pair<uint64_t, uint32_t>, uint32_t> external_ids;  // (thread, id from kExternalStackIds)
  std::unordered_map<uint32_t, uint32_t> inst_of_pid;
  std::vector<uint32_t> inst_pid;
  uint64_t lost = 0;

  uint32_t inst(uint32_t pid) {
    auto [it, fresh] = inst_of_pid.try_emplace(pid, static_cast<uint32_t>(inst_pid.size()));
    if (fresh) inst_pid.push_back(pid);
    return it->second;
  }
  // The thread's stack ids and instance, remembered for the thread asked for last (records come in runs of
  // one thread): two hash lookups per event were a tenth of the fold.
  struct Thread {
    std::vector<uint32_t>* ids;
    uint32_t inst;
  };
  Thread& thread(uint32_t pid, uint32_t tid) {
    const uint64_t key = uint64_t{pid} << 32 | tid;
    if (key != last_key || inst_pid.size() != last_insts) {
      last_key = key;
      last = {&stack_ids[key], inst(pid)};
      last_insts = inst_pid.size();
    }
    return last;
  }
  uint64_t last_key = UINT64_MAX;
  size_t last_insts = 0;
  Thread last{nullptr, 0};

  // The record at `off` of a chunk: an allocation or free into `e` (true), or a stack definition or lost
  // count applied, a clock pair added to `clocks` when given (false). `size`: the record's, 0 when it is
  // cut short or unknown (the chunk's rest is then skipped).
  bool record(const wire::ChunkHeader& h, std::span<const std::byte> chunk, size_t off, FoldEvent& e,
              size_t& size, std::vector<TimeMap::Pair>* clocks) {
    size = 0;
    const uint64_t thread = uint64_t{h.pid} << 32 | h.tid;
    switch (static_cast<wire::Kind>(chunk[off])) {
      case wire::Kind::Alloc: {
        wire::AllocRecord r;
        if (!read_at(chunk, off, r)) return false;
        size = sizeof r;
        const Thread& t = this->thread(h.pid, h.tid);
        const auto& ids = *t.ids;
        uint32_t s = r.stack < ids.size() ? ids[r.stack] : UINT32_MAX;
        if (r.stack >= wire::kExternalStackIds) {
          auto it = external_ids.find({thread, uint32_t{r.stack}});
          if (it != external_ids.end()) s = it->second;
        }
        e = {r.time, r.addr, r.size, t.inst, h.tid, s, true, false};
        return true;
      }
      case wire::Kind::Free: {
        wire::FreeRecord r;
        if (!read_at(chunk, off, r)) return false;
        size = sizeof r;
        e = {r.time, r.addr, r.temporary, this->thread(h.pid, h.tid).inst, h.tid, UINT32_MAX, false, false};
        return true;
      }
      default:
        break;
    }
    wire::Record r;
    if (!read_at(chunk, off, r)) return false;
    switch (static_cast<wire::Kind>(r.kind)) {
      case wire::Kind::StackDef: {
        const size_t n = std::min<uint64_t>(r.addr, wire::kMaxFrames);
        if (off + sizeof r + n * 8 > chunk.size()) return false;
        size = sizeof r + n * 8;
        uint64_t frames[wire::kMaxFrames];
        std::memcpy(frames, chunk.data() + off + sizeof r, n * 8);
        const uint32_t node = stacks.intern({frames, n}, r.size, paths[thread]);
        if (node == StackTrie::kNone) return false;  // not a definition the shim makes: its uses stay unknown
        if (r.stack >= wire::kExternalStackIds) {
          external_ids[{thread, r.stack}] = node;
        } else if (r.stack < kMaxStackIds) {  // the shim's (it counts from 0 per thread); others ignored
          auto& ids = stack_ids[thread];
          if (r.stack == 0 && h.tid == h.pid && !ids.empty()) {  // the main thread starts again: an exec
            inst_of_pid[h.pid] = static_cast<uint32_t>(inst_pid.size());
            inst_pid.push_back(h.pid);
          }
          if (r.stack >= ids.size()) ids.resize(size_t{r.stack} + 1, UINT32_MAX);
          ids[r.stack] = node;
        } else {
          return false;
        }
        return false;
      }
      case wire::Kind::Lost:
        size = sizeof r;
        lost += r.size;
        return false;
      case wire::Kind::End:
        size = sizeof r;
        return false;
      case wire::Kind::Clock:
        size = sizeof r;
        if (clocks) clocks->push_back({r.addr, r.time});
        return false;
      default:
        return false;
    }
  }
};

}  // namespace

struct HeapSource::Impl {
  Options opt;
  UniqueFd read_fd, write_fd, stop_fd;
  std::vector<std::unique_ptr<EnvOverride>> env;
  std::thread reader, worker;
  std::atomic<uint64_t> deadline{0};  // set by finish(): stop reading then even without EOF
  std::vector<std::byte> external;    // chunks of calls recorded outside the shim (add_external)
  TimeMap::Pair start_clock{0, 0};    // (TSC, ns) when recording started: the TSC's rate

  // The stream as read: one mapping reserved once (never moved, so the worker reads it while the reader
  // fills it), whose pages are only touched, 2 MiB at a time, as the stream grows. The reader does nothing
  // else while the program runs (one copy per byte), so that it keeps up: a full pipe blocks the program.
  Mapping stream;
  size_t used = 0;     // bytes read into stream (reader)
  size_t scanned = 0;  // of which whole chunks (reader)
  size_t pipe_bytes = 0;
  bool desync = false;               // the reader stopped early (read by finish() after joining it)
  internal::StreamEnds ends;         // which processes said Bye (reader)
  std::atomic<size_t> published{0};  // whole chunks, for the worker
  std::atomic<uint32_t> signal{0};   // bumped when published or reader_done changes
  std::atomic<bool> reader_done{false}, abandon{false};
  std::atomic<uint64_t> folded{0};  // events the worker has folded
  std::mutex folded_mu;
  std::condition_variable folded_cv;

  // The worker: folds the events, in time order, while the program runs. Each thread's chunks come in its
  // order; across threads they are merged, an event folded once every thread seen that has not ended has
  // sent something later (its lane's mark). A thread is seen before any event later than its first: the
  // shim sends its first chunk before timing its first event (heap/wire.h). An event that still arrives
  // earlier than one already folded (a ns-timed free after its thread's end) cannot be folded in order:
  // the worker stops, and finish() folds the whole stream again, sorted (`broken`).
  struct Lane {
    uint32_t pid = 0, tid = 0;
    struct Chunk {
      size_t off;
      bool tsc;  // times in TSC ticks; else ns, converted through `base`
      TimeMap::Pair base;
    };
    std::deque<Chunk> chunks;  // whole chunks not folded yet
    size_t pos = 0;            // in the front chunk: the next record
    uint64_t mark = 0;         // the lane has sent everything before this time
    bool ended = false;        // its last chunk had an End record: it holds nothing back
    // Decoded ahead (up to a chunk's events), so that the fold can be asked to prefetch.
    std::vector<FoldEvent> ahead;
    size_t next = 0;
    bool has_head = false;
    FoldEvent head;
  };
  Parser parser;
  std::vector<Lane> lanes;
  std::unordered_map<uint64_t, uint32_t> lane_of;
  std::vector<TimeMap::Pair> clocks;  // from every chunk with TSC times
  std::optional<internal::Fold> fold;
  bool tsc_mode = false, broken = false;
  double ticks_per_ns = 1;
  TimeMap::Pair latest{0, 0};  // the latest clock pair seen

  const std::byte* base() const { return static_cast<const std::byte*>(stream.data()); }

  void run() {
    for (;;) {
      if (stream.size() - used < 16 * wire::kChunkMax) {
        desync = true;  // the reservation is full: stop reading (the program then waits until the end)
        break;
      }
      auto* p = static_cast<std::byte*>(stream.data());
      ssize_t n = read(read_fd.get(), p + used, stream.size() - used);
      if (n > 0) {
        used += static_cast<size_t>(n);
        while (used - scanned >= sizeof(wire::ChunkHeader)) {
          wire::ChunkHeader h;
          std::memcpy(&h, p + scanned, sizeof h);
          if (h.magic != wire::kMagic || h.bytes > wire::kChunkMax) {
            desync = true;  // cannot happen with atomic chunk writes; never misread what follows
            break;
          }
          if (used - scanned < sizeof h + h.bytes) break;
          ends.chunk(scanned, h, {p + scanned + sizeof h, h.bytes});
          scanned += sizeof h + h.bytes;
        }
        publish();
        if (desync) break;
        // A read that found the pipe nearly empty: let chunks gather for 1 ms (a 1 MiB pipe holds ~12 ms of
        // python's stream) rather than wake for each 4 KiB one, switching the CPU with the program each time.
        if (pipe_bytes >= (512 << 10) && static_cast<size_t>(n) < (64 << 10)) {
          pollfd stop{stop_fd.get(), POLLIN, 0};
          poll(&stop, 1, 1);
        }
        continue;
      }
      if (n == 0) break;  // every writer is gone
      if (n < 0 && errno != EAGAIN && errno != EINTR) break;
      uint64_t d = deadline.load();
      if (d != 0 && now_ns() > d) break;  // a process that outlives the recording still holds the pipe
      pollfd fds[2] = {{read_fd.get(), POLLIN, 0}, {stop_fd.get(), POLLIN, 0}};
      poll(fds, 2, 50);
    }
    reader_done.store(true, std::memory_order_release);
    signal.fetch_add(1, std::memory_order_release);
    signal.notify_one();
  }
  void publish() {
    if (published.load(std::memory_order_relaxed) == scanned) return;
    published.store(scanned, std::memory_order_release);
    signal.fetch_add(1, std::memory_order_release);
    signal.notify_one();
  }

  void work() {
    size_t upto = 0;
    for (;;) {
      const uint32_t sig = signal.load(std::memory_order_acquire);
      const bool last = reader_done.load(std::memory_order_acquire);
      const size_t pub = published.load(std::memory_order_acquire);
      if (abandon.load(std::memory_order_relaxed)) return;
      for (; upto < pub && !broken;) upto += scan(upto);
      if (!broken) fold_ready(last ? kNever : mark());
      if (last || broken) return;
      if (upto == pub) signal.wait(sig, std::memory_order_acquire);
    }
  }

  // A whole chunk the reader has published: its clock pairs, its place in its lane; its size.
  size_t scan(size_t off) {
    wire::ChunkHeader h;
    std::memcpy(&h, base() + off, sizeof h);
    const std::span<const std::byte> chunk(base() + off + sizeof h, h.bytes);
    bool tsc = false, events = false, ended = false;
    uint64_t first = 0, last = 0, close = 0;
    for (size_t at = 0; at < chunk.size();) {
      const auto kind = static_cast<wire::Kind>(chunk[at]);
      if (kind == wire::Kind::Alloc || kind == wire::Kind::Free) {
        uint64_t t;
        if (at + 1 + (kind == wire::Kind::Alloc ? 4 : 0) + 8 > chunk.size()) break;
        std::memcpy(&t, chunk.data() + at + 1 + (kind == wire::Kind::Alloc ? 4 : 0), 8);
        if (!events) first = t;
        last = t;
        events = true;
        at += kind == wire::Kind::Alloc ? sizeof(wire::AllocRecord) : sizeof(wire::FreeRecord);
        continue;
      }
      wire::Record r;
      if (!read_at(chunk, at, r)) break;
      at += sizeof r;
      if (kind == wire::Kind::StackDef) at += std::min<uint64_t>(r.addr, wire::kMaxFrames) * 8;
      ended |= kind == wire::Kind::End;
      if (kind == wire::Kind::Clock) {
        tsc = true;
        close = r.addr;
        clocks.push_back({r.addr, r.time});
        if (r.time >= latest.ns) latest = {r.addr, r.time};
      }
    }
    const size_t size = sizeof h + h.bytes;
    if (!fold && events) {  // the first events say the clock's unit
      tsc_mode = tsc;
      uint64_t per_ms = 1000000;
      if (tsc && latest.ns > start_clock.ns + 100000 && latest.tsc > start_clock.tsc) {
        ticks_per_ns = double(latest.tsc - start_clock.tsc) / double(latest.ns - start_clock.ns);
        per_ms = static_cast<uint64_t>(ticks_per_ns * 1e6);
      }
      fold.emplace(opt.mode == Mode::Sampled, opt.rate_bytes, per_ms);
    }
    if (fold && tsc && !tsc_mode) {  // ticks in a stream of ns: no order between them yet
      broken = true;
      return size;
    }
    Lane::Chunk c{off, tsc, latest};
    auto key = [&](uint64_t t) { return to_key(c, t); };
    if (events && fold->events() > 0 && key(first) < fold->last_time()) {
      broken = true;  // earlier than what is folded: the stream is folded again, sorted, in finish()
      return size;
    }
    const uint64_t thread = uint64_t{h.pid} << 32 | h.tid;
    auto [it, fresh] = lane_of.try_emplace(thread, static_cast<uint32_t>(lanes.size()));
    if (fresh) {
      lanes.emplace_back();
      lanes.back().pid = h.pid;
      lanes.back().tid = h.tid;
    }
    Lane& lane = lanes[it->second];
    lane.mark = std::max(lane.mark, tsc ? close : events ? key(last) : lane.mark);
    lane.ended = ended;  // (a later thread with the same id says hello: not ended)
    lane.chunks.push_back(c);
    return size;
  }
  uint64_t to_key(const Lane::Chunk& c, uint64_t t) const {
    if (c.tsc || !tsc_mode) return t;
    const double k = double(c.base.tsc) + (double(t) - double(c.base.ns)) * ticks_per_ns;
    return k <= 0 ? 0 : static_cast<uint64_t>(k);
  }
  uint64_t mark() const {
    uint64_t m = kNever;
    for (const Lane& l : lanes)
      if (!l.ended) m = std::min(m, l.mark);
    return m;
  }

  // The lane's next event into its head; false when it has none yet.
  bool advance(Lane& l) {
    if (l.next == l.ahead.size()) {
      l.ahead.clear();
      l.next = 0;
      decode(l);
      if (l.ahead.empty()) return l.has_head = false;
    }
    l.head = l.ahead[l.next++];
    if (l.next + kAhead < l.ahead.size()) fold->prefetch(l.ahead[l.next + kAhead]);
    return l.has_head = true;
  }
  static constexpr size_t kAhead = 12;
  // The events of the lane's next chunk (with any before them) into `ahead`, applying the other records.
  void decode(Lane& l) {
    FoldEvent e;
    while (!l.chunks.empty()) {
      const Lane::Chunk& c = l.chunks.front();
      wire::ChunkHeader h;
      std::memcpy(&h, base() + c.off, sizeof h);
      const std::span<const std::byte> chunk(base() + c.off + sizeof h, h.bytes);
      while (l.pos < chunk.size()) {
        size_t size;
        const bool event = parser.record(h, chunk, l.pos, e, size, nullptr);
        if (size == 0) {
          l.pos = chunk.size();
          break;
        }
        l.pos += size;
        if (event) {
          e.time = to_key(c, e.time);
          l.ahead.push_back(e);
        }
      }
      l.chunks.pop_front();
      l.pos = 0;
      if (!l.ahead.empty()) break;
    }
    for (size_t i = 0; i < std::min(kAhead, l.ahead.size()); ++i) fold->prefetch(l.ahead[i]);
  }

  // Folds every event before `until`, in time order across the lanes.
  void fold_ready(uint64_t until) {
    std::vector<std::pair<uint64_t, uint32_t>> ready;  // a min-heap of (head time, lane)
    for (uint32_t i = 0; i < lanes.size(); ++i)
      if (lanes[i].has_head || advance(lanes[i])) ready.push_back({lanes[i].head.time, i});
    auto later = [](const auto& a, const auto& b) { return a > b; };
    std::make_heap(ready.begin(), ready.end(), later);
    uint64_t n = 0;
    while (!ready.empty()) {
      if (ready.front().first > until) break;
      const uint32_t i = ready.front().second;
      std::pop_heap(ready.begin(), ready.end(), later);
      ready.pop_back();
      Lane& l = lanes[i];
      // One lane alone (or the earliest until another's head): no heap work per event.
      const uint64_t stop = std::min(until, ready.empty() ? kNever : ready.front().first);
      while (l.has_head && l.head.time <= stop) {
        fold->add(l.head);
        if ((++n & 0xffff) == 0) {
          folded.store(fold->events(), std::memory_order_release);
          if (abandon.load(std::memory_order_relaxed)) return;
        }
        advance(l);
      }
      if (l.has_head && l.head.time <= until) {
        ready.push_back({l.head.time, i});
        std::push_heap(ready.begin(), ready.end(), later);
      }
      if (!ready.empty() && ready.front().first > until) break;  // every head is past `until`
    }
    folded.store(fold ? fold->events() : 0, std::memory_order_release);
    { std::lock_guard<std::mutex> lock(folded_mu); }
    folded_cv.notify_all();
  }

  // After a broken order (or calls recorded outside the shim, whose times interleave with the shim's): the
  // whole stream, from the start, into one list sorted by time, folded in that order. The stream's pages go
  // back as they are parsed (the list and the stream were both held, 760 MB for python's 10.4M events).
  internal::Fold fold_sorted(std::vector<uint32_t>& inst_pid, StackTrie& stacks) {
    parser = Parser();
    lanes.clear();
    lane_of.clear();
    fold.reset();
    std::vector<FoldEvent, HugeAllocator<FoldEvent>> ev;
    ev.reserve(scanned / sizeof(wire::FreeRecord));
    std::vector<TimeMap::Pair> pairs;
    auto walk = [&](const std::byte* p, size_t n, bool release) {
      size_t pos = 0, released = 0;
      const std::span<const std::byte> chunks(p, n);
      wire::ChunkHeader h;
      while (read_at(chunks, pos, h)) {
        const std::span<const std::byte> chunk(p + pos + sizeof h, h.bytes);
        bool tsc = false;
        FoldEvent e;
        for (size_t at = 0, size = 0; at < chunk.size(); at += size) {
          const size_t had = pairs.size();
          if (parser.record(h, chunk, at, e, size, &pairs)) {
            e.tsc = tsc;
            ev.push_back(e);
          }
          tsc |= pairs.size() > had;
          if (size == 0) break;
        }
        pos += sizeof h + h.bytes;
        if (release && pos - released >= 4 * kHugePageBytes) {
          const size_t upto = pos / kHugePageBytes * kHugePageBytes;
          madvise(const_cast<std::byte*>(p) + released, upto - released, MADV_DONTNEED);
          released = upto;
        }
      }
    };
    walk(base(), scanned, true);
    stream = Mapping();
    walk(external.data(), external.size(), false);
    external = {};
    const TimeMap map(std::move(pairs));
    for (FoldEvent& e : ev)
      if (e.tsc) e.time = map(e.time);
    // One thread's events are in order already (its chunks are): only several threads need the sort.
    merge_runs(ev, [](const FoldEvent& a, const FoldEvent& b) { return a.time < b.time; });
    internal::Fold f(opt.mode == Mode::Sampled, opt.rate_bytes, 1000000);
    for (const FoldEvent& e : ev) f.add(e);
    inst_pid = std::move(parser.inst_pid);
    stacks = std::move(parser.stacks);
    return f;
  }
};

HeapSource::HeapSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HeapSource::~HeapSource() {
  if (!impl_) return;
  impl_->abandon.store(true);
  impl_->deadline.store(1);
  if (impl_->reader.joinable()) impl_->reader.join();
  if (impl_->worker.joinable()) impl_->worker.join();
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
  UniqueFd low(fds[1]);
  // The write end goes to the program (inherited: no close-on-exec), under a number far above those its own
  // open() calls get; the shim writes to it only while it is this pipe (heap/shim_pipe.h).
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  const auto high =
      static_cast<int>(std::clamp<rlim_t>(files.rlim_cur > 64 ? files.rlim_cur - 64 : 10, 10, 960));
  impl->write_fd.reset(fcntl(fds[1], F_DUPFD, high));
  if (!impl->write_fd.valid()) impl->write_fd = std::move(low);  // (a limit of a few files): where it is
  low.reset();
  struct stat pipe_id {};
  fstat(impl->write_fd.get(), &pipe_id);
  // A larger pipe lets the program run ahead of the reader by 1 MiB.
  fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
  impl->pipe_bytes = static_cast<size_t>(std::max(0, fcntl(fds[0], F_GETPIPE_SZ)));
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  impl->stop_fd.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  // The stream's room: reserved, not committed (MAP_NORESERVE: only the pages the stream fills count), so
  // that it never moves under the worker; the largest the address space allows, up to 64 GiB.
  // Under an address-space limit (ulimit -v), a quarter of it at most: the rest is the profile's.
  size_t most = size_t{64} << 30;
  if (rlimit as{}; getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    most = std::min<size_t>(most, std::max<size_t>(as.rlim_cur / 4, size_t{64} << 20));
  for (size_t size = most; !impl->stream.data() && size >= (size_t{64} << 20); size /= 2) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) continue;
    madvise(p, size, MADV_HUGEPAGE);  // filled 2 MiB per fault
    impl->stream = Mapping(p, size);
  }
  if (!impl->stream.data()) return Err("cannot reserve memory for the heap stream: " + errno_text(errno));
  impl->start_clock = {now_tsc(), now_ns()};

  std::string preload = shim;
  if (const char* old = getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  impl->env.push_back(std::make_unique<EnvOverride>("LD_PRELOAD", preload));
  impl->env.push_back(std::make_unique<EnvOverride>(wire::kFdEnv, std::to_string(impl->write_fd.get())));
  impl->env.push_back(std::make_unique<EnvOverride>(
      wire::kPipeEnv, std::to_string(pipe_id.st_dev) + ":" + std::to_string(pipe_id.st_ino)));
  impl->env.push_back(
      std::make_unique<EnvOverride>(wire::kModeEnv, options.mode == Mode::Full ? "full" : "sampled"));
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.0f", options.rate_bytes);
  impl->env.push_back(std::make_unique<EnvOverride>(wire::kRateEnv, rate));
  if (struct stat exe; !options.probed_code.empty() && stat(options.probed_exe.c_str(), &exe) == 0) {
    std::string probed = std::to_string(exe.st_dev) + ":" + std::to_string(exe.st_ino) + ":";
    char range[48];
    for (const auto& [start, end] : options.probed_code) {
      std::snprintf(range, sizeof range, "%s%llx-%llx", probed.ends_with(":") ? "" : ",",
                    static_cast<unsigned long long>(start), static_cast<unsigned long long>(end));
      probed += range;
    }
    impl->env.push_back(std::make_unique<EnvOverride>(wire::kProbedEnv, probed));
  }
  Impl* raw = impl.get();
  impl->reader = std::thread([raw] { raw->run(); });
  impl->worker = std::thread([raw] { raw->work(); });
  return std::unique_ptr<HeapSource>(new HeapSource(std::move(impl)));
}

void HeapSource::add_external(std::span<const ExternalCall> calls) {
  std::vector<std::byte> chunks = external_chunks(calls, impl_->opt.mode, impl_->opt.rate_bytes);
  impl_->external.insert(impl_->external.end(), chunks.begin(), chunks.end());
}

Summary HeapSource::finish(model::Profile& prof) {
  Impl& im = *impl_;
  Summary sum;
  sum.mode = im.opt.mode;
  sum.folded_while_running = im.folded.load(std::memory_order_acquire);
  const uint64_t entered_ns = now_ns();
  im.env.clear();       // nothing fxprof starts from now on is recorded
  im.write_fd.reset();  // our copy: EOF comes when the program and its children are gone
  im.deadline.store(now_ns() + 1000000000ull);
  if (im.reader.joinable()) im.reader.join();
  if (im.worker.joinable()) im.worker.join();  // it folds what the reader read last, then stops
  sum.cuts = im.ends.cuts(im.base());          // before the stream's pages go

  std::vector<uint32_t> inst_pid;
  StackTrie stacks;
  std::optional<internal::Fold> fold;
  std::optional<TimeMap> map;
  if (im.broken || !im.external.empty()) {
    sum.refolded = im.broken;
    fold.emplace(im.fold_sorted(inst_pid, stacks));
  } else {
    im.stream = Mapping();
    if (!im.fold) im.fold.emplace(im.opt.mode == Mode::Sampled, im.opt.rate_bytes, 1000000);
    fold.emplace(std::move(*im.fold));
    im.fold.reset();
    inst_pid = std::move(im.parser.inst_pid);
    stacks = std::move(im.parser.stacks);
    if (im.tsc_mode) map.emplace(std::move(im.clocks));
  }
  sum.lost_chunks = im.parser.lost;
  sum.events = fold->events();
  const uint64_t folded_ns = now_ns();
  fold->finish(
      prof, [&](uint64_t t) { return map ? (*map)(t) : t; }, inst_pid, stacks);
  if (getenv("FXPROF_HEAP_DEBUG"))  // where finish()'s time goes (bench/heap_real.sh's breakdown)
    std::fprintf(stderr,
                 "fxprof: heap debug: %llu events, %llu folded while running%s; %.3f s to join and fold the "
                 "rest, %.3f s to the model\n",
                 static_cast<unsigned long long>(sum.events),
                 static_cast<unsigned long long>(sum.folded_while_running), sum.refolded ? " (refolded)" : "",
                 double(folded_ns - entered_ns) / 1e9, double(now_ns() - folded_ns) / 1e9);
  return sum;
}

bool HeapSource::wait_folded(uint64_t events, std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  std::unique_lock<std::mutex> lock(im.folded_mu);
  return im.folded_cv.wait_for(lock, timeout, [&] { return im.folded.load() >= events; });
}

}  // namespace fxprof::heap
