// Data-quality lines and meta entries (recorder/quality.h), each on a real program and real kernel events:
// a program the kernel stops profiling (unreadable, setuid), a damaged .eh_frame, lost records, a binary
// deleted while it runs.
#include "recorder/quality.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/fd.h"
#include "tests/support/support.h"

using namespace fxprof::test;

namespace {

// A copy of a test program at `to`, with `mode`.
void copy_program(const std::string& name, const std::string& to, mode_t mode) {
  auto r = run({"cp", test_program(name), to});
  INFO(r.err);
  REQUIRE(r.status == 0);
  REQUIRE(chmod(to.c_str(), mode) == 0);
}

// The entries of the profile's meta.extra section `section`: label -> value.
std::vector<std::pair<std::string, uint64_t>> meta_section(const std::string& text,
                                                           const std::string& section) {
  simdjson::dom::parser parser;
  auto root = parse_json(parser, text);
  std::vector<std::pair<std::string, uint64_t>> out;
  simdjson::dom::array extra;
  if (root["meta"]["extra"].get(extra)) return out;
  for (simdjson::dom::element s : extra) {
    if (std::string_view(s["label"]) != section) continue;
    for (simdjson::dom::element e : simdjson::dom::array(s["entries"]))
      out.push_back({std::string(std::string_view(e["label"])), uint64_t(e["value"])});
  }
  return out;
}

// The value of the "Data quality" entry whose label starts with `prefix` (and that label), or ("", 0). Other
// entries may come and go with the machine's load (lost records): only the one a test is about is checked.
std::pair<std::string, uint64_t> quality_entry(const std::string& text, const std::string& prefix) {
  for (auto& [label, value] : meta_section(text, "Data quality"))
    if (label.starts_with(prefix)) return {label, value};
  return {"", 0};
}

// Overwrites section `name` of the ELF file `path` with 0xff bytes (readelf gives its offset and size).
void damage_section(const std::string& path, const std::string& name) {
  auto r = run({"readelf", "-SW", path});
  REQUIRE(r.status == 0);
  std::istringstream lines(r.out);
  std::string line;
  uint64_t off = 0, size = 0;
  while (std::getline(lines, line)) {
    // "  [18] .eh_frame  PROGBITS  0000000000002118 002118 000134 00   A  0   0  8"
    size_t at = line.find("] " + name + " ");
    if (at == std::string::npos) continue;
    std::istringstream f(line.substr(at + 2));
    std::string sec, type, addr;
    f >> sec >> type >> addr >> std::hex >> off >> size;
  }
  REQUIRE(size > 0);
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  std::string junk(size, '\xff');
  CHECK(pwrite(fd, junk.data(), size, static_cast<off_t>(off)) == static_cast<ssize_t>(size));
  close(fd);
}

// A process of one main thread with one sample of `cpu_ns` on-CPU time, started at `start_ns`.
fxprof::model::Thread& add_process(fxprof::model::Profile& p, uint32_t pid, const char* name,
                                   uint64_t start_ns, int64_t cpu_ns) {
  fxprof::model::Process& proc = p.processes.emplace_back();
  proc.pid = pid;
  proc.name = name;
  proc.start_ns = start_ns;
  fxprof::model::Thread& t = proc.threads.emplace_back();
  t.tid = pid;
  t.is_main = true;
  t.name = name;
  t.samples.push_back({});
  t.samples.back().cpu_delta_ns = static_cast<int32_t>(cpu_ns);
  return t;
}

}  // namespace

