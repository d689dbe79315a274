#include "perf/data_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <unordered_map>

#include "base/byte_reader.h"

namespace fxprof::perf {

namespace {

constexpr uint64_t kMagic = 0x32454c4946524550ULL;    // "PERFILE2", little-endian
constexpr uint64_t kSwapped = 0x50455246494c4532ULL;  // the same, written big-endian
constexpr size_t kFileHeader = 104, kPipeHeader = 16;
constexpr uint64_t kMaxEvents = 4096, kMaxIds = uint64_t{1} << 24, kMaxStrings = 1 << 16;

// perf's own record types (tools/perf/util/event.h), after the kernel's.
enum : uint32_t {
  kUserTypeStart = 64,
  kHeaderAttr = 64,
  kTracingData = 66,
  kHeaderBuildId = 67,
  kEventUpdate = 78,
  kAuxtrace = 71,
  kHeaderFeature = 80,
  kCompressed = 81,
  kCompressed2 = 83,
};
// Feature bits (tools/perf/util/header.h).
enum : uint64_t {
  kFeatTracingData = 1,
  kFeatBuildId = 2,
  kFeatHostname = 3,
  kFeatOsRelease = 4,
  kFeatVersion = 5,
  kFeatArch = 6,
  kFeatNrCpus = 7,
  kFeatCpuDesc = 8,
  kFeatTotalMem = 10,
  kFeatCmdline = 11,
  kFeatEventDesc = 12,
};
constexpr uint16_t kMiscBuildIdSize = 1 << 15;

ByteReader reader(std::span<const std::byte> b) {
  auto* p = reinterpret_cast<const uint8_t*>(b.data());
  return ByteReader{p, p + b.size()};
}

// perf_header_string: u32 len, then len bytes (NUL-padded).
std::string header_string(ByteReader& r) {
  const uint32_t len = r.get<uint32_t>();
  if (!r.need(len)) return {};
  const auto* s = reinterpret_cast<const char*>(r.p);
  r.p += len;
  return std::string(s, strnlen(s, len));
}

// A perf_event_attr of `size` bytes as a file holds it; a shorter one reads as zeros past its end.
perf_event_attr attr_from(ByteReader& r, uint64_t size) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  if (!r.need(size)) return a;
  std::memcpy(&a, r.p, std::min<size_t>(size, sizeof a));
  r.p += size;
  a.size = sizeof a;
  return a;
}

// One build_id_event (the BUILD_ID feature's entries, pipe mode's HEADER_BUILD_ID): false when malformed.
bool build_id_entry(std::span<const std::byte> e, std::vector<BuildIdEntry>& out) {
  ByteReader r = reader(e);
  perf_event_header h = r.get<perf_event_header>();
  if (r.bad || h.size < 36 || h.size > e.size()) return false;
  BuildIdEntry b;
  b.pid = r.get<int32_t>();
  b.cpumode = h.misc & PERF_RECORD_MISC_CPUMODE_MASK;
  const uint8_t* id = r.p;
  r.p += 24;
  size_t n = 20;
  if (h.misc & kMiscBuildIdSize) n = std::min<size_t>(id[20], 20);
  b.build_id.assign(reinterpret_cast<const char*>(id), n);
  const auto* name = reinterpret_cast<const char*>(r.p);
  b.path.assign(name, strnlen(name, h.size - 36));
  out.push_back(std::move(b));
  return true;
}

}  // namespace

std::string event_name(const perf_event_attr& a) {
  static const char* const kHardware[] = {
      "cycles",        "instructions", "cache-references",        "cache-misses",           "branches",
      "branch-misses", "bus-cycles",   "stalled-cycles-frontend", "stalled-cycles-backend", "ref-cycles"};
  static const char* const kSoftware[] = {
      "cpu-clock",        "task-clock",   "page-faults",  "context-switches",
      "cpu-migrations",   "minor-faults", "major-faults", "alignment-faults",
      "emulation-faults", "dummy",        "bpf-output",   "cgroup-switches"};
  if (a.type == PERF_TYPE_HARDWARE && a.config < std::size(kHardware)) return kHardware[a.config];
  if (a.type == PERF_TYPE_SOFTWARE && a.config < std::size(kSoftware)) return kSoftware[a.config];
  if (a.type == PERF_TYPE_TRACEPOINT) return "tracepoint:" + std::to_string(a.config);
  return std::to_string(a.type) + ":0x" + [&] {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(a.config));
    return std::string(buf);
  }();
}

