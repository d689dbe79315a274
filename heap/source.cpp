#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>

#include "base/fd.h"
#include "heap/heap.h"
#include "heap/wire.h"
#include "symbolizer/symbolizer.h"

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
  bool tsc;  // time is in TSC ticks until map_tsc()
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

struct HeapSource::Impl {
  Options opt;
  UniqueFd read_fd, write_fd, stop_fd;
  std::vector<std::unique_ptr<EnvOverride>> env;
  std::thread reader;
  std::atomic<uint64_t> deadline{0};  // set by finish(): stop reading then even without EOF

  // Filled by the reader thread; read by finish() after joining it.
  std::vector<Event> events;
  std::vector<std::vector<uint64_t>> stacks;  // leaf first
  std::unordered_map<uint64_t, std::unordered_map<uint32_t, uint32_t>>
      stack_ids;  // (pid<<32|tid) -> id -> index
  uint64_t lost = 0;
  bool desync = false;
  std::vector<ClockPair> clocks;  // from every chunk with TSC times

  void parse_chunk(const wire::ChunkHeader& h, const std::byte* p) {
    auto& ids = stack_ids[uint64_t{h.pid} << 32 | h.tid];
    size_t off = 0;
    bool tsc = false;
    while (off + sizeof(wire::Record) <= h.bytes) {
      wire::Record r;
      std::memcpy(&r, p + off, sizeof r);
      off += sizeof r;
      switch (static_cast<wire::Kind>(r.kind)) {
        case wire::Kind::StackDef: {
          size_t n = std::min<uint64_t>(r.addr, wire::kMaxFrames);
          if (off + n * 8 > h.bytes) return;
          std::vector<uint64_t> frames(n);
          std::memcpy(frames.data(), p + off, n * 8);
          off += n * 8;
          ids[r.stack] = static_cast<uint32_t>(stacks.size());
          stacks.push_back(std::move(frames));
          break;
        }
        case wire::Kind::Alloc: {
          auto it = ids.find(r.stack);
          uint32_t s = it == ids.end() ? UINT32_MAX : it->second;
          events.push_back(
              {r.time, r.addr, static_cast<int64_t>(r.size), h.pid, h.tid, s, wire::Kind::Alloc, tsc});
          break;
        }
        case wire::Kind::Free:
          events.push_back({r.time, r.addr, 0, h.pid, h.tid, UINT32_MAX, wire::Kind::Free, tsc});
          break;
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
  size_t used = 0;     // bytes read into stream
  size_t scanned = 0;  // of which whole chunks

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
    events.reserve(scanned / sizeof(wire::Record));
    auto* base = static_cast<const std::byte*>(stream.data());
    size_t pos = 0;
    while (pos + sizeof(wire::ChunkHeader) <= scanned) {
      wire::ChunkHeader h;
      std::memcpy(&h, base + pos, sizeof h);
      parse_chunk(h, base + pos + sizeof h);
      pos += sizeof h + h.bytes;
    }
    stream = Mapping();
    used = scanned = 0;
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

namespace {

// The process entry `pid` had at time `t` (exec gives a pid a new entry), created if perf never saw it.
uint32_t process_for(model::Profile& prof, uint32_t pid, uint64_t t) {
  int best = -1;
  for (size_t i = 0; i < prof.processes.size(); ++i) {
    const auto& p = prof.processes[i];
    if (p.pid != pid) continue;
    if (best < 0 || (p.start_ns <= t && p.start_ns >= prof.processes[static_cast<size_t>(best)].start_ns))
      best = static_cast<int>(i);
  }
  if (best >= 0) return static_cast<uint32_t>(best);
  model::Process p;
  p.pid = pid;
  p.name = "pid " + std::to_string(pid);
  p.start_ns = t;
  prof.processes.push_back(std::move(p));
  return static_cast<uint32_t>(prof.processes.size() - 1);
}

uint32_t thread_for(model::Process& proc, uint32_t tid, uint64_t t) {
  for (size_t i = 0; i < proc.threads.size(); ++i)
    if (proc.threads[i].tid == tid) return static_cast<uint32_t>(i);
  model::Thread th;
  th.tid = tid;
  th.name = tid == proc.pid ? proc.name : "thread " + std::to_string(tid);
  th.is_main = tid == proc.pid;
  th.start_ns = std::min(t, proc.start_ns);
  proc.threads.push_back(std::move(th));
  return static_cast<uint32_t>(proc.threads.size() - 1);
}

const model::Lib* lib_for(const model::Process& proc, uint64_t addr) {
  for (const auto& l : proc.libs)
    if (addr >= l.start && addr < l.end) return &l;
  return nullptr;
}

bool is_allocator_lib(const std::string& name) {
  return name.starts_with("libc.so") || name.starts_with("libstdc++") || name.starts_with("libgcc_s") ||
         name.starts_with("ld-linux") || name.starts_with("libfxprof_heap");
}

}  // namespace

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
  std::stable_sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) { return a.time < b.time; });

  // Model stacks, interned lazily (root first).
  std::vector<model::StackId> model_stack(im.stacks.size(), model::kNoStack);
  std::vector<model::FrameId> path;
  auto stack_of = [&](uint32_t s) {
    if (s == UINT32_MAX) return model::kNoStack;
    if (model_stack[s] == model::kNoStack) {
      path.clear();
      const auto& f = im.stacks[s];
      for (auto it = f.rbegin(); it != f.rend(); ++it) path.push_back(prof.native_frame(*it));
      model_stack[s] = prof.stacks.intern_path(path);
    }
    return model_stack[s];
  };

  struct Live {
    int64_t size;
    uint32_t proc, thread;
    uint32_t stack;
  };
  std::unordered_map<uint32_t, std::unordered_map<uint64_t, Live>> live;  // pid -> address -> block
  std::unordered_map<uint32_t, uint64_t> last_alloc;                      // tid -> address just allocated
  // The Memory counter: one sample per process and 1 ms bucket with the bucket's change; a bucket whose
  // highest point lies above both its ends is written as two samples (up to the high, then down from it), so
  // that the track's maximum is the process's exact peak however briefly it was held.
  struct CounterState {
    uint64_t bucket = UINT64_MAX;
    int64_t value = 0;    // the process's heap bytes after its last event
    int64_t written = 0;  // what the samples written so far add up to
    int64_t high = 0;     // the bucket's highest value, reached after high_count of its count events
    uint64_t high_count = 0, count = 0, last_time = 0;
  };
  std::map<uint32_t, CounterState> counters;  // process index -> its counter's state
  auto flush_counter = [&](uint32_t proc, CounterState& c) {
    if (c.count == 0) return;
    auto& samples = prof.processes[proc].counters;
    auto it = std::find_if(samples.begin(), samples.end(),
                           [](const model::Counter& k) { return k.name == "Heap"; });
    if (it == samples.end()) {
      samples.push_back({"Heap", "Memory", "Heap bytes in use (fxprof --heap)", {}});
      it = samples.end() - 1;
    }
    const uint64_t start_ns = c.bucket * 1000000;
    if (c.high > c.written && c.high > c.value) {
      it->samples.push_back({start_ns, c.high - c.written, c.high_count});
      it->samples.push_back({std::max(c.last_time, start_ns + 1), c.value - c.high, c.count - c.high_count});
    } else {
      it->samples.push_back({start_ns, c.value - c.written, c.count});
    }
    c.written = c.value;
    c.count = 0;
  };
  auto add_counter = [&](uint32_t proc, uint64_t t, int64_t d) {
    auto& c = counters[proc];
    uint64_t bucket = t / 1000000;
    if (c.bucket != bucket) {
      flush_counter(proc, c);
      c.bucket = bucket;
      c.high = c.written;
      c.high_count = 0;
    }
    c.value += d;
    ++c.count;
    c.last_time = t;
    if (c.value > c.high) {
      c.high = c.value;
      c.high_count = c.count;
    }
  };
  int64_t total = 0;
  const uint64_t start = prof.meta.start_monotonic_ns;
  double count_estimate = 0, temp_estimate = 0;
  for (const Event& e : ev) {
    if (e.kind == wire::Kind::Alloc) {
      uint32_t pi = process_for(prof, e.pid, e.time);
      uint32_t ti = thread_for(prof.processes[pi], e.tid, e.time);
      auto& blocks = live[e.pid];
      if (auto old = blocks.find(e.addr); old != blocks.end()) {  // its free was not seen (reentrant path)
        total -= old->second.size;
        blocks.erase(old);
      }
      blocks[e.addr] = {e.size, pi, ti, e.stack};
      prof.processes[pi].threads[ti].allocations.push_back(
          {e.time, stack_of(e.stack), e.size, e.addr, e.tid});
      add_counter(pi, e.time, e.size);
      total += e.size;
      count_estimate += 1;
      last_alloc[e.tid] = e.addr;
      if (total > sum.peak_bytes) {
        sum.peak_bytes = total;
        sum.peak_time_s = e.time > start ? static_cast<double>(e.time - start) / 1e9 : 0;
      }
    } else if (e.kind == wire::Kind::Free) {
      auto lit = live.find(e.pid);
      if (lit == live.end()) continue;
      auto it = lit->second.find(e.addr);
      if (it == lit->second.end()) continue;  // not seen allocated (before the shim, or unsampled)
      const Live& b = it->second;
      prof.processes[b.proc].threads[b.thread].allocations.push_back(
          {e.time, stack_of(b.stack), -b.size, e.addr, e.tid});
      add_counter(b.proc, e.time, -b.size);
      total -= b.size;
      ++sum.frees;
      if (auto la = last_alloc.find(e.tid); la != last_alloc.end() && la->second == e.addr)
        temp_estimate += 1;
      last_alloc.erase(e.tid);
      lit->second.erase(it);
    }
  }
  for (auto& [proc, c] : counters) {
    flush_counter(proc, c);
    // The last value holds to the process's end (or the recording's), as the RSS track's does: the track
    // does not stop at the last allocation or free.
    const model::Process& p = prof.processes[proc];
    const uint64_t end = p.end_ns ? *p.end_ns : prof.meta.end_monotonic_ns.value_or(0);
    for (model::Counter& k : prof.processes[proc].counters)
      if (k.name == "Heap" && !k.samples.empty() && end > k.samples.back().time_ns)
        k.samples.push_back({end, 0, 0});
  }
  sum.allocations = static_cast<uint64_t>(count_estimate);
  sum.temporary = static_cast<uint64_t>(temp_estimate);

  // Retained blocks by allocation site: the first frame outside the allocator's libraries, named through the
  // symbolizer (the same path the server takes for CPU samples).
  struct SiteKey {
    uint32_t proc;
    uint64_t addr;
    bool operator<(const SiteKey& o) const { return proc != o.proc ? proc < o.proc : addr < o.addr; }
  };
  std::map<SiteKey, Site> sites;
  for (auto& [pid, blocks] : live) {
    for (auto& [addr, b] : blocks) {
      sum.retained_bytes += b.size;
      ++sum.retained_blocks;
      uint64_t site = 0;
      if (b.stack != UINT32_MAX) {
        for (uint64_t f : im.stacks[b.stack]) {
          const model::Lib* l = lib_for(prof.processes[b.proc], f);
          site = f;
          if (!l || !is_allocator_lib(l->name)) break;
        }
      }
      Site& s = sites[{b.proc, site}];
      s.bytes += b.size;
      ++s.blocks;
    }
  }
  std::vector<std::pair<SiteKey, Site>> ranked(sites.begin(), sites.end());
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  if (ranked.size() > 50) ranked.resize(50);
  symbolizer::Symbolizer sym;
  std::map<std::string, Site> named;
  for (auto& [key, site] : ranked) {
    const model::Process& proc = prof.processes[key.proc];
    const model::Lib* l = lib_for(proc, key.addr);
    char buf[64];
    std::string name;
    if (!l) {
      std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(key.addr));
      name = buf;
    } else {
      uint64_t rel = key.addr - (l->start - l->offset);
      std::snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(rel));
      name = l->name + buf;
      sym.add_known_lib(
          {l->debug_name, l->breakpad_id, l->name, l->path, l->debug_path, l->code_id, l->arch});
      uint64_t addrs[1] = {rel > 0 ? rel - 1 : rel};  // a return address: look up the call
      if (auto r = sym.lookup(l->debug_name, l->breakpad_id, addrs); r && !r->empty() && (*r)[0].found)
        name = (*r)[0].function + " (" + l->name + ")";
    }
    Site& n = named[name];
    n.name = name;
    n.bytes += site.bytes;
    n.blocks += site.blocks;
  }
  for (auto& [name, s] : named) sum.top_sites.push_back(s);
  std::sort(sum.top_sites.begin(), sum.top_sites.end(),
            [](const Site& a, const Site& b) { return a.bytes > b.bytes; });
  if (sum.top_sites.size() > 5) sum.top_sites.resize(5);
  return sum;
}

