// The export formats' table (sinks/exports.h): what `export FORMAT` and `record --export` offer, each row's
// writer producing its format, and the options reaching the writers that read them.
#include "sinks/exports.h"

#include <catch2/catch.hpp>
#include <set>

#include "base/fd.h"
#include "tests/sinks/sink_models.h"
#include "tests/support/support.h"

using namespace fxprof;

TEST_CASE("exports: each format has a name, an extension and a writer that writes it") {
  CHECK(sinks::export_format_names() == "folded, pprof or svg");
  CHECK(sinks::find_export_format("json") == nullptr);
  CHECK(sinks::find_export_format("") == nullptr);
  std::set<std::string_view> names, extensions;
  const model::Profile p = test::sink_profile();
  test::TempDir dir;
  for (const sinks::ExportFormat& f : sinks::export_formats()) {
    INFO(f.name);
    CHECK(names.insert(f.name).second);
    CHECK(extensions.insert(f.extension).second);
    CHECK(f.extension.starts_with("."));
    CHECK(sinks::find_export_format(f.name) == &f);
    const std::string path = dir.file("p" + std::string(f.extension));
    REQUIRE(f.write(p, path, {}).ok());
    auto bytes = read_file(path);
    REQUIRE(bytes);
    REQUIRE(bytes->size() > 2);
    if (f.name == "folded") CHECK(bytes->starts_with("main;compute 10\nmain;compute;helper 3\n"));
    if (f.name == "pprof") CHECK(bytes->substr(0, 2) == "\x1f\x8b");  // gzipped profile.proto
    if (f.name == "svg") CHECK(bytes->find("<svg") != std::string::npos);
  }
}

TEST_CASE("exports: the tree options reach folded and svg, the SVG options svg") {
  const model::Profile p = test::sink_profile();
  test::TempDir dir;
  sinks::ExportOptions o;
  o.folded.tree.thread_roots = true;
  o.folded.annotate = true;
  o.svg.title = "A title of its own";
  REQUIRE(sinks::find_export_format("folded")->write(p, dir.file("p.folded"), o).ok());
  auto folded = read_file(dir.file("p.folded"));
  REQUIRE(folded);
  INFO(*folded);
  CHECK(folded->find("app (tid 10);main;compute 5\n") != std::string::npos);
  CHECK(folded->find("ksys_read_[k]") != std::string::npos);
  REQUIRE(sinks::find_export_format("svg")->write(p, dir.file("p.svg"), o).ok());
  auto svg = read_file(dir.file("p.svg"));
  REQUIRE(svg);
  CHECK(svg->find("A title of its own") != std::string::npos);
  CHECK(svg->find("app (tid 10)") != std::string::npos);
}
