// Where sinks write: default names beside the input, standard output for "-".
#include "exporter/output.h"

#include <catch2/catch.hpp>

#include "tests/support/support.h"

using namespace fxprof;

TEST_CASE("default outputs go beside the input") {
  CHECK(exporter::output_beside("/tmp/p.json.gz", ".svg") == "/tmp/p.svg");
  CHECK(exporter::output_beside("p.json", ".folded") == "p.folded");
  CHECK(exporter::output_beside("run", ".pb.gz") == "run.pb.gz");
}

TEST_CASE("a file output appears only when finished") {
  test::TempDir dir;
  auto out = exporter::open_output(dir.file("x.txt"));
  REQUIRE(out);
  (*out)->write("hello\n");
  REQUIRE((*out)->finish());
  CHECK(test::read_profile_text(dir.file("x.txt")) == "hello\n");
  auto bad = exporter::open_output(dir.file("no/such/dir/x"));
  CHECK(!bad);
}
