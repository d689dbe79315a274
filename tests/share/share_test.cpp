// fxprof share, share-to and push against loopback stand-ins that follow each service's protocol as
// documented: firefox-devtools/profiler-server's POST /compressed-store (gzip body, a JWT answer), a store
// taking a PUT, Grafana Pyroscope's POST /ingest (pprof as the multipart field "profile") and Parca's
// ProfileStoreService/WriteRaw as gRPC-Web (parca/profilestore/v1alpha1/profilestore.proto). What arrives
// is checked: gzip JSON with baked names, pprof that `go tool pprof` reads.
#include "share/share.h"

#include <httplib.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <protozero/pbf_reader.hpp>
#include <thread>

#include "base/url.h"
#include "tests/cli/sink_cli.h"
#include "tests/share/stand_in.h"

using namespace fxprof;
using namespace fxprof::test;

namespace {

// `go tool pprof -top` of a pprof file: its output (the test asserts names in it).
CmdResult pprof_top(const TempDir& dir, const std::string& file, const std::string& index) {
  CmdOptions go;
  go.env = {{"HOME", dir.path()}, {"PPROF_TMPDIR", dir.path()}, {"GOCACHE", dir.path() + "/gocache"}};
  return run({"go", "tool", "pprof", "-top", "-sample_index=" + index, file}, go);
}

// The one raw profile and the labels of a WriteRawRequest.
struct WriteRaw {
  std::map<std::string, std::string> labels;
  std::string raw_profile;
  int series = 0;
};
WriteRaw decode_write_raw(const std::string& message) {
  WriteRaw out;
  protozero::pbf_reader req(message);
  while (req.next(2)) {
    ++out.series;
    protozero::pbf_reader series = req.get_message();
    while (series.next()) {
      if (series.tag() == 1) {
        protozero::pbf_reader set = series.get_message();
        while (set.next(1)) {
          protozero::pbf_reader label = set.get_message();
          std::string k, v;
          while (label.next()) {
            const bool is_name = label.tag() == 1;  // read before get_string() moves past the field
            (is_name ? k : v) = label.get_string();
          }
          out.labels[k] = v;
        }
      } else if (series.tag() == 2) {
        protozero::pbf_reader sample = series.get_message();
        while (sample.next(1)) out.raw_profile = sample.get_bytes();
      } else {
        series.skip();
      }
    }
  }
  return out;
}

// strace's log of `argv` (every process, openat only). LeakSanitizer refuses to run under ptrace: the
// sanitizer build's fxprof runs without it here.
CmdResult traced(const std::string& log, std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"strace", "-f", "-q", "-e", "trace=openat", "-o", log});
  CmdOptions o;
  const char* asan = std::getenv("ASAN_OPTIONS");
  o.env = {{"ASAN_OPTIONS", std::string(asan ? asan : "") + ":detect_leaks=0"},
           {"PROFILER_URL", "https://profiler.example.test"}};
  return run(argv, o);
}

// How many times a traced run opened `path` (successfully).
size_t opens_of(const std::string& log, const std::string& path) {
  std::ifstream f(log);
  size_t n = 0;
  for (std::string line; std::getline(f, line);)
    if (line.find("openat(") != std::string::npos && line.find("\"" + path + "\"") != std::string::npos &&
        line.find("= -1") == std::string::npos)
      ++n;
  return n;
}

}  // namespace

TEST_CASE("share uploads the gzip of a self-contained profile and prints the public link") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  record_exp_work(profile, "1", false);  // raw addresses: share must bake the names in
  StandIn store([](const httplib::Request&, httplib::Response& res) {
    res.set_content(jwt_for("abc123XYZ"), "text/plain");
  });
  CmdOptions o;
  o.env = {{"PROFILER_URL", "https://profiler.example.test/"}};
  auto r = run({fxprof_bin(), "share", "--yes", "--upload-url", store.origin(), profile}, o);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out == "https://profiler.example.test/public/abc123XYZ/\n");
  // It said what the profile holds, and that the link is public, before uploading.
  CHECK(r.err.find("processes: exp_work (pid ") != std::string::npos);
  CHECK(r.err.find("150 MB") != std::string::npos);
  auto seen = store.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].method == "POST");
  CHECK(seen[0].path == "/compressed-store");
  CHECK(seen[0].accept == "application/vnd.firefox-profiler+json;version=1.0");
  const std::string json = gunzip(seen[0].body);
  REQUIRE(!json.empty());
  CHECK(lint_gecko_profile(json).empty());
  CHECK(json.find("\"presymbolicated\":true") != std::string::npos);
  CHECK(json.find("beta(long)") != std::string::npos);  // a name baked in, not an address
}

