// A pprof file into flat tables (pprof_decode.h): gunzip (bounded), one protozero pass, one check pass.
#include "recorder/pprof_decode.h"

#include <zlib.h>

#include <protozero/exception.hpp>
#include <protozero/pbf_reader.hpp>

#include "recorder/pprof_import.h"

namespace fxprof::recorder::pprof {
namespace {

using protozero::pbf_reader;
using protozero::pbf_wire_type;

// gzip (several members, as `cat a.gz b.gz` makes) into at most kMaxPprofBytes.
Result<std::string> gunzip(std::string_view in) {
  std::string out;
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return Err("zlib: cannot start inflating");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(std::min<size_t>(in.size(), UINT32_MAX));
  int rc = Z_OK;
  while (true) {
    if (out.size() >= kMaxPprofBytes) {
      inflateEnd(&z);
      return Err("it inflates to more than " + std::to_string(kMaxPprofBytes >> 20) +
                 " MB of protobuf (a gzip bomb?)");
    }
    const size_t used = out.size();
    out.resize(std::min(kMaxPprofBytes, std::max<size_t>(used * 2, 1 << 16)));
    z.next_out = reinterpret_cast<Bytef*>(out.data() + used);
    z.avail_out = static_cast<uInt>(out.size() - used);
    rc = inflate(&z, Z_NO_FLUSH);
    out.resize(out.size() - z.avail_out);
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0) break;
      inflateReset(&z);  // another member
      continue;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) break;
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // truncated
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) return Err("its gzip stream is truncated or corrupt");
  return out;
}

// A varint field's value, or false when the field has another wire type (protozero asserts on it).
bool varint(pbf_reader& r, uint64_t& v) {
  if (r.wire_type() != pbf_wire_type::varint) {
    r.skip();
    return false;
  }
  v = r.get_uint64();
  return true;
}
int64_t as_int(uint64_t v) { return static_cast<int64_t>(v); }

// A repeated scalar, packed (length-delimited) or one varint.
template <class T, class Out>
void repeated(pbf_reader& r, Out& out, uint32_t& count) {
  if (r.wire_type() == pbf_wire_type::length_delimited) {
    auto range = r.get_packed_uint64();
    for (uint64_t v : range) {
      out.push_back(static_cast<T>(v));
      ++count;
    }
  } else if (uint64_t v = 0; varint(r, v)) {
    out.push_back(static_cast<T>(v));
    ++count;
  }
}

// A sub-message field's reader, or false (skipped) when the field is not length-delimited.
bool message(pbf_reader& r, pbf_reader& sub) {
  if (r.wire_type() != pbf_wire_type::length_delimited) {
    r.skip();
    return false;
  }
  sub = r.get_message();
  return true;
}

ValueType value_type(pbf_reader m) {
  ValueType v;
  uint64_t n = 0;
  while (m.next()) {
    const auto t = m.tag();  // read once: a debug protozero forgets it once the field is consumed
    if (t == 1 && varint(m, n))
      v.type = as_int(n);
    else if (t == 2 && varint(m, n))
      v.unit = as_int(n);
    else if (t != 1 && t != 2)
      m.skip();
  }
  return v;
}

void sample(pbf_reader m, Decoded& d) {
  Sample s;
  s.first_location = static_cast<uint32_t>(d.location_ids.size());
  s.first_value = static_cast<uint32_t>(d.values.size());
  s.first_label = static_cast<uint32_t>(d.labels.size());
  while (m.next()) {
    pbf_reader sub;
    const auto field = m.tag();
    if (field == 1) {
      repeated<uint64_t>(m, d.location_ids, s.locations);
    } else if (field == 2) {
      repeated<int64_t>(m, d.values, s.values);
    } else if (field == 3 && message(m, sub)) {
      Label l;
      uint64_t n = 0;
      while (sub.next()) {
        const auto t = sub.tag();
        if (t >= 1 && t <= 3 && varint(sub, n))
          (t == 1 ? l.key : t == 2 ? l.str : l.num) = as_int(n);
        else if (t < 1 || t > 3)
          sub.skip();
      }
      d.labels.push_back(l);
      ++s.labels;
    } else if (field != 3) {
      m.skip();
    }
  }
  d.samples.push_back(s);
}

