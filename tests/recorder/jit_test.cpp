// Tests of recorder/jit.h: perf map and jitdump parsing with times, merging, and following a perf map.
#include "recorder/jit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "recorder/quality.h"
#include "tests/support/support.h"

namespace r = fxprof::recorder;
namespace m = fxprof::model;

namespace {

struct Entry {
  uint64_t start, end;
  std::string name;
  bool operator==(const Entry&) const = default;
};
std::vector<Entry> entries(const std::vector<m::JitCode>& in) {
  std::vector<Entry> out;
  for (const auto& c : in) out.push_back({c.start, c.end, c.name});
  return out;
}

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

std::string jitdump_header(uint32_t magic = 0x4A695444, uint64_t flags = 0) {
  std::string d;
  put<uint32_t>(d, magic);
  put<uint32_t>(d, 1);
  put<uint32_t>(d, 40);
  put<uint32_t>(d, 62);
  put<uint32_t>(d, 0);
  put<uint32_t>(d, 1234);
  put<uint64_t>(d, 1);
  put<uint64_t>(d, flags);
  return d;
}
void code_load(std::string& d, uint64_t addr, uint64_t size, const std::string& name, uint64_t index,
               uint64_t time = 2) {
  put<uint32_t>(d, 0);
  put<uint32_t>(d, static_cast<uint32_t>(16 + 40 + name.size() + 1 + size));
  put<uint64_t>(d, time);
  put<uint32_t>(d, 1234);
  put<uint32_t>(d, 1234);
  put<uint64_t>(d, addr);
  put<uint64_t>(d, addr);
  put<uint64_t>(d, size);
  put<uint64_t>(d, index);
  d += name;
  d += '\0';
  d.append(size, '\xcc');
}
void code_move(std::string& d, uint64_t old_addr, uint64_t new_addr, uint64_t size, uint64_t index,
               uint64_t time = 3) {
  put<uint32_t>(d, 1);
  put<uint32_t>(d, 16 + 48);
  put<uint64_t>(d, time);
  put<uint32_t>(d, 1234);
  put<uint32_t>(d, 1234);
  put<uint64_t>(d, new_addr);
  put<uint64_t>(d, old_addr);
  put<uint64_t>(d, new_addr);
  put<uint64_t>(d, size);
  put<uint64_t>(d, index);
}

}  // namespace

TEST_CASE("perf map: hex START SIZE and a name with spaces; bad lines skipped", "[recorder][jit]") {
  auto got = r::parse_perf_map(
      "7f0000001000 40 LazyCompile:*fib /tmp/a.js:1:10\n"
      "0x7f0000002000 0x10 py::f:/x.py\r\n"
      "zzz 10 not hex\n"
      "7f0000003000 0 empty\n"
      "7f0000004000 20\n"
      "\n"
      "7f0000005000 8 last without newline");
  CHECK(entries(got) ==
        std::vector<Entry>{{0x7f0000001000, 0x7f0000001040, "LazyCompile:*fib /tmp/a.js:1:10"},
                           {0x7f0000002000, 0x7f0000002010, "py::f:/x.py"},
                           {0x7f0000005000, 0x7f0000005008, "last without newline"}});
}

TEST_CASE("jitdump: code loads and moves; a truncated last record is ignored", "[recorder][jit]") {
  std::string d = jitdump_header();
  code_load(d, 0x1000, 0x40, "first", 7);
  code_load(d, 0x2000, 0x20, "second", 8);
  code_move(d, 0x1000, 0x3000, 0x40, 7);
  std::string truncated = d;
  code_load(truncated, 0x4000, 0x10, "half-written", 9);
  truncated.resize(truncated.size() - 5);
  for (const std::string& image : {d, truncated}) {
    auto got = r::parse_jitdump(image);
    REQUIRE(got.ok());
    CHECK(entries(*got) == std::vector<Entry>{{0x1000, 0x1040, "first"},
                                              {0x2000, 0x2020, "second"},
                                              {0x3000, 0x3040, "first"}});
  }
  CHECK(!r::parse_jitdump(jitdump_header(0x4454694a)).ok());  // other byte order
  CHECK(!r::parse_jitdump("JiTD").ok());
  CHECK(!r::parse_jitdump(std::string(64, 'x')).ok());
}

