// The server, for real: HTTP against a running server (in-process on its own threads, and `fxprof load` as a
// child process), presymbolication checked frame by frame, and the Firefox Profiler's own import and
// symbolication code (profiler-cli) loading from our server, through --with-samply, and from a baked profile.
#include "server/server.h"

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
#include "tests/e2e/e2e.h"  // function_handle
#include "tests/server/server_fixtures.h"
#include "tests/support/support.h"

#undef p_type  // <resolv.h> (through httplib.h) renames it, and Elf64_Phdr needs it

using namespace fxprof;
using namespace fxprof::test;
using namespace fxprof::test::server_fixtures;

// ---------------------------------------------------------------------------------------------------------

TEST_CASE("profiler URL encodes the profile and symbol server URLs like samply", "[server]") {
  ::unsetenv("PROFILER_URL");
  CHECK(server::firefox_profiler_url("http://127.0.0.1:3000/abc/profile.json", "http://127.0.0.1:3000/abc") ==
        "https://profiler.firefox.com/from-url/http%3A%2F%2F127.0.0.1%3A3000%2Fabc%2Fprofile.json/"
        "?symbolServer=http%3A%2F%2F127.0.0.1%3A3000%2Fabc");
  // The front end's view state follows as it is (gecko::gecko_view_query).
  CHECK(
      server::firefox_profiler_url("http://h/p.json", "http://h", "thread=c") ==
      "https://profiler.firefox.com/from-url/http%3A%2F%2Fh%2Fp.json/?symbolServer=http%3A%2F%2Fh&thread=c");
  CHECK(fxprof::url_encode("a b\n%?#&=") == "a%20b%0A%25%3F%23%26%3D");
}

TEST_CASE("a processed-format gzip bomb is refused by load with the Gecko reader's cap", "[server][cli]") {
  TempDir dir;
  // 24 MB of short values that gzip packs ~1000x: past the 200x cap long before it is whole.
  std::string text = R"({"meta":{"preprocessedProfileVersion":48,"version":30},"libs":[],"pad":["x")";
  while (text.size() < (24u << 20)) text += ",\"x\"";
  text += "]}";
  write_text(dir.file("bomb.json.gz"), gzip_text(text));
  text = std::string();
  auto info = server::inspect_profile(dir.file("bomb.json.gz"));
  REQUIRE_FALSE(info.ok());
  CHECK_THAT(info.error(), Catch::Contains("bomb.json.gz: gzip data inflates beyond 200x its size"));
  auto r = run({fxprof_bin(), "load", "--no-open", "-P", "0", dir.file("bomb.json.gz")});
  CHECK(r.status != 0);
  CHECK_THAT(r.err, Catch::Contains("gzip data inflates beyond 200x its size"));
  CHECK(r.out.empty());  // no URL: nothing is served
}

TEST_CASE("tokens are 39 random base32 characters", "[server]") {
  std::string a = server::random_token(), b = server::random_token();
  CHECK(a.size() == 39);
  CHECK(a != b);
  CHECK(a.find_first_not_of("0123456789abcdfghijklmnpqrsvwxyz") == std::string::npos);
}

TEST_CASE("corrupt, truncated, empty and non-profile files give one clear error", "[server]") {
  TempDir dir;
  std::string good = demo_profile();
  std::string gz = gzip_text(good);
  struct Case {
    std::string name, content, expected;
  };
  std::vector<Case> cases = {
      {"empty.json", "", "empty.json: empty file"},
      {"text.json", "hello, world\n", "text.json: not a profile (neither JSON nor gzip)"},
      {"array.json", "[1,2,3]", "array.json: not a profile (neither JSON nor gzip)"},
      {"other.json", R"({"traceEvents":[]})",
       "other.json: not a Firefox Profiler profile (no \"meta\" object)"},
      {"cut.json", good.substr(0, good.size() / 2), "cut.json: truncated JSON"},
      {"cut.json.gz", gz.substr(0, gz.size() / 2), "cut.json.gz: truncated gzip data"},
      {"bad.json.gz", gz.substr(0, 10) + std::string(gz.size() - 10, '\x55'),
       "bad.json.gz: corrupt gzip data"},
      {"empty.json.gz", gzip_text(""), "empty.json.gz: empty file"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    write_text(dir.file(c.name), c.content);
    auto r = server::inspect_profile(dir.file(c.name));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains(c.expected));
    CHECK(r.error().find('\n') == std::string::npos);
  }
  auto missing = server::inspect_profile(dir.file("nope.json"));
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error(), Catch::Contains("nope.json"));

  write_text(dir.file("good.json.gz"), gz);
  auto ok = server::inspect_profile(dir.file("good.json.gz"));
  REQUIRE(ok.ok());
  CHECK(ok->gzip);
  REQUIRE(ok->libs.size() == 1);
  CHECK(ok->libs[0].debug_name == "fxprof_srv_demo");
  CHECK(ok->libs[0].path == demo_path());
  CHECK(ok->has_local_paths);
}

