#include "recorder/capture.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <type_traits>
#include <utility>

#include "recorder/sources.h"
#include "recorder/proc_counters.h"
#include "recorder/rss.h"
#include "recorder/unwind/unwinder.h"

namespace fxprof::recorder {

namespace {

constexpr std::string_view kMagic = "fxprof-capture 3\n";
constexpr size_t kFlushBytes = 1 << 20;

// The entries' tags.
enum Tag : char {
  kConfig = 'C',
  kLaunched = 'L',
  kAttached = 'A',
  kAttachedThread = 'T',
  kRound = 'R',
  kWakings = 'W',
  kRssTick = 'S',
  kEnd = 'E',
  kRead = 'r',
  kList = 'l',
  kKernelSymbols = 'k',
};

static_assert(std::is_trivially_copyable_v<EventConfig> && std::is_trivially_copyable_v<OffCpuConfig>);

}  // namespace

// The /proc tap: every answer goes to the file as it is given.
class CapturingProcfs final : public Procfs {
 public:
  CapturingProcfs(CaptureWriter& w, Procfs& inner) : w_(w), inner_(inner) {}
  Result<std::string> read(const std::string& path) override {
    Result<std::string> r = inner_.read(path);
    w_.begin(kRead);
    w_.put_str(path);
    w_.put(static_cast<uint8_t>(r.ok()));
    w_.put_str(r.ok() ? r.value() : r.error());
    w_.commit();
    return r;
  }
  std::vector<uint32_t> list(const std::string& dir) override {
    std::vector<uint32_t> v = inner_.list(dir);
    w_.begin(kList);
    w_.put_str(dir);
    w_.put(static_cast<uint32_t>(v.size()));
    w_.put(v.data(), v.size() * sizeof(uint32_t));
    w_.commit();
    return v;
  }
  std::vector<std::string> kernel_symbols(std::span<const uint64_t> addrs) override {
    std::vector<std::string> names = inner_.kernel_symbols(addrs);
    w_.begin(kKernelSymbols);
    w_.put(static_cast<uint32_t>(names.size()));
    for (const std::string& n : names) w_.put_str(n);
    w_.commit();
    return names;
  }

 private:
  CaptureWriter& w_;
  Procfs& inner_;
};

Result<std::unique_ptr<CaptureWriter>> CaptureWriter::create(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd.valid()) return Err("cannot write the capture " + path + ": " + errno_text(errno));
  return std::make_unique<CaptureWriter>(std::move(fd));
}

CaptureWriter::CaptureWriter(UniqueFd fd) : fd_(std::move(fd)), buf_(kMagic) {}

CaptureWriter::~CaptureWriter() { (void)flush(); }

Procfs& CaptureWriter::tap(Procfs& inner) {
  procfs_tap_ = std::make_unique<CapturingProcfs>(*this, inner);
  return *procfs_tap_;
}

void CaptureWriter::begin(char tag) {
  entry_at_ = buf_.size();
  buf_.push_back(tag);
  buf_.append(4, '\0');  // the length, once known
}

void CaptureWriter::put(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }

void CaptureWriter::put_str(std::string_view s) {
  put(static_cast<uint32_t>(s.size()));
  put(s.data(), s.size());
}

void CaptureWriter::commit() {
  const auto len = static_cast<uint32_t>(buf_.size() - entry_at_ - 5);
  std::memcpy(buf_.data() + entry_at_ + 1, &len, 4);
  if (buf_.size() >= kFlushBytes) (void)flush();  // an error is kept: the last flush() returns it
}

Status CaptureWriter::flush() {
  size_t done = 0;
  while (error_.empty() && done < buf_.size()) {
    ssize_t n = write(fd_.get(), buf_.data() + done, buf_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) error_ = "cannot write the capture: " + errno_text(errno);
    if (n > 0) done += static_cast<size_t>(n);
  }
  buf_.clear();
  if (!error_.empty()) return Err(error_);
  return {};
}

void CaptureWriter::config(const EventConfig& events, const OffCpuConfig* off_cpu, double interval_ms) {
  begin(kConfig);
  put(events);
  put(static_cast<uint8_t>(off_cpu != nullptr));
  put(off_cpu ? *off_cpu : OffCpuConfig{});
  put(interval_ms);
  commit();
}