namespace {

// The reading of one file: features, attributes and records, into `f`.
class Parser {
 public:
  Parser(DataFile& f, std::byte* base, size_t size, const std::string& name,
         std::deque<std::vector<uint64_t>>& aligned)
      : f_(f), base_(base), size_(size), name_(name), aligned_(aligned) {}

  Status file_mode();
  Status pipe_mode();
  // Kernel records kept so far, to be sorted once the layout is known.
  std::vector<perf_event_header*> kept;

 private:
  Error bad(const std::string& what) const { return Err(name_ + ": " + what); }
  std::span<const std::byte> at(uint64_t off, uint64_t len) const {
    return {base_ + off, static_cast<size_t>(len)};
  }
  bool inside(uint64_t off, uint64_t len) const { return off <= size_ && len <= size_ - off; }
  Status feature(uint64_t bit, std::span<const std::byte> data);
  Status event_desc(std::span<const std::byte> data);
  Status records(uint64_t off, uint64_t end);
  Status user_record(perf_event_header* h, uint64_t& next, uint64_t end);
  Status compressed(const perf_event_header* h);
  Status keep_inflated();

  DataFile& f_;
  std::byte* base_;
  size_t size_;
  const std::string& name_;
  std::deque<std::vector<uint64_t>>& aligned_;
  // Compressed records (perf record -z): one zstd stream for the file, and the inflated bytes of a record
  // not complete yet (perf cuts records across compressed records).
  std::unique_ptr<ZSTD_DStream, size_t (*)(ZSTD_DStream*)> zstd_{nullptr, ZSTD_freeDStream};
  std::vector<std::byte> inflated_;
  uint64_t inflated_total_ = 0;
};

Status Parser::feature(uint64_t bit, std::span<const std::byte> data) {
  ByteReader r = reader(data);
  Features& ft = f_.features;
  switch (bit) {
    case kFeatTracingData:
      ft.tracing_data.assign(reinterpret_cast<const char*>(data.data()), data.size());
      return {};
    case kFeatBuildId:
      for (size_t off = 0; data.size() - off >= sizeof(perf_event_header);) {
        perf_event_header h;
        std::memcpy(&h, data.data() + off, sizeof h);
        if (h.size < 36 || h.size > data.size() - off ||
            !build_id_entry(data.subspan(off, h.size), ft.build_ids))
          return bad("malformed build-ID table");
        off += h.size;
        if (ft.build_ids.size() > kMaxStrings) return bad("build-ID table too long");
      }
      break;
    case kFeatHostname:
      ft.hostname = header_string(r);
      break;
    case kFeatOsRelease:
      ft.os_release = header_string(r);
      break;
    case kFeatVersion:
      ft.perf_version = header_string(r);
      break;
    case kFeatArch:
      ft.arch = header_string(r);
      break;
    case kFeatCpuDesc:
      ft.cpu_desc = header_string(r);
      break;
    case kFeatNrCpus:
      ft.cpus_available = r.get<uint32_t>();
      ft.cpus_online = r.get<uint32_t>();
      break;
    case kFeatTotalMem:
      ft.total_mem_kb = r.get<uint64_t>();
      break;
    case kFeatCmdline: {
      const uint32_t nr = r.get<uint32_t>();
      if (nr > kMaxStrings) return bad("command line with " + std::to_string(nr) + " words");
      for (uint32_t i = 0; i < nr && !r.bad; ++i) ft.cmdline.push_back(header_string(r));
      break;
    }
    case kFeatEventDesc:
      return event_desc(data);
    default:
      return {};
  }
  if (r.bad) return bad("malformed header feature " + std::to_string(bit));
  return {};
}

// EVENT_DESC: u32 nr, u32 attr_size, then per event its attr, u32 nr_ids, its name, its ids.
Status Parser::event_desc(std::span<const std::byte> data) {
  ByteReader r = reader(data);
  const uint32_t nr = r.get<uint32_t>(), attr_size = r.get<uint32_t>();
  if (nr > kMaxEvents || attr_size > 4096) return bad("malformed event descriptions");
  for (uint32_t i = 0; i < nr && !r.bad; ++i) {
    (void)attr_from(r, attr_size);
    const uint32_t nr_ids = r.get<uint32_t>();
    std::string name = header_string(r);
    if (nr_ids > kMaxIds || !r.need(uint64_t{nr_ids} * 8)) break;
    uint64_t first = 0;
    if (nr_ids) std::memcpy(&first, r.p, 8);
    r.p += uint64_t{nr_ids} * 8;
    // The attributes section's event with these ids, or the i-th when there are none.
    for (size_t e = 0; e < f_.events.size(); ++e) {
      const Event& ev = f_.events[e];
      const bool match = nr_ids ? std::find(ev.ids.begin(), ev.ids.end(), first) != ev.ids.end() : e == i;
      if (match) f_.events[e].name = name;
    }
  }
  if (r.bad) return bad("malformed event descriptions");
  return {};
}

Status Parser::file_mode() {
  if (size_ < kFileHeader) return bad("truncated perf.data header");
  ByteReader r = reader(at(0, kFileHeader));
  r.get<uint64_t>();  // magic
  const uint64_t header_size = r.get<uint64_t>(), attr_size = r.get<uint64_t>();
  const uint64_t attrs_off = r.get<uint64_t>(), attrs_size = r.get<uint64_t>();
  const uint64_t data_off = r.get<uint64_t>(), data_size = r.get<uint64_t>();
  r.get<uint64_t>();  // event_types (unused since perf 3.x)
  r.get<uint64_t>();
  uint64_t features[4];
  for (uint64_t& w : features) w = r.get<uint64_t>();
  if (header_size != kFileHeader) return bad("unknown perf.data header size " + std::to_string(header_size));
  if (attr_size < PERF_ATTR_SIZE_VER0 + 16 || attr_size > 4096 + 16)
    return bad("impossible attribute size " + std::to_string(attr_size));
  if (!inside(attrs_off, attrs_size) || attrs_size % attr_size != 0 || attrs_size / attr_size > kMaxEvents)
    return bad("the attributes section does not fit the file (" + std::to_string(attrs_size) + " bytes at " +
               std::to_string(attrs_off) + ")");
  if (!inside(data_off, data_size)) return bad("truncated: the data section ends past the end of the file");
  for (uint64_t off = attrs_off; off < attrs_off + attrs_size; off += attr_size) {
    ByteReader a = reader(at(off, attr_size));
    Event e;
    e.attr = attr_from(a, attr_size - 16);
    const uint64_t ids_off = a.get<uint64_t>(), ids_size = a.get<uint64_t>();
    if (!inside(ids_off, ids_size) || ids_size % 8 != 0 || ids_size / 8 > kMaxIds)
      return bad("an event's ids do not fit the file");
    e.ids.resize(ids_size / 8);
    if (ids_size) std::memcpy(e.ids.data(), base_ + ids_off, ids_size);
    f_.events.push_back(std::move(e));
  }
  if (f_.events.empty()) return bad("no events in the attributes section");
  // Feature sections: one (offset, size) per bit set, in bit order, right after the data.
  uint64_t table = data_off + data_size;
  for (uint64_t bit = 0; bit < 256; ++bit) {
    if (!(features[bit / 64] >> (bit % 64) & 1)) continue;
    if (!inside(table, 16))
      return bad("truncated: the feature sections' table ends past the end of the file");
    ByteReader t = reader(at(table, 16));
    const uint64_t off = t.get<uint64_t>(), len = t.get<uint64_t>();
    table += 16;
    if (!inside(off, len)) return bad("header feature " + std::to_string(bit) + " does not fit the file");
    if (auto s = feature(bit, at(off, len)); !s) return s;
  }
  return records(data_off, data_off + data_size);
}

Status Parser::pipe_mode() { return records(kPipeHeader, size_); }

// perf's own records: attributes, names, features and build IDs in pipe mode; data that follows a record
// outside its size (AUXTRACE, TRACING_DATA) skipped.
Status Parser::user_record(perf_event_header* h, uint64_t& next, uint64_t end) {
  ByteReader r = reader({reinterpret_cast<const std::byte*>(h), h->size});
  r.p += sizeof *h;
  switch (h->type) {
    case kHeaderAttr: {
      if (f_.events.size() >= kMaxEvents) return bad("too many events");
      const uint32_t asize = r.left() >= 8 ? [&] {
        uint32_t s;
        std::memcpy(&s, r.p + 4, 4);
        return s;
      }() : 0;
      if (asize < PERF_ATTR_SIZE_VER0 || asize > r.left() || (r.left() - asize) % 8)
        return bad("malformed event attribute record");
      Event e;
      e.attr = attr_from(r, asize);
      e.ids.resize(r.left() / 8);
      if (!e.ids.empty()) std::memcpy(e.ids.data(), r.p, e.ids.size() * 8);
      f_.events.push_back(std::move(e));
      break;
    }
    case kHeaderFeature: {
      const uint64_t bit = r.get<uint64_t>();
      if (r.bad) return bad("malformed header feature record");
      if (bit != kFeatEventDesc)  // pipe mode names events by EVENT_UPDATE
        if (auto s = feature(bit, {reinterpret_cast<const std::byte*>(r.p), r.left()}); !s) return s;
      break;
    }
    case kHeaderBuildId:
      if (!build_id_entry({reinterpret_cast<const std::byte*>(h), h->size}, f_.features.build_ids))
        return bad("malformed build-ID record");
      break;
    case kEventUpdate: {
      const uint64_t type = r.get<uint64_t>(), id = r.get<uint64_t>();
      if (type == 2 && !r.bad)  // PERF_EVENT_UPDATE__NAME
        for (Event& e : f_.events)
          if (std::find(e.ids.begin(), e.ids.end(), id) != e.ids.end())
            e.name.assign(reinterpret_cast<const char*>(r.p),
                          strnlen(reinterpret_cast<const char*>(r.p), r.left()));
      break;
    }
    case kTracingData:
    case kAuxtrace: {
      const uint64_t extra = h->type == kAuxtrace ? r.get<uint64_t>() : r.get<uint32_t>();
      if (r.bad || extra > end - next)
        return bad("truncated: data after a record ends past the end of the file");
      next += extra;
      ++f_.dropped;
      break;
    }
    case kCompressed:
    case kCompressed2:
      return compressed(h);
    default:
      break;
  }
  return {};
}

// A compressed record's zstd data, inflated by the file's one stream (a frame may span records) and at
// most kMaxInflatedRecord bytes at a time, at most kMaxInflatedRatio times the file's size in all (a record
// that claims more is an error, not an allocation); its complete records are kept as the file's own.
constexpr size_t kMaxInflatedRecord = size_t{64} << 20;
constexpr uint64_t kMaxInflatedRatio = 100;

Status Parser::compressed(const perf_event_header* h) {
  const auto* data = reinterpret_cast<const std::byte*>(h) + sizeof *h;
  size_t len = h->size - sizeof *h;
  if (h->type == kCompressed2) {  // a u64 data size, then the data padded to 8 bytes
    uint64_t data_size = 0;
    if (len < 8) return bad("malformed compressed record");
    std::memcpy(&data_size, data, 8);
    data += 8;
    len -= 8;
    if (data_size > len) return bad("malformed compressed record (its data ends past the record)");
    len = static_cast<size_t>(data_size);
  }
  if (!zstd_) {
    zstd_.reset(ZSTD_createDStream());
    if (!zstd_ || ZSTD_isError(ZSTD_initDStream(zstd_.get()))) return bad("zstd: cannot start inflating");
  }
  ZSTD_inBuffer in{data, len, 0};
  // Until the input is used and zstd had room to spare (a full output may leave output inside zstd).
  for (bool full = true; in.pos < in.size || full;) {
    const size_t used = inflated_.size();
    if (used >= kMaxInflatedRecord)
      return bad("a compressed record inflates to more than " + std::to_string(kMaxInflatedRecord >> 20) +
                 " MB");
    inflated_.resize(std::min(kMaxInflatedRecord, used + std::max<size_t>(len * 8, 1 << 16)));
    ZSTD_outBuffer out{inflated_.data() + used, inflated_.size() - used, 0};
    const size_t before = in.pos;
    const size_t rc = ZSTD_decompressStream(zstd_.get(), &out, &in);
    inflated_.resize(used + out.pos);
    full = out.pos == out.size;
    if (ZSTD_isError(rc)) return bad(std::string("corrupt compressed record: ") + ZSTD_getErrorName(rc));
    if (in.pos == before && out.pos == 0) {
      if (in.pos == in.size) break;
      return bad("corrupt compressed record (zstd made no progress)");
    }
    inflated_total_ += out.pos;
    if (inflated_total_ > kMaxInflatedRatio * std::max<uint64_t>(size_, 1 << 20))
      return bad("its compressed records inflate to more than " + std::to_string(kMaxInflatedRatio) +
                 " times the file's size");
  }
  return keep_inflated();
}

// The complete records at the start of inflated_, copied to aligned storage and kept; the rest waits for
// the next compressed record.
Status Parser::keep_inflated() {
  size_t off = 0;
  while (inflated_.size() - off >= sizeof(perf_event_header)) {
    perf_event_header hd;
    std::memcpy(&hd, inflated_.data() + off, sizeof hd);
    if (hd.size < sizeof hd || hd.size % 8)
      return bad("a compressed record holds a record of an impossible size (" + std::to_string(hd.size) +
                 " bytes)");
    if (hd.size > inflated_.size() - off) break;
    off += hd.size;
  }
  if (off == 0) return {};
  std::vector<uint64_t>& chunk = aligned_.emplace_back(off / 8);
  std::memcpy(chunk.data(), inflated_.data(), off);
  for (size_t at = 0; at < off;) {
    auto* rec = reinterpret_cast<perf_event_header*>(reinterpret_cast<std::byte*>(chunk.data()) + at);
    if (rec->type < kUserTypeStart) kept.push_back(rec);  // perf compresses the kernel's records only
    at += rec->size;
  }
  inflated_.erase(inflated_.begin(), inflated_.begin() + static_cast<ptrdiff_t>(off));
  return {};
}

Status Parser::records(uint64_t off, uint64_t end) {
  while (off < end) {
    if (end - off < sizeof(perf_event_header))
      return bad("truncated record at offset " + std::to_string(off));
    auto* h = reinterpret_cast<perf_event_header*>(base_ + off);
    perf_event_header hd;
    std::memcpy(&hd, h, sizeof hd);
    if (hd.size < sizeof hd || hd.size > end - off)
      return bad("record at offset " + std::to_string(off) + " has an impossible size (" +
                 std::to_string(hd.size) + " bytes)");
    uint64_t next = off + hd.size;
    if (reinterpret_cast<uintptr_t>(h) % 8 != 0) {  // copied to aligned storage (the ring buffer's shape)
      std::vector<uint64_t>& copy = aligned_.emplace_back((hd.size + 7) / 8);
      std::memcpy(copy.data(), h, hd.size);
      h = reinterpret_cast<perf_event_header*>(copy.data());
    }
    if (hd.type >= kUserTypeStart) {
      if (auto s = user_record(h, next, end); !s) return s;
    } else {
      kept.push_back(h);
    }
    off = next;
  }
  return {};
}

}  // namespace