TEST_CASE("jitdump: each entry has its time; a move ends the old place; TSC times are dropped",
          "[recorder][jit]") {
  std::string d = jitdump_header();
  code_load(d, 0x1000, 0x40, "first", 7, 1000);
  code_load(d, 0x1000, 0x40, "reused", 8, 2000);  // the same address, later
  code_move(d, 0x1000, 0x3000, 0x40, 7, 3000);
  auto got = r::parse_jitdump(d);
  REQUIRE(got.ok());
  REQUIRE(got->size() == 3);
  CHECK((*got)[0].from_ns == 1000);
  CHECK((*got)[0].until_ns == 3000);
  CHECK((*got)[1].from_ns == 2000);
  CHECK((*got)[1].until_ns == UINT64_MAX);
  CHECK(((*got)[2].start == 0x3000 && (*got)[2].name == "first" && (*got)[2].from_ns == 3000));
  // JITDUMP_FLAGS_ARCH_TIMESTAMP: TSC counts, not comparable with CLOCK_MONOTONIC.
  std::string tsc = jitdump_header(0x4A695444, 1);
  code_load(tsc, 0x1000, 0x40, "first", 7, 1000);
  auto t = r::parse_jitdump(tsc);
  REQUIRE(t.ok());
  REQUIRE(t->size() == 1);
  CHECK((*t)[0].from_ns == 0);
}

TEST_CASE("merging: the jitdump's entries replace the perf map's where they overlap", "[recorder][jit]") {
  auto got = r::merge_jit_sources({{0x100, 0x200, "map only"},
                                   {0x300, 0x400, "map, overlapped at its end"},
                                   {0x500, 0x600, "map, overlapped at its start"},
                                   {0x700, 0x800, "map only too"}},
                                  {{0x3f0, 0x510, "dump"}, {0x900, 0xa00, "dump too"}});
  CHECK(entries(got) == std::vector<Entry>{{0x100, 0x200, "map only"},
                                           {0x700, 0x800, "map only too"},
                                           {0x3f0, 0x510, "dump"},
                                           {0x900, 0xa00, "dump too"}});
  CHECK(entries(r::merge_jit_sources({{0x100, 0x200, "map"}}, {})) ==
        std::vector<Entry>{{0x100, 0x200, "map"}});
}

namespace {
void append(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_APPEND, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  close(fd);
}
}  // namespace