TEST_CASE("fxprof load refuses bad input with one line and serves nothing", "[server][cli]") {
  TempDir dir;
  write_text(dir.file("trunc.json.gz"), gzip_text(demo_profile()).substr(0, 100));
  write_text(dir.file("empty.json"), "");
  for (const char* name : {"trunc.json.gz", "empty.json", "missing.json"}) {
    INFO(name);
    auto r = run({fxprof_bin(), "load", "--no-open", "-P", "0", dir.file(name)},
                 {.timeout = std::chrono::seconds(20)});
    CHECK(r.status != 0);
    CHECK_FALSE(r.timed_out);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::StartsWith("fxprof: " + dir.file(name)));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  auto usage = run({fxprof_bin(), "load"}, {.timeout = std::chrono::seconds(20)});
  CHECK(usage.status == 2);
  auto help = run({fxprof_bin(), "load", "--help"}, {.timeout = std::chrono::seconds(20)});
  CHECK(help.status == 0);
  CHECK_THAT(help.out, Catch::Contains("--no-open"));
}

TEST_CASE("fxprof load refuses what report refuses, with the same line, and serves nothing",
          "[server][cli]") {
  // load used to serve from the profile's head: a file cut in its samples, with trailing garbage or a stack
  // table with a cycle was served (and the front end failed on it) where every other command refused it.
  TempDir dir;
  const std::string good = demo_profile();
  const size_t cut = good.find("\"samples\":");
  REQUIRE(cut != std::string::npos);
  write_text(dir.file("cut.json"), good.substr(0, cut + 20));
  write_text(dir.file("trailing.json"), good + " and more");
  const size_t table = good.find("\"stackTable\":");
  const size_t data = good.find("\"data\":[[", table);
  REQUIRE(data != std::string::npos);
  std::string cycle = good;  // the first stack's prefix: a stack after it
  cycle.replace(data + 9, good.find(',', data + 9) - (data + 9), "1");
  write_text(dir.file("cycle.json"), cycle);
  for (const char* name : {"cut.json", "trailing.json", "cycle.json"}) {
    INFO(name);
    auto report = run({fxprof_bin(), "report", dir.file(name)}, {.timeout = std::chrono::seconds(60)});
    CHECK(report.status == 1);
    auto load = run({fxprof_bin(), "load", "--no-open", "-P", "0", dir.file(name)},
                    {.timeout = std::chrono::seconds(60)});
    CHECK(load.status == 1);
    CHECK(load.out.empty());
    CHECK_THAT(load.err, Catch::StartsWith("fxprof: " + dir.file(name) + ": "));
    CHECK(load.err == report.err);
  }
}