std::string format_summary(const Summary& s) {
  auto bytes = [](int64_t b) {
    char buf[64];
    double v = static_cast<double>(b);
    if (std::abs(v) >= 1 << 20)
      std::snprintf(buf, sizeof buf, "%.2f MiB", v / (1 << 20));
    else if (std::abs(v) >= 1 << 10)
      std::snprintf(buf, sizeof buf, "%.1f KiB", v / (1 << 10));
    else
      std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
    return std::string(buf);
  };
  std::string out;
  char line[512];
  const char* est = s.mode == Mode::Sampled ? " (estimated from samples)" : "";
  std::string peak = bytes(s.peak_bytes);
  if (s.mode == Mode::Full)
    peak += " (" + std::to_string(s.peak_bytes) + " bytes)";  // exact: worth all digits
  std::snprintf(line, sizeof line,
                "fxprof: heap%s: peak %s at %.3f s; %s in %llu blocks still allocated at exit\n", est,
                peak.c_str(), s.peak_time_s, bytes(s.retained_bytes).c_str(),
                static_cast<unsigned long long>(s.retained_blocks));
  out += line;
  if (s.mode == Mode::Full)
    std::snprintf(line, sizeof line, "fxprof: heap: %llu allocations, %llu temporary, %llu frees\n",
                  static_cast<unsigned long long>(s.allocations),
                  static_cast<unsigned long long>(s.temporary), static_cast<unsigned long long>(s.frees));
  else
    std::snprintf(line, sizeof line, "fxprof: heap: %llu sampled allocations, %llu sampled frees\n",
                  static_cast<unsigned long long>(s.allocations), static_cast<unsigned long long>(s.frees));
  out += line;
  for (const Site& site : s.top_sites) {
    std::snprintf(line, sizeof line, "fxprof: heap:   %s in %llu blocks: %s\n", bytes(site.bytes).c_str(),
                  static_cast<unsigned long long>(site.blocks), site.name.c_str());
    out += line;
  }
  if (s.lost_chunks > 0) {
    std::snprintf(line, sizeof line, "fxprof: heap: %llu event chunks lost (the program closed the pipe)\n",
                  static_cast<unsigned long long>(s.lost_chunks));
    out += line;
  }
  return out;
}

}  // namespace fxprof::heap