TEST_CASE("quality: a program the kernel will not let this user profile is named, with why",
          "[quality][unprivileged]") {
  REQUIRE(geteuid() == 0);  // the suite runs as root and drops to the test user here
  const passwd* pw = ensure_test_user();
  REQUIRE(pw != nullptr);
  TempDir dir;
  // Root's files: the user may run them, not read them (0111), or runs them as root (setuid).
  copy_program("dq_work", dir.file("dq_open"), 0755);
  copy_program("dq_work", dir.file("dq_locked"), 0111);
  copy_program("dq_work", dir.file("dq_suid"), 04755);
  CmdOptions opts = as_test_user(dir);
  const std::string out = dir.file("p.json.gz");
  auto record = [&](const std::vector<std::string>& argv) {
    std::vector<std::string> cmd{fxprof_bin(), "record", "--save-only", "--no-symbolicate", "-o", out, "--"};
    cmd.insert(cmd.end(), argv.begin(), argv.end());
    return run(cmd, opts);
  };

  SECTION("launched directly: no samples, and the message says why instead of blaming CPU use") {
    auto r = record({"./dq_locked", "300"});
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(r.err.find("fxprof: no samples: not profiled from their exec on: ./dq_locked (pid ") !=
          std::string::npos);
    CHECK(r.err.find("not readable by you (mode 0111)") != std::string::npos);
    CHECK(r.err.find("used less CPU") == std::string::npos);
    CHECK(r.err.find("record as root") != std::string::npos);
  }

  SECTION("started by the program: one line for both, and the meta counts them") {
    const std::string script = dir.path() + "/dq_open 200 && " + dir.path() + "/dq_locked 300 && " +
                               dir.path() + "/dq_suid 300 && " + dir.path() + "/dq_open 200";
    auto r = record({"/bin/sh", "-c", script});
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.find("fxprof: not profiled from their exec on: " + dir.path() + "/dq_locked (pid ") !=
          std::string::npos);
    CHECK(r.err.find("not readable by you (mode 0111)") != std::string::npos);
    CHECK(r.err.find(dir.path() + "/dq_suid (pid ") != std::string::npos);
    CHECK(r.err.find("setuid root") != std::string::npos);
    auto [label, count] = quality_entry(read_profile_text(out), "Not profiled after exec");
    CHECK(label == "Not profiled after exec (setuid or unreadable binary): dq_locked, dq_suid");
    CHECK(count == 2);
  }
}

TEST_CASE("quality: as root, programs setuid to another user or setgid are named, short-lived ones too",
          "[quality]") {
  REQUIRE(geteuid() == 0);
  const passwd* pw = ensure_test_user();
  REQUIRE(pw != nullptr);
  TempDir dir;
  // Root's own setuid-root program stays profiled (its real and effective user are both root); one setuid
  // to the test user or setgid to its group changes ids at the exec, and the kernel drops our events.
  copy_program("dq_work", dir.file("dq_rootsuid"), 04755);
  copy_program("dq_work", dir.file("dq_sgid"), 0755);
  REQUIRE(chown(dir.file("dq_sgid").c_str(), 0, pw->pw_gid) == 0);
  REQUIRE(chmod(dir.file("dq_sgid").c_str(), 02755) == 0);
  copy_program("dq_work", dir.file("dq_suser"), 0755);
  REQUIRE(chown(dir.file("dq_suser").c_str(), pw->pw_uid, 0) == 0);
  REQUIRE(chmod(dir.file("dq_suser").c_str(), 04755) == 0);
  using fxprof::recorder::unprofilable_reason;
  CHECK(unprofilable_reason(dir.file("dq_rootsuid")).empty());
  CHECK(unprofilable_reason(dir.file("dq_sgid")).starts_with("setgid group "));
  CHECK(unprofilable_reason(dir.file("dq_suser")) ==
        "setuid to user " + std::string(pw->pw_name) + " (" + std::to_string(pw->pw_uid) + ")");
  const std::string out = dir.file("p.json.gz");
  auto record = [&](const std::vector<std::string>& argv) {
    std::vector<std::string> cmd{fxprof_bin(), "record", "--save-only", "--no-symbolicate", "-o", out, "--"};
    cmd.insert(cmd.end(), argv.begin(), argv.end());
    return run(cmd);
  };

  SECTION("launched directly: the no-samples message says why, not that it used too little CPU") {
    auto r = record({dir.file("dq_sgid"), "200"});
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(r.err.find("fxprof: no samples: not profiled from their exec on: " + dir.file("dq_sgid")) !=
          std::string::npos);
    CHECK(r.err.find("setgid group ") != std::string::npos);
    CHECK(r.err.find("used less CPU") == std::string::npos);
    CHECK(r.err.find("chmod ug-s") != std::string::npos);
  }

  SECTION("started by the program: each one counts, however short its life") {
    // Five that exit at once (0 ms of work: gone long before the reader sees their EXIT), two that run on.
    std::string script = dir.file("dq_rootsuid") + " 100";
    for (int i = 0; i < 5; ++i) script += " && " + dir.file("dq_suser") + " 0";
    script += " && " + dir.file("dq_sgid") + " 200 && " + dir.file("dq_suser") + " 200";
    auto r = record({"/bin/sh", "-c", script});
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.find("fxprof: not profiled from their exec on: ") != std::string::npos);
    CHECK(r.err.find("and 4 more") != std::string::npos);
    const std::string text = read_profile_text(out);
    auto [label, count] = quality_entry(text, "Not profiled after exec");
    INFO(label);
    CHECK(count == 7);
    CHECK(label.find("dq_suser") != std::string::npos);
    CHECK(label.find("dq_rootsuid") == std::string::npos);  // root's setuid-root program was profiled
    CHECK(text.find("\"processName\":\"dq_rootsuid\"") != std::string::npos);
  }
}

