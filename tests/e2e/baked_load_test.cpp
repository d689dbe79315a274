// `fxprof load` of a baked profile (issue 38.3): the front end gets what it needs to show source, assembly
// and inlined functions, as it does for an unsymbolicated one (through our server's /symbolicate/v5,
// /source/v1 and /asm/v1, which profiler-cli's `function annotate` calls), while the binaries are still on
// disk as recorded; when one is not, the terminal says so.
#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/e2e/e2e.h"

using namespace fxprof::test;

namespace {

// A copy of the server's test program in `dir` (so the test can remove it), recorded baked.
std::string record_baked(const TempDir& dir, const std::string& binary) {
  std::filesystem::copy_file(test_program("fxprof_srv_demo"), binary);
  const std::string out = dir.file("baked.json.gz");
  auto r = run({fxprof_bin(), "record", "--save-only", "-q", "-o", out, "--", binary, "300000"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  return out;
}

// Loads what `server` serves (the URL's profile, as a browser fetches it, not the file on disk) into `cli`.
void load_served(ProfilerCli& cli, FxprofServer& server) {
  const std::string& url = server.profiler_url();
  INFO(url << server.err());
  const size_t from = url.find("/from-url/"), end = url.find("/?", from);
  REQUIRE(from != std::string::npos);
  REQUIRE(end != std::string::npos);
  auto r = cli.load(url_decode(url.substr(from + 10, end - from - 10)), server.symbol_server());
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
}

}  // namespace

TEST_CASE("load of a baked profile: source, assembly and inlined functions through our server", "[e2e]") {
  TempDir dir;
  const std::string binary = dir.file("srv_demo");
  const std::string baked = record_baked(dir, binary);

  ProfilerCli cli;
  FxprofServer server(baked);
  load_served(cli, server);
  auto tree = cli.cmd({"thread", "samples-top-down"});
  INFO(tree.out << tree.err);
  // Inlined functions are marked as such (the front end knows them only from the symbol server).
  const size_t helper = tree.out.find("srv_demo!inlined_helper");
  REQUIRE(helper != std::string::npos);
  CHECK(tree.out.substr(helper, tree.out.find('\n', helper) - helper).find("(inl)") != std::string::npos);
  auto funcs = cli.cmd({"thread", "functions"});
  const std::string hot = function_handle(funcs.out, "compute_hot");
  INFO(funcs.out);
  REQUIRE_FALSE(hot.empty());
  auto src = cli.cmd({"function", "annotate", hot});  // /source/v1
  INFO(src.out << src.err);
  CHECK_THAT(src.out,
             Catch::Contains("Source file: " + source_dir() + "/tests/programs/server/srv_demo.cpp"));
  CHECK_THAT(src.out, Catch::Contains("t += inlined_helper(static_cast<unsigned long>(k % 1000));"));
  auto asm_view = cli.cmd({"function", "annotate", hot, "--mode", "asm"});  // /asm/v1
  INFO(asm_view.out << asm_view.err);
  CHECK_THAT(asm_view.out, Catch::Contains("Name: compute_hot"));
  CHECK(server.err().find("saved in the profile") == std::string::npos);

  // The binary gone: its names stay, and the terminal says why there is nothing more.
  std::filesystem::remove(binary);
  ProfilerCli again;
  FxprofServer gone(baked);
  load_served(again, gone);
  auto tree2 = again.cmd({"thread", "samples-top-down"});
  INFO(tree2.out);
  CHECK_THAT(tree2.out, Catch::Contains("compute_hot"));
  CHECK_THAT(gone.err(),
             Catch::Contains("fxprof: served with the names saved in the profile (no source, assembly or "
                             "inlined functions) for srv_demo (not on disk)"));
}