// Reads the attributes, features and records, then puts the records in time order.
Result<bool> DataFile::load(const std::string& name) {
  if (size_ < 8) return Err(name + ": not a perf.data file (too short)");
  uint64_t magic;
  std::memcpy(&magic, base_, 8);
  if (magic == kSwapped) return Err(name + ": a big-endian perf.data file, which fxprof does not read");
  if (magic != kMagic) return Err(name + ": not a perf.data file (no PERFILE2 magic)");
  uint64_t header = 0;
  if (size_ >= 16) std::memcpy(&header, base_ + 8, 8);
  pipe = header == kPipeHeader;
  Parser p(*this, base_, size_, name, aligned_);
  if (auto s = pipe ? p.pipe_mode() : p.file_mode(); !s) return std::move(s).take_error();
  if (events.empty()) return Err(name + ": no event attributes in the file");
  std::vector<EventAttr> attrs;
  for (Event& e : events) {
    attrs.push_back(EventAttr::of(e.attr));
    if (e.name.empty()) e.name = event_name(e.attr);
  }
  layout = Layout(std::move(attrs));
  if (events.size() > 1)
    for (uint32_t i = 0; i < events.size(); ++i)
      for (uint64_t id : events[i].ids) layout.add_id(id, i);
  // Time order; records without a time (synthesized before the recording) take the first one.
  records.reserve(p.kept.size());
  uint64_t first = 0, latest = 0;
  for (perf_event_header* h : p.kept) {
    const uint64_t t = record_time(h, layout);
    if (t && (!first || t < first)) first = t;
    if (t && t < latest) ++out_of_order;
    latest = std::max(latest, t);
    records.push_back({t, h});
  }
  for (RecordAt& r : records)
    if (r.time == 0)
      if (const size_t at = time_offset(r.h, layout)) {
        std::memcpy(reinterpret_cast<std::byte*>(const_cast<perf_event_header*>(r.h)) + at, &first, 8);
        r.time = first;
      }
  std::stable_sort(records.begin(), records.end(),
                   [](const RecordAt& a, const RecordAt& b) { return a.time < b.time; });
  return true;
}

