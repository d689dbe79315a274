// Helpers shared by the end-to-end tests.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/support.h"

namespace fxprof::test {

struct ThreadSummary {
  std::string process;  // processName
  std::string name;     // thread name (GeckoMain for main threads)
  int64_t pid = 0, tid = 0;
  size_t samples = 0;          // on-CPU samples (what CPU time x frequency predicts)
  size_t off_cpu_samples = 0;  // samples of blocked or preempted time: leaf frame in the Idle category
  size_t kernel_frames = 0;    // frames named "... (in [kernel.kallsyms])" in its frame table
  std::map<std::string, size_t> on_cpu_by_category;  // on-CPU samples by their leaf frame's category name
};

// Every thread of the top level and of each process.
inline std::vector<ThreadSummary> summarize(const std::string& profile_text) {
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, profile_text);
  std::vector<ThreadSummary> out;
  auto add = [&](simdjson::dom::element proc) {
    for (simdjson::dom::element t : simdjson::dom::array(proc["threads"])) {
      ThreadSummary s;
      s.process = std::string(std::string_view(t["processName"]));
      s.name = std::string(std::string_view(t["name"]));
      // "1234.1" for a later process with a reused pid.
      s.pid = t["pid"].is_string() ? std::stoll(std::string(std::string_view(t["pid"]))) : int64_t(t["pid"]);
      s.tid = int64_t(t["tid"]);
      // A sample is off-CPU when its leaf frame's category is "Idle" (fxprof record is wall-clock by
      // default).
      int64_t idle = -1, i = 0;
      std::vector<std::string> category_names;
      for (simdjson::dom::element c : simdjson::dom::array(proc["meta"]["categories"])) {
        if (std::string_view(c["name"]) == "Idle") idle = i;
        category_names.emplace_back(std::string_view(c["name"]));
        ++i;
      }
      simdjson::dom::array frames = t["frameTable"]["data"], stacks = t["stackTable"]["data"];
      const auto frame_col = size_t(int64_t(t["stackTable"]["schema"]["frame"]));
      const auto cat_col = size_t(int64_t(t["frameTable"]["schema"]["category"]));
      for (simdjson::dom::element smp : simdjson::dom::array(t["samples"]["data"])) {
        bool off = false;
        if (!smp.at(0).is_null()) {
          auto frame = stacks.at(size_t(int64_t(smp.at(0)))).at(frame_col);
          auto cat = frames.at(size_t(int64_t(frame))).at(cat_col);
          off = !cat.is_null() && int64_t(cat) == idle;
          if (!off && !cat.is_null() && size_t(int64_t(cat)) < category_names.size())
            ++s.on_cpu_by_category[category_names[size_t(int64_t(cat))]];
        }
        ++(off ? s.off_cpu_samples : s.samples);
      }
      for (simdjson::dom::element str : simdjson::dom::array(t["stringTable"]))
        if (std::string_view(str).find("(in [kernel.kallsyms])") != std::string_view::npos) ++s.kernel_frames;
      out.push_back(s);
    }
  };
  add(doc);
  for (simdjson::dom::element p : simdjson::dom::array(doc["processes"])) add(p);
  return out;
}

inline const ThreadSummary* find_thread(const std::vector<ThreadSummary>& ts, const std::string& name) {
  for (const auto& t : ts)
    if (t.name == name) return &t;
  return nullptr;
}

// Tests that count the wakers of every wait, from the program's first one, have the eBPF waker tracer loaded
// before the program starts (by default it attaches beside the running program: recorder/waker.h); the
// tracer loaded beside the program is tested on its own (tests/e2e/wakers_test.cpp).
inline constexpr const char* kWakersFromStart = "--wakers-from-start";

// `fxprof record --save-only --no-symbolicate -o OUT [extra] -- argv...`
inline CmdResult record(const std::string& out, const std::vector<std::string>& argv,
                        const std::vector<std::string>& extra = {}, const CmdOptions& opts = {}) {
  std::vector<std::string> cmd{fxprof_bin(), "record", "--save-only", "--no-symbolicate", "-o", out};
  cmd.insert(cmd.end(), extra.begin(), extra.end());
  cmd.push_back("--");
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  return run(cmd, opts);
}

// The handle ("f-3") of a function in `thread functions` output, or "".
inline std::string function_handle(const std::string& listing, const std::string& name) {
  auto at = listing.find("!" + name + " ");
  if (at == std::string::npos) return {};
  auto start = listing.rfind("f-", at);
  auto dot = listing.find('.', start);
  return start == std::string::npos || dot > at ? std::string() : listing.substr(start, dot - start);
}

// Serves `profile` with `fxprof load` and loads it into `cli` through that server, as a user's browser would;
// the returned server must outlive the queries.
inline std::unique_ptr<FxprofServer> load_through_fxprof(ProfilerCli& cli, const std::string& profile) {
  auto server = std::make_unique<FxprofServer>(profile);
  INFO(server->err());
  REQUIRE(!server->symbol_server().empty());
  auto load = cli.load(profile, server->symbol_server());
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  return server;
}

// The thread the front end selects when it opens `url` (a profiler.firefox.com URL whose profile is still
// served): profiler-cli loads the URL as the front end does (its own stateFromLocation, URL upgraders
// included) and says which thread is selected.
inline std::string selected_by_url(const std::string& line) {
  const size_t from = line.find("https://");
  REQUIRE(from != std::string::npos);
  const std::string url = line.substr(from, line.find_first_of(" \t\r\n", from) - from);
  ProfilerCli cli;
  auto load = cli.load_args({url});
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  auto status = cli.cmd({"status", "--json"});
  INFO(status.out << status.err);
  REQUIRE(status.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, status.out);
  simdjson::dom::array selected = doc["selectedThreads"];
  REQUIRE(selected.size() == 1);
  return std::string(std::string_view(selected.at(0)["name"]));
}

}  // namespace fxprof::test
