// Synthetic perf bytes for the perf layer's tests and fuzz seeds: records built field by field, and
// perf.data files (file mode and pipe mode) around them, with their attributes and header features.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace fxprof::test {

// Little-endian bytes appended field by field.
class Bytes {
 public:
  Bytes& u64(uint64_t v) { return put(&v, 8); }
  Bytes& u32(uint32_t v) { return put(&v, 4); }
  Bytes& u16(uint16_t v) { return put(&v, 2); }
  Bytes& u32x2(uint32_t a, uint32_t b) { return u32(a).u32(b); }
  Bytes& put(const void* p, size_t n) {
    s.append(static_cast<const char*>(p), n);
    return *this;
  }
  Bytes& str(const std::string& v, size_t align = 8) {  // NUL-terminated, padded
    std::string p = v;
    p.resize((v.size() / align + 1) * align, '\0');
    return put(p.data(), p.size());
  }
  Bytes& header_string(const std::string& v) {  // perf_header_string: u32 len, padded to 64
    std::string p = v;
    p.resize((v.size() / 64 + 1) * 64, '\0');
    u32(static_cast<uint32_t>(p.size()));
    return put(p.data(), p.size());
  }
  // A record: header (type, misc, size) and this body.
  std::string record(uint32_t type, uint16_t misc = 0) const {
    Bytes r;
    r.u32(type).u16(misc).u16(static_cast<uint16_t>(s.size() + 8));
    r.s += s;
    return r.s;
  }
  std::string s;
};

inline perf_event_attr attr(uint64_t sample_type, uint32_t type = PERF_TYPE_SOFTWARE, uint64_t config = 0) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = type;
  a.config = config;
  a.sample_type = sample_type;
  a.sample_id_all = 1;
  a.freq = 1;
  a.sample_freq = 4000;
  return a;
}

// A perf.data file in file mode: each event's attr and ids, the records, the features given (bit, bytes).
struct FileSpec {
  std::vector<perf_event_attr> attrs;
  std::vector<std::vector<uint64_t>> ids;
  std::vector<std::string> records;
  std::vector<std::pair<uint32_t, std::string>> features;  // in increasing bit order
};

inline std::string perf_file(const FileSpec& f) {
  const size_t attr_entry = sizeof(perf_event_attr) + 16;
  std::string ids_bytes;
  std::vector<std::pair<uint64_t, uint64_t>> id_sections;
  const uint64_t ids_at = 104;
  for (const auto& v : f.ids) {
    id_sections.push_back({ids_at + ids_bytes.size(), v.size() * 8});
    ids_bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * 8);
  }
  const uint64_t attrs_at = ids_at + ids_bytes.size();
  const uint64_t data_at = attrs_at + f.attrs.size() * attr_entry;
  std::string data;
  for (const std::string& r : f.records) data += r;
  Bytes out;
  uint64_t bitmap[4] = {0, 0, 0, 0};
  for (const auto& [bit, bytes] : f.features) bitmap[bit / 64] |= uint64_t{1} << (bit % 64);
  out.put("PERFILE2", 8).u64(104).u64(attr_entry).u64(attrs_at).u64(f.attrs.size() * attr_entry);
  out.u64(data_at).u64(data.size()).u64(0).u64(0);
  for (uint64_t w : bitmap) out.u64(w);
  out.s += ids_bytes;
  for (size_t i = 0; i < f.attrs.size(); ++i) {
    out.put(&f.attrs[i], sizeof(perf_event_attr));
    const auto sec = i < id_sections.size() ? id_sections[i] : std::pair<uint64_t, uint64_t>{0, 0};
    out.u64(sec.first).u64(sec.second);
  }
  out.s += data;
  // The features' table right after the data, then their bytes.
  uint64_t at = out.s.size() + f.features.size() * 16;
  for (const auto& [bit, bytes] : f.features) {
    out.u64(at).u64(bytes.size());
    at += bytes.size();
  }
  for (const auto& [bit, bytes] : f.features) out.s += bytes;
  return out.s;
}

// Pipe mode: the 16-byte header, a HEADER_ATTR record per event, then the records.
inline std::string perf_pipe(const FileSpec& f) {
  Bytes out;
  out.put("PERFILE2", 8).u64(16);
  for (size_t i = 0; i < f.attrs.size(); ++i) {
    Bytes a;
    a.put(&f.attrs[i], sizeof(perf_event_attr));
    if (i < f.ids.size())
      for (uint64_t id : f.ids[i]) a.u64(id);
    out.s += a.record(64);
  }
  for (const std::string& r : f.records) out.s += r;
  return out.s;
}

}  // namespace fxprof::test
