// Folded stacks: one line per distinct path, counts that add up to the samples, inferno's syntax (parsed back
// here: the count is after the last space, frames are separated by ';').
#include "sinks/folded.h"

#include <catch2/catch.hpp>
#include <map>

#include "tests/sinks/sink_models.h"
#include "tests/support/support.h"

using namespace fxprof;

namespace {

// Parses folded text back; fails the test on a malformed line.
std::map<std::string, uint64_t> parse_folded(const std::string& text) {
  std::map<std::string, uint64_t> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    REQUIRE(nl != std::string::npos);  // every line ends with a newline
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    size_t sp = line.rfind(' ');
    REQUIRE(sp != std::string::npos);
    std::string count = line.substr(sp + 1);
    REQUIRE(!count.empty());
    REQUIRE(count.find_first_not_of("0123456789") == std::string::npos);
    std::string path = line.substr(0, sp);
    REQUIRE(!path.empty());
    REQUIRE(path.find(";;") == std::string::npos);
    INFO(line);
    CHECK(out.count(path) == 0);  // one line per distinct path
    out[path] = std::stoull(count);
  }
  return out;
}

std::string folded(const model::Profile& p, const sinks::FoldedOptions& o) {
  test::TempDir dir;
  REQUIRE(sinks::write_folded(p, dir.file("out.folded"), o));
  return test::read_profile_text(dir.file("out.folded"));
}

}  // namespace

TEST_CASE("folded stacks: exact paths and counts, sorted like flamegraph.pl") {
  std::string text = folded(test::sink_profile(), {});
  CHECK(text ==
        "main;compute 10\n"
        "main;compute;helper 3\n"
        "main;compute;ksys_read 1\n"
        "main;helper 2\n"
        "main;libdemo.so+0x2234 2\n"
        "main;rec;rec 2\n");
  uint64_t sum = 0;
  for (auto& [path, n] : parse_folded(text)) sum += n;
  CHECK(sum == 20);
}

TEST_CASE("folded stacks: process and thread roots, annotations") {
  sinks::FoldedOptions o;
  o.tree.process_roots = o.tree.thread_roots = true;
  o.annotate = true;
  auto got = parse_folded(folded(test::sink_profile(), o));
  CHECK(got["app (pid 10);app (tid 10);main;compute;ksys_read_[k]"] == 1);
  CHECK(got["app (pid 10);worker (tid 11);main;compute"] == 4);
  CHECK(got["child (pid 20);child (tid 20);main;libdemo.so+0x2234"] == 2);
  uint64_t sum = 0;
  for (auto& [path, n] : got) sum += n;
  CHECK(sum == 20);
}

TEST_CASE("folded stacks: separators in names cannot split frames") {
  model::Profile p;
  model::FrameId a = p.label_frame("operator;weird\nname", model::Category::User);
  auto& proc = p.processes.emplace_back();
  auto& t = proc.threads.emplace_back();
  std::vector<model::FrameId> path{a};
  t.samples.push_back({1, p.stacks.intern_path(path), -1});
  CHECK(folded(p, {}) == "operator:weird name 1\n");
}

TEST_CASE("folded stacks to a gzip file and to an unwritable place") {
  test::TempDir dir;
  REQUIRE(sinks::write_folded(test::sink_profile(), dir.file("out.folded.gz"), {}));
  CHECK(test::read_profile_text(dir.file("out.folded.gz")).starts_with("main;compute 10\n"));
  auto s = sinks::write_folded(test::sink_profile(), dir.file("missing/dir/out.folded"), {});
  REQUIRE(!s);
  CHECK(s.error().find("missing/dir") != std::string::npos);
}