TEST_CASE("quality: stacks that stop at a damaged .eh_frame are failed, and the binary is named",
          "[quality]") {
  TempDir dir;
  const std::string prog = dir.file("dq_damaged");
  copy_program("dq_work", prog, 0755);
  damage_section(prog, ".eh_frame");
  const std::string out = dir.file("p.json.gz");
  auto r = run({fxprof_bin(), "record", "--save-only", "--no-symbolicate", "-F", "2000", "-o", out, "--",
                prog, "300"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  // The incomplete-stacks line (recorder/unwind/report.h) names it, with the remedy for a damaged file.
  CHECK(r.err.find("% of the stacks of thread") != std::string::npos);
  CHECK(r.err.find("unwinding stopped in dq_damaged (") != std::string::npos);
  CHECK(r.err.find(", corrupt .eh_frame)") != std::string::npos);
  CHECK(r.err.find("the unwind tables (.eh_frame) of dq_damaged could not be parsed") != std::string::npos);
  const std::string text = read_profile_text(out);
  CHECK(lint_gecko_profile(text).empty());
  uint64_t stacks = 0, failed = 0;
  for (const auto& [label, value] : meta_section(text, "Stack walking")) {
    if (label == "Stacks unwound (DWARF)") stacks = value;
    if (label == "Failed (no unwind information)") failed = value;
  }
  CHECK(stacks >= 20);          // 300 ms at 2 kHz: ~600 on an idle machine
  CHECK(failed * 2 >= stacks);  // most of them: every stack starts in dq_work's own code
  auto [label, count] = quality_entry(text, "Stacks stopped at a damaged .eh_frame");
  CHECK(label == "Stacks stopped at a damaged .eh_frame: " + prog);
  CHECK(count * 2 >= stacks);
  // The saved profile still says it: `fxprof report` prints the entry.
  auto report = run({fxprof_bin(), "report", "--no-symbolicate", out});
  INFO(report.err);
  REQUIRE(report.status == 0);
  CHECK(report.out.find("data quality: Stacks stopped at a damaged .eh_frame: " + prog + " (" +
                        std::to_string(count) + ")\n") != std::string::npos);
}

// Whether process `pid` comes to hold a descriptor of `path` within a minute (its fd table, looked at
// every few milliseconds: there is nothing to wait on).
static bool holds_open(pid_t pid, const std::string& path) {
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  for (int i = 0; i < 12000; ++i) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(fds, ec))
      if (std::filesystem::read_symlink(e.path(), ec) == path) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST_CASE("quality: a binary deleted while it runs still unwinds and gets its names", "[quality]") {
  TempDir dir;
  const std::string prog = dir.file("dq_deleted"), ready = dir.file("ready"), go = dir.file("go");
  copy_program("dq_work", prog, 0755);
  REQUIRE(mkfifo(ready.c_str(), 0600) == 0);
  REQUIRE(mkfifo(go.c_str(), 0600) == 0);
  // Read-write: opening does not wait for the program, and poll() waits for its line.
  fxprof::UniqueFd ready_fd(open(ready.c_str(), O_RDWR | O_CLOEXEC));
  REQUIRE(ready_fd.valid());
  const std::string out = dir.file("p.json.gz");
  Background fx(
      {fxprof_bin(), "record", "--save-only", "-F", "2000", "-o", out, "--", prog, "300", ready, go});
  pollfd pfd{ready_fd.get(), POLLIN, 0};
  REQUIRE(poll(&pfd, 1, 60000) == 1);
  char line[16] = {};
  REQUIRE(read(ready_fd.get(), line, sizeof line) == 6);
  // fxprof keeps the launched executable's descriptor from its exec on (its mmap records may be read after
  // the program ended, under load): unlink once it holds it.
  REQUIRE(holds_open(fx.pid(), prog));
  REQUIRE(unlink(prog.c_str()) == 0);
  {
    fxprof::UniqueFd go_fd(open(go.c_str(), O_WRONLY | O_CLOEXEC));  // the program waits for its end
    REQUIRE(go_fd.valid());
  }
  const int status = fx.stop(0, std::chrono::seconds(120));
  const std::string err = fx.err();
  INFO(err);
  REQUIRE(status == 0);
  CHECK(err.find("no symbols for dq_deleted") == std::string::npos);
  const std::string text = read_profile_text(out);
  CHECK(lint_gecko_profile(text).empty());
  // Unwound through its own code and named from the deleted file: the whole call path, in most samples.
  auto folded = run({fxprof_bin(), "export", "folded", out, "-o", "-"});
  INFO(folded.err);
  REQUIRE(folded.status == 0);
  uint64_t total = 0, named = 0;
  std::istringstream lines(folded.out);
  for (std::string l; std::getline(lines, l);) {
    const size_t space = l.rfind(' ');
    if (space == std::string::npos) continue;
    const uint64_t n = std::stoull(l.substr(space + 1));
    if (l.find("dq_deleted") != std::string::npos || l.find("spin_cpu_ms") != std::string::npos) total += n;
    if (l.find("main;dq_outer;dq_middle;dq_inner") != std::string::npos) named += n;
  }
  INFO(folded.out.substr(0, 4000));
  CHECK(total >= 20);
  CHECK(named * 10 >= total * 8);
  auto [label, count] = quality_entry(text, "Deleted while running");
  CHECK(label == "Deleted while running, read from the open file: " + prog);
  CHECK(count == 1);

  // The Firefox Profiler drops meta.extra: the entry reaches it as a "Data quality" marker on the program's
  // main thread, and the stack-walking counts as a "Stack walking" marker, read by its own code.
  ProfilerCli cli;
  auto load = cli.load(out);
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  auto markers = cli.cmd({"profile", "markers", "--search", "Data quality", "--json"});
  INFO(markers.out << markers.err);
  REQUIRE(markers.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, markers.out);
  int found = 0;
  for (simdjson::dom::element m : simdjson::dom::array(doc["markers"])) {
    if (std::string_view(m["data"]["what"]) != "Deleted while running, read from the open file: " + prog)
      continue;
    ++found;
    CHECK(std::string_view(m["markerType"]) == "DataQuality");
    CHECK(int64_t(m["data"]["count"]) == 1);
    CHECK(std::string_view(m["processName"]) == "dq_deleted");
    CHECK(std::string_view(m["label"]) == "Deleted while running, read from the open file: " + prog + " (1)");
  }
  CHECK(found == 1);
  auto walk = cli.cmd({"profile", "markers", "--search", "Stack walking", "--json"});
  INFO(walk.out << walk.err);
  REQUIRE(walk.status == 0);
  auto wdoc = parse_json(parser, walk.out);
  simdjson::dom::array walks = wdoc["markers"];
  REQUIRE(walks.size() == 1);
  // The same counts as meta.extra's "Stack walking" section.
  const auto sw = meta_section(text, "Stack walking");
  REQUIRE(!sw.empty());
  CHECK(sw[0].first == "Stacks unwound (DWARF)");
  CHECK(uint64_t(walks.at(0)["data"]["stacks"]) == sw[0].second);
  CHECK(sw[0].second > 0);
}

TEST_CASE("quality: the machine is in the profile's meta, where the Firefox Profiler shows it", "[quality]") {
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  auto r = run(
      {fxprof_bin(), "record", "--save-only", "--cpu-only", "-o", out, "--", test_program("dq_work"), "20"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string text = read_profile_text(out);
  simdjson::dom::parser parser;
  auto meta = parse_json(parser, text)["meta"];
  // What the machine says about itself.
  const std::string cpuinfo = read_profile_text("/proc/cpuinfo");
  const size_t model = cpuinfo.find("model name");
  REQUIRE(model != std::string::npos);
  const size_t colon = cpuinfo.find(": ", model) + 2;
  CHECK(std::string_view(meta["CPUName"]) == cpuinfo.substr(colon, cpuinfo.find('\n', colon) - colon));
  CHECK(int64_t(meta["logicalCPUs"]) == sysconf(_SC_NPROCESSORS_ONLN));
  CHECK(int64_t(meta["physicalCPUs"]) >= 1);
  CHECK(int64_t(meta["physicalCPUs"]) <= int64_t(meta["logicalCPUs"]));
  CHECK(uint64_t(meta["mainMemory"]) / 4096 ==
        static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 4096);
  CHECK(std::string_view(meta["arguments"]) == test_program("dq_work") + " 20");
  auto uname_r = run({"uname", "-r"});
  REQUIRE(uname_r.status == 0);
  const std::string release = uname_r.out.substr(0, uname_r.out.find('\n'));
  // Through the front end's own code: the name carries the command, the platform the kernel.
  ProfilerCli cli;
  auto load = cli.load(out);
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  auto info = cli.cmd({"profile", "info", "--json"});
  INFO(info.out << info.err);
  REQUIRE(info.status == 0);
  simdjson::dom::parser info_parser;  // `meta` still points into `parser`'s document
  auto idoc = parse_json(info_parser, info.out);
  CHECK(std::string_view(idoc["platform"]).find("Linux " + release) == 0);
  CHECK(std::string_view(idoc["name"]).find(test_program("dq_work") + " 20") != std::string_view::npos);
  // And `fxprof report` prints them.
  auto rep = run({fxprof_bin(), "report", out});
  REQUIRE(rep.status == 0);
  CHECK(rep.out.find("command: " + test_program("dq_work") + " 20\n") != std::string::npos);
  CHECK(rep.out.find("machine: " + std::string(std::string_view(meta["CPUName"]))) != std::string::npos);
}

TEST_CASE("quality: lost records are one line, and samples in code whose mapping was lost are marked",
          "[quality]") {
  // A one-page ring buffer and a program that maps its own binary thousands of times before each exec: the
  // buffer overflows, and with it go mmap and exec records of the children.
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  auto r = run({fxprof_bin(), "record", "--save-only", "--no-symbolicate", "--cpu-only", "--call-graph", "fp",
                "--buffer-size", "4096", "-F", "4000", "-o", out, "--", test_program("dq_mmaps"), "10",
                "5000", test_program("dq_work"), "50"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find(" records lost (the reader fell behind; shown as \"Lost records\" markers)") !=
        std::string::npos);
  CHECK(r.err.find("--buffer-size") != std::string::npos);
  const std::string text = read_profile_text(out);
  CHECK(lint_gecko_profile(text).empty());
  uint64_t lost = 0, unknown = 0;
  for (const auto& [label, value] : meta_section(text, "Data quality")) {
    if (label == "Records lost (ring buffer overflow)") lost = value;
    if (label == "Samples in code whose mapping was lost") unknown = value;
  }
  CHECK(lost > 0);
  // Every sample under the marker is counted, and only those.
  simdjson::dom::parser parser;
  auto root = parse_json(parser, text);
  uint64_t marked = 0;
  auto count = [&](simdjson::dom::element thread) {
    simdjson::dom::array strings = thread["stringTable"], frames = thread["frameTable"]["data"],
                         stacks = thread["stackTable"]["data"];
    const auto location_col = size_t(int64_t(thread["frameTable"]["schema"]["location"]));
    const auto frame_col = size_t(int64_t(thread["stackTable"]["schema"]["frame"]));
    const auto prefix_col = size_t(int64_t(thread["stackTable"]["schema"]["prefix"]));
    for (simdjson::dom::element smp : simdjson::dom::array(thread["samples"]["data"])) {
      if (smp.at(0).is_null()) continue;
      int64_t s = int64_t(smp.at(0)), root_frame = -1;
      while (s >= 0) {
        auto st = stacks.at(size_t(s));
        root_frame = int64_t(st.at(frame_col));
        s = st.at(prefix_col).is_null() ? -1 : int64_t(st.at(prefix_col));
      }
      auto name = frames.at(size_t(root_frame)).at(location_col);
      marked += std::string_view(strings.at(size_t(int64_t(name)))) == "(unknown code: records lost)";
    }
  };
  for (simdjson::dom::element t : simdjson::dom::array(root["threads"])) count(t);
  for (simdjson::dom::element p : simdjson::dom::array(root["processes"]))
    for (simdjson::dom::element t : simdjson::dom::array(p["threads"])) count(t);
  CHECK(marked == unknown);
  CHECK(marked > 0);
  if (unknown > 0) CHECK(r.err.find("ran code whose mmap or exec record was lost") != std::string::npos);
}

TEST_CASE("quality: the file execvp runs, and the lines' wording", "[quality]") {
  CHECK(fxprof::recorder::command_path("./x/y") == "./x/y");
  const std::string sh = fxprof::recorder::command_path("sh");
  CHECK(sh.ends_with("/sh"));
  CHECK(access(sh.c_str(), X_OK) == 0);
  // Root may profile an ordinary program (and a setuid-root one: the test above).
  REQUIRE(geteuid() == 0);
  CHECK(fxprof::recorder::unprofilable_reason(sh).empty());
  auto q = fxprof::recorder::lost_records_problem(120, 7, 2);
  CHECK(q.label == "Records lost (ring buffer overflow)");
  CHECK(q.count == 120);
  CHECK(q.line.starts_with("120 records lost (the reader fell behind"));
  CHECK(q.line.find(": 7 samples of 2 processes ran code whose mmap or exec record was lost") !=
        std::string::npos);
  CHECK(fxprof::recorder::lost_records_problem(5, 0, 0).line.find("samples of") == std::string::npos);
  std::vector<fxprof::recorder::UnfollowedExec> execs = {{10, "/usr/bin/passwd", "setuid root"},
                                                         {11, "./locked", "not readable by you (mode 0111)"}};
  auto u = fxprof::recorder::unfollowed_problem(execs);
  CHECK(u.label == "Not profiled after exec (setuid or unreadable binary): passwd, locked");
  CHECK(u.count == 2);
  CHECK(
      u.line.starts_with("not profiled from their exec on: /usr/bin/passwd (pid 10: setuid root), ./locked "
                         "(pid 11: not readable by you (mode 0111)). "));
}

TEST_CASE("quality: each marker is on the affected process's main thread, at the time it happened",
          "[quality]") {
  // Issue 38.4: a shell (the top process, no CPU) started gzip (busy: the thread the URL opens) and two
  // programs the kernel stopped profiling at their execs, one setuid and one setgid.
  namespace model = fxprof::model;
  constexpr uint64_t ms = 1000000;
  model::Profile p;
  p.meta.start_monotonic_ns = 1000 * ms;
  p.meta.end_monotonic_ns = 6000 * ms;
  p.meta.stack_walk = model::Meta::StackWalk{};
  p.meta.stack_walk->stacks = 100;
  for (auto [pid, name, cpu] :
       {std::tuple{10u, "sh", uint64_t{0}}, std::tuple{11u, "gzip", 900 * ms},
        std::tuple{12u, "dq_suser", uint64_t{0}}, std::tuple{13u, "dq_sgid", uint64_t{0}}})
    add_process(p, pid, name, 1000 * ms, static_cast<int64_t>(cpu));
  std::vector<fxprof::recorder::UnfollowedExec> execs = {
      {12, "/t/dq_suser", "setuid to user fxprof-test (999)", 1500 * ms},
      {13, "/t/dq_sgid", "setgid group fxprof-test (999)", 2500 * ms}};
  std::vector<fxprof::recorder::QualityProblem> problems = {
      fxprof::recorder::unfollowed_problem(execs),
      fxprof::recorder::lost_records_problem(40, 0, 0, 3000 * ms)};
  fxprof::recorder::report_quality(p, problems);

  // (process, marker name, what) of every marker, with its time.
  struct Seen {
    std::string process, name, what;
    uint64_t time;
  };
  std::vector<Seen> seen;
  for (const model::Process& proc : p.processes)
    for (const model::Marker& m : proc.threads[0].markers) {
      std::string what;
      for (const model::MarkerField& f : m.fields)
        if (f.is_string && p.strings.get(f.key) == "what") what = std::string(p.strings.get(f.string));
      seen.push_back({proc.name, std::string(p.strings.get(m.name)), what, (m.start_ns - 1000 * ms) / ms});
    }
  for (const Seen& s : seen) INFO(s.process << ": " << s.name << " " << s.what << " at " << s.time);
  REQUIRE(seen.size() == 4);
  auto find = [&](const std::string& needle) -> const Seen* {
    for (const Seen& s : seen)
      if ((s.name + " " + s.what).find(needle) != std::string::npos) return &s;
    return nullptr;
  };
  const Seen* suid = find("dq_suser");
  const Seen* sgid = find("dq_sgid");
  const Seen* lost = find("Records lost");
  const Seen* walk = find("Stack walking");
  REQUIRE(suid);
  REQUIRE(sgid);
  REQUIRE(lost);
  REQUIRE(walk);
  // One marker per program, each on its own track, at its exec, saying why.
  CHECK(suid->process == "dq_suser");
  CHECK(suid->time == 500);
  CHECK(suid->what.find("setuid to user") != std::string::npos);
  CHECK(suid->what.find("dq_sgid") == std::string::npos);
  CHECK(sgid->process == "dq_sgid");
  CHECK(sgid->time == 1500);
  CHECK(sgid->what.find("setgid group") != std::string::npos);
  // The recording's own problems on the process the user sees (gzip, not the shell): the loss when it began.
  CHECK(lost->process == "gzip");
  CHECK(lost->time == 2000);
  CHECK(walk->process == "gzip");
  // The meta entry and the stderr line stay one for all the programs.
  REQUIRE(p.meta.data_quality.size() == 2);
  CHECK(p.meta.data_quality[0].count == 2);
}

TEST_CASE("quality: the recording's markers stay inside the life of the process they are marked on",
          "[quality]") {
  // Seen in the front end: `sh -c 'gzip ...; gzip ...'` with lost records put "Records lost" on the first
  // gzip at the shell's first loss, 62 ms before that gzip began (a negative time in its process), and "Stack
  // walking" at the recording's end, a second after it exited: neither on its track.
  namespace model = fxprof::model;
  constexpr uint64_t ms = 1000000;
  model::Profile p;
  p.meta.start_monotonic_ns = 1000 * ms;
  p.meta.end_monotonic_ns = 4000 * ms;
  p.meta.stack_walk = model::Meta::StackWalk{};
  p.meta.stack_walk->stacks = 100;
  p.processes.reserve(2);
  add_process(p, 10, "sh", 1000 * ms, 0);
  model::Thread& g = add_process(p, 11, "gzip", 1100 * ms, 900 * ms);
  model::Process& sh = p.processes[0];
  model::Process& gzip = p.processes[1];
  gzip.end_ns = g.end_ns = 2000 * ms;
  std::vector<fxprof::recorder::QualityProblem> problems = {
      fxprof::recorder::lost_records_problem(40, 0, 0, 1010 * ms)};
  fxprof::recorder::report_quality(p, problems);
  CHECK(sh.threads[0].markers.empty());
  REQUIRE(g.markers.size() == 2);
  for (const model::Marker& m : g.markers) {
    INFO(p.strings.get(m.name) << " at " << m.start_ns / ms << " ms");
    CHECK(m.start_ns >= gzip.start_ns);
    CHECK(m.start_ns <= *g.end_ns);
  }
}
