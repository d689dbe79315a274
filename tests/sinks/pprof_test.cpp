// pprof export read by pprof itself (`go tool pprof`, Debian golang-go): top functions and totals, traces,
// mappings with build IDs, labels.
#include "sinks/pprof.h"

#include <catch2/catch.hpp>
#include <map>
#include <sstream>

#include "tests/sinks/sink_models.h"
#include "tests/support/support.h"

using namespace fxprof;

namespace {

test::CmdResult pprof(const test::TempDir& home, std::vector<std::string> args) {
  std::vector<std::string> argv{"go", "tool", "pprof"};
  argv.insert(argv.end(), args.begin(), args.end());
  test::CmdOptions o;
  o.env = {{"HOME", home.path()}, {"PPROF_TMPDIR", home.path()}, {"GOCACHE", home.path() + "/gocache"}};
  return test::run(argv, o);
}

// `-top` rows: function -> (flat, cum).
std::map<std::string, std::pair<long, long>> top_rows(const std::string& out) {
  std::map<std::string, std::pair<long, long>> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string flat, flat_pct, sum_pct, cum, cum_pct, name;
    if (!(l >> flat >> flat_pct >> sum_pct >> cum >> cum_pct)) continue;
    if (flat_pct.empty() || flat_pct.back() != '%' ||
        flat.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::getline(l, name);
    name.erase(0, name.find_first_not_of(' '));
    rows[name] = {std::stol(flat), std::stol(cum)};
  }
  return rows;
}

}  // namespace

TEST_CASE("go tool pprof reads the export: top functions, totals, traces, build IDs") {
  test::TempDir dir;
  const std::string file = dir.file("profile.pb.gz");
  REQUIRE(sinks::write_pprof(test::sink_profile(), file));
  CHECK(test::read_profile_text(file).size() > 0);

  auto top = pprof(dir, {"-top", "-sample_index=samples", file});
  INFO(top.out << top.err);
  REQUIRE(top.status == 0);
  CHECK(top.out.find("Showing nodes accounting for 20, 100% of 20 total") != std::string::npos);
  auto rows = top_rows(top.out);
  CHECK(rows["compute"] == std::make_pair(10L, 14L));
  CHECK(rows["helper"] == std::make_pair(5L, 5L));
  CHECK(rows["rec"] == std::make_pair(2L, 2L));
  CHECK(rows["ksys_read"] == std::make_pair(1L, 1L));
  CHECK(rows["main"] == std::make_pair(0L, 20L));
  CHECK(rows["libdemo.so+0x2234"] == std::make_pair(2L, 2L));

  auto cpu = pprof(dir, {"-top", "-sample_index=cpu", file});
  REQUIRE(cpu.status == 0);
  CHECK(cpu.out.find("of 24ms total") != std::string::npos);

  auto traces = pprof(dir, {"-traces", "-sample_index=samples", file});
  REQUIRE(traces.status == 0);
  INFO(traces.out);
  // Leaf first, one trace per (thread, stack), with the thread labels.
  CHECK(traces.out.find("thread:  worker") != std::string::npos);
  CHECK(traces.out.find("pid:  20") != std::string::npos);

  auto raw = pprof(dir, {"-raw", file});
  REQUIRE(raw.status == 0);
  INFO(raw.out);
  CHECK(raw.out.find("/tmp/libdemo.so ddccbbaaffee11002233445566778899") != std::string::npos);
}

TEST_CASE("pprof export: a sample of a softirq, a hard interrupt or a kernel thread is labelled with it") {
  model::Profile p = test::sink_profile();
  // The one sample ending in the kernel (main;compute;ksys_read) becomes a softirq's.
  size_t relabelled = 0;
  for (model::Process& proc : p.processes)
    for (model::Thread& t : proc.threads)
      for (model::Sample& s : t.samples) {
        if (s.stack == model::kNoStack) continue;
        model::Frame leaf = p.frames.get(p.stacks.frame(s.stack));
        if (leaf.kind != model::FrameKind::Kernel) continue;
        leaf.category = model::Category::Softirq;
        s.stack = p.stacks.intern(p.stacks.prefix(s.stack), p.frames.intern(leaf));
        ++relabelled;
      }
  REQUIRE(relabelled == 1);
  test::TempDir dir;
  const std::string file = dir.file("profile.pb.gz");
  REQUIRE(sinks::write_pprof(p, file));
  auto traces = pprof(dir, {"-traces", "-sample_index=samples", file});
  INFO(traces.out << traces.err);
  REQUIRE(traces.status == 0);
  CHECK(traces.out.find("category:  Softirq") != std::string::npos);
  // The program's own samples have no such label.
  size_t labelled = 0;
  for (size_t at = 0; (at = traces.out.find("category:", at)) != std::string::npos; ++at) ++labelled;
  CHECK(labelled == 1);
}