Result<DataFile> DataFile::parse(std::span<const std::byte> bytes, const std::string& name) {
  DataFile f;
  f.owned_.assign((bytes.size() + 7) / 8, 0);
  if (!bytes.empty()) std::memcpy(f.owned_.data(), bytes.data(), bytes.size());
  f.base_ = reinterpret_cast<std::byte*>(f.owned_.data());
  f.size_ = bytes.size();
  if (auto r = f.load(name); !r) return std::move(r).take_error();
  return f;
}

Result<DataFile> DataFile::read(const std::string& path) {
  const bool in = path == "-";
  UniqueFd own(in ? -1 : open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const int fd = in ? STDIN_FILENO : own.get();
  if (fd < 0) return Err("cannot open " + path + ": " + errno_text(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) return Err("cannot read " + path + ": " + errno_text(errno));
  const std::string name = in ? "standard input" : path;
  DataFile f;
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    const auto len = static_cast<size_t>(st.st_size);
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return Err("cannot map " + name + ": " + errno_text(errno));
    f.map_ = Mapping(p, len);
    f.base_ = static_cast<std::byte*>(p);
    f.size_ = len;
  } else {
    if (S_ISDIR(st.st_mode)) return Err(path + ": a directory, not a perf.data file");
    std::string bytes;
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Err("cannot read " + name + ": " + errno_text(errno));
      if (n == 0) break;
      bytes.append(buf, static_cast<size_t>(n));
    }
    f.owned_.assign((bytes.size() + 7) / 8, 0);
    if (!bytes.empty()) std::memcpy(f.owned_.data(), bytes.data(), bytes.size());
    f.base_ = reinterpret_cast<std::byte*>(f.owned_.data());
    f.size_ = bytes.size();
  }
  if (auto r = f.load(name); !r) return std::move(r).take_error();
  return f;
}

}  // namespace fxprof::perf