TEST_CASE("share asks first: without a terminal and without --yes nothing is uploaded") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  record_exp_work(profile);
  StandIn store(
      [](const httplib::Request&, httplib::Response& res) { res.set_content(jwt_for("t"), "text/plain"); });
  auto r = run({fxprof_bin(), "share", "--upload-url", store.origin(), profile});
  CHECK(r.status == 1);
  CHECK(r.err.find("not uploaded: the link would be public; give --yes") != std::string::npos);
  CHECK(store.seen().empty());
}

TEST_CASE("share: the service's refusal is one line with its status and words") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  record_exp_work(profile);
  StandIn store([](const httplib::Request&, httplib::Response& res) {
    res.status = 413;
    res.set_content("Payload Too Large\nmore detail", "text/plain");
  });
  auto r = run({fxprof_bin(), "share", "--yes", "--upload-url", store.origin(), profile});
  CHECK(r.status == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("fxprof: upload refused by " + store.origin() + ": HTTP 413: Payload Too Large\n") !=
        std::string::npos);
  // A token that is not a JWT is an error too, not a link.
  StandIn bad(
      [](const httplib::Request&, httplib::Response& res) { res.set_content("<html>", "text/html"); });
  auto b = run({fxprof_bin(), "share", "--yes", "--upload-url", bad.origin(), profile});
  CHECK(b.status == 1);
  CHECK(b.err.find("not a token") != std::string::npos);
  // Nobody listening: one line naming the URL.
  auto gone = run({fxprof_bin(), "share", "--yes", "--upload-url", "http://127.0.0.1:1", profile});
  CHECK(gone.status == 1);
  CHECK(gone.err.find("fxprof: cannot reach http://127.0.0.1:1/compressed-store") != std::string::npos);
}

TEST_CASE("share --share-to PUTs the self-contained profile and prints the from-url link") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  record_exp_work(profile, "1", false);
  StandIn store([](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  const std::string url = store.origin() + "/bucket/p.json.gz?X-Amz-Signature=ab%2Fcd&x=1";
  CmdOptions o;
  o.env = {{"PROFILER_URL", "https://profiler.example.test"}};
  auto r = run({fxprof_bin(), "share", "--share-to", url, "--header", "x-amz-acl: private", profile}, o);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out == "https://profiler.example.test/from-url/" + url_encode(url) + "/\n");
  CHECK(r.err.find("CORS") != std::string::npos);
  auto seen = store.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].method == "PUT");
  CHECK(seen[0].path == "/bucket/p.json.gz");
  const std::string json = gunzip(seen[0].body);
  CHECK(json.find("beta(long)") != std::string::npos);
}

TEST_CASE("push --pyroscope speaks the Push API: a PushRequest with the labels and the pprof") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  record_exp_work(profile, "1", false);
  StandIn pyro([](const httplib::Request&, httplib::Response& res) {
    res.set_content("", "application/proto");  // PushResponse{}
  });
  auto r = run({fxprof_bin(), "push", "--pyroscope", pyro.origin(), "--label", "env=ci", profile});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto seen = pyro.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].path == "/push.v1.PusherService/Push");
  CHECK(seen[0].content_type == "application/proto");
  const std::vector<PushedSeries> series = decode_series(seen[0].body, false);
  REQUIRE(series.size() == 1);
  std::map<std::string, std::string> labels = series[0].labels;
  CHECK(labels["__name__"] == "process_cpu");
  CHECK(labels["service_name"] == "exp_work");
  CHECK(labels["env"] == "ci");
  CHECK(labels.size() == 3);
  REQUIRE(series[0].raw_profiles.size() == 1);
  REQUIRE(series[0].ids.size() == 1);
  CHECK(series[0].ids[0].size() == 36);  // a UUID
  write_file(dir.file("got.pb.gz"), series[0].raw_profiles[0]);
  auto top = pprof_top(dir, dir.file("got.pb.gz"), "cpu");
  INFO(top.out << top.err);
  REQUIRE(top.status == 0);
  CHECK(top.out.find("beta") != std::string::npos);

  // Connect's error answer: a status and {"code", "message"}, said in one line.
  StandIn refusing([](const httplib::Request&, httplib::Response& res) {
    res.status = 400;
    res.set_content(R"({"code":"invalid_argument","message":"no service_name"})", "application/json");
  });
  auto bad = run({fxprof_bin(), "push", "--pyroscope", refusing.origin(), profile});
  CHECK(bad.status == 1);
  CHECK(bad.err.find("Pyroscope refused the profile: HTTP 400") != std::string::npos);
  CHECK(bad.err.find("no service_name") != std::string::npos);
}

