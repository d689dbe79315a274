// Tests of server/api_source_v1.cpp: the request shapes the Firefox Profiler sends, its refusals, and answers
// checked against binutils' view of the test programs (tests/programs/symbolizer).
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "server/internal.h"
#include "tests/server/api_support.h"

using namespace fxprof::test::api;
using fxprof::test::run;
using fxprof::test::test_program;

TEST_CASE("api: /source/v1 serves only files the debug info refers to") {
  Prog p = prog(test_program("sym_inline"));
  auto syms = nm_symbols(p.path);
  uint64_t hot = syms.at("_Z11compute_hoti").addr;
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  auto info = s.lookup("sym_inline", p.breakpad, std::vector<uint64_t>{hot});
  REQUIRE(info.ok());
  std::string file = (*info)[0].file;
  REQUIRE(ends_with(file, "sym_inline.cpp"));
  auto request = [&](const std::string& f) {
    return R"({"debugName":"sym_inline","debugId":")" + p.breakpad + R"(","moduleOffset":")" + hex(hot) +
           R"(","file":")" + f + R"("})";
  };
  auto ok = fxprof::server::source_v1(s, request(file));
  REQUIRE(ok.http_status == 200);
  simdjson::dom::parser parser;
  auto root = parse(parser, ok.body);
  CHECK(std::string_view(root["source"]).find("int compute_hot(int x)") != std::string_view::npos);
  CHECK(std::string_view(root["file"]) == file);
  CHECK(root["symbolsLastModified"].is_null());
  CHECK(root["sourceLastModified"].is_null());

  std::string dir = file.substr(0, file.rfind('/'));
  for (const std::string& refused : {std::string("/etc/passwd"), dir + "/../../../../../../../etc/passwd",
                                     dir + "/../symbolizer/CMakeLists.txt", std::string("../../etc/passwd"),
                                     std::string("sym_inline.cpp"), dir + "/make_variants.sh"}) {
    INFO(refused);
    auto r = fxprof::server::source_v1(s, request(refused));
    CHECK(r.http_status == 403);
    CHECK(r.body.find("\"error\"") != std::string::npos);
    CHECK(r.body.find("root:") == std::string::npos);
  }
  // An unknown library: nothing to refer to.
  auto r = fxprof::server::source_v1(
      s, R"({"debugName":"nope","debugId":"0123456789ABCDEF0123456789ABCDEF0","moduleOffset":"0x0",)"
         R"("file":"/etc/passwd"})");
  CHECK(r.http_status == 404);
}

TEST_CASE("api: /source/v1: malformed requests get 400 and an error object, never a crash") {
  Prog p = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  for (const auto& body :
       {std::string(""), std::string("{"), std::string(R"({"debugName":5})"),
        std::string(R"({"debugName":"a","debugId":"b","moduleOffset":"zz","file":"/x"})")}) {
    CHECK(fxprof::server::source_v1(s, body).http_status == 400);
  }
}

TEST_CASE("api: /source/v1: mutated requests never crash") {
  Prog p = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  check_mutations(R"({"debugName":"sym_inline","debugId":")" + p.breakpad +
                      R"(","moduleOffset":"0x11d0","file":"/x.cpp"})",
                  [&](const std::string& req) { return fxprof::server::source_v1(s, req); }, 8);
}