TEST_CASE("a followed perf map: lines stamped with the poll before they were seen", "[recorder][jit]") {
  fxprof::test::TempDir dir;
  const std::string path = dir.file("perf-1.map");
  const std::vector<uint32_t> mine{static_cast<uint32_t>(geteuid())};
  r::PerfMapFollower f(path, mine);
  f.poll(100);                           // not there yet
  append(path, "1000 10 a\n2000 10 b");  // b's line is not complete yet
  f.poll(200);
  append(path, "\n1000 10 c\n");  // c reuses a's address
  f.poll(300);
  append(path, "3000 10 d");  // no newline: the runtime ended mid-line
  auto got = f.finish();
  REQUIRE(got.size() == 4);
  CHECK(((got[0].name == "a" && got[0].from_ns == 100)));
  CHECK(((got[1].name == "b" && got[1].from_ns == 200)));
  CHECK(((got[2].name == "c" && got[2].from_ns == 200)));
  CHECK(((got[3].name == "d" && got[3].from_ns == 300)));

  // Replaced by another program's map (a pid reused): the old lines are dropped.
  r::PerfMapFollower g(path, mine);
  g.poll(10);
  REQUIRE(unlink(path.c_str()) == 0);
  append(path, "4000 10 new\n");
  g.poll(20);
  auto renewed = g.finish();
  REQUIRE(renewed.size() == 1);
  CHECK(renewed[0].name == "new");
  CHECK(renewed[0].from_ns == 10);

  // Deleted by its runtime at exit: what it held is kept, read to its end from the open file.
  r::PerfMapFollower kept(path, mine);
  kept.poll(30);
  append(path, "5000 10 last\n");
  REQUIRE(unlink(path.c_str()) == 0);
  kept.poll(40);
  auto deleted = kept.finish();
  REQUIRE(deleted.size() == 2);
  CHECK(deleted[1].name == "last");
  CHECK(kept.dropped().empty());
  append(path, "4000 10 new\n");  // there again for the checks below

  // Symbolic links and FIFOs are not followed.
  REQUIRE(symlink(path.c_str(), dir.file("link.map").c_str()) == 0);
  r::PerfMapFollower l(dir.file("link.map"), mine);
  l.poll(1);
  CHECK(l.finish().empty());

  // A map another user owns (anyone can create /tmp/perf-PID.map first) is not read, and says why.
  REQUIRE(chown(path.c_str(), 4242, 4242) == 0);
  r::PerfMapFollower other(path, mine);
  other.poll(1);
  CHECK(other.finish().empty());
  CHECK(other.untrusted().find("owned by user 4242") != std::string::npos);

  // Handed to another user, or made writable by others, while it is followed: refused as a whole, the lines
  // read before too (they may be that user's), with the same line saying why.
  const std::string later = dir.file("perf-2.map");
  append(later, "5000 10 early\n");
  r::PerfMapFollower followed(later, mine);
  followed.poll(1);
  REQUIRE(chown(later.c_str(), 4242, 4242) == 0);
  append(later, "6000 10 late\n");
  CHECK(followed.finish().empty());
  CHECK(followed.untrusted() == later + ": owned by user 4242, not by the process's user (0) or root");
  const std::string writable = dir.file("perf-3.map");
  append(writable, "5000 10 early\n");
  r::PerfMapFollower opened(writable, mine);
  opened.poll(1);
  REQUIRE(chmod(writable.c_str(), 0666) == 0);
  opened.poll(2);
  CHECK(opened.finish().empty());
  CHECK(opened.untrusted() == writable + ": writable by others");
}

TEST_CASE("a perf map's memory is bounded: names past the cap are dropped and said, long lines skipped",
          "[recorder][jit]") {
  // 10M lines once peaked at 1.74 GB (kMaxJitEntryBytes bounds it; a 1 MiB cap here, the same code).
  fxprof::test::TempDir dir;
  const std::string path = dir.file("perf-9.map");
  const std::vector<uint32_t> mine{static_cast<uint32_t>(geteuid())};
  const std::string name(200, 'f');
  const size_t cap = size_t{1} << 20, cost = sizeof(fxprof::model::JitCode) + name.size() + 9;
  const size_t fits = cap / cost, lines = fits + fits / 4;
  std::string text;
  char head[48];
  for (size_t i = 0; i < lines; ++i) {
    int n = std::snprintf(head, sizeof head, "%zx 10 ", 0x10000 + i * 16);
    text.append(head, static_cast<size_t>(n)).append(name).append(std::to_string(100000000 + i));
    text.push_back('\n');
  }
  append(path, text);
  r::PerfMapFollower f(path, mine, cap);
  f.poll(1);
  auto got = f.finish();
  CHECK(got.size() == fits);
  CHECK(got.front().name == name + "100000000");
  CHECK(f.dropped() == path + ": " + std::to_string(lines - fits) + " functions after the first " +
                           std::to_string(fits) + " (1 MiB of names) have no names");
  // A line longer than a read (4 MiB), then a function: the long one is skipped, never held whole.
  const std::string other = dir.file("perf-10.map");
  append(other, "1000 10 " + std::string(size_t{5} << 20, 'x') + "\n2000 10 b\n");
  r::PerfMapFollower g(other, mine);
  g.poll(1);
  auto after = g.finish();
  REQUIRE(after.size() == 1);
  CHECK(after[0].name == "b");
  CHECK(g.dropped().empty());
}

