// Issue 37: what share and push print and send. Names from a profile, a service's answer and the user's own
// arguments reach the terminal escaped (37.4); the command line is shown before an upload and
// --strip-args leaves its arguments out everywhere (37.5); a URL's query string (a presigned URL's
// signature) never appears in an error line, and a server trickling its answer does not hold fxprof past
// the deadline (37.11). Against loopback stand-ins (tests/share/stand_in.h).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>

#include "base/fd.h"
#include "share/http.h"
#include "share/share.h"
#include "tests/cli/sink_cli.h"
#include "tests/share/stand_in.h"

using namespace fxprof;
using namespace fxprof::test;

namespace {

// No control byte a terminal would act on: ESC, and CSI as one byte (0x9b) or as UTF-8 (U+009B).
void check_no_escapes(const std::string& text) {
  INFO(text);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\x9b') == std::string::npos);
  CHECK(text.find('\x07') == std::string::npos);
}

// A recorded profile whose process and thread are named "exp<ESC>[2J<CSI>work".
std::string hostile_profile(const TempDir& dir) {
  const std::string recorded = dir.file("r.json.gz");
  record_exp_work(recorded);
  std::string json = read_profile_text(recorded);
  size_t n = 0;
  for (size_t at = 0; (at = json.find("\"exp_work\"", at)) != std::string::npos; ++n)
    json.replace(at, 10, "\"exp\\u001b[2J\\u009bwork\"");
  REQUIRE(n >= 2);
  const std::string path = dir.file("hostile.json");
  write_file(path, json);
  return path;
}

// sh -c LOOP sh --password=hunter2: a secret on the command line.
std::string profile_with_password(const TempDir& dir) {
  const std::string path = dir.file("pw.json.gz");
  auto r = run({fxprof_bin(), "record", "--cpu-only", "-q", "-s", "-o", path, "--", "sh", "-c",
                "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done", "sh", "--password=hunter2"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  return path;
}

}  // namespace

TEST_CASE("share and push print names, answers and labels from others escaped") {
  TempDir dir;
  const std::string profile = hostile_profile(dir);
  // The privacy list before an upload: process and thread names.
  StandIn store(
      [](const httplib::Request&, httplib::Response& res) { res.set_content(jwt_for("t1"), "text/plain"); });
  auto s = run({fxprof_bin(), "share", "--yes", "--upload-url", store.origin(), profile});
  INFO(s.err);
  CHECK(s.status == 0);
  CHECK(s.err.find("processes: exp\\e[2J\\u009bwork (pid ") != std::string::npos);
  check_no_escapes(s.err);
  // An upload refused with C1 and C0 controls in the answer.
  StandIn refusing([](const httplib::Request&, httplib::Response& res) {
    res.status = 500;
    res.set_content(
        "oops \xc2\x9b"
        "31m \x9b\x1b[2J",
        "text/plain");
  });
  auto r = run({fxprof_bin(), "share", "--yes", "--upload-url", refusing.origin(), profile});
  CHECK(r.status == 1);
  CHECK(r.err.find("HTTP 500: oops \\u009b31m \\x9b\\e[2J") != std::string::npos);
  check_no_escapes(r.err);
  // push: "as APP", from the command line.
  StandIn pyro([](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  auto p =
      run({fxprof_bin(), "push", "--pyroscope", pyro.origin(), "--app", "app\x1b]52;c;aGk=\x07", profile});
  INFO(p.err);
  CHECK(p.status == 0);
  CHECK(p.err.find("as app\\e]52;c;aGk=\\x07") != std::string::npos);
  check_no_escapes(p.err);
  // Parca's gRPC message, taken from the server.
  StandIn parca([](const httplib::Request&, httplib::Response& res) {
    const std::string trailer = "grpc-status: 3\r\ngrpc-message: bad\x1b[2J\xc2\x9b\r\n";
    std::string body(5, '\0');
    body[0] = static_cast<char>(0x80);
    body[4] = static_cast<char>(trailer.size());
    res.set_content(std::string(5, '\0') + body + trailer, "application/grpc-web+proto");
  });
  auto g = run({fxprof_bin(), "push", "--parca", parca.origin(), profile});
  CHECK(g.status == 1);
  CHECK(g.err.find("gRPC status 3: bad\\e[2J\\u009b") != std::string::npos);
  check_no_escapes(g.err);
}

TEST_CASE("share shows the command line before uploading; --strip-args sends it without arguments") {
  TempDir dir;
  const std::string profile = profile_with_password(dir);
  StandIn store(
      [](const httplib::Request&, httplib::Response& res) { res.set_content(jwt_for("t2"), "text/plain"); });
  auto with = run({fxprof_bin(), "share", "--yes", "--upload-url", store.origin(), profile});
  INFO(with.err);
  REQUIRE(with.status == 0);
  CHECK(with.err.find("  command line: sh -c i=0; while") != std::string::npos);
  CHECK(with.err.find("sh --password=hunter2 (--strip-args leaves the arguments out)\n") !=
        std::string::npos);
  auto stripped =
      run({fxprof_bin(), "share", "--yes", "--strip-args", "--upload-url", store.origin(), profile});
  INFO(stripped.err);
  REQUIRE(stripped.status == 0);
  CHECK(stripped.err.find("  command line: sh (arguments stripped)\n") != std::string::npos);
  auto seen = store.seen();
  REQUIRE(seen.size() == 2);
  const std::string sent = gunzip(seen[0].body), sent_stripped = gunzip(seen[1].body);
  CHECK(sent.find("hunter2") != std::string::npos);  // what --strip-args is for
  CHECK(sent_stripped.find("hunter2") == std::string::npos);
  CHECK(sent_stripped.find("\"product\":\"fxprof: sh\"") != std::string::npos);
  CHECK(sent_stripped.find("\"arguments\":\"sh\"") != std::string::npos);
  CHECK(lint_gecko_profile(sent_stripped).empty());
  // push: the pprof's comment ("recorded by ...") holds the command line too.
  StandIn pyro([](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  REQUIRE(run({fxprof_bin(), "push", "--pyroscope-ingest", pyro.origin(), profile}).status == 0);
  REQUIRE(run({fxprof_bin(), "push", "--strip-args", "--pyroscope-ingest", pyro.origin(), profile}).status ==
          0);
  auto pushed = pyro.seen();
  REQUIRE(pushed.size() == 2);
  CHECK(gunzip(pushed[0].multipart_profile).find("hunter2") != std::string::npos);
  CHECK(gunzip(pushed[1].multipart_profile).find("hunter2") == std::string::npos);
  // record --share takes it too.
  auto rec = run({fxprof_bin(), "record", "--cpu-only", "-q", "--share", "--yes", "--strip-args",
                  "--upload-url", store.origin(), "-o", dir.file("rec.json.gz"), "--", "sh", "-c", "exit 0",
                  "sh", "--token=s3cr3t"});
  INFO(rec.err);
  CHECK(rec.status == 0);
  seen = store.seen();
  REQUIRE(seen.size() == 3);
  CHECK(gunzip(seen[2].body).find("s3cr3t") == std::string::npos);
}

TEST_CASE("error lines never print a URL's query string (a presigned URL's signature)") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  record_exp_work(profile);
  auto r =
      run({fxprof_bin(), "share", "--share-to",
           "http://127.0.0.1:1/bucket/p.json.gz?X-Amz-Signature=SIGNATURE123&X-Amz-Credential=KEY", profile});
  CHECK(r.status == 1);
  CHECK(r.err.find("cannot reach http://127.0.0.1:1/bucket/p.json.gz?<redacted>: ") != std::string::npos);
  CHECK(r.err.find("SIGNATURE123") == std::string::npos);
  CHECK(r.err.find("KEY") == std::string::npos);
  auto u = run({fxprof_bin(), "share", "--share-to", "http://user:PASSWORD@127.0.0.1:1/p", profile});
  CHECK(u.err.find("PASSWORD") == std::string::npos);
}

// A server that takes the request, then answers two bytes a second: the upload once waited 464 s.
TEST_CASE("an upload has a total deadline: a trickling server does not hold fxprof") {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener.get(), 4) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  std::atomic<bool> done{false};
  std::thread server([&] {
    UniqueFd c(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    char buf[65536];
    (void)!::read(c.get(), buf, sizeof buf);
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n";
    (void)!::write(c.get(), head.data(), head.size());
    while (!done && ::send(c.get(), "xx", 2, MSG_NOSIGNAL) == 2)
      std::this_thread::sleep_for(std::chrono::seconds(1));  // the trickle itself, not a wait for readiness
  });
  share::HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/compressed-store?sig=SECRET";
  req.body = "profile";
  req.deadline_s = 3;
  auto res = share::send(req);
  done = true;
  server.join();
  REQUIRE_FALSE(res);
  CHECK(res.error().starts_with("gave up on http://127.0.0.1:"));
  CHECK(res.error().find("/compressed-store?<redacted>: no answer within 3 s") != std::string::npos);
  // The default deadline: bounded for any profile the store takes.
  CHECK(share::upload_deadline_s(0) == 120);
  CHECK(share::upload_deadline_s(share::kUploadLimitBytes) < 3600);
}
