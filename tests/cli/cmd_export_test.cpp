// `fxprof export`: folded, pprof and svg from a recorded profile of a known program, compared with the
// profile itself (every sample counted once), with go tool pprof, and as XML.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tests/cli/sink_cli.h"
#include "tests/e2e/e2e.h"

using namespace fxprof::test;

namespace {

std::map<std::string, uint64_t> parse_folded(const std::string& text, uint64_t* total) {
  std::map<std::string, uint64_t> out;
  std::set<std::string> seen;
  std::istringstream in(text);
  std::string line;
  *total = 0;
  while (std::getline(in, line)) {
    size_t sp = line.rfind(' ');
    REQUIRE(sp != std::string::npos);
    uint64_t n = std::stoull(line.substr(sp + 1));
    // Distinct lines, then unresolved addresses normalized as in gecko_call_paths.
    CHECK(seen.insert(line.substr(0, sp)).second);
    std::string path, frame;
    std::istringstream frames(line.substr(0, sp));
    while (std::getline(frames, frame, ';')) path += (path.empty() ? "" : ";") + normalize_frame(frame);
    out[path] += n;
    *total += n;
  }
  return out;
}

}  // namespace

TEST_CASE("export folded has exactly the call paths and counts of the Gecko profile") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  record_exp_work(profile);
  uint64_t gecko_total = 0;
  auto gecko = gecko_call_paths(profile, &gecko_total);
  REQUIRE(gecko_total > 100);  // 300 ms of CPU at 1 kHz

  auto r = run({fxprof_bin(), "export", "folded", profile});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("wrote " + dir.file("p.folded")) != std::string::npos);
  uint64_t total = 0;
  auto folded = parse_folded(read_profile_text(dir.file("p.folded")), &total);
  CHECK(total == gecko_total);
  CHECK(folded == gecko);
  // The known functions are there, the inlined one under the function it is inlined into.
  bool alpha = false, inlined = false;
  for (auto& [path, n] : folded) {
    alpha |= path.find("main;alpha(long)") != std::string::npos;
    inlined |= path.find("gamma_work(long);mix_inlined(long)") != std::string::npos;
  }
  CHECK(alpha);
  CHECK(inlined);

  // From raw addresses, export symbolicates on the model: --no-inline folds mix_inlined into gamma_work;
  // --thread-roots/--process-roots add root frames.
  const std::string raw = dir.file("raw.json.gz");
  record_exp_work(raw, "1", false);
  auto merged = run(
      {fxprof_bin(), "export", "folded", "--no-inline", "--process-roots", "--thread-roots", raw, "-o", "-"});
  REQUIRE(merged.status == 0);
  uint64_t merged_total = 0;
  auto m = parse_folded(merged.out, &merged_total);
  CHECK(merged_total > 100);
  for (auto& [path, n] : m) {
    INFO(path);
    CHECK(path.find("mix_inlined") == std::string::npos);
    CHECK(path.starts_with("exp_work (pid "));
    CHECK(path.find(";exp_work (tid ") != std::string::npos);
  }
}

TEST_CASE("export pprof: go tool pprof agrees with the report, inlined lines, build IDs") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  record_exp_work(profile, "1", false);
  auto r = run({fxprof_bin(), "export", "pprof", profile});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string pb = dir.file("p.pb.gz");
  CmdOptions go;
  go.env = {{"HOME", dir.path()},
            {"PPROF_TMPDIR", dir.path()},
            {"GOCACHE", dir.path() + "/gocache"},
            {"PPROF_BINARY_PATH", dir.path()}};
  auto top = run({"go", "tool", "pprof", "-top", "-sample_index=samples", pb}, go);
  INFO(top.out << top.err);
  REQUIRE(top.status == 0);

  // Totals and the first function agree with `fxprof report`.
  auto rep = run({fxprof_bin(), "report", "--json", "--limit", "3", profile});
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, rep.out);
  uint64_t samples = uint64_t(doc["samples"]);
  CHECK(top.out.find("of " + std::to_string(samples) + " total") != std::string::npos);
  std::string first(std::string_view(doc["sections"].at(0)["topFunctionsBySelf"].at(0)["name"]));
  uint64_t first_self = uint64_t(doc["sections"].at(0)["topFunctionsBySelf"].at(0)["selfSamples"]);
  std::istringstream rows(top.out);
  std::string line;
  bool found = false;
  while (std::getline(rows, line)) {
    if (line.find(first) == std::string::npos || line.find('%') == std::string::npos) continue;
    std::istringstream l(line);
    uint64_t flat = 0;
    l >> flat;
    CHECK(flat == first_self);
    found = true;
    break;
  }
  CHECK(found);

  // -traces: the inlined function sits on the same location as gamma_work (pprof prints inlined frames
  // with "(inline)"); -raw lists mappings with their build IDs.
  auto traces = run({"go", "tool", "pprof", "-traces", "-sample_index=samples", pb}, go);
  REQUIRE(traces.status == 0);
  CHECK(traces.out.find("mix_inlined(long) (inline)") != std::string::npos);
  auto raw = run({"go", "tool", "pprof", "-raw", pb}, go);
  REQUIRE(raw.status == 0);
  CHECK(std::regex_search(raw.out, std::regex("exp_work [0-9a-f]{40}")));
}

