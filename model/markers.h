// fxprof model: the markers a program writes about itself (marker files, the fxprof header
// include/fxprof/markers.h, NVTX and ITT: recorder/markers.h), as typed markers (Marker::program), their
// schemas, and the samples inside their intervals.
//
// A program marker keeps its name, its times, its category (a "category" string field, when given) and its
// fields as model fields (numbers and strings): the Gecko writer writes them as the payload, one schema per
// marker name says which fields the tooltip and the sidebar show, and the Gecko reader reads them back, so
// `fxprof report --markers` and `--marker NAME` work on saved profiles without reading any display text.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/profile.h"

namespace fxprof::model {

// The payload key that marks a program's marker in a Gecko file (the reader sets Marker::program from it).
inline constexpr std::string_view kProgramMarkerKey = "fxprofProgram";
// The field that carries a program marker's category ("" when it gave none).
inline constexpr std::string_view kMarkerCategoryKey = "category";

// One schema per program marker name, with each field its markers carry (numbers as integers or decimals,
// strings as strings), shown in the marker chart, the table and the timeline; each program marker's payload
// type becomes its schema's name: the marker's name, or "NAME (program)" when the recorder has a schema of
// that name. Idempotent (a profile read back keeps its schemas).
void add_program_marker_schemas(Profile& p);

// One interval of a program marker on a thread, in time order.
struct MarkerInterval {
  uint64_t start_ns = 0, end_ns = 0;
  StringId name = kNoString;
};

// The program's interval markers of a thread (named `name`, or all when `name` is kNoString), sorted by
// start.
std::vector<MarkerInterval> program_intervals(const Thread& t, StringId name = kNoString);

// For each sample of `t` (by index), the name of the innermost program interval marker it falls in (the
// one that started last of those still open at its time), kNoString when none.
std::vector<StringId> innermost_marker_of_samples(const Thread& t);

// Whether each sample of `t` (by index) falls inside an interval of its program marker `name`.
std::vector<bool> samples_inside(const Thread& t, StringId name);

// Keeps only the samples that fall inside an interval of a program marker named `name` on their own
// thread (`--marker NAME`); the number of such intervals in the profile (0: no such marker, nothing kept).
size_t keep_samples_in_marker(Profile& p, std::string_view name);

}  // namespace fxprof::model