void CaptureWriter::on_launched(uint32_t pid, const std::string& name, uint64_t time_ns) {
  begin(kLaunched);
  put(pid);
  put(time_ns);
  put_str(name);
  commit();
  if (next_) next_->on_launched(pid, name, time_ns);
}

void CaptureWriter::on_attached(uint32_t pid, uint64_t time_ns) {
  begin(kAttached);
  put(pid);
  put(time_ns);
  commit();
  if (next_) next_->on_attached(pid, time_ns);
}

void CaptureWriter::on_attached_thread(uint32_t pid, uint32_t tid, uint64_t time_ns) {
  begin(kAttachedThread);
  put(pid);
  put(tid);
  put(time_ns);
  commit();
  if (next_) next_->on_attached_thread(pid, tid, time_ns);
}

void CaptureWriter::on_wakings(std::span<Waking> w) {
  if (!w.empty()) {
    begin(kWakings);
    std::vector<std::byte> bytes;
    for (const Waking& k : w) {  // each as the tracer's record (waker.h), after its size
      bytes.clear();
      encode_waking(k, bytes);
      put(static_cast<uint32_t>(bytes.size()));
      put(bytes.data(), bytes.size());
    }
    commit();
  }
  if (next_) next_->on_wakings(w);
}

// One entry per round: each record with the buffer kind it came from, in the merged order.
void CaptureWriter::on_records(std::span<const RecordRef> round) {
  if (!round.empty()) {
    begin(kRound);
    for (const RecordRef& r : round) {
      if (r.typed || r.waking) continue;  // a file source's (host.h): a live recording has none
      put(static_cast<uint8_t>(r.switch_event));
      put(r.h, r.h->size);
    }
    commit();
  }
  if (next_) next_->on_records(round);
}

void CaptureWriter::rss_tick(uint64_t now_ns) {
  begin(kRssTick);
  put(now_ns);
  commit();
}

void CaptureWriter::on_end(uint64_t end_ns) {
  begin(kEnd);
  put(end_ns);
  commit();
  if (next_) next_->on_end(end_ns);
}

namespace {

// Bounds-checked reading of one entry's payload.
class Payload {
 public:
  explicit Payload(std::string_view p) : p_(p) {}
  bool ok() const { return ok_; }
  std::string_view bytes(size_t n) {
    if (p_.size() < n) {
      ok_ = false;
      return {};
    }
    std::string_view v = p_.substr(0, n);
    p_.remove_prefix(n);
    return v;
  }
  template <class T>
  T get() {
    T v{};
    std::string_view b = bytes(sizeof v);
    if (ok_) std::memcpy(&v, b.data(), sizeof v);
    return v;
  }
  std::string str() { return std::string(bytes(get<uint32_t>())); }
  bool empty() const { return p_.empty(); }
  std::string_view rest() const { return p_; }

 private:
  std::string_view p_;
  bool ok_ = true;
};

// The builder's /proc questions answered from the capture: each path's answers in the order they were given
// (the same records make the builder ask the same questions in the same order).
class ReplayProcfs final : public Procfs {
 public:
  std::map<std::string, std::deque<Result<std::string>>> reads;
  std::map<std::string, std::deque<std::vector<uint32_t>>> lists;
  std::deque<std::vector<std::string>> kernel;

