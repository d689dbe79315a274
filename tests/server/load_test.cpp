// `fxprof load` end to end: profiler-cli (the Firefox Profiler's own code) loading from our server, the
// browser it opens, and recorded profiles served and baked (fixtures: server_fixtures.h).
#include <elf.h>
#include <fcntl.h>
#include <httplib.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "base/fd.h"
#include "base/url.h"
#include "passes/symbolicate.h"
#include "server/server.h"
#include "tests/e2e/e2e.h"  // function_handle
#include "tests/server/server_fixtures.h"
#include "tests/support/support.h"

#undef p_type  // <resolv.h> (through httplib.h) renames it, and Elf64_Phdr needs it

using namespace fxprof;
using namespace fxprof::test;
using namespace fxprof::test::server_fixtures;

TEST_CASE("fxprof load serves to profiler-cli, which symbolicates through our server",
          "[server][profiler-cli]") {
  INFO("profiler-cli comes with `make test-deps`");
  REQUIRE(have_profiler_cli());
  TempDir dir;
  write_text(dir.file("p.json.gz"), gzip_text(demo_profile()));
  LoadProcess load({"--no-open", "-P", "0", dir.file("p.json.gz")});
  std::string url = load.wait_for_url();
  INFO(load.err());
  REQUIRE_FALSE(url.empty());
  auto [profile_url, symbol_server] = split_profiler_url(url);

  ProfilerCli pcli;
  auto r = pcli.load(profile_url, symbol_server);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  auto tree = pcli.cmd({"thread", "samples-top-down"});
  INFO(tree.out << tree.err);
  CHECK_THAT(tree.out, Catch::Contains("compute_hot"));
  CHECK_THAT(tree.out, Catch::Contains("inlined_helper"));
  CHECK_THAT(tree.out, Catch::Contains("first_fn"));
  // Files and lines from the symbol server, and the source text itself through /source/v1.
  auto funcs = pcli.cmd({"thread", "functions"});
  std::string hot = function_handle(funcs.out, "compute_hot");
  INFO(funcs.out);
  REQUIRE_FALSE(hot.empty());
  auto src = pcli.cmd({"function", "annotate", hot});
  INFO(src.out << src.err);
  CHECK_THAT(src.out,
             Catch::Contains("Source file: " + source_dir() + "/tests/programs/server/srv_demo.cpp"));
  CHECK_THAT(src.out, Catch::Contains("t += inlined_helper(static_cast<unsigned long>(k % 1000));"));
  // And the disassembly through /asm/v1.
  auto asm_view = pcli.cmd({"function", "annotate", hot, "--mode", "asm"});
  INFO(asm_view.out << asm_view.err);
  CHECK_THAT(asm_view.out, Catch::Contains("Name: compute_hot"));

  CHECK(load.stop(SIGINT) == 0);
  CHECK_THAT(load.err(), Catch::Contains("Local server listening at http://127.0.0.1:"));
  CHECK_THAT(load.err(), Catch::Contains("Press Ctrl+C to stop."));
  CHECK_THAT(load.err(),
             Catch::Contains("Server stopped; the profile stays in " + dir.file("p.json.gz") + "\n"));
  CHECK(std::filesystem::exists(dir.file("p.json.gz")));
}