void mapping(pbf_reader m, Decoded& d) {
  Mapping mp;
  uint64_t n = 0;
  while (m.next()) {
    const auto t = m.tag();
    if (t < 1 || t > 6) {
      m.skip();
      continue;
    }
    if (!varint(m, n)) continue;
    switch (t) {
      case 1:
        mp.id = n;
        break;
      case 2:
        mp.start = n;
        break;
      case 3:
        mp.limit = n;
        break;
      case 4:
        mp.offset = n;
        break;
      case 5:
        mp.filename = as_int(n);
        break;
      default:
        mp.build_id = as_int(n);
        break;
    }
  }
  d.mappings.push_back(mp);
}

void location(pbf_reader m, Decoded& d) {
  Location loc;
  loc.first_line = static_cast<uint32_t>(d.lines.size());
  uint64_t n = 0;
  while (m.next()) {
    pbf_reader sub;
    const auto t = m.tag();
    if (t == 4 && message(m, sub)) {
      Line l;
      while (sub.next()) {
        const auto lt = sub.tag();
        if (lt == 1 && varint(sub, n))
          l.function = n;
        else if (lt == 2 && varint(sub, n))
          l.line = as_int(n);
        else if (lt != 1 && lt != 2)
          sub.skip();
      }
      d.lines.push_back(l);
      ++loc.lines;
    } else if (t >= 1 && t <= 3 && varint(m, n)) {
      (t == 1 ? loc.id : t == 2 ? loc.mapping : loc.address) = n;
    } else if (t < 1 || t > 4) {
      m.skip();
    }
  }
  d.locations.push_back(loc);
}

void function(pbf_reader m, Decoded& d) {
  Function f;
  uint64_t n = 0;
  while (m.next()) {
    const auto t = m.tag();
    if (t < 1 || t > 5) {
      m.skip();
      continue;
    }
    if (!varint(m, n)) continue;
    if (t == 1)
      f.id = n;
    else
      (t == 2 ? f.name : t == 3 ? f.system_name : t == 4 ? f.filename : f.start_line) = as_int(n);
  }
  d.functions.push_back(f);
}

void profile(pbf_reader m, Decoded& d) {
  uint64_t n = 0;
  uint32_t unused = 0;
  while (m.next()) {
    pbf_reader sub;
    switch (m.tag()) {
      case 1:
        if (message(m, sub)) d.sample_types.push_back(value_type(sub));
        break;
      case 2:
        if (message(m, sub)) sample(sub, d);
        break;
      case 3:
        if (message(m, sub)) mapping(sub, d);
        break;
      case 4:
        if (message(m, sub)) location(sub, d);
        break;
      case 5:
        if (message(m, sub)) function(sub, d);
        break;
      case 6:
        if (m.wire_type() == pbf_wire_type::length_delimited) {
          const protozero::data_view v = m.get_view();
          d.strings.emplace_back(v.data(), v.size());
        } else
          m.skip();
        break;
      case 9:
        if (varint(m, n)) d.time_nanos = as_int(n);
        break;
      case 10:
        if (varint(m, n)) d.duration_nanos = as_int(n);
        break;
      case 11:
        if (message(m, sub)) d.period_type = value_type(sub);
        break;
      case 12:
        if (varint(m, n)) d.period = as_int(n);
        break;
      case 13:
        repeated<int64_t>(m, d.comments, unused);
        break;
      case 14:
        if (varint(m, n)) d.default_sample_type = as_int(n);
        break;
      default:
        m.skip();
        break;
    }
  }
}