  Result<std::string> read(const std::string& path) override {
    auto it = reads.find(path);
    if (it == reads.end() || it->second.empty()) return Err(path + ": not in the capture");
    Result<std::string> r = std::move(it->second.front());
    it->second.pop_front();
    return r;
  }
  std::vector<uint32_t> list(const std::string& dir) override {
    auto it = lists.find(dir);
    if (it == lists.end() || it->second.empty()) return {};
    std::vector<uint32_t> v = std::move(it->second.front());
    it->second.pop_front();
    return v;
  }
  std::vector<std::string> kernel_symbols(std::span<const uint64_t>) override {
    if (kernel.empty()) return {};
    std::vector<std::string> v = std::move(kernel.front());
    kernel.pop_front();
    return v;
  }
};

// One captured round, copied to 8-byte aligned storage as the ring buffers hold records.
class ReplayRound {
 public:
  bool load(std::string_view payload) {
    std::vector<std::string_view> recs;
    kinds_.clear();
    Payload p(payload);
    size_t words = 0;
    while (!p.empty()) {
      kinds_.push_back(p.get<uint8_t>() != 0);
      perf_event_header h{};
      if (p.rest().size() < sizeof h) return false;
      std::memcpy(&h, p.rest().data(), sizeof h);
      if (h.size < sizeof h) return false;
      recs.push_back(p.bytes(h.size));
      if (!p.ok()) return false;
      words += (h.size + 7) / 8;
    }
    store_.assign(words, 0);
    at_.clear();
    size_t w = 0;
    for (std::string_view r : recs) {
      std::memcpy(store_.data() + w, r.data(), r.size());
      at_.push_back(w);
      w += (r.size() + 7) / 8;
    }
    return true;
  }
  // In the order the recording merged them (by time).
  void collect(std::vector<RecordRef>& out) const {
    for (size_t i = 0; i < at_.size(); ++i) {
      auto* h = reinterpret_cast<const perf_event_header*>(store_.data() + at_[i]);
      out.push_back({record_time(h), h, kinds_[i]});
    }
  }

 private:
  std::vector<uint64_t> store_;
  std::vector<size_t> at_;  // each record's first word in store_
  std::vector<bool> kinds_;
};

// A capture's entries after its magic line. The /proc answers go to `procfs`'s queues at once (the builder
// asks while it handles a round, and the answers were written while the recording handled it, after the
// round's entry); the others are returned in order.
struct Entry {
  char tag;
  std::string_view payload;
};
Result<std::vector<Entry>> read_entries(std::string_view text, ReplayProcfs& procfs,
                                        const std::string& path) {
  std::vector<Entry> entries;
  while (!text.empty()) {
    if (text.size() < 5) return Err(path + ": truncated capture");
    uint32_t len;
    std::memcpy(&len, text.data() + 1, 4);
    if (text.size() - 5 < len) return Err(path + ": truncated capture");
    Entry e{text[0], text.substr(5, len)};
    text.remove_prefix(5 + len);
    Payload p(e.payload);
    if (e.tag == kRead) {
      std::string at = p.str();
      const bool ok = p.get<uint8_t>() != 0;
      std::string body = p.str();
      procfs.reads[at].push_back(ok ? Result<std::string>(std::move(body)) : Result<std::string>(Err(body)));
    } else if (e.tag == kList) {
      std::string at = p.str();
      std::vector<uint32_t> v(p.get<uint32_t>());
      std::string_view b = p.bytes(v.size() * sizeof(uint32_t));
      if (p.ok()) std::memcpy(v.data(), b.data(), b.size());
      procfs.lists[at].push_back(std::move(v));
    } else if (e.tag == kKernelSymbols) {
      std::vector<std::string> names(p.get<uint32_t>());
      for (std::string& n : names) n = p.str();
      procfs.kernel.push_back(std::move(names));
    } else {
      entries.push_back(e);
    }
    if (!p.ok()) return Err(path + ": malformed capture entry '" + std::string(1, e.tag) + "'");
  }
  return entries;
}

// A capture as a source (a row of driver/sources.h): the calls the recording made, in its order, one case per entry
// tag (longer than most, for that list). A round is a round entry, with the wakeups written before it; the
// RSS sampler's ticks tick the replay's samplers. The first malformed entry ends it (error()).
class CaptureSource final : public Source {
 public:
  CaptureSource(std::span<const Entry> entries, model::Profile& profile, ReplayProcfs& procfs,
                const std::string& path)
      : entries_(entries), profile_(profile), rss_(procfs), counters_(procfs), path_(path) {}
  const std::string& error() const { return error_; }