TEST_CASE("push --pyroscope-ingest sends pprof as the multipart field 'profile' to /ingest") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  record_exp_work(profile, "1", false);
  StandIn pyro([](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  auto r = run({fxprof_bin(), "push", "--pyroscope-ingest", pyro.origin(), "--label", "env=ci", "--label",
                "branch=main", profile});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto seen = pyro.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].path == "/ingest");
  CHECK(seen[0].params.find("name")->second == "exp_work{env=ci,branch=main}");
  CHECK(seen[0].params.find("format")->second == "pprof");
  const long from = std::stol(seen[0].params.find("from")->second);
  const long until = std::stol(seen[0].params.find("until")->second);
  CHECK(from > 1700000000);
  CHECK(until >= from);
  CHECK(until - from < 60);
  REQUIRE(!seen[0].multipart_profile.empty());
  write_file(dir.file("got.pb.gz"), seen[0].multipart_profile);
  auto top = pprof_top(dir, dir.file("got.pb.gz"), "cpu");
  INFO(top.out << top.err);
  REQUIRE(top.status == 0);
  CHECK(top.out.find("beta") != std::string::npos);  // symbols baked: no debug upload needed
  CHECK(top.out.find("alpha") != std::string::npos);
  // A bad label name is refused before anything is sent.
  auto bad = run({fxprof_bin(), "push", "--pyroscope-ingest", pyro.origin(), "--label", "9x=1", profile});
  CHECK(bad.status == 2);
  CHECK(pyro.seen().size() == 1);
}

TEST_CASE("push --parca sends a WriteRawRequest as gRPC-Web and reads the gRPC status") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  record_exp_work(profile, "1", false);
  auto grpc_answer = [](int code, const std::string& message) {
    return [code, message](const httplib::Request&, httplib::Response& res) {
      std::string trailer = "grpc-status: " + std::to_string(code) + "\r\n";
      if (!message.empty()) trailer += "grpc-message: " + message + "\r\n";
      std::string body(5, '\0');
      body[0] = static_cast<char>(0x80);
      body[4] = static_cast<char>(trailer.size());
      body += trailer;
      std::string empty_message(5, '\0');  // WriteRawResponse{}: an empty message frame first
      res.set_content(empty_message + body, "application/grpc-web+proto");
    };
  };
  StandIn parca(grpc_answer(0, ""));
  auto r = run({fxprof_bin(), "push", "--parca", parca.origin(), "--app", "myservice", "--label", "region=eu",
                profile});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto seen = parca.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].path == "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw");
  CHECK(seen[0].content_type == "application/grpc-web+proto");
  const std::string& frame = seen[0].body;
  REQUIRE(frame.size() > 5);
  CHECK(frame[0] == 0);  // not compressed
  const uint32_t len = (uint32_t(uint8_t(frame[1])) << 24) | (uint32_t(uint8_t(frame[2])) << 16) |
                       (uint32_t(uint8_t(frame[3])) << 8) | uint32_t(uint8_t(frame[4]));
  REQUIRE(len == frame.size() - 5);
  WriteRaw w = decode_write_raw(frame.substr(5));
  CHECK(w.series == 1);
  CHECK(w.labels["__name__"] == "fxprof");
  CHECK(w.labels["service_name"] == "myservice");
  CHECK(w.labels["region"] == "eu");
  write_file(dir.file("got.pb.gz"), w.raw_profile);
  auto top = pprof_top(dir, dir.file("got.pb.gz"), "samples");
  INFO(top.out << top.err);
  REQUIRE(top.status == 0);
  CHECK(top.out.find("gamma_work") != std::string::npos);

  StandIn refusing(grpc_answer(3, "invalid labels"));
  auto bad = run({fxprof_bin(), "push", "--parca", refusing.origin(), profile});
  CHECK(bad.status == 1);
  CHECK(bad.err.find("Parca refused the profile: gRPC status 3: invalid labels") != std::string::npos);
}

TEST_CASE("record --share uploads after recording and exits with the program's status") {
  TempDir dir;
  StandIn store([](const httplib::Request&, httplib::Response& res) {
    res.set_content(jwt_for("rec1"), "text/plain");
  });
  CmdOptions o;
  o.env = {{"PROFILER_URL", "https://profiler.example.test"}};
  auto r = run(
      {fxprof_bin(), "record", "--cpu-only", "-q", "--share", "--yes", "--upload-url", store.origin(), "-o",
       dir.file("p.json.gz"), "--", "sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 7"},
      o);
  INFO(r.out << r.err);
  CHECK(r.status == 7);
  CHECK(r.out.find("https://profiler.example.test/public/rec1/") != std::string::npos);
  REQUIRE(store.seen().size() == 1);
}

