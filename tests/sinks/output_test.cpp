// Where sinks write: default names beside the input, standard output for "-", files (plain or gzip) that
// appear only when finished.
#include "sinks/output.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/support/support.h"

using namespace fxprof;

TEST_CASE("default outputs go beside the input") {
  CHECK(sinks::output_beside("/tmp/p.json.gz", ".svg") == "/tmp/p.svg");
  CHECK(sinks::output_beside("p.json", ".folded") == "p.folded");
  CHECK(sinks::output_beside("run", ".pb.gz") == "run.pb.gz");
}

TEST_CASE("a file output appears only when finished") {
  test::TempDir dir;
  auto out = sinks::open_output(dir.file("x.txt"));
  REQUIRE(out);
  (*out)->write("hello\n");
  REQUIRE((*out)->finish());
  CHECK(test::read_profile_text(dir.file("x.txt")) == "hello\n");
  auto bad = sinks::open_output(dir.file("no/such/dir/x"));
  CHECK(!bad);
}

TEST_CASE("a JSON writer over an output file, plain or gzip") {
  test::TempDir dir;
  for (std::string name : {"x.json", "x.json.gz"}) {
    std::string path = dir.file(name);
    auto out = sinks::OutputFile::create(path);
    REQUIRE(out);
    {
      JsonWriter w(**out);
      w.begin_object().key("a").begin_array().value(1).value(-2).value(0.1).value(1e300).null().end_array();
      w.key("b").value(true).key("c").begin_object().end_object().key("d").value("é").end_object();
    }
    // Not visible under its final name before finish().
    CHECK(access(path.c_str(), F_OK) != 0);
    REQUIRE((*out)->finish());
    CHECK(test::read_profile_text(path) == "{\"a\":[1,-2,0.1,1e+300,null],\"b\":true,\"c\":{},\"d\":\"é\"}");
  }
}

TEST_CASE("an output file that is never finished leaves nothing behind") {
  test::TempDir dir;
  std::string path = dir.file("p.json.gz");
  {
    auto out = sinks::OutputFile::create(path);
    REQUIRE(out);
    (*out)->write("{\"partial\":");
  }
  CHECK(access(path.c_str(), F_OK) != 0);
  CHECK(rmdir(dir.path().c_str()) == 0);  // the temporary file is gone too
  mkdir(dir.path().c_str(), 0755);
}

TEST_CASE("an output file in a missing folder is a clear error") {
  auto out = sinks::OutputFile::create("/nonexistent-dir/p.json");
  REQUIRE_FALSE(out);
  CHECK(out.error().find("cannot create /nonexistent-dir/p.json") == 0);
  CHECK(out.error().find("No such file or directory") != std::string::npos);
}