TEST_CASE("jitdump file names and reading files", "[recorder][jit]") {
  CHECK(r::jitdump_pid("/home/u/jit-1234.dump") == 1234);
  CHECK(r::jitdump_pid("jit-7.dump") == 7);
  CHECK(r::jitdump_pid("/tmp/jit-.dump") == 0);
  CHECK(r::jitdump_pid("/tmp/jit-12x.dump") == 0);
  CHECK(r::jitdump_pid("/usr/lib/libjit-1.so") == 0);

  fxprof::test::TempDir dir;
  const std::vector<uint32_t> mine{static_cast<uint32_t>(geteuid())};
  CHECK(!r::read_perf_map(dir.file("missing.map"), mine).ok());
  // A FIFO named like a map must not block the recorder.
  REQUIRE(mkfifo(dir.file("fifo.map").c_str(), 0600) == 0);
  CHECK(!r::read_perf_map(dir.file("fifo.map"), mine).ok());
  {
    int fd = open(dir.file("p.map").c_str(), O_CREAT | O_WRONLY, 0600);
    REQUIRE(fd >= 0);
    std::string text = "1000 10 a\n2000 10 b\n";
    REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    close(fd);
  }
  auto got = r::read_perf_map(dir.file("p.map"), mine);
  REQUIRE(got.ok());
  CHECK(got->size() == 2);
  // A symbolic link (anyone can create /tmp/perf-PID.map) is not followed.
  REQUIRE(symlink(dir.file("p.map").c_str(), dir.file("link.map").c_str()) == 0);
  CHECK(!r::read_perf_map(dir.file("link.map"), mine).ok());
}

TEST_CASE("a JIT file is used only when the process's user or root owns it and no one else may write it",
          "[recorder][jit]") {
  // Anyone can create /tmp/perf-PID.map before the process does: another user's map named 13% of root's
  // profile. perf checks the owner too.
  REQUIRE(geteuid() == 0);  // the suite runs as root: it can give the file to any user
  fxprof::test::TempDir dir;
  const std::string map = dir.file("perf-1.map");
  {
    int fd = open(map.c_str(), O_CREAT | O_WRONLY, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, "1000 10 a\n", 10) == 10);
    close(fd);
  }
  const std::vector<uint32_t> process_of_4242{4242, 4242};
  std::string why;
  CHECK(r::read_perf_map(map, process_of_4242, &why).ok());  // root's
  CHECK(why.empty());
  REQUIRE(chown(map.c_str(), 4242, 4242) == 0);
  CHECK(r::read_perf_map(map, process_of_4242, &why).ok());  // the process's user's
  CHECK(why.empty());
  REQUIRE(chown(map.c_str(), 1313, 1313) == 0);
  auto other = r::read_perf_map(map, process_of_4242, &why);
  REQUIRE_FALSE(other.ok());
  CHECK(why == map + ": owned by user 1313, not by the process's user (4242) or root");
  CHECK(other.error() == why);
  // A setuid process: its real and effective users both may own it.
  CHECK(r::read_perf_map(map, std::vector<uint32_t>{4242, 1313}).ok());
  why.clear();
  REQUIRE(chown(map.c_str(), 4242, 4242) == 0);
  REQUIRE(chmod(map.c_str(), 0620) == 0);
  CHECK_FALSE(r::read_perf_map(map, process_of_4242, &why).ok());
  CHECK(why == map + ": writable by its group");
  REQUIRE(chmod(map.c_str(), 0602) == 0);
  CHECK_FALSE(r::read_jitdump(map, process_of_4242, &why).ok());
  CHECK(why == map + ": writable by others");
  CHECK(r::jit_file_untrusted(0, 0100644, process_of_4242).empty());
  CHECK(r::jit_file_untrusted(7, 0100644, std::vector<uint32_t>{7}).empty());
  // Whose: the real and effective users of /proc/PID/status.
  CHECK(r::status_uids("Name:\tnode\nUmask:\t0022\nUid:\t1000\t0\t0\t0\nGid:\t5\t5\t5\t5\n") ==
        std::vector<uint32_t>{1000, 0});
  CHECK(r::status_uids("Name:\tx\n").empty());
}
