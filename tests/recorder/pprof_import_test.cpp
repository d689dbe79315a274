// pprof import (recorder/pprof_import.h) on profiles built here with protozero's writer in Go's layout
// (string table with "" first, mappings with build IDs, locations with inlined lines, labels): the samples,
// threads, frames, CPU time and heap rows the model gets; and hostile bytes (every truncation, ids and string
// indices that point nowhere, varints and lengths that lie, counts too large) are one-line errors.
#include "recorder/pprof_import.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <map>
#include <protozero/pbf_writer.hpp>
#include <string>
#include <vector>

#include "tests/support/support.h"

using namespace fxprof;
using fxprof::test::gzip_text;
using namespace fxprof::recorder;

namespace {

struct Loc {
  uint64_t id, mapping, address;
  std::vector<std::pair<uint64_t, int64_t>> lines;  // function id, line; innermost first
};
struct Smp {
  std::vector<uint64_t> locations;  // leaf first
  std::vector<int64_t> values;
  std::vector<std::pair<std::string, std::string>> str_labels;
  std::vector<std::pair<std::string, int64_t>> num_labels;
};

// A profile in Go's layout; `types` are "type/unit".
class Proto {
 public:
  std::vector<std::string> types{"samples/count", "cpu/nanoseconds"};
  std::vector<Loc> locations;
  std::vector<Smp> samples;
  std::map<uint64_t, std::string> functions;  // id -> name
  int64_t period = 10'000'000, duration = 2'000'000'000;

  std::string bytes() {
    std::string out;
    protozero::pbf_writer w(out);
    for (const std::string& t : types) {
      protozero::pbf_writer v(w, 1);
      v.add_int64(1, s(t.substr(0, t.find('/'))));
      v.add_int64(2, s(t.substr(t.find('/') + 1)));
    }
    for (const Smp& sm : samples) {
      protozero::pbf_writer m(w, 2);
      m.add_packed_uint64(1, sm.locations.begin(), sm.locations.end());
      m.add_packed_int64(2, sm.values.begin(), sm.values.end());
      for (const auto& [k, v] : sm.str_labels) {
        protozero::pbf_writer l(m, 3);
        l.add_int64(1, s(k));
        l.add_int64(2, s(v));
      }
      for (const auto& [k, v] : sm.num_labels) {
        protozero::pbf_writer l(m, 3);
        l.add_int64(1, s(k));
        l.add_int64(3, v);
      }
    }
    {
      protozero::pbf_writer m(w, 3);
      m.add_uint64(1, 1);
      m.add_uint64(2, 0x400000);
      m.add_uint64(3, 0x500000);
      m.add_uint64(4, 0x1000);
      m.add_int64(5, s("/usr/bin/server"));
      m.add_int64(6, s("0123456789abcdef0123456789abcdef01234567"));
      m.add_bool(7, true);
    }
    for (const Loc& l : locations) {
      protozero::pbf_writer m(w, 4);
      m.add_uint64(1, l.id);
      if (l.mapping) m.add_uint64(2, l.mapping);
      m.add_uint64(3, l.address);
      for (const auto& [fn, line] : l.lines) {
        protozero::pbf_writer ln(m, 4);
        ln.add_uint64(1, fn);
        ln.add_int64(2, line);
      }
    }
    for (const auto& [id, name] : functions) {
      protozero::pbf_writer f(w, 5);
      f.add_uint64(1, id);
      f.add_int64(2, s(name));
      f.add_int64(3, s(name));
      f.add_int64(4, s("server.go"));
    }
    w.add_int64(9, 1'700'000'000'000'000'000);
    w.add_int64(10, duration);
    {
      protozero::pbf_writer v(w, 11);
      v.add_int64(1, s("cpu"));
      v.add_int64(2, s("nanoseconds"));
    }
    w.add_int64(12, period);
    for (const std::string& str : strings_) w.add_string(6, str);
    return out;
  }