TEST_CASE("fxprof load --symbol-dir serves a named copy and names the user's file as the one that stays",
          "[server][cli]") {
  TempDir dir;
  const std::string profile = dir.file("bare.json.gz");
  // Self-contained, its stripped binary's sites named by their FDEs: --symbol-dir names them in a temporary
  // copy, which is served and removed at the end.
  auto r = run({fxprof_bin(), "record", "--heap=full", "--save-only", "-o", profile, "--",
                test_program("heap_prog_stripped"), "leak", "50", "1000"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  LoadProcess load({"--no-open", "-P", "0", "--symbol-dir", test_program("heap_syms"), profile});
  REQUIRE_FALSE(load.wait_for_url().empty());
  CHECK(load.stop(SIGINT) == 0);
  INFO(load.err());
  CHECK_THAT(load.err(), Catch::Contains("Server stopped; the profile stays in " + profile + "\n"));
  CHECK_THAT(load.err(), !Catch::Contains("fxprof-load"));
  CHECK(std::filesystem::exists(profile));
}

TEST_CASE("profiler-cli --with-samply runs fxprof as its samply", "[server][profiler-cli]") {
  INFO("profiler-cli comes with `make test-deps`");
  REQUIRE(have_profiler_cli());
  TempDir dir;
  write_text(dir.file("p.json"), demo_profile());
  ProfilerCli pcli;
  CmdOptions o;
  o.env["PROFILER_CLI_SAMPLY_PATH"] = fxprof_bin();
  auto r = pcli.load_args({dir.file("p.json"), "--with-samply"}, o);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  auto tree = pcli.cmd({"thread", "samples-top-down"});
  INFO(tree.out << tree.err);
  CHECK_THAT(tree.out, Catch::Contains("compute_hot"));
  CHECK_THAT(tree.out, Catch::Contains("inlined_helper"));
}

// Waits (poll, no sleeps) until someone writes to the FIFO at `path`; false after `timeout`.
static bool wait_fifo(const std::string& path, std::chrono::milliseconds timeout) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return false;
  pollfd p{fd.get(), POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

TEST_CASE("fxprof load opens $BROWSER on a private redirect page, never on the token, and SIGTERM stops it",
          "[server][cli]") {
  REQUIRE(geteuid() == 0);  // another local user must not read the page: the suite runs as root
  const passwd* pw = ensure_test_user();
  REQUIRE(pw != nullptr);
  TempDir dir, runtime;
  write_text(dir.file("p.json"), demo_profile());
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
  // The stand-in browser records its command line, the page's and its folder's modes, and the page.
  std::string script = dir.file("browser.sh");
  write_text(script, "#!/bin/sh\nf=\"${1#file://}\"\nprintf '%s\\n' \"$@\" > " + dir.file("argv") +
                         "\necho \"$f\" > " + dir.file("file") +
                         "\nstat -c %a \"$f\" \"$(dirname \"$f\")\" > " + dir.file("modes") +
                         "\ncat \"$f\" > " + dir.file("page") + "\necho done > " + dir.file("fifo") + "\n");
  ::chmod(script.c_str(), 0755);
  ::chmod(runtime.path().c_str(), 0755);
  LoadProcess load({"-P", "0", dir.file("p.json")},
                   {{"BROWSER", script}, {"DISPLAY", ":99"}, {"XDG_RUNTIME_DIR", runtime.path()}});
  std::string url = load.wait_for_url();  // still printed
  REQUIRE_FALSE(url.empty());
  REQUIRE(wait_fifo(dir.file("fifo"), std::chrono::seconds(10)));
  auto [profile_url, symbol_server] = split_profiler_url(url);
  const std::string token = symbol_server.substr(symbol_server.rfind('/') + 1);
  REQUIRE(token.size() == 39);
  const std::string argv = read_file(dir.file("argv")).value();
  INFO(argv);
  CHECK(argv.find(token) == std::string::npos);
  CHECK(argv.rfind("file://" + runtime.path() + "/fxprof-", 0) == 0);
  std::string page_path = read_file(dir.file("file")).value();
  page_path.pop_back();
  CHECK(read_file(dir.file("modes")).value() == "600\n700\n");
  std::string page = read_file(dir.file("page")).value();
  std::string escaped_url = url;
  for (size_t at = 0; (at = escaped_url.find('&', at)) != std::string::npos; at += 5)
    escaped_url.replace(at, 1, "&amp;");
  CHECK_THAT(page, Catch::Contains("<meta http-equiv=\"refresh\" content=\"0;url=" + escaped_url + "\">"));
  // Another local user can neither read the page nor list its folder.
  CmdOptions as_user;
  as_user.uid = pw->pw_uid;
  as_user.gid = pw->pw_gid;
  auto peek = run({"cat", page_path}, as_user);
  CHECK(peek.status != 0);
  CHECK_THAT(peek.err, Catch::Contains("Permission denied"));

  CHECK(load.stop(SIGTERM) == 0);
  CHECK_THAT(load.err(), Catch::Contains("local network"));
  CHECK(std::filesystem::exists(dir.file("p.json")));
  CHECK_FALSE(std::filesystem::exists(page_path));  // gone with its folder when the server stops
  CHECK_FALSE(std::filesystem::exists(std::filesystem::path(page_path).parent_path()));
}

TEST_CASE("record serves with the symbolizer its summary loaded: no library is read a second time",
          "[server][cli]") {
  // The program is a copy that is deleted once the URL is printed: only the libraries record already loaded
  // for its summary line can answer for it (a second load would find no file).
  TempDir dir;
  const std::string program = dir.file("fxprof_srv_demo");
  REQUIRE(run({"cp", demo_path(), program}).status == 0);
  Background rec({fxprof_bin(), "record", "-n", "-o", dir.file("p.json.gz"), "--", program, "200000"});
  const std::string pre = "https://profiler.firefox.com/from-url/";
  std::string line = rec.wait_for_line(pre, std::chrono::seconds(60));
  INFO(rec.err());
  REQUIRE(line.find(pre) != std::string::npos);
  CHECK_THAT(rec.err(), Catch::Contains("top self: ") && Catch::Contains("inlined_helper"));
  REQUIRE(std::filesystem::remove(program));
  auto [profile_url, symbol_server] = split_profiler_url(line.substr(line.find(pre)));
  const std::string origin = symbol_server.substr(0, symbol_server.rfind('/'));
  httplib::Client cli(origin);
  cli.set_read_timeout(30);
  DemoAddrs d = demo_addrs();
  auto r = cli.Post(symbol_server.substr(origin.size()) + "/symbolicate/v5",
                    symbolicate_request({d.hot_inlined, d.second_start}), "application/json");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK_THAT(r->body, Catch::Contains("\"compute_hot\""));
  CHECK_THAT(r->body, Catch::Contains("inlined_helper"));
  CHECK_THAT(r->body, Catch::Contains("\"second_fn\""));
  CHECK(rec.stop(SIGINT) == 0);
}

TEST_CASE("a recorded profile: served by fxprof load and baked by fxprof symbolicate",
          "[server][profiler-cli]") {
  INFO("profiler-cli comes with `make test-deps`");
  REQUIRE(have_profiler_cli());
  TempDir dir;
  std::string raw = dir.file("raw.json.gz");
  auto rec =
      run({fxprof_bin(), "record", "--no-symbolicate", "--save-only", "-o", raw, "--", demo_path(), "400000"},
          {.timeout = std::chrono::seconds(60)});
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  REQUIRE(lint_gecko_profile(read_profile_text(raw)).empty());

  SECTION("served, symbolicated by our server") {
    LoadProcess load({"--no-open", "-P", "0", raw});
    std::string url = load.wait_for_url();
    REQUIRE_FALSE(url.empty());
    auto [profile_url, symbol_server] = split_profiler_url(url);
    ProfilerCli pcli;
    auto r = pcli.load(profile_url, symbol_server);
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    auto tree = pcli.cmd({"thread", "samples-top-down"});
    INFO(tree.out << tree.err);
    CHECK_THAT(tree.out, Catch::Contains("fxprof_srv_demo!main"));
    CHECK_THAT(tree.out, Catch::Contains("fxprof_srv_demo!compute_hot"));
    CHECK_THAT(tree.out, Catch::Contains("fxprof_srv_demo!inlined_helper"));
    CHECK(load.stop(SIGTERM) == 0);
  }
  SECTION("baked, and loaded with no server") {
    std::string shared = dir.file("shared.json");
    auto sym = run({fxprof_bin(), "symbolicate", raw, "-o", shared}, {.timeout = std::chrono::seconds(60)});
    INFO(sym.err);
    REQUIRE(sym.status == 0);
    std::string text = read_profile_text(shared);
    CHECK(lint_gecko_profile(text).empty());
    CHECK_THAT(text, Catch::Contains("\"presymbolicated\":true"));
    ProfilerCli pcli;
    auto r = pcli.load(shared);
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    auto tree = pcli.cmd({"thread", "samples-top-down"});
    INFO(tree.out << tree.err);
    CHECK_THAT(tree.out, Catch::Contains("fxprof_srv_demo!compute_hot"));
    CHECK_THAT(tree.out, Catch::Contains("fxprof_srv_demo!inlined_helper"));
    CHECK_THAT(tree.out, Catch::Contains("libc.so.6!"));  // libraries other than the program's, too
  }
}
