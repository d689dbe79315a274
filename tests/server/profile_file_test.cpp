// server/profile_file.cpp: what a saved profile says about itself, read by the streaming Gecko reader; the
// processed format (samply's) for its libraries, without holding the file.
#include <catch2/catch.hpp>
#include <fstream>

#include "server/server.h"
#include "tests/support/support.h"

using namespace fxprof;
using fxprof::test::TempDir;

namespace {
void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

const char* kLib(const char* name, const char* id) {
  static std::string s;
  s = std::string(R"({"name":")") + name + R"(","path":"/usr/lib/)" + name + R"(","debugName":")" + name +
      R"(","debugPath":"/usr/lib/)" + name + R"(","breakpadId":")" + id + R"(","codeId":"","arch":"x86_64"})";
  return s.c_str();
}
}  // namespace

TEST_CASE("a processed-format profile gives its libraries, the top level's and each thread's", "[server]") {
  TempDir dir;
  const std::string top = kLib("libtop.so", "AAAA0"), old = kLib("libold.so", "BBBB0");
  const std::string text = R"({"meta":{"preprocessedProfileVersion":48,"version":30,"pad":[)" +
                           std::string(4096, ' ') + R"(]},"libs":[)" + top + R"(],"counters":[{"x":1}],)" +
                           R"("threads":[{"name":"a","libs":[)" + old + "," + top +
                           R"(],"samples":{"length":0}},{"name":"b"}],"pages":[]})";
  write(dir.file("p.json"), text);
  auto info = server::inspect_profile(dir.file("p.json"));
  INFO((info ? "" : info.error()));
  REQUIRE(info.ok());
  CHECK(info->processed);
  REQUIRE(info->libs.size() == 2);
  CHECK(info->libs[0].debug_name == "libtop.so");
  CHECK(info->libs[1].debug_name == "libold.so");
  CHECK(info->libs[1].breakpad_id == "BBBB0");
  CHECK(info->has_local_paths);
  // Checked to its end as every reader does: bytes after the object, a value over 1 MiB.
  write(dir.file("trailing.json"), text + "x");
  auto trailing = server::inspect_profile(dir.file("trailing.json"));
  REQUIRE_FALSE(trailing.ok());
  CHECK(trailing.error() == dir.file("trailing.json") + ": not valid JSON (more after the profile's object)");
  std::string ws = text;
  ws.insert(ws.find("\"length\":0") + 10, std::string(size_t{2} << 20, ' '));  // in a value skipped unread
  write(dir.file("ws.json"), ws);
  auto spaces = server::inspect_profile(dir.file("ws.json"));
  REQUIRE_FALSE(spaces.ok());
  CHECK_THAT(spaces.error(), Catch::Contains("a number or whitespace longer than 1 MiB"));
}