// Ids into index maps; every reference checked, so the model side indexes without looking.
Status check(Decoded& d) {
  if (d.strings.empty() || !d.strings[0].empty()) return Err("its string table does not start with \"\"");
  const auto nstr = static_cast<int64_t>(d.strings.size());
  auto bad_string = [&](int64_t i) { return i < 0 || i >= nstr; };
  auto index = [](auto& table, auto& map, const char* what) -> Status {
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i].id == 0 || !map.try_emplace(table[i].id, static_cast<uint32_t>(i)).second)
        return Err(std::string("a ") + what + " id is 0 or used twice (" + std::to_string(table[i].id) + ")");
    return {};
  };
  if (Status s = index(d.mappings, d.mapping_index, "mapping"); !s) return s;
  if (Status s = index(d.locations, d.location_index, "location"); !s) return s;
  if (Status s = index(d.functions, d.function_index, "function"); !s) return s;
  for (const ValueType& v : d.sample_types)
    if (bad_string(v.type) || bad_string(v.unit)) return Err("a sample type names no string");
  if (bad_string(d.period_type.type) || bad_string(d.period_type.unit) || bad_string(d.default_sample_type))
    return Err("its period type names no string");
  for (const Mapping& m : d.mappings)
    if (bad_string(m.filename) || bad_string(m.build_id)) return Err("a mapping names no string");
  for (const Function& f : d.functions)
    if (bad_string(f.name) || bad_string(f.system_name) || bad_string(f.filename))
      return Err("function " + std::to_string(f.id) + " names no string");
  for (const Location& l : d.locations) {
    if (l.mapping && !d.mapping_index.count(l.mapping))
      return Err("location " + std::to_string(l.id) + " names no mapping");
    for (uint32_t i = 0; i < l.lines; ++i)
      if (!d.function_index.count(d.lines[l.first_line + i].function))
        return Err("location " + std::to_string(l.id) + " names no function");
  }
  for (const Label& l : d.labels)
    if (bad_string(l.key) || bad_string(l.str)) return Err("a label names no string");
  for (uint64_t id : d.location_ids)
    if (!d.location_index.count(id)) return Err("a sample names no location (" + std::to_string(id) + ")");
  for (const Sample& s : d.samples)
    if (s.values != d.sample_types.size())
      return Err("a sample has " + std::to_string(s.values) + " values for " +
                 std::to_string(d.sample_types.size()) + " sample types");
  if (d.sample_types.empty()) return Err("it has no sample types");
  return {};
}

}  // namespace

}  // namespace fxprof::recorder::pprof

namespace fxprof::recorder {

bool looks_like_pprof(std::string_view head) {
  if (head.size() >= 2 && static_cast<uint8_t>(head[0]) == 0x1f && static_cast<uint8_t>(head[1]) == 0x8b) {
    // gzip: a Gecko profile (.json.gz) or a pprof one; its first inflated byte tells.
    z_stream z{};
    if (inflateInit2(&z, 15 + 16) != Z_OK) return false;
    char first = 0;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(head.data()));
    z.avail_in = static_cast<uInt>(head.size());
    z.next_out = reinterpret_cast<Bytef*>(&first);
    z.avail_out = 1;
    const int rc = inflate(&z, Z_SYNC_FLUSH);
    const bool got = z.avail_out == 0 && (rc == Z_OK || rc == Z_STREAM_END);
    inflateEnd(&z);
    return got && looks_like_pprof(std::string_view(&first, 1));
  }
  if (head.empty() || head.starts_with("PERFILE2")) return false;
  // Field 1-6, 11 (length-delimited) or 9, 10, 12-14 (varint).
  switch (static_cast<uint8_t>(head[0])) {
    case 0x0a:
    case 0x12:
    case 0x1a:
    case 0x22:
    case 0x2a:
    case 0x32:
    case 0x5a:
    case 0x48:
    case 0x50:
    case 0x60:
    case 0x68:
    case 0x70:
      return true;
    default:
      return false;
  }
}

}  // namespace fxprof::recorder

namespace fxprof::recorder::pprof {

Result<Decoded> decode(std::string bytes) {
  Decoded d;
  if (bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f && static_cast<uint8_t>(bytes[1]) == 0x8b) {
    auto raw = gunzip(bytes);
    if (!raw) return std::move(raw).take_error();
    d.bytes = std::make_unique<std::string>(std::move(*raw));
  } else if (bytes.size() > kMaxPprofBytes) {
    return Err("it is larger than " + std::to_string(kMaxPprofBytes >> 20) + " MB");
  } else {
    d.bytes = std::make_unique<std::string>(std::move(bytes));
  }
  try {
    profile(pbf_reader(*d.bytes), d);
  } catch (const protozero::exception& e) {
    return Err(std::string("not a pprof profile (malformed protobuf: ") + e.what() + ")");
  }
  if (Status s = check(d); !s) return Err("not a valid pprof profile: " + s.error());
  return d;
}

}  // namespace fxprof::recorder::pprof