// A program built at test time in a folder the second local user owns: its debug info names a source file
// that user may then swap for a symlink, a FIFO or anything else. Root's server must not follow.
TEST_CASE("api: /source/v1 never follows a symlink, and serves regular files only") {
  REQUIRE(geteuid() == 0);  // the suite runs as root: the swap is done as the test user
  const passwd* pw = fxprof::test::ensure_test_user();
  REQUIRE(pw != nullptr);
  fxprof::test::TempDir secret_dir, dir;
  // Root's own secrets, 0600, in a root folder (one under the source file's name too).
  for (const char* name : {"secret", "victim.c"}) {
    const std::string f = secret_dir.file(name);
    { std::ofstream(f) << "TOP-SECRET-ROOT-ONLY\n"; }
    REQUIRE(chmod(f.c_str(), 0600) == 0);
  }
  REQUIRE(chown(dir.path().c_str(), pw->pw_uid, pw->pw_gid) == 0);
  const std::string real = dir.file("real"), src = real + "/victim.c", bin = dir.file("victim");
  REQUIRE(mkdir(real.c_str(), 0755) == 0);
  {
    std::ofstream(src)
        << "int hot(int x) { return x * 3 + 1; }\nint main(int c, char** v) { return hot(c); }\n";
  }
  auto cc = run({"gcc", "-g", "-O1", "-Wl,--build-id", "-o", bin, src});
  REQUIRE(cc.status == 0);
  REQUIRE(run({"chown", "-R", std::to_string(pw->pw_uid), real}).status == 0);
  Prog p = prog(bin);
  uint64_t hot = nm_symbols(bin).at("hot").addr;
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, bin, "victim"));
  const std::string request = R"({"debugName":"victim","debugId":")" + p.breakpad + R"(","moduleOffset":")" +
                              hex(hot) + R"(","file":")" + src + R"("})";
  auto ok = fxprof::server::source_v1(s, request);
  REQUIRE(ok.http_status == 200);
  CHECK(ok.body.find("return x * 3 + 1;") != std::string::npos);

  fxprof::test::CmdOptions as_user;
  as_user.uid = pw->pw_uid;
  as_user.gid = pw->pw_gid;
  auto swap = [&](const std::vector<std::string>& argv) {  // as the other user: rm the file, then argv
    REQUIRE(run({"rm", "-f", src}, as_user).status == 0);
    auto r = run(argv, as_user);
    INFO(r.err);
    REQUIRE(r.status == 0);
  };
  SECTION("a symlink to root's 0600 file") {
    swap({"ln", "-s", secret_dir.file("secret"), src});
    auto r = fxprof::server::source_v1(s, request);
    CHECK(r.http_status == 403);
    CHECK(r.body.find("symbolic link") != std::string::npos);
    CHECK(r.body.find("TOP-SECRET") == std::string::npos);
  }
  SECTION("a symlink to /dev/zero: refused at once, nothing read") {
    swap({"ln", "-s", "/dev/zero", src});
    auto r = fxprof::server::source_v1(s, request);
    CHECK(r.http_status == 403);
    CHECK(r.body.size() < 1000);
  }
  SECTION("a FIFO: refused without waiting for a writer") {
    swap({"mkfifo", src});
    auto r = fxprof::server::source_v1(s, request);
    CHECK(r.http_status == 403);
    CHECK(r.body.find("not a regular file") != std::string::npos);
  }
  SECTION("a symlink for a folder on the path") {
    auto r = run({"sh", "-c", "mv real real.old && ln -s " + secret_dir.path() + " real"}, [&] {
      auto o = as_user;
      o.cwd = dir.path();
      return o;
    }());
    INFO(r.err);
    REQUIRE(r.status == 0);
    auto refused = fxprof::server::source_v1(s, request);
    CHECK(refused.http_status == 403);
    CHECK(refused.body.find("TOP-SECRET") == std::string::npos);
  }
}

// Issue 37.6: a source file of NUL bytes grows six-fold as JSON (\u0000): 64 MiB of them made a 402 MB
// answer. The answer is capped (32 MiB), not only the file, and a client that has gone stops the work.
TEST_CASE("api: /source/v1 caps the answer, not only the file, and stops for a client that has gone") {
  fxprof::test::TempDir dir;
  const std::string src = dir.file("big.c"), bin = dir.file("big");
  {
    std::ofstream(src)
        << "int hot(int x) { return x * 3 + 1; }\nint main(int c, char** v) { return hot(c); }\n";
  }
  auto cc = run({"gcc", "-g", "-O1", "-Wl,--build-id", "-o", bin, src});
  REQUIRE(cc.status == 0);
  Prog p = prog(bin);
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, bin, "big"));
  const std::string request = R"({"debugName":"big","debugId":")" + p.breakpad + R"(","moduleOffset":")" +
                              hex(nm_symbols(bin).at("hot").addr) + R"(","file":")" + src + R"("})";
  // 8 MiB of NUL bytes: 48 MiB once escaped.
  { std::ofstream(src, std::ios::binary) << std::string(size_t{8} << 20, '\0'); }
  auto big = fxprof::server::source_v1(s, request);
  CHECK(big.http_status == 413);
  CHECK(big.body.size() < 1000);
  CHECK(big.body.find("too large once escaped as JSON") != std::string::npos);
  // 8 MiB of text is served whole.
  const std::string text(size_t{8} << 20, 'x');
  { std::ofstream(src, std::ios::binary) << text; }
  auto ok = fxprof::server::source_v1(s, request);
  REQUIRE(ok.http_status == 200);
  simdjson::dom::parser parser;
  CHECK(std::string_view(parse(parser, ok.body)["source"]) == text);
  // The worker's client closed its connection: no answer is computed.
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  ::close(sv[1]);
  {
    fxprof::server::internal::ClientWatch watch(sv[0]);
    auto gone = fxprof::server::internal::source_v1(s, simdjson::padded_string(request));
    CHECK(gone.http_status == 499);
    CHECK(gone.body.size() < 1000);
  }
  ::close(sv[0]);
}