TEST_CASE("the server answers only under its token, with CORS and preflights", "[server][http]") {
  TempDir dir;
  std::string profile = demo_profile();
  write_text(dir.file("p.json"), profile);
  LiveServer live(dir.file("p.json"));
  auto cli = live.client();

  SECTION("the profile under the token, with CORS") {
    auto r = cli.Get(live.path("/profile.json"));
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->body == profile);
    CHECK(r->get_header_value("Access-Control-Allow-Origin") == "*");
    CHECK_THAT(r->get_header_value("Content-Type"), Catch::StartsWith("application/json"));
  }
  SECTION("404 without the token, with a wrong token, or for unknown paths") {
    for (std::string p : {std::string("/profile.json"), std::string("/symbolicate/v5"),
                          "/" + server::random_token() + "/profile.json", live.path("/nothing"),
                          "/" + live.server->token() + "profile.json"}) {
      INFO(p);
      auto r = cli.Get(p);
      REQUIRE(r);
      CHECK(r->status == 404);
      CHECK(r->body.find(profile.substr(0, 40)) == std::string::npos);
    }
    auto post = cli.Post("/symbolicate/v5", symbolicate_request({0x1000}), "application/json");
    REQUIRE(post);
    CHECK(post->status == 404);
    CHECK_FALSE(post->has_header("Access-Control-Allow-Origin"));
    auto root = cli.Get("/");
    REQUIRE(root);
    CHECK(root->status == 200);
    CHECK_THAT(root->body, Catch::Contains("fxprof"));
    CHECK(root->body.find(live.server->token()) == std::string::npos);
  }
  SECTION("OPTIONS preflight") {
    httplib::Headers h = {{"Origin", "https://profiler.firefox.com"},
                          {"Access-Control-Request-Method", "POST"},
                          {"Access-Control-Request-Headers", "user-agent,content-type"}};
    auto r = cli.Options(live.path("/symbolicate/v5").c_str(), h);
    REQUIRE(r);
    CHECK(r->status == 204);
    CHECK(r->get_header_value("Access-Control-Allow-Origin") == "*");
    CHECK(r->get_header_value("Access-Control-Allow-Methods") == "POST, GET, OPTIONS");
    CHECK(r->get_header_value("Access-Control-Allow-Headers") == "user-agent,content-type");
    CHECK(r->get_header_value("Access-Control-Max-Age") == "86400");
  }
  SECTION("symbolication works and is CORS-enabled") {
    DemoAddrs d = demo_addrs();
    auto r = cli.Post(live.path("/symbolicate/v5"), symbolicate_request({d.hot_inlined, d.second_start}),
                      "text/plain;charset=UTF-8");
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->get_header_value("Access-Control-Allow-Origin") == "*");
    CHECK_THAT(r->body, Catch::Contains("compute_hot"));
    CHECK_THAT(r->body, Catch::Contains("inlined_helper"));
    CHECK_THAT(r->body, Catch::Contains("second_fn"));
  }
  SECTION("malformed JSON: 400 with an error object") {
    for (const char* body : {"{\"jobs\": [", "not json", "[1,2]"}) {
      INFO(body);
      auto r = cli.Post(live.path("/symbolicate/v5"), body, "application/json");
      REQUIRE(r);
      CHECK(r->status == 400);
      CHECK_THAT(r->body, Catch::Contains("\"error\""));
      CHECK(r->get_header_value("Access-Control-Allow-Origin") == "*");
    }
  }
  SECTION("bodies over 16 MiB: 413, and the server keeps serving") {
    std::string big(17u << 20, ' ');
    big[0] = '{';
    auto r = cli.Post(live.path("/symbolicate/v5"), big, "application/json");
    REQUIRE(r);
    CHECK(r->status == 413);
    auto again = live.client().Get(live.path("/profile.json"));
    REQUIRE(again);
    CHECK(again->status == 200);
  }
  SECTION("/source/v1 refuses files the debug info does not name") {
    DemoAddrs d = demo_addrs();
    std::string bid = breakpad_id(build_id(demo_path()));
    for (std::string file : {"/etc/passwd", "../../../../etc/passwd", "/proc/self/environ"}) {
      INFO(file);
      std::string req = R"({"debugName":"fxprof_srv_demo","debugId":")" + bid + R"(","moduleOffset":")" +
                        hex(d.hot_inlined) + R"(","file":")" + file + R"("})";
      auto r = cli.Post(live.path("/source/v1"), req, "application/json");
      REQUIRE(r);
      CHECK(r->get_header_value("Access-Control-Allow-Origin") == "*");
      CHECK((r->status != 200 || r->body.find("\"error\"") != std::string::npos));
      CHECK(r->body.find("root:") == std::string::npos);
    }
  }
}

