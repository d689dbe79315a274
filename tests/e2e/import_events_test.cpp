// `fxprof import` of perf.data files with several events (perf record -e cpu-clock,page-faults): the chosen
// event's samples are the threads' samples, each other event's are tracks of their own ("THREAD (EVENT)"),
// each with exactly as many samples as `perf script` prints of that event; and binaries perf copied into its
// build-ID cache (~/.debug) name the frames of a program that is gone or rebuilt since. A profile read back
// and written again (`symbolicate`, `load`'s copy) keeps the tracks.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <string>

#include "base/fd.h"
#include "tests/support/support.h"

using namespace fxprof::test;

namespace {

// perf's samples per event: `perf script -F tid,event` prints "TID EVENT:" per sample (the idle task's,
// tid 0, left out: fxprof leaves it out as `record` does).
std::map<std::string, uint64_t> perf_counts(const std::string& data) {
  auto r = run({"perf", "script", "-i", data, "-F", "tid,event"});
  REQUIRE(r.status == 0);
  std::map<std::string, uint64_t> n;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) {
    std::istringstream words(l);
    uint64_t tid = 0;
    std::string event;
    if (!(words >> tid >> event) || tid == 0 || !event.ends_with(':')) continue;
    ++n[event.substr(0, event.size() - 1)];
  }
  return n;
}

// What the written profile holds: the threads' samples, and the samples of the tracks "NAME (EVENT)" by
// event, each track written as a synthetic thread; and whether every track sample has a stack.
struct Written {
  uint64_t samples = 0;
  std::map<std::string, uint64_t> tracks;
  bool stacks = true;
  std::string err;  // import's lines
};
Written written(const std::string& profile) {
  const std::string text = read_profile_text(profile);
  CHECK(lint_gecko_profile(text) == std::vector<std::string>{});
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parse_json(parser, text);
  Written w;
  auto add = [&](simdjson::dom::element threads) {
    for (simdjson::dom::element t : threads.get_array()) {
      const std::string name{std::string_view(t["name"])};
      const uint64_t n = simdjson::dom::array(t["samples"]["data"]).size();
      bool synthetic = false;
      if (auto s = t["fxprofSynthetic"]; !s.error()) synthetic = bool(s);
      if (!synthetic) {
        w.samples += n;
        continue;
      }
      if (!name.ends_with(")") || name.starts_with("critical path")) continue;
      const size_t open = name.rfind(" (");
      REQUIRE(open != std::string::npos);
      w.tracks[name.substr(open + 2, name.size() - open - 3)] += n;
      for (simdjson::dom::element row : simdjson::dom::array(t["samples"]["data"]))
        w.stacks &= !row.at(0).is_null();
    }
  };
  add(doc["threads"]);
  for (simdjson::dom::element p : doc["processes"].get_array()) add(p["threads"]);
  return w;
}

// `fxprof import -s` of `data` (with `args`), its profile read back.
Written import(const TempDir& dir, const std::string& data, const std::vector<std::string>& args = {}) {
  std::vector<std::string> argv{fxprof_bin(), "import", "-s", "-q", "-o", dir.file("p.json.gz")};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(data);
  auto r = run(argv);
  INFO(r.err);
  REQUIRE(r.status == 0);
  Written w = written(dir.file("p.json.gz"));
  w.err = r.err;
  return w;
}

}  // namespace

TEST_CASE("import: -e cpu-clock,page-faults, each event's samples with their stacks, as perf counts them",
          "[import]") {
  TempDir dir;
  const std::string data = dir.file("ev.data");
  auto rec = run({"perf", "record", "-q", "-g", "-e", "cpu-clock,page-faults", "-o", data,
                  test_program("exp_work"), "0.3"});
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  const auto perf = perf_counts(data);
  REQUIRE(perf.count("cpu-clock"));
  REQUIRE(perf.count("page-faults"));

  // The first event is the threads' samples; the page faults are their tracks, every one of them.
  Written w = import(dir, data);
  CHECK(w.samples == perf.at("cpu-clock"));
  REQUIRE(w.tracks.count("page-faults"));
  CHECK(w.tracks.at("page-faults") == perf.at("page-faults"));
  CHECK(w.tracks.count("cpu-clock") == 0);
  CHECK(w.stacks);
  // The program's one thread (its tracks are none) and the count of the other event.
  CHECK_THAT(w.err, Catch::Contains(", 1 threads, 1 processes,"));
  CHECK_THAT(w.err,
             Catch::Contains(std::to_string(perf.at("page-faults")) + " samples of page-faults, in tracks"));
  // Read back and written again (as `load` writes a copy): the tracks stay, with their samples.
  auto again = run({fxprof_bin(), "symbolicate", dir.file("p.json.gz"), "-o", dir.file("again.json.gz")});
  INFO(again.err);
  REQUIRE(again.status == 0);
  const Written back = written(dir.file("again.json.gz"));
  CHECK(back.samples == w.samples);
  CHECK(back.tracks == w.tracks);
  CHECK(back.stacks);

  // --event page-faults: the other way round.
  w = import(dir, data, {"--event", "page-faults"});
  CHECK(w.samples == perf.at("page-faults"));
  REQUIRE(w.tracks.count("cpu-clock"));
  CHECK(w.tracks.at("cpu-clock") == perf.at("cpu-clock"));
  CHECK(w.tracks.count("page-faults") == 0);

  // report keeps the chosen event alone.
  auto rep = run({fxprof_bin(), "report", "--json", data});
  INFO(rep.err);
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  CHECK(uint64_t(parse_json(parser, rep.out)["samples"]) == perf.at("cpu-clock"));
}

