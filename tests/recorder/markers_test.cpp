// Marker files (recorder/markers.h): their names, their lines (samply's and the fxprof header's), and
// following a file its writer maps and fills.
#include "model/markers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "recorder/markers.h"
#include "tests/support/support.h"

using namespace fxprof;
using recorder::MarkerFileKind;

TEST_CASE("marker files: samply's names and ours, with the pid they give") {
  uint32_t pid = 0;
  CHECK(recorder::marker_file_kind("/tmp/marker-1234.txt", &pid) == MarkerFileKind::Samply);
  CHECK(pid == 1234);
  CHECK(recorder::marker_file_kind("/x/marker-55-56.txt", &pid) == MarkerFileKind::Samply);
  CHECK(pid == 55);
  CHECK(recorder::marker_file_kind("/d/fxprof-markers-7-8-0.txt", &pid) == MarkerFileKind::Fxprof);
  CHECK(pid == 7);
  CHECK(recorder::marker_file_kind("/d/fxprof-markers-7.txt") == MarkerFileKind::None);
  CHECK(recorder::marker_file_kind("/d/marker-x.txt") == MarkerFileKind::None);
  CHECK(recorder::marker_file_kind("/d/marker-12.log") == MarkerFileKind::None);
  CHECK(recorder::marker_file_kind("/d/jit-12.dump") == MarkerFileKind::None);
}

TEST_CASE("marker lines: samply's take the rest as the name, ours carry a category, fields, instants") {
  model::Profile p;
  model::Marker m;
  REQUIRE(recorder::parse_marker_line("100 250 GC\tmajor sweep", MarkerFileKind::Samply, p, m));
  CHECK(p.strings.get(m.name) == "GC\tmajor sweep");
  CHECK(m.start_ns == 100);
  CHECK(m.end_ns == 250);
  CHECK(m.program);
  CHECK(m.phase == model::MarkerPhase::Interval);

  REQUIRE(recorder::parse_marker_line("100 250 request\t.cat=http\tid=42\tratio=0.5\tpath=\"/a b\"\tword=x1",
                                      MarkerFileKind::Fxprof, p, m));
  CHECK(p.strings.get(m.name) == "request");
  REQUIRE(m.fields.size() == 5);
  CHECK(p.strings.get(m.fields[0].key) == model::kMarkerCategoryKey);
  CHECK(p.strings.get(m.fields[0].string) == "http");
  CHECK((!m.fields[1].is_string && m.fields[1].number == 42));
  CHECK((!m.fields[2].is_string && m.fields[2].number == 0.5));
  CHECK((m.fields[3].is_string && p.strings.get(m.fields[3].string) == "/a b"));
  CHECK((m.fields[4].is_string && p.strings.get(m.fields[4].string) == "x1"));

  REQUIRE(recorder::parse_marker_line("300 300 tick\t.instant", MarkerFileKind::Fxprof, p, m));
  CHECK(m.phase == model::MarkerPhase::Instant);
  CHECK(m.start_ns == 300);

  // Not markers: missing parts, not numbers, an end before the start, no name, a field without '='.
  for (const char* bad : {"", "100", "100 200", "100 200 ", "a 200 x", "100 -2 x", "300 200 late", "0 5 zero",
                          "100 200 x\tnovalue"})
    CHECK_FALSE(recorder::parse_marker_line(bad, MarkerFileKind::Fxprof, p, m));
}

TEST_CASE("marker files: followed as they are filled, up to the NUL room of a mapped window") {
  test::TempDir dir;
  const std::string path = dir.file("fxprof-markers-1-1-0.txt");
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, 65536) == 0);  // as the header maps it: NUL bytes past what was written
  recorder::MarkerFileFollower f(path, {static_cast<uint32_t>(::geteuid())});
  std::vector<std::string> lines;
  auto take = [&](std::string_view l) { lines.emplace_back(l); };
  REQUIRE(pwrite(fd, "1 2 a\n3 4 b\n5 6 c", 17, 0) == 17);  // the third not complete yet
  f.poll(take);
  CHECK(lines == std::vector<std::string>{"1 2 a", "3 4 b"});
  REQUIRE(pwrite(fd, "\n\n\n7 8 d\n", 9, 17) == 9);  // a window's end: empty lines
  f.poll(take);
  CHECK(lines == std::vector<std::string>{"1 2 a", "3 4 b", "5 6 c", "7 8 d"});
  f.poll(take);
  CHECK(lines.size() == 4);
  ::close(fd);
}

TEST_CASE("marker files: another user's or a writable-by-others file is not read") {
  test::TempDir dir;
  const std::string path = dir.file("marker-1.txt");
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "1 2 a\n", 6) == 6);
  REQUIRE(fchmod(fd, 0666) == 0);
  ::close(fd);
  recorder::MarkerFileFollower f(path, {static_cast<uint32_t>(::geteuid())});
  std::vector<std::string> lines;
  f.poll([&](std::string_view l) { lines.emplace_back(l); });
  CHECK(lines.empty());
  CHECK(f.untrusted().find("writable by others") != std::string::npos);
}