// record --share-to and --push send the model they recorded, named by the symbolizer that loaded the
// binaries while the program ran: no temporary file read back by a second symbolizer (which opened each
// binary again), and the upload is the self-contained profile --symbolicate writes, byte for byte.
TEST_CASE("record --share-to and --push upload the recorded model: no binary opened again") {
  TempDir dir;
  StandIn store([](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  const std::string program = std::filesystem::canonical(test_program("exp_work")).string();
  auto alone = traced(dir.file("alone.log"), {fxprof_bin(), "record", "--cpu-only", "-q", "--save-only", "-o",
                                              dir.file("a.json.gz"), "--", program, "1"});
  INFO(alone.err);
  REQUIRE(alone.status == 0);
  const size_t opened = opens_of(dir.file("alone.log"), program);
  REQUIRE(opened >= 1);

  // The file stays lazy (raw addresses, as without --share-to); the upload has the names.
  auto shared =
      traced(dir.file("shared.log"),
             {fxprof_bin(), "record", "--cpu-only", "-q", "--push", "pyroscope=" + store.origin(),
              "--share-to", store.origin() + "/b.json.gz", "-o", dir.file("b.json.gz"), "--", program, "1"});
  INFO(shared.out << shared.err);
  REQUIRE(shared.status == 0);
  CHECK(opens_of(dir.file("shared.log"), program) == opened);
  auto seen = store.seen();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].path == "/push.v1.PusherService/Push");
  const std::vector<PushedSeries> series = decode_series(seen[0].body, false);
  REQUIRE(series.size() == 1);
  REQUIRE(series[0].raw_profiles.size() == 1);
  write_file(dir.file("got.pb.gz"), series[0].raw_profiles[0]);
  auto top = pprof_top(dir, dir.file("got.pb.gz"), "cpu");
  INFO(top.out << top.err);
  REQUIRE(top.status == 0);
  CHECK(top.out.find("beta") != std::string::npos);
  CHECK(seen[1].path == "/b.json.gz");
  CHECK(gunzip(seen[1].body).find("beta(long)") != std::string::npos);
  CHECK(read_profile_text(dir.file("b.json.gz")).find("beta(long)") == std::string::npos);

  // Named for the file too: the upload is the file's JSON.
  auto baked = run({fxprof_bin(), "record", "--cpu-only", "-q", "--symbolicate", "--share-to",
                    store.origin() + "/c.json.gz", "-o", dir.file("c.json.gz"), "--", program, "1"});
  INFO(baked.err);
  REQUIRE(baked.status == 0);
  seen = store.seen();
  REQUIRE(seen.size() == 3);
  const bool same = gunzip(seen[2].body) == read_profile_text(dir.file("c.json.gz"));
  CHECK(same);
}

TEST_CASE("share: JWT decoding and Parca's message, as plain functions") {
  auto t = share::token_from_jwt(jwt_for("a-b_c9") + "\n");
  REQUIRE(t);
  CHECK(*t == "a-b_c9");
  CHECK(!share::token_from_jwt("nodots"));
  CHECK(!share::token_from_jwt("a.!!!.c"));
  CHECK(!share::token_from_jwt(base64url("{}") + "." + base64url("{\"profileToken\":\"../x\"}") + ".s"));
  share::PushOptions o;
  o.app = "app";
  o.labels = {{"k", "v"}};
  WriteRaw w = decode_write_raw(share::parca_write_raw_request("PPROF", o));
  const std::vector<PushedSeries> pushed =
      decode_series(share::pyroscope_push_request({{share::series_labels("off_cpu", o), "P1"},
                                                   {share::series_labels("process_cpu", o), "P2"}}),
                    false);
  REQUIRE(pushed.size() == 2);
  CHECK(pushed[0].labels.at("__name__") == "off_cpu");
  CHECK(pushed[1].labels.at("service_name") == "app");
  CHECK(pushed[1].labels.at("k") == "v");
  CHECK(pushed[1].raw_profiles == std::vector<std::string>{"P2"});
  CHECK(pushed[0].ids != pushed[1].ids);
  CHECK(w.raw_profile == "PPROF");
  CHECK(w.labels.size() == 3);
  CHECK(w.labels["k"] == "v");
  CHECK(share::check_label_name("ok_1"));
  CHECK(!share::check_label_name("1bad"));
  CHECK(!share::check_label_name("a-b"));
  CHECK(!share::check_label_name(""));
}