 private:
  int64_t s(const std::string& str) {
    for (size_t i = 0; i < strings_.size(); ++i)
      if (strings_[i] == str) return static_cast<int64_t>(i);
    strings_.push_back(str);
    return static_cast<int64_t>(strings_.size() - 1);
  }
  std::vector<std::string> strings_{""};
};

// main -> handle -> (parse inlined into handle) ; main -> idle
Proto go_like() {
  Proto p;
  p.functions = {{1, "main.main"}, {2, "main.handle"}, {3, "main.parse"}, {4, "main.idle"}};
  p.locations = {{1, 1, 0x401100, {{1, 10}}},
                 {2, 1, 0x402200, {{3, 30}, {2, 20}}},  // parse inlined into handle
                 {3, 1, 0x403300, {{4, 40}}}};
  p.samples = {{{2, 1}, {3, 30'000'000}, {{"thread", "worker"}}, {{"tid", 12}, {"pid", 10}}},
               {{3, 1}, {2, 20'000'000}, {{"thread", "server"}}, {{"tid", 10}, {"pid", 10}}}};
  return p;
}

// The function names of a stack, root first, with inline depths.
std::string path_of(const model::Profile& p, model::StackId st) {
  std::string out;
  for (; st != model::kNoStack; st = p.stacks.prefix(st)) {
    const model::Frame& f = p.frames.get(p.stacks.frame(st));
    std::string name = f.name == model::kNoString ? "?" : std::string(p.strings.get(f.name));
    if (f.inline_depth) name += "@" + std::to_string(f.inline_depth);
    out = name + (out.empty() ? "" : ";") + out;
  }
  return out;
}

}  // namespace

