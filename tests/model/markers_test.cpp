// Program markers in the model (model/markers.h): the samples inside their intervals, the innermost one of
// each sample, and a schema per marker name.
#include "model/markers.h"

#include <catch2/catch.hpp>

using namespace fxprof::model;

namespace {

Marker interval(Profile& p, const char* name, uint64_t start, uint64_t end) {
  Marker m;
  m.program = true;
  m.phase = MarkerPhase::Interval;
  m.name = p.strings.intern(name);
  m.start_ns = start;
  m.end_ns = end;
  return m;
}

}  // namespace

TEST_CASE("program markers: the samples inside their intervals, nested and overlapping counted once") {
  Profile p;
  Thread t;
  for (uint64_t time : {5, 10, 15, 20, 25, 30, 35, 40}) t.samples.push_back({time, 0, -1});
  t.markers.push_back(interval(p, "req", 10, 20));
  t.markers.push_back(interval(p, "req", 12, 18));  // nested in the first
  t.markers.push_back(interval(p, "req", 28, 36));
  t.markers.push_back(interval(p, "inner", 14, 16));
  Marker recorder_own = interval(p, "req", 0, 100);  // the recorder's, not the program's
  recorder_own.program = false;
  t.markers.push_back(recorder_own);
  const std::vector<bool> inside = samples_inside(t, p.strings.intern("req"));
  CHECK(inside == std::vector<bool>{false, true, true, true, false, true, true, false});
  const std::vector<StringId> innermost = innermost_marker_of_samples(t);
  CHECK(innermost[0] == kNoString);
  CHECK(innermost[2] == p.strings.intern("inner"));
  CHECK(innermost[3] == p.strings.intern("req"));

  Process proc;
  proc.threads.push_back(t);
  p.processes.push_back(proc);
  CHECK(keep_samples_in_marker(p, "req") == 3);
  std::vector<uint64_t> kept;
  for (const Sample& s : p.processes[0].threads[0].samples) kept.push_back(s.time_ns);
  CHECK(kept == std::vector<uint64_t>{10, 15, 20, 30, 35});
  CHECK(keep_samples_in_marker(p, "nothing") == 0);
}

TEST_CASE("program markers: one schema per name with its fields, not taking a recorder schema's name") {
  Profile p;
  p.meta.marker_schemas.push_back({"Lock wait", {"marker-chart"}, "", "", "", {}});
  Thread t;
  Marker a = interval(p, "request", 1, 2);
  a.fields.push_back({p.strings.intern("id"), false, 3, kNoString});
  a.fields.push_back({p.strings.intern("path"), true, 0, p.strings.intern("/x")});
  Marker b = interval(p, "request", 3, 4);
  b.fields.push_back({p.strings.intern("id"), false, 2.5, kNoString});
  t.markers = {a, b, interval(p, "Lock wait", 5, 6)};
  Process proc;
  proc.threads.push_back(t);
  p.processes.push_back(proc);
  add_program_marker_schemas(p);
  add_program_marker_schemas(p);  // a profile read back and written again keeps one of each
  REQUIRE(p.meta.marker_schemas.size() == 3);
  const MarkerSchema& r = p.meta.marker_schemas[1];
  CHECK(r.name == "request");
  REQUIRE(r.fields.size() == 2);
  CHECK(r.fields[0].key == "id");
  CHECK(r.fields[0].format == "decimal");  // one marker's id is not an integer
  CHECK(r.fields[1].format == "string");
  CHECK(p.strings.get(p.processes[0].threads[0].markers[0].type) == "request");
  CHECK(p.meta.marker_schemas[2].name == "Lock wait (program)");
}
