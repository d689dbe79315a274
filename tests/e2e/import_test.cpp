// `fxprof import` on perf.data files real `perf record` wrote: the sample count is exactly perf's, and the
// top self shares of our program's functions agree with `perf report --no-children` within 0.5 points, in
// frame-pointer (-g) and DWARF (--call-graph dwarf) mode, from a file and from a pipe; python3 too. Hostile
// files get one line and exit status 1.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "base/fd.h"
#include "tests/perf/perf_bytes.h"
#include "tests/support/support.h"

using namespace fxprof::test;

namespace {

// perf's sample count: one line per sample of `perf script -F tid`.
uint64_t perf_samples(const std::string& data) {
  auto r = run({"perf", "script", "-i", data, "-F", "tid"});
  REQUIRE(r.status == 0);
  // In pipe mode perf script prints the callchains too (tab-indented lines): count the others.
  uint64_t n = 0;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) n += !l.empty() && l[0] != '\t';
  return n;
}

// perf report's self samples per symbol (--no-children, -n, by symbol).
std::map<std::string, uint64_t> perf_self(const std::string& data) {
  auto r =
      run({"perf", "report", "-i", data, "--no-children", "--stdio", "-n", "--sort", "sym", "-g", "none"});
  REQUIRE(r.status == 0);
  std::map<std::string, uint64_t> self;
  std::regex line(R"(^\s+[\d.]+%\s+(\d+)\s+\[.\]\s+(\S+))");
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line)) self[m[2]] += std::stoull(m[1]);
  }
  return self;
}

struct Imported {
  uint64_t samples = 0;
  std::map<std::string, uint64_t> self;
  std::map<std::string, double> total_percent;  // the busiest section's
};

// A function's name as perf prints it: C++ names without their parameters ("alpha(long)" is "alpha").
std::string perf_name(std::string_view name) { return std::string(name.substr(0, name.find('('))); }

// fxprof import, then fxprof report --json --no-inline (perf names an inlined function's samples by the
// function it was inlined into).
Imported fxprof_import(const TempDir& dir, const std::vector<std::string>& args, const CmdOptions& o = {}) {
  std::vector<std::string> argv{fxprof_bin(), "import", "-s", "-q", "-o", dir.file("p.json.gz")};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run(argv, o);
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto rep = run({fxprof_bin(), "report", "--json", "--no-inline", "--limit", "50", dir.file("p.json.gz")});
  INFO(rep.err);
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parse_json(parser, rep.out);
  Imported out;
  out.samples = uint64_t(doc["samples"]);
  for (simdjson::dom::element sec : doc["sections"].get_array()) {
    for (simdjson::dom::element f : sec["topFunctionsBySelf"].get_array())
      out.self[perf_name(std::string_view(f["name"]))] += uint64_t(f["selfSamples"]);
    for (simdjson::dom::element f : sec["topFunctionsByTotal"].get_array())
      out.total_percent.try_emplace(perf_name(std::string_view(f["name"])), double(f["totalPercentage"]));
  }
  return out;
}

// Same count, and the same self share (of all samples) for each of our program's functions.
void same_as_perf(const std::string& data, const Imported& fx) {
  const uint64_t n = perf_samples(data);
  CHECK(fx.samples == n);
  const auto perf = perf_self(data);
  for (const char* f : {"alpha", "beta", "gamma_work"}) {
    INFO(f);
    REQUIRE(perf.count(f));
    REQUIRE(fx.self.count(f));
    const double p = 100.0 * static_cast<double>(perf.at(f)) / static_cast<double>(n);
    const double x = 100.0 * static_cast<double>(fx.self.at(f)) / static_cast<double>(fx.samples);
    CHECK(std::abs(p - x) < 0.5);
  }
}

}  // namespace

TEST_CASE("import: perf record -g of our program, the same samples and self shares as perf report",
          "[import]") {
  TempDir dir;
  const std::string data = dir.file("fp.data");
  auto rec = run({"perf", "record", "-q", "-g", "-o", data, test_program("exp_work"), "2"});
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  const Imported fx = fxprof_import(dir, {data});
  same_as_perf(data, fx);
}

