// The exporter's rules (the spec in ../shared/docs/firefox-profiler-format.md): sorted sample times, stack
// tables in topological order per thread, sorted non-overlapping libs, string indices, categories, GeckoMain
// naming, processes one level deep. Profiles built by hand here, then linted and loaded with the Firefox
// Profiler's own importer (profiler-cli).
#include "gecko/gecko.h"

#include <catch2/catch.hpp>

#include "gecko/gecko_reader.h"
#include "tests/support/support.h"

using namespace fxprof;
using simdjson::dom::array;
using simdjson::dom::element;

namespace {

constexpr uint64_t kT0 = 1'000'000'000'000;  // monotonic ns at the start

model::Profile sample_profile() {
  model::Profile p;
  p.meta.product = "unit";
  p.meta.start_unix_ms = 1.7e12;
  p.meta.start_monotonic_ns = kT0;
  p.meta.end_monotonic_ns = kT0 + 50'000'000;
  p.meta.marker_schemas.push_back(
      {"Lost", {"marker-chart", "marker-table"}, "lost", "", "", {{"count", "Count", "integer"}}});

  model::Process& proc = p.processes.emplace_back();
  proc.pid = 100;
  proc.name = "app";
  proc.start_ns = kT0;
  // Deliberately unsorted and overlapping libs.
  proc.libs.push_back({0x7f0000001000, 0x7f0000009000, 0x1000, "libc.so.6", "/lib/libc.so.6", "libc.so.6",
                       "/lib/libc.so.6", "5C0A0D51EA1980DF43F203B4525BE9BE0",
                       "510d0a5c19eadf8043f203b4525be9be3dcb9554"});
  proc.libs.push_back({0x555555555000, 0x555555556000, 0x1000, "app", "/tmp/app", "app", "/tmp/app",
                       "0123456789ABCDEF0123456789ABCDEF0", "efcdab8967452301"});
  proc.libs.push_back({0x7f0000002000, 0x7f0000003000, 0, "overlap", "/x", "overlap", "/x", "", ""});

  model::FrameId start = p.native_frame(0x555555555040);
  model::FrameId main_f = p.native_frame(0x555555555231);
  model::FrameId leaf = p.native_frame(0x7f0000001234);
  model::FrameId kfn = p.kernel_frame(0xffffffff81000010);
  p.frames.mutable_frame(kfn).name = p.strings.intern("ksys_write");
  model::FrameId label = p.label_frame("(stack truncated)");

  std::vector<model::FrameId> s1{start, main_f, leaf};
  std::vector<model::FrameId> s2{start, main_f, leaf, kfn};
  std::vector<model::FrameId> s3{label, leaf};
  model::StackId a = p.stacks.intern_path(s1), b = p.stacks.intern_path(s2), c = p.stacks.intern_path(s3);

  model::Thread& main_t = proc.threads.emplace_back();
  main_t.tid = 100;
  main_t.name = "app";
  main_t.is_main = true;
  main_t.start_ns = kT0;
  // Out of order on purpose.
  main_t.samples = {{kT0 + 3'000'000, b, 1000}, {kT0 + 1'000'000, a, -1}, {kT0 + 2'000'000, a, 900'000}};
  model::Marker m;
  m.name = p.strings.intern("Lost records");
  m.start_ns = kT0 + 1'500'000;
  m.end_ns = kT0 + 2'500'000;
  m.phase = model::MarkerPhase::Interval;
  m.type = p.strings.intern("Lost");
  m.fields.push_back({p.strings.intern("count"), false, 3, model::kNoString});
  main_t.markers.push_back(m);

  model::Thread& worker = proc.threads.emplace_back();
  worker.tid = 101;
  worker.name = "worker \xFF";  // comm names are bytes, not UTF-8
  worker.start_ns = kT0 + 500'000;
  worker.end_ns = kT0 + 40'000'000;
  worker.samples = {{kT0 + 4'000'000, c, 1000}, {kT0 + 5'000'000, model::kNoStack, 0}};

  model::Process& child = p.processes.emplace_back();
  child.pid = 200;
  child.name = "child";
  child.start_ns = kT0 + 10'000'000;
  child.end_ns = kT0 + 20'000'000;
  model::Thread& ct = child.threads.emplace_back();
  ct.tid = 200;
  ct.name = "child";
  ct.is_main = true;
  ct.start_ns = child.start_ns;
  ct.samples = {{kT0 + 11'000'000, a, 1000}};
  return p;
}

std::string_view str(element e) { return std::string_view(e); }
int64_t i64(element e) { return int64_t(e); }

}  // namespace

TEST_CASE("a Gecko profile follows the format rules") {
  test::TempDir dir;
  std::string path = dir.file("p.json");
  REQUIRE(gecko::write_gecko_profile(sample_profile(), path));
  std::string text = test::read_profile_text(path);
  INFO(text);
  auto problems = test::lint_gecko_profile(text);
  for (const auto& pr : problems) UNSCOPED_INFO(pr);
  CHECK(problems.empty());

  simdjson::dom::parser parser;
  element doc = test::parse_json(parser, text);
  CHECK(i64(doc["meta"]["version"]) == 36);
  CHECK(bool(doc["meta"]["presymbolicated"]) == false);
  CHECK(str(doc["meta"]["categories"].at(0)["color"]) == "grey");
  CHECK(str(doc["meta"]["categories"].at(2)["name"]) == "Kernel");
  CHECK(str(doc["meta"]["sampleUnits"]["threadCPUDelta"]) == "µs");
  CHECK(double(doc["meta"]["startTime"]) == Approx(1.7e12));

  SECTION("libs are sorted and overlaps dropped") {
    array libs = doc["libs"];
    REQUIRE(libs.size() == 2);
    CHECK(str(libs.at(0)["name"]) == "app");
    CHECK(str(libs.at(1)["name"]) == "libc.so.6");
    CHECK(uint64_t(libs.at(1)["offset"]) == 0x1000);
    CHECK(str(libs.at(1)["codeId"]) == "510d0a5c19eadf8043f203b4525be9be3dcb9554");
  }
  SECTION("threads: GeckoMain first, times sorted and relative to the process start") {
    array threads = doc["threads"];
    REQUIRE(threads.size() == 2);
    element t = threads.at(0);
    CHECK(str(t["name"]) == "GeckoMain");
    CHECK(str(t["processName"]) == "app");
    array samples = t["samples"]["data"];
    REQUIRE(samples.size() == 3);
    CHECK(double(samples.at(0).at(1)) == Approx(1.0));
    CHECK(double(samples.at(1).at(1)) == Approx(2.0));
    CHECK(double(samples.at(2).at(1)) == Approx(3.0));
    CHECK(samples.at(0).at(3).is_null());
    CHECK(i64(samples.at(1).at(3)) == 900);  // µs
    // Stack of the last sample: leaf frame is the named kernel frame, 4 deep.
    array stacks = t["stackTable"]["data"];
    array frames = t["frameTable"]["data"];
    array strings = t["stringTable"];
    int64_t s = i64(samples.at(2).at(0));
    std::vector<std::string> names;
    std::vector<int64_t> cats;
    while (true) {
      int64_t f = i64(stacks.at(size_t(s)).at(1));
      names.insert(names.begin(), std::string(str(strings.at(size_t(i64(frames.at(size_t(f)).at(0)))))));
      cats.insert(cats.begin(), i64(frames.at(size_t(f)).at(6)));
      if (stacks.at(size_t(s)).at(0).is_null()) break;
      s = i64(stacks.at(size_t(s)).at(0));
    }
    CHECK(names == std::vector<std::string>{"0x555555555040", "0x555555555231", "0x7f0000001234",
                                            "ksys_write (in [kernel.kallsyms])"});
    CHECK(cats == std::vector<int64_t>{1, 1, 1, 2});
    // Only the stacks this thread uses: three (the label stack belongs to the worker).
    CHECK(stacks.size() == 4);
    // The marker payload.
    element m = t["markers"]["data"].at(0);
    CHECK(str(strings.at(size_t(i64(m.at(0))))) == "Lost records");
    CHECK(i64(m.at(3)) == 1);
    CHECK(str(m.at(5)["type"]) == "Lost");
    CHECK(double(m.at(5)["count"]) == 3);
  }
  SECTION("the worker keeps its name, times and label frames") {
    element t = doc["threads"].at(1);
    CHECK(str(t["name"]) == "worker \xEF\xBF\xBD");
    CHECK(double(t["registerTime"]) == Approx(0.5));
    CHECK(double(t["unregisterTime"]) == Approx(40.0));
    array samples = t["samples"]["data"];
    CHECK(samples.at(1).at(0).is_null());
    array strings = t["stringTable"];
    bool has_label = false;
    for (element s : strings) has_label |= str(s) == "(stack truncated)";
    CHECK(has_label);
  }
  SECTION("child processes are one level deep with their own start time") {
    array procs = doc["processes"];
    REQUIRE(procs.size() == 1);
    element c = procs.at(0);
    CHECK(double(c["meta"]["startTime"]) == Approx(1.7e12 + 10));
    CHECK(double(c["meta"]["shutdownTime"]) == Approx(10));
    CHECK(array(c["processes"]).size() == 0);
    CHECK(double(c["threads"].at(0)["samples"]["data"].at(0).at(1)) == Approx(1.0));
  }
}

TEST_CASE("a process that exec'd keeps its real pid; the program it exec'd is the process track") {
  auto p = sample_profile();
  model::Process again = p.processes[1];  // exec: same pid, a new process entry
  again.name = "python3";
  again.start_ns += 5'000'000;
  p.processes.push_back(again);
  test::TempDir dir;
  REQUIRE(gecko::write_gecko_profile(p, dir.file("p.json")));
  std::string text = test::read_profile_text(dir.file("p.json"));
  CHECK(test::lint_gecko_profile(text).empty());
  simdjson::dom::parser parser;
  element doc = test::parse_json(parser, text);
  CHECK(i64(doc["threads"].at(0)["pid"]) == 100);
  // Both entries of pid 200 are "PID: 200" in the front end (no "200.1"); the track is the exec'd program's
  // (its main thread is the one GeckoMain of the pid), the one before the exec a thread track under it.
  element before = doc["processes"].at(0)["threads"].at(0), after = doc["processes"].at(1)["threads"].at(0);
  CHECK(i64(before["pid"]) == 200);
  CHECK(i64(after["pid"]) == 200);
  CHECK(str(before["name"]) == "child (before exec)");
  CHECK(str(after["name"]) == "GeckoMain");
  CHECK(str(after["processName"]) == "python3");
  // Read back, the entries stay two processes, each with its main thread.
  auto r = gecko::read_gecko_profile(dir.file("p.json"));
  REQUIRE(r.ok());
  REQUIRE(r->processes.size() == 3);
  CHECK(r->processes[1].name == "child");
  CHECK(r->processes[1].threads.at(0).is_main);
  CHECK(r->processes[1].threads.at(0).name == "child");
  CHECK(r->processes[2].name == "python3");
  CHECK(r->processes[2].threads.at(0).is_main);
}

TEST_CASE("the URL's view state selects the busiest thread by the importer's index, in its encoding") {
  // The front end's uintarray encoding (src/utils/uintarray-encoding.ts): "12" would be threads 1 and 2.
  CHECK(gecko::url_uint(0) == "0");
  CHECK(gecko::url_uint(12) == "c");
  CHECK(gecko::url_uint(31) == "v");
  CHECK(gecko::url_uint(40) == "x8");
  CHECK(gecko::url_uint(32 * 32 + 31) == "xwv");
  auto p = sample_profile();
  // The main thread used the most CPU: the first thread written.
  CHECK(gecko::gecko_busiest_thread(p) == 0u);
  CHECK(gecko::gecko_view_query(p) == "v=7&thread=0");
  // Now the child's thread: after the top process's two threads.
  p.processes[1].threads[0].samples[0].cpu_delta_ns = 5'000'000;
  CHECK(gecko::gecko_busiest_thread(p) == 2u);
  CHECK(gecko::gecko_view_query(p) == "v=7&thread=2");
  // The worker, written after the main thread whatever the model's order.
  std::swap(p.processes[0].threads[0], p.processes[0].threads[1]);
  p.processes[0].threads[0].samples[0].cpu_delta_ns = 9'000'000;
  CHECK(gecko::gecko_busiest_thread(p) == 1u);
  CHECK(gecko::gecko_view_query(model::Profile{}).empty());
}

TEST_CASE("a synthetic thread is written after its process's recorded ones, never the URL's, not read back") {
  auto p = sample_profile();
  std::vector<model::SyntheticThread> synthetic(1);
  synthetic[0].process = 0;
  model::Thread& t = synthetic[0].thread;
  t = p.processes[0].threads[0];  // the busiest thread's samples, with more CPU
  t.name = "critical path of main";
  t.is_main = false;
  for (model::Sample& s : t.samples) s.cpu_delta_ns = 50'000'000;
  // The main thread (0), the worker (1), the synthetic one (2), the child's main thread (3).
  CHECK(gecko::gecko_busiest_thread(p, synthetic) == 0u);
  p.processes[1].threads[0].samples[0].cpu_delta_ns = 5'000'000;
  CHECK(gecko::gecko_busiest_thread(p, synthetic) == 3u);
  CHECK(gecko::gecko_view_query(p, synthetic) == "v=7&thread=3");
  test::TempDir dir;
  const std::string path = dir.file("p.json");
  REQUIRE(gecko::write_gecko_profile(p, path, synthetic));
  simdjson::dom::parser parser;
  const std::string text = test::read_profile_text(path);
  auto doc = test::parse_json(parser, text);
  simdjson::dom::array threads = doc["threads"];
  REQUIRE(threads.size() == 3);
  CHECK(std::string_view(threads.at(2)["name"]) == "critical path of main");
  CHECK(bool(threads.at(2)["fxprofSynthetic"]));
  CHECK(uint64_t(doc["meta"]["fxprofSelectedThread"]) == 3);
  auto r = gecko::read_gecko_profile(path);
  REQUIRE(r);
  REQUIRE(r->processes[0].threads.size() == 2);
  CHECK(r->processes[0].threads[1].name != "critical path of main");
  CHECK(r->meta.selected_thread == 3u);
  // What load prints for the file it serves as it is: the writer's index, not the model's (2). Written
  // again without the synthetic thread (as diff --serve writes its files), the file's own: 2.
  CHECK(gecko::file_view_query(*r) == "v=7&thread=3");
  CHECK(gecko::gecko_view_query(*r) == "v=7&thread=2");
}

TEST_CASE("gzip output inflates to the same profile") {
  test::TempDir dir;
  auto p = sample_profile();
  REQUIRE(gecko::write_gecko_profile(p, dir.file("p.json")));
  REQUIRE(gecko::write_gecko_profile(p, dir.file("p.json.gz")));
  CHECK(test::read_profile_text(dir.file("p.json.gz")) == test::read_profile_text(dir.file("p.json")));
}

TEST_CASE("an empty profile is still a valid one") {
  test::TempDir dir;
  model::Profile p;
  REQUIRE(gecko::write_gecko_profile(p, dir.file("e.json")));
  CHECK(test::lint_gecko_profile(test::read_profile_text(dir.file("e.json"))).empty());
}

TEST_CASE("the Firefox Profiler's importer loads the exported profile") {
  test::TempDir dir;
  REQUIRE(gecko::write_gecko_profile(sample_profile(), dir.file("p.json.gz")));
  test::ProfilerCli cli;
  auto load = cli.load(dir.file("p.json.gz"));
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  auto info = cli.cmd({"profile", "info", "--all"});
  INFO(info.out << info.err);
  REQUIRE(info.status == 0);
  CHECK(info.out.find("app") != std::string::npos);
  CHECK(info.out.find("child") != std::string::npos);
  auto tree = cli.cmd({"thread", "samples-top-down"});
  INFO(tree.out << tree.err);
  REQUIRE(tree.status == 0);
  CHECK(tree.out.find("ksys_write") != std::string::npos);
}
