// `fxprof import` and the sink commands on pprof files: our own export round-trips (same functions, same
// call paths, same totals), so does Go's rewrite of it (`go tool pprof -proto`), and a CPU profile Go's
// runtime/pprof wrote of a Go program has exactly the sample count `go tool pprof` reads in it.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "tests/cli/sink_cli.h"

using namespace fxprof::test;

namespace {

CmdOptions go_options(const TempDir& dir) {
  CmdOptions go;
  // The build cache in the build tree: compiling Go's runtime once, not per run.
  go.env = {{"HOME", dir.path()},
            {"PPROF_TMPDIR", dir.path()},
            {"GOCACHE", std::filesystem::current_path().string() + "/gocache"},
            {"GOPATH", dir.path() + "/gopath"},
            {"GOTOOLCHAIN", "local"},
            {"PPROF_BINARY_PATH", dir.path()}};
  return go;
}

struct Report {
  uint64_t samples = 0;
  std::map<std::string, uint64_t> self, total;
};

Report report(const std::string& file) {
  auto r = run({fxprof_bin(), "report", "--json", "--limit", "30", file});
  INFO(file << ": " << r.err);
  REQUIRE(r.status == 0);
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parse_json(parser, r.out);
  Report out;
  out.samples = uint64_t(doc["samples"]);
  for (simdjson::dom::element sec : doc["sections"].get_array()) {
    for (simdjson::dom::element f : sec["topFunctionsBySelf"].get_array())
      out.self[std::string(std::string_view(f["name"]))] += uint64_t(f["selfSamples"]);
    for (simdjson::dom::element f : sec["topFunctionsByTotal"].get_array())
      out.total[std::string(std::string_view(f["name"]))] += uint64_t(f["totalSamples"]);
  }
  return out;
}

void same_report(const Report& a, const Report& b) {
  CHECK(a.samples == b.samples);
  CHECK(a.self == b.self);
  CHECK(a.total == b.total);
}

}  // namespace

TEST_CASE("pprof import: fxprof's export and Go's rewrite of it round-trip") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz"), pb = dir.file("p.pb.gz");
  record_exp_work(profile);
  auto e = run({fxprof_bin(), "export", "pprof", profile, "-o", pb});
  INFO(e.err);
  REQUIRE(e.status == 0);
  const Report original = report(profile);
  REQUIRE(original.samples > 100);
  REQUIRE(original.self.count("alpha(long)"));

  // report reads the .pb.gz directly; import makes a Gecko profile of it with the same call paths.
  same_report(original, report(pb));
  const std::string back = dir.file("back.json.gz");
  auto im = run({fxprof_bin(), "import", "-s", "-q", "-o", back, pb});
  INFO(im.err);
  REQUIRE(im.status == 0);
  CHECK(im.err.find("fxprof: imported pprof: ") != std::string::npos);
  uint64_t n1 = 0, n2 = 0;
  CHECK(gecko_call_paths(back, &n2) == gecko_call_paths(profile, &n1));
  CHECK(n1 == n2);
  same_report(original, report(back));

  // Go's own writer (uncompressed too): the same.
  const std::string go_pb = dir.file("go.pb");
  auto go = run({"go", "tool", "pprof", "-proto", "-output", go_pb + ".gz", pb}, go_options(dir));
  INFO(go.out << go.err);
  REQUIRE(go.status == 0);
  auto gunzip = run({"gzip", "-dk", go_pb + ".gz"});
  REQUIRE(gunzip.status == 0);
  same_report(original, report(go_pb + ".gz"));
  same_report(original, report(go_pb));
}