TEST_CASE("pprof import: Go's layout becomes threads, named inlined frames, samples with CPU time") {
  for (bool gz : {false, true}) {
    INFO(gz);
    const std::string bytes = go_like().bytes();
    CHECK(looks_like_pprof(gz ? gzip_text(bytes) : bytes));
    auto r = import_pprof(gz ? gzip_text(bytes) : bytes, {});
    INFO((r ? "" : r.error()));
    REQUIRE(r);
    const model::Profile& p = r->profile;
    CHECK(r->stats.samples == 5);
    CHECK(r->stats.counted == "samples/count");
    REQUIRE(p.processes.size() == 1);
    CHECK(p.processes[0].pid == 10);
    CHECK(p.processes[0].name == "server");
    REQUIRE(p.processes[0].threads.size() == 2);
    const model::Thread& worker = p.processes[0].threads[0];
    CHECK(worker.name == "worker");
    CHECK(worker.tid == 12);
    REQUIRE(worker.samples.size() == 3);
    CHECK(path_of(p, worker.samples[0].stack) == "main.main;main.handle;main.parse@1");
    CHECK(worker.samples[0].cpu_delta_ns == 10'000'000);
    CHECK(p.processes[0].threads[1].samples.size() == 2);
    CHECK(p.meta.interval_ms == 10.0);
    // The frames are in the mapping's binary, binary-relative, with its build ID; the library is the
    // process's.
    const model::Frame& leaf = p.frames.get(p.stacks.frame(worker.samples[0].stack));
    REQUIRE(leaf.binary != model::kNoBinary);
    CHECK(leaf.address == 0x402200 - 0x400000 + 0x1000);
    CHECK(p.binaries[leaf.binary].code_id == "0123456789abcdef0123456789abcdef01234567");
    CHECK(p.strings.get(leaf.file) == "server.go");
    CHECK(leaf.line == 30);
    REQUIRE(p.processes[0].libs.size() == 1);
    CHECK(p.processes[0].libs[0].name == "server");
    // Samples spread over the 2 s the profile lasted, in time order.
    CHECK(worker.samples[2].time_ns > worker.samples[0].time_ns);
    CHECK(worker.samples[2].time_ns - p.meta.start_monotonic_ns <= 2'000'000'000);
  }
}

TEST_CASE("pprof import: --event picks the counted type, filters, off-CPU and heap values") {
  Proto p = go_like();
  ImportOptions o;
  o.tids = {10};
  auto one = import_pprof(p.bytes(), o);
  REQUIRE(one);
  CHECK(one->stats.samples == 2);
  o.tids.clear();
  o.event = "nope";
  auto bad = import_pprof(p.bytes(), o);
  REQUIRE(!bad);
  CHECK(bad.error() == "no sample type nope (its types: samples/count, cpu/nanoseconds)");
  o.event = "cpu";  // one sample per 10 ms period: the same 5
  auto cpu = import_pprof(p.bytes(), o);
  REQUIRE(cpu);
  CHECK(cpu->stats.samples == 5);

  // fxprof's own export: off_cpu nanoseconds become Idle samples.
  Proto off = go_like();
  off.types = {"samples/count", "cpu/nanoseconds", "off_cpu/nanoseconds"};
  off.samples[0].values = {3, 30'000'000, 40'000'000};
  off.samples[1].values = {2, 20'000'000, 0};
  auto offr = import_pprof(off.bytes(), {});
  REQUIRE(offr);
  CHECK(offr->stats.samples == 5);
  CHECK(offr->stats.off_cpu_samples == 4);
  const model::Profile& op = offr->profile;
  const model::Thread& w = op.processes[0].threads[0];
  REQUIRE(w.samples.size() == 7);
  const model::Frame& idle = op.frames.get(op.stacks.frame(w.samples.back().stack));
  CHECK(idle.category == model::Category::Idle);
  CHECK(idle.kind == model::FrameKind::Label);

  // Go's heap profile: the four totals come back from the rows.
  Proto heap = go_like();
  heap.types = {"alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes"};
  heap.samples[0].values = {10, 1000, 4, 400};
  heap.samples[1].values = {1, 64, 0, 0};
  auto hr = import_pprof(heap.bytes(), {});
  REQUIRE(hr);
  int64_t alloc = 0, freed = 0, objects = 0;
  for (const model::Thread& t : hr->profile.processes[0].threads)
    for (const model::Allocation& a : t.allocations) {
      (a.bytes > 0 ? alloc : freed) += a.bytes;
      if (a.bytes > 0) objects += a.count;
    }
  CHECK(alloc == 1064);
  CHECK(alloc + freed == 400);
  CHECK(objects == 11);
}

TEST_CASE("pprof import: hostile bytes are one-line errors, never a crash") {
  const std::string good = go_like().bytes();
  // Every truncation: an error or (cut between fields) a profile; never a crash.
  for (size_t n = 0; n < good.size(); ++n) {
    auto r = import_pprof(good.substr(0, n), {});
    if (!r) CHECK(r.error().find('\n') == std::string::npos);
  }
  const std::string gz = gzip_text(good);
  for (size_t n = 0; n < gz.size(); n += 3) (void)import_pprof(gz.substr(0, n), {});

  auto error = [](std::string bytes) {
    auto r = import_pprof(std::move(bytes), {});
    REQUIRE(!r);
    return r.error();
  };
  // A varint of 11 bytes; a length past the end.
  CHECK(error("\x48\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01").starts_with("not a pprof profile"));
  CHECK(error(std::string("\x32\xff\xff\xff\xff\x0f", 6) + "abc").starts_with("not a pprof profile"));
  // A sample naming a location that is not there; a function naming a string past the table.
  Proto missing = go_like();
  missing.samples[0].locations = {1ull << 60};
  CHECK(error(missing.bytes()) ==
        "not a valid pprof profile: a sample names no location (1152921504606846976)");
  std::string bad_string = go_like().bytes();
  {
    protozero::pbf_writer w(bad_string);
    protozero::pbf_writer f(w, 5);
    f.add_uint64(1, 99);
    f.add_int64(2, 1'000'000);
  }
  CHECK(error(bad_string) == "not a valid pprof profile: function 99 names no string");
  // A count of 2^62 samples: refused, not allocated.
  Proto huge = go_like();
  huge.samples[0].values = {int64_t{1} << 62, 0};
  CHECK(error(huge.bytes()).starts_with("it holds more than 50000000 samples"));
  // No string table.
  CHECK(error(std::string("\x48\x01", 2)) ==
        "not a valid pprof profile: its string table does not start with \"\"");
  // A Gecko profile, gzipped or not, and perf.data are not pprof.
  CHECK(!looks_like_pprof("{\"meta\":{}}"));
  CHECK(!looks_like_pprof(gzip_text("{\"meta\":{}}")));
  CHECK(!looks_like_pprof("PERFILE2"));
}
