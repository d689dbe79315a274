// The fxprof command line: usage errors are one line and a non-zero exit, and the README documents every
// option that `--help` lists.
#include <signal.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <regex>
#include <set>

#include "base/fd.h"
#include "tests/support/support.h"

using namespace fxprof::test;

TEST_CASE("usage errors are one clear line and exit 2") {
  auto none = run({fxprof_bin()});
  CHECK(none.status == 2);
  CHECK(none.err.find("Usage:") != std::string::npos);

  auto unknown = run({fxprof_bin(), "frobnicate"});
  CHECK(unknown.status == 2);
  CHECK(unknown.err == "fxprof: unknown command 'frobnicate' (try `fxprof --help`)\n");

  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : {
           Case{{"record"}, "nothing to record: give a command or -p PID"},
           Case{{"record", "-F", "abc", "--", "true"},
                "--freq needs a positive number of samples per second"},
           Case{{"record", "--call-graph", "lbr", "true"}, "--call-graph must be dwarf[,BYTES] or fp"},
           Case{{"record", "--stack-size", "100000", "true"},
                "--stack-size must be between 512 and 65528 bytes"},
           Case{{"record", "--off-cpu-stack-size", "100", "true"},
                "--off-cpu-stack-size must be between 512 and 65528 bytes"},
           Case{{"record", "-p", "12x"}, "--pid needs process ids, like 123,456"},
           Case{{"record", "--off-cpu-threshold", "-1", "true"},
                "--off-cpu-threshold needs a number of milliseconds (0 or more)"},
           Case{{"record", "--bogus", "true"}, "unknown option '--bogus'"},
           Case{{"record", "-o"}, "option -o needs a value"},
           Case{{"record", "-p", "1", "--", "true"}, "give either a command or -p PID, not both"},
       }) {
    auto r = run([&] {
      std::vector<std::string> argv{fxprof_bin()};
      argv.insert(argv.end(), c.args.begin(), c.args.end());
      return argv;
    }());
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK(r.err == "fxprof record: " + c.message + " (try `fxprof record --help`)\n");
  }
}

TEST_CASE("an unwritable output is an error before the program is launched") {
  TempDir dir;
  std::string marker = dir.file("ran");
  auto r = run({fxprof_bin(), "record", "--save-only", "-o", "/nonexistent-dir/p.json.gz", "--", "sh", "-c",
                "touch " + marker});
  CHECK(r.status == 1);
  CHECK(r.err == "fxprof: cannot create /nonexistent-dir/p.json.gz: No such file or directory\n");
  CHECK(::access(marker.c_str(), F_OK) != 0);  // the program never ran
}

TEST_CASE("SIGHUP (a closed terminal) ends the program, and the profile is still written, 0600") {
  TempDir dir;
  std::string out = dir.file("p.json");
  // Not --save-only: after a hangup fxprof must not start serving to nobody.
  Background rec({fxprof_bin(), "record", "--no-symbolicate", "-n", "-o", out, "--", "sh", "-c",
                  "echo ready; exec sleep 60"});
  REQUIRE(rec.wait_for_line("ready", std::chrono::seconds(60)) == "ready");
  REQUIRE(::kill(rec.pid(), SIGHUP) == 0);  // to fxprof alone: it is passed on to the program
  int status = rec.stop(0, std::chrono::seconds(60));
  INFO(rec.err());
  CHECK(status == 128 + SIGHUP);  // the program's status: sleep died of the SIGHUP
  CHECK(rec.out().find("from-url") == std::string::npos);
  std::string text = read_profile_text(out);
  CHECK(lint_gecko_profile(text).empty());
  CHECK(text.find("sleep") != std::string::npos);
  struct stat st {};
  REQUIRE(::stat(out.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("arguments that are not UTF-8 are written as valid UTF-8 (all 256 lead bytes)") {
  TempDir dir;
  std::string out = dir.file("p.json");
  // The shell loops for ~30 ms of CPU: a program that exits at once may get no sample, and a profile without
  // samples is an error, not a file.
  std::vector<std::string> argv = {fxprof_bin(),  "record",
                                   "--save-only", "--no-symbolicate",
                                   "-o",          out,
                                   "--",          "sh",
                                   "-c",          "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done",
                                   "sh"};
  for (int lead = 1; lead < 256; ++lead) argv.push_back(std::string(1, static_cast<char>(lead)) + "\x80\x80");
  argv.push_back("\xf5\x80\x80");
  auto r = run(argv);
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::string text = read_profile_text(out);
  CHECK(simdjson::validate_utf8(text.data(), text.size()));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  CHECK(parser.parse(text).get(doc) == simdjson::SUCCESS);
}

TEST_CASE("the README documents every option of every command's --help") {
  auto readme = fxprof::read_file(source_dir() + "/README.md");
  REQUIRE(readme);
  std::regex opt(R"((^|[ ,])(--[a-z][a-z-]+|-[a-zA-Z])\b)");
  for (std::string cmd :
       {"record", "load", "symbolicate", "export", "report", "diff", "share", "push", "stat"}) {
    auto help = run({fxprof_bin(), cmd, "--help"});
    INFO(cmd << ": " << help.err);
    REQUIRE(help.status == 0);
    std::set<std::string> options;
    for (std::sregex_iterator it(help.out.begin(), help.out.end(), opt), end; it != end; ++it)
      options.insert((*it)[2]);
    CHECK(options.size() >= 2);
    for (const auto& o : options) {
      INFO("fxprof " << cmd << " " << o << " is missing from README.md");
      CHECK(readme->find(o) != std::string::npos);
    }
  }
}