TEST_CASE("pprof import: a Go program's CPU profile has the samples go tool pprof reads") {
  TempDir dir;
  {
    std::ofstream src(dir.file("main.go"));
    src << R"(package main

import (
	"os"
	"runtime/pprof"
)

//go:noinline
func burn(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i % 7
	}
	return s
}

func main() {
	f, _ := os.Create(os.Args[1])
	pprof.StartCPUProfile(f)
	s := 0
	for i := 0; i < 300; i++ {
		s += burn(1000000)
	}
	pprof.StopCPUProfile()
	f.Close()
	println(s)
}
)";
  }
  const CmdOptions go = go_options(dir);
  const std::string bin = dir.file("burner"), pb = dir.file("cpu.pb.gz");
  auto build = run({"go", "build", "-o", bin, dir.file("main.go")}, go);
  INFO(build.err);
  REQUIRE(build.status == 0);
  REQUIRE(run({bin, pb}).status == 0);

  auto top = run({"go", "tool", "pprof", "-top", "-sample_index=samples", pb}, go);
  INFO(top.out << top.err);
  REQUIRE(top.status == 0);
  std::smatch m;
  REQUIRE(std::regex_search(top.out, m, std::regex(R"(of (\d+) total)")));
  const uint64_t go_samples = std::stoull(m[1]);
  REQUIRE(go_samples > 10);

  const Report rep = report(pb);
  CHECK(rep.samples == go_samples);
  // Each function's self and total samples are go tool pprof's flat and cum (names from Go's own lines, no
  // symbolication). Which function leads is Go's business: under load its profile puts most samples in
  // runtime.asyncPreempt (the scheduler preempting burn), so burn is compared, not required to lead.
  std::istringstream rows(top.out);
  size_t compared = 0;
  const std::regex row(R"(^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(\S+)$)");
  for (std::string l; std::getline(rows, l);) {
    std::smatch r;
    if (!std::regex_match(l, r, row)) continue;
    INFO(l);
    const std::string name = r[3];
    const uint64_t flat = std::stoull(r[1]), cum = std::stoull(r[2]);
    CHECK((rep.self.count(name) ? rep.self.at(name) : 0) == flat);
    CHECK((rep.total.count(name) ? rep.total.at(name) : 0) == cum);
    ++compared;
  }
  CHECK(compared >= 3);
  REQUIRE(rep.total.count("main.burn"));
  CHECK(rep.total.at("main.burn") * 2 >= go_samples);  // burn ran for most of the profile whatever the load

  auto im = run({fxprof_bin(), "import", "-s", "-q", "-v", "-o", dir.file("go.json.gz"), pb});
  INFO(im.err);
  REQUIRE(im.status == 0);
  CHECK(im.err.find("pprof sample types samples/count, cpu/nanoseconds") != std::string::npos);
  CHECK(im.err.find(std::to_string(go_samples) + " samples of samples/count") != std::string::npos);
}

TEST_CASE("pprof import: a broken file is one line and exit status 1") {
  TempDir dir;
  const std::string bad = dir.file("bad.pb");
  {
    std::ofstream out(bad);
    out << std::string("\x0a\x05\x08\x01", 4);  // a sample type cut short
  }
  for (const char* cmd : {"import", "report"}) {
    auto r = run({fxprof_bin(), cmd, "-s", bad});
    if (std::string(cmd) == "report") r = run({fxprof_bin(), cmd, bad});
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(r.err.starts_with("fxprof: " + bad + ": not a pprof profile"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

TEST_CASE("pprof import: fxprof load serves a .pb.gz as the Gecko profile import makes") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz"), pb = dir.file("p.pb.gz");
  record_exp_work(profile);
  REQUIRE(run({fxprof_bin(), "export", "pprof", profile, "-o", pb}).status == 0);
  FxprofServer server(pb);
  INFO(server.err());
  REQUIRE(!server.symbol_server().empty());
  // The profile's URL, from the Firefox Profiler's from-url/ADDRESS/.
  const std::string& url = server.profiler_url();
  const size_t from = url.find("from-url/");
  REQUIRE(from != std::string::npos);
  const std::string served = url_decode(url.substr(from + 9, url.find('/', from + 9) - from - 9));
  auto body = run({"curl", "-sS", "--max-time", "20", "--compressed", "-o", dir.file("served.json"), served});
  REQUIRE(body.status == 0);
  uint64_t n1 = 0, n2 = 0;
  CHECK(gecko_call_paths(dir.file("served.json"), &n2) == gecko_call_paths(profile, &n1));
  CHECK(n1 == n2);
}
