// fxprof recorder internals: a pprof file (perftools.profiles.Profile, profile.proto) decoded into flat
// tables, for pprof_import.cpp to turn into the model.
//
// The file is read whole (Go's, Pyroscope's and Parca's profiles are a few MB; ours stream the string table
// last, so nothing can be named before the end): gunzipped when it starts with gzip's magic, at most
// kMaxPprofBytes of protobuf, then decoded by protozero in one pass into vectors of plain structs (every
// entry takes at least one byte of input, so the tables are bounded by the input's size). Repeated scalars
// are read packed or not, as proto3 readers must. Every string index, location, function and mapping id is
// checked once after the pass (ids are looked up in hash maps: a hostile id of 2^60 costs nothing), so the
// model side never checks again. A malformed message (truncated, a varint that lies, a length past the end)
// is a one-line error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"

namespace fxprof::recorder::pprof {

inline constexpr size_t kMaxPprofBytes = size_t{512} << 20;  // a gzip bomb stops here

struct ValueType {
  int64_t type = 0, unit = 0;  // string indices
};
struct Label {
  int64_t key = 0, str = 0, num = 0;
};
struct Sample {
  uint32_t first_location = 0, locations = 0;  // into Decoded::location_ids, leaf first
  uint32_t first_value = 0, values = 0;        // into Decoded::values
  uint32_t first_label = 0, labels = 0;        // into Decoded::labels
};
struct Mapping {
  uint64_t id = 0, start = 0, limit = 0, offset = 0;
  int64_t filename = 0, build_id = 0;
};
struct Line {
  uint64_t function = 0;  // id
  int64_t line = 0;
};
struct Location {
  uint64_t id = 0, mapping = 0, address = 0;  // mapping 0: none
  uint32_t first_line = 0, lines = 0;         // into Decoded::lines, innermost first
};
struct Function {
  uint64_t id = 0;
  int64_t name = 0, system_name = 0, filename = 0, start_line = 0;
};

struct Decoded {
  std::unique_ptr<std::string> bytes;  // the protobuf (gunzipped): the strings view it (a pointer: a move
                                       // of the Decoded keeps them valid)
  std::vector<std::string_view> strings;
  std::vector<ValueType> sample_types;
  ValueType period_type;
  int64_t period = 0, time_nanos = 0, duration_nanos = 0, default_sample_type = 0;
  std::vector<Sample> samples;
  std::vector<uint64_t> location_ids;
  std::vector<int64_t> values;
  std::vector<Label> labels;
  std::vector<Mapping> mappings;
  std::vector<Location> locations;
  std::vector<Line> lines;
  std::vector<Function> functions;
  std::vector<int64_t> comments;
  // id -> index, checked: every id a sample, location or line names is in these.
  std::unordered_map<uint64_t, uint32_t> location_index, mapping_index, function_index;

  std::string_view str(int64_t i) const { return strings[static_cast<size_t>(i)]; }
};

// `bytes`: the file's content, gzip or not. Errors are one line, without the file name.
Result<Decoded> decode(std::string bytes);

}  // namespace fxprof::recorder::pprof