TEST_CASE("100 parallel symbolication requests are all answered", "[server][http]") {
  TempDir dir;
  write_text(dir.file("p.json"), demo_profile());
  LiveServer live(dir.file("p.json"));
  DemoAddrs d = demo_addrs();
  std::string req = symbolicate_request({d.hot_inlined, d.second_start, d.outer_caller, d.main_caller});
  std::atomic<int> ok{0};
  std::mutex mu;
  std::map<std::string, int> failures;
  std::vector<std::thread> threads;
  for (int i = 0; i < 100; ++i) {
    threads.emplace_back([&] {
      auto cli = live.client();
      auto t0 = std::chrono::steady_clock::now();
      auto r = cli.Post(live.path("/symbolicate/v5"), req, "text/plain;charset=UTF-8");
      if (r && r->status == 200 && r->body.find("outer_work") != std::string::npos) {
        ++ok;
        return;
      }
      std::lock_guard lock(mu);
      ++failures[r ? "status " + std::to_string(r->status) + ": " + r->body.substr(0, 200)
                   : "error " + httplib::to_string(r.error()) + " after " +
                         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::steady_clock::now() - t0)
                                            .count()) +
                         " ms"];
    });
  }
  for (auto& t : threads) t.join();
  for (auto& [what, n] : failures) UNSCOPED_INFO(n << " x " << what);
  CHECK(ok == 100);
}

TEST_CASE("a .json.gz profile is served as it is, with Content-Encoding: gzip (curl)", "[server][http]") {
  TempDir dir;
  std::string gz = gzip_text(demo_profile());
  write_text(dir.file("p.json.gz"), gz);
  LiveServer live(dir.file("p.json.gz"));
  std::string url = live.server->profile_url();
  auto raw = run({"curl", "-sS", "--max-time", "20", "-D", dir.file("headers"), "-o", dir.file("body"), url});
  REQUIRE(raw.status == 0);
  auto headers = read_file(dir.file("headers"));
  REQUIRE(headers.ok());
  CHECK_THAT(*headers, Catch::Contains("Content-Encoding: gzip"));
  CHECK_THAT(*headers, Catch::Contains("Access-Control-Allow-Origin: *"));
  CHECK(*read_file(dir.file("body")) == gz);
  auto inflated = run({"curl", "-sS", "--max-time", "20", "--compressed", url});
  CHECK(inflated.out == demo_profile());
  auto preflight =
      run({"curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-w", "%{http_code}", "-X", "OPTIONS", "-H",
           "Access-Control-Request-Method: POST", live.server->symbol_server_url() + "/asm/v1"});
  CHECK(preflight.out == "204");
  auto no_token = run({"curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-w", "%{http_code}",
                       live.server->origin() + "/profile.json"});
  CHECK(no_token.out == "404");
}

TEST_CASE("port selection: an explicit busy port is an error, the default moves on", "[server][http]") {
  TempDir dir;
  write_text(dir.file("p.json"), demo_profile());
  symbolizer::Symbolizer symbols;
  server::ProfileServer::Config c;
  c.profile_path = dir.file("p.json");
  c.port = 0;
  auto first = server::ProfileServer::start(c, symbols);
  REQUIRE(first.ok());
  c.port = (*first)->port();
  c.port_exact = true;
  auto clash = server::ProfileServer::start(c, symbols);
  REQUIRE_FALSE(clash.ok());
  CHECK_THAT(clash.error(), Catch::Contains(std::to_string(c.port)));
  c.port_exact = false;
  auto next = server::ProfileServer::start(c, symbols);
  REQUIRE(next.ok());
  CHECK((*next)->port() > c.port);
  CHECK((*next)->token() != (*first)->token());
  CHECK_THAT((*next)->profiler_url(), Catch::Contains("%3A" + std::to_string((*next)->port()) + "%2F"));
}