  bool next(Round& round, RecordSink& sink) override {
    for (; at_ < entries_.size(); ++at_) {
      const Entry& e = entries_[at_];
      Payload p(e.payload);
      if (e.tag == kRound) {
        if (!round_.load(e.payload)) return fail("malformed records in the capture");
        round_.collect(round.records);
        ++at_;
        return true;
      }
      if (e.tag == kWakings) {
        while (p.ok() && !p.empty()) {
          std::string_view b = p.bytes(p.get<uint32_t>());
          if (!p.ok() ||
              !decode_waking(std::as_bytes(std::span(b.data(), b.size())), round.wakings.emplace_back()))
            return fail("malformed wakeups in the capture");
        }
        continue;
      }
      if (!round.wakings.empty()) return true;  // wakeups of a round without records: given first
      if (!call(e.tag, p, sink)) return false;
      if (!p.ok()) return fail("malformed capture entry '" + std::string(1, e.tag) + "'");
    }
    return false;
  }

 private:
  // An entry that is a call of its own; false at the end or an unknown tag.
  bool call(char tag, Payload& p, RecordSink& sink) {
    switch (tag) {
      case kLaunched: {
        const auto pid = p.get<uint32_t>();
        const auto t = p.get<uint64_t>();
        sink.on_launched(pid, p.str(), t);
        return true;
      }
      case kAttached: {
        const auto pid = p.get<uint32_t>();
        sink.on_attached(pid, p.get<uint64_t>());
        counters_.set_attached();
        return true;
      }
      case kAttachedThread: {
        const auto pid = p.get<uint32_t>();
        const auto tid = p.get<uint32_t>();
        sink.on_attached_thread(pid, tid, p.get<uint64_t>());
        return true;
      }
      case kRssTick: {
        const auto now = p.get<uint64_t>();
        rss_.tick(profile_, now);
        counters_.tick(profile_, now);
        return true;
      }
      case kEnd:
        sink.on_end(p.get<uint64_t>());
        rss_.finish(profile_);
        counters_.finish(profile_);
        return true;
      case kConfig:
        return fail("a second configuration in the capture");
      default:
        return fail("unknown capture entry '" + std::string(1, tag) + "'");
    }
  }
  bool fail(const std::string& why) {
    if (error_.empty()) error_ = path_ + ": " + why;
    at_ = entries_.size();
    return false;
  }

  std::span<const Entry> entries_;
  size_t at_ = 0;
  model::Profile& profile_;
  RssSampler rss_;
  ProcCounters counters_;
  ReplayRound round_;
  std::string path_, error_;
};

}  // namespace

Result<model::Profile> replay(const std::string& path, const ReplayOptions& options) {
  auto file = read_file(path);
  if (!file) return std::move(file).take_error();
  std::string_view text = *file;
  if (!text.starts_with(kMagic)) return Err(path + ": not an fxprof capture");
  text.remove_prefix(kMagic.size());
  ReplayProcfs procfs;
  auto read = read_entries(text, procfs, path);
  if (!read) return std::move(read).take_error();
  const std::vector<Entry>& entries = *read;
  if (entries.empty() || entries[0].tag != kConfig)
    return Err(path + ": the capture does not start with its configuration");

  model::Profile profile;
  Payload p(entries[0].payload);
  const auto events = p.get<EventConfig>();
  const bool off_cpu = p.get<uint8_t>() != 0;
  const auto oc = p.get<OffCpuConfig>();
  profile.meta.interval_ms = p.get<double>();
  if (!p.ok()) return Err(path + ": malformed capture entry 'C'");
  std::unique_ptr<Unwinder> unwinder;
  if (events.dwarf) {
    elf::LocatorOptions locator;
    locator.symbol_dirs = options.symbol_dirs;
    unwinder = std::make_unique<Unwinder>(std::move(locator));
  }
  ProfileBuilder builder(profile, unwinder.get(), events, procfs);
  if (off_cpu) builder.set_off_cpu(oc);
  const std::span<const Entry> calls = std::span(entries).subspan(1);  // after the configuration
  CaptureSource source(calls, profile, procfs, path);
  Driver driver(builder);
  driver.add(source);
  driver.run();
  if (!source.error().empty()) return Err(source.error());
  return profile;
}

}  // namespace fxprof::recorder