TEST_CASE("import: perf record -z (zstd-compressed records), the same samples as perf report", "[import]") {
  TempDir dir;
  const std::string data = dir.file("z.data");
  auto rec = run({"perf", "record", "-q", "-z", "-g", "-o", data, test_program("exp_work"), "2"});
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  // perf did compress: its header lists the compressed records.
  auto info = run({"perf", "report", "-i", data, "--stats"});
  REQUIRE(info.status == 0);
  REQUIRE(info.out.find("COMPRESSED") != std::string::npos);
  const Imported fx = fxprof_import(dir, {data});
  same_as_perf(data, fx);
}

TEST_CASE("import: perf record --call-graph dwarf, unwound by fxprof's unwinder", "[import]") {
  TempDir dir;
  const std::string data = dir.file("dwarf.data");
  auto rec =
      run({"perf", "record", "-q", "--call-graph", "dwarf", "-o", data, test_program("exp_work"), "2"});
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  const Imported fx = fxprof_import(dir, {data});
  same_as_perf(data, fx);
  // The program's functions are reached from main: the copied stacks were unwound.
  REQUIRE(fx.total_percent.count("main"));
  CHECK(fx.total_percent.at("main") > 90);
}

TEST_CASE("import: pipe mode (perf record -o -) from standard input", "[import]") {
  TempDir dir;
  const std::string data = dir.file("pipe.data");
  auto rec = run({"sh", "-c", "perf record -q -g -o - \"$0\" 2 > \"$1\"", test_program("exp_work"), data});
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  auto bytes = fxprof::read_file(data);
  REQUIRE(bytes);
  CmdOptions o;
  o.stdin_data = *bytes;
  const Imported fx = fxprof_import(dir, {"-"}, o);
  same_as_perf(data, fx);
}

TEST_CASE("import: python3, every sample perf recorded", "[import]") {
  TempDir dir;
  const std::string data = dir.file("py.data");
  auto rec =
      run({"perf", "record", "-q", "-g", "-o", data, "python3", "-c",
           "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: sum(range(1000))"});
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  const Imported fx = fxprof_import(dir, {data});
  CHECK(fx.samples == perf_samples(data));
}

TEST_CASE("import: hostile perf.data files are one line and exit status 1", "[import]") {
  TempDir dir;
  auto refused = [&](const std::string& bytes, const std::string& says) {
    const std::string path = dir.file("bad.data");
    std::ofstream(path, std::ios::binary) << bytes;
    auto r = run({fxprof_bin(), "import", "-s", "-o", dir.file("out.json.gz"), path});
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_THAT(r.err, Catch::Contains(says));
    CHECK_FALSE(fxprof::read_file(dir.file("out.json.gz")).ok());
  };
  refused("not perf", "not a perf.data file");
  // A real file cut short, and one whose attribute section says it holds more than the file.
  const std::string data = dir.file("fp.data");
  REQUIRE(run({"perf", "record", "-q", "-g", "-o", data, test_program("exp_work"), "0.2"}).status == 0);
  const std::string good = *fxprof::read_file(data);
  refused(good.substr(0, 4000), "truncated");
  std::string lying = good;
  const uint64_t many = uint64_t{1} << 32;
  std::memcpy(lying.data() + 32, &many, 8);  // the attributes section's size
  refused(lying, "attributes section");
  // A build-ID table that names /etc/shadow as a binary: refused, nothing of it read into the profile.
  FileSpec f;
  const uint64_t type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
                        PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN;
  f.attrs = {attr(type)};
  Bytes mmap, smp, entry;
  mmap.u32x2(5, 5).u64(0x400000).u64(0x1000).u64(0).u64(0).u64(0).u64(0).u32x2(5, 2).str("/etc/shadow");
  mmap.u32x2(5, 5).u64(100).u32x2(0, 0);
  smp.u64(0x400100).u32x2(5, 5).u64(200).u32x2(0, 0).u64(1).u64(1).u64(0x400100);
  f.records = {mmap.record(PERF_RECORD_MMAP2), smp.record(PERF_RECORD_SAMPLE)};
  entry.u32(5);
  for (int i = 0; i < 6; ++i) entry.u32(0x11223344);
  entry.str("/etc/shadow", 64);
  f.features = {{2, entry.record(0, PERF_RECORD_MISC_USER)}};
  refused(perf_file(f), "/etc/shadow");
}