TEST_CASE("symbolicate_profile bakes names, expands inlines and nudges callers", "[server][symbolicate]") {
  TempDir dir;
  write_text(dir.file("in.json"), demo_profile(true));
  auto s = symbolicate_file(dir.file("in.json"), dir.file("out.json.gz"));
  REQUIRE(s.ok());
  std::string out = read_profile_text(dir.file("out.json.gz"));
  CHECK(lint_gecko_profile(out).empty());
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, out);
  CHECK(bool(doc["meta"]["presymbolicated"]) == true);
  CHECK(std::string_view(doc["meta"]["product"]) == "fxprof_srv_demo");  // the rest copied through
  CHECK(int64_t(doc["meta"]["version"]) == 36);

  auto paths = sample_paths(out);
  REQUIRE(paths.size() == 3);
  const std::string lib = " (in fxprof_srv_demo)";
  // second_fn's first byte as a caller is first_fn's call (address - 1); as a leaf it is second_fn.
  CHECK(paths[0] == "main" + lib + ";outer_work" + lib + ";first_fn" + lib + ";compute_hot" + lib +
                        ";inlined_helper" + lib);
  CHECK(paths[1] == paths[0]);
  CHECK(paths[2] == "main" + lib + ";outer_work" + lib + ";second_fn" + lib);

  // The marker's backtrace points at the caller variant of the stack, with valid indices.
  auto t = doc["threads"].at(0);
  int64_t nstacks = static_cast<int64_t>(t["stackTable"]["data"].get_array().size());
  auto m = t["markers"]["data"].at(0);
  int64_t ms = int64_t(m.at(5)["stack"]["samples"]["data"].at(0).at(0));
  CHECK(ms >= 0);
  CHECK(ms < nstacks);
  CHECK(std::string_view(t["stringTable"].at(size_t(int64_t(m.at(0))))) == "DemoMarker");
  // Lines went into the frame table's line column.
  bool has_line = false;
  for (auto f : t["frameTable"]["data"].get_array()) has_line |= f.at(4).is_int64();
  CHECK(has_line);

  // Idempotent in place: a baked profile baked again is unchanged in content.
  REQUIRE(symbolicate_file(dir.file("out.json.gz"), dir.file("out.json.gz")).ok());
  CHECK(sample_paths(read_profile_text(dir.file("out.json.gz"))) == paths);
}

TEST_CASE("child processes are symbolicated with their own libs", "[server][symbolicate]") {
  TempDir dir;
  // The demo profile as the only child process of a parent with no libs and no threads.
  std::string child = demo_profile();
  std::string parent =
      R"({"meta":{"version":36,"interval":1,"startTime":1700000000000,"shutdownTime":null,)"
      R"("processType":0,"product":"parent","stackwalk":1,"debug":0,"presymbolicated":false,)"
      R"("categories":[{"name":"Other","color":"grey","subcategories":["Other"]}],)"
      R"("markerSchema":[]},"libs":[],"threads":[],"pausedRanges":[],"processes":[)" +
      child + "]}";
  write_text(dir.file("in.json"), parent);
  auto info = server::inspect_profile(dir.file("in.json"));
  REQUIRE(info.ok());
  REQUIRE(info->libs.size() == 1);
  CHECK(info->libs[0].debug_name == "fxprof_srv_demo");
  REQUIRE(symbolicate_file(dir.file("in.json"), dir.file("out.json")).ok());
  std::string out = read_profile_text(dir.file("out.json"));
  CHECK(lint_gecko_profile(out).empty());
  auto paths = sample_paths(out, true);
  REQUIRE(paths.size() == 3);
  CHECK_THAT(paths[0],
             Catch::EndsWith(";compute_hot (in fxprof_srv_demo);inlined_helper (in fxprof_srv_demo)"));
}

TEST_CASE("fxprof symbolicate writes a self-contained profile that loads with names and no server",
          "[server][symbolicate][profiler-cli]") {
  TempDir dir;
  write_text(dir.file("in.json"), demo_profile());
  auto r = run({fxprof_bin(), "symbolicate", dir.file("in.json"), "-o", dir.file("shared.json.gz")});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err, Catch::Contains("local paths"));  // the sharing warning
  auto bad = run({fxprof_bin(), "symbolicate", dir.file("missing.json"), "-o", dir.file("x.json")});
  CHECK(bad.status != 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("x.json")));
  INFO("profiler-cli comes with `make test-deps`");
  REQUIRE(have_profiler_cli());
  ProfilerCli pcli;
  auto load = pcli.load(dir.file("shared.json.gz"));
  REQUIRE(load.status == 0);
  auto tree = pcli.cmd({"thread", "samples-top-down"});
  INFO(tree.out << tree.err);
  CHECK_THAT(tree.out, Catch::Contains("inlined_helper"));
  CHECK_THAT(tree.out, Catch::Contains("first_fn"));
  CHECK_THAT(tree.out, Catch::Contains("second_fn"));
  CHECK(tree.out.find("0x") == std::string::npos);
}