TEST_CASE("import: context-switches and sched:sched_switch beside cpu-clock, each in its tracks",
          "[import]") {
  TempDir dir;
  const std::string data = dir.file("cs.data");
  // The program computes, sleeps (it leaves the CPU) and computes again.
  const std::string work = test_program("exp_work");
  auto rec = run({"perf", "record", "-q", "-g", "-e", "cpu-clock,context-switches,sched:sched_switch", "-o",
                  data, "sh", "-c", "\"$0\" 0.1; sleep 0.05; \"$0\" 0.1", work});
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  const auto perf = perf_counts(data);
  REQUIRE(perf.count("cpu-clock"));
  REQUIRE(perf.count("context-switches"));
  REQUIRE(perf.count("sched:sched_switch"));
  Written w = import(dir, data);
  // The threads' samples: cpu-clock's, and the off-CPU samples of the waits sched_switch timed (a switch into
  // a thread of the program: the shell waking after its child).
  CHECK(w.samples >= perf.at("cpu-clock"));
  CHECK(w.tracks.count("cpu-clock") == 0);
  CHECK(w.tracks["context-switches"] == perf.at("context-switches"));
  CHECK(w.tracks["sched:sched_switch"] == perf.at("sched:sched_switch"));
  CHECK(w.stacks);
}

TEST_CASE("import: a program gone or rebuilt since perf recorded it is named from perf's ~/.debug cache",
          "[import]") {
  TempDir dir;
  const std::string home = dir.file("home");
  REQUIRE(run({"mkdir", "-p", home}).status == 0);
  const std::string prog = dir.file("prog");
  REQUIRE(run({"cp", test_program("exp_work"), prog}).status == 0);
  const std::string data = dir.file("fp.data");
  CmdOptions o;
  o.env["HOME"] = home;  // perf record copies the program into HOME/.debug
  auto rec = run({"perf", "record", "-q", "-g", "-o", data, prog, "0.3"}, o);
  INFO(rec.err);
  REQUIRE(rec.status == 0);

  // Named in a self-contained profile: its functions, not addresses.
  auto named = [&](const CmdOptions& with) {
    const std::string out = dir.file("p.json.gz");
    auto r = run({fxprof_bin(), "import", "-s", "-q", "-o", out, data}, with);
    INFO(r.err);
    REQUIRE(r.status == 0);
    auto rep = run({fxprof_bin(), "report", "--limit", "20", out});
    INFO(rep.out << rep.err);
    REQUIRE(rep.status == 0);
    return rep.out.find("alpha") != std::string::npos && rep.out.find("gamma_work") != std::string::npos;
  };
  // Rebuilt: another binary (another build ID) at the path, a new file as a linker writes it (perf's copy is
  // a hard link of the old one when it can be). Then gone.
  REQUIRE(::unlink(prog.c_str()) == 0);
  REQUIRE(run({"cp", test_program("sym_inline_rebuilt"), prog}).status == 0);
  CHECK(named(o));
  REQUIRE(::unlink(prog.c_str()) == 0);
  CHECK(named(o));
  // Another HOME: no cache, no names.
  CmdOptions elsewhere;
  elsewhere.env["HOME"] = dir.path();
  CHECK_FALSE(named(elsewhere));
  // PERF_BUILDID_DIR names the cache as for perf.
  elsewhere.env["PERF_BUILDID_DIR"] = home + "/.debug";
  CHECK(named(elsewhere));
}