TEST_CASE("export svg: XML with every function and the viewer") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  record_exp_work(profile);
  auto r = run({fxprof_bin(), "export", "svg", "--min-width", "0", profile, "-o", dir.file("fg.svg")});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto lint = run({"xmllint", "--noout", dir.file("fg.svg")});
  CHECK(lint.status == 0);
  std::string svg = read_profile_text(dir.file("fg.svg"));
  for (auto& [path, n] : gecko_call_paths(profile)) {
    std::istringstream frames(path);
    std::string f;
    while (std::getline(frames, f, ';')) {
      std::string escaped;
      for (char c : f)
        escaped += c == '&'   ? "&amp;"
                   : c == '<' ? "&lt;"
                   : c == '>' ? "&gt;"
                   : c == '"' ? "&quot;"
                              : std::string(1, c);
      INFO(f);
      if (f != "?") CHECK(svg.find("data-n=\"" + escaped + "\"") != std::string::npos);
    }
  }
}

TEST_CASE("export usage errors") {
  auto none = run({fxprof_bin(), "export"});
  CHECK(none.status == 2);
  CHECK(none.err == "fxprof export: which format? folded, pprof or svg (try `fxprof export --help`)\n");
  auto bad = run({fxprof_bin(), "export", "png", "x.json"});
  CHECK(bad.err ==
        "fxprof export: unknown format 'png' (folded, pprof or svg) (try `fxprof export --help`)\n");
  auto missing = run({fxprof_bin(), "export", "folded", "/nonexistent/p.json"});
  CHECK(missing.status != 0);
  CHECK(missing.err.find("/nonexistent/p.json") != std::string::npos);
}

TEST_CASE("export folded/svg --heap: the heap as flame graphs whose sums are the heap report's figures") {
  TempDir dir;
  const std::string prof = dir.file("h.json.gz");
  // 50 leaked blocks of 1000 bytes, 1000 temporary 64-byte ones, 100 x 10000 held at once.
  auto r = record(prof, {test_program("heap_prog"), "leak", "50", "1000"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto rep = run({fxprof_bin(), "report", "--heap", "--json", prof});
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  simdjson::dom::element heap = parse_json(parser, rep.out)["heap"];
  // Each kind's lines, summed, and the weight of the lines through `function`.
  auto folded = [&](const std::string& kind, const std::string& function, uint64_t& through) {
    auto f = run({fxprof_bin(), "export", "folded", "--heap", kind, prof, "-o", "-"});
    INFO(f.err);
    REQUIRE(f.status == 0);
    uint64_t sum = 0;
    through = 0;
    std::istringstream in(f.out);
    for (std::string line; std::getline(in, line);) {
      const uint64_t n = std::stoull(line.substr(line.rfind(' ') + 1));
      sum += n;
      if (line.find(function) != std::string::npos) through += n;
    }
    return sum;
  };
  uint64_t leak_bytes = 0, churn_blocks = 0, allocated_leak = 0;
  CHECK(folded("allocated", "leak_blocks", allocated_leak) == uint64_t(heap["bytesAllocated"]));
  CHECK(allocated_leak == 50 * 1000);
  CHECK(folded("leaked", "leak_blocks", leak_bytes) == uint64_t(heap["leakedBytes"]));
  CHECK(leak_bytes == 50 * 1000);
  CHECK(folded("allocations", "churn", churn_blocks) == uint64_t(heap["allocations"]));
  CHECK(churn_blocks == 1000);
  auto svg = run({fxprof_bin(), "export", "svg", "--heap", "leaked", prof, "-o", dir.file("l.svg")});
  REQUIRE(svg.status == 0);
  std::ifstream svg_file(dir.file("l.svg"));
  std::stringstream svg_text;
  svg_text << svg_file.rdbuf();
  CHECK(svg_text.str().find("leak_blocks (50000 bytes, ") != std::string::npos);

  // Errors: a profile without heap data, an unknown kind, pprof (it has heap sample types of its own).
  record_exp_work(dir.file("cpu.json.gz"));
  auto none = run({fxprof_bin(), "export", "folded", "--heap", "leaked", dir.file("cpu.json.gz"), "-o", "-"});
  CHECK(none.status == 1);
  CHECK(none.err.find("has no heap data: record the program with --heap") != std::string::npos);
  auto bad = run({fxprof_bin(), "export", "folded", "--heap", "peak", prof, "-o", "-"});
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--heap takes allocated, allocations or leaked, not 'peak'") != std::string::npos);
  auto pprof = run({fxprof_bin(), "export", "pprof", "--heap", "leaked", prof, "-o", dir.file("p.pb.gz")});
  CHECK(pprof.status == 1);
  CHECK(pprof.err.find("pprof carries the heap as sample types") != std::string::npos);
}
