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
           Case{{"record"}, "nothing to record: give a command, -p PID or -a"},
           Case{{"record", "-F", "abc", "--", "true"},
                "--freq: expected a number of samples per second more than 0 and at most 1000000, got 'abc'"},
           Case{{"record", "--call-graph", "lbr", "true"}, "--call-graph must be dwarf[,BYTES] or fp"},
           Case{{"record", "--stack-size", "100000", "true"},
                "--stack-size: expected a number of bytes between 512 and 65528, got '100000'"},
           Case{{"record", "--off-cpu-stack-size", "100", "true"},
                "--off-cpu-stack-size: expected a number of bytes between 512 and 65528, got '100'"},
           Case{{"record", "-p", "12x"},
                "--pid: expected process ids, each a whole number between 1 and 2^22, got '12x'"},
           Case{{"record", "--off-cpu-threshold", "-1", "true"},
                "--off-cpu-threshold: expected a number of milliseconds between 0 and 86400000, got '-1'"},
           // Issue 37: nan, inf and overflowing values were taken (and crashed or misbehaved later).
           Case{{"record", "--heap", "--heap-rate", "nan", "true"},
                "--heap-rate: expected a number of bytes between 1 and 2^40, got 'nan'"},
           Case{{"record", "--heap", "--heap-rate", "inf", "true"},
                "--heap-rate: expected a number of bytes between 1 and 2^40, got 'inf'"},
           Case{{"record", "--heap", "--heap-rate", "1e300", "true"},
                "--heap-rate: expected a number of bytes between 1 and 2^40, got '1e300'"},
           Case{{"record", "-d", "1e19", "true"},
                "--duration: expected a number of seconds more than 0 and at most 31536000, got '1e19'"},
           Case{{"record", "-d", "inf", "true"},
                "--duration: expected a number of seconds more than 0 and at most 31536000, got 'inf'"},
           Case{{"record", "--buffer-size", "nan", "true"},
                "--buffer-size: expected a number of bytes between 4096 and 2^30, got 'nan'"},
           // Issue 38: a ring smaller than one sample lost every sample without a word.
           Case{{"record", "--buffer-size", "40000", "true"},
                "--buffer-size 40000 (32768 once rounded) holds no DWARF sample of --stack-size 32768 (the "
                "stack "
                "copy + ~1 KiB): give at least 65536 or a smaller --stack-size"},
           Case{{"record", "--off-cpu-threshold", "nan", "true"},
                "--off-cpu-threshold: expected a number of milliseconds between 0 and 86400000, got 'nan'"},
           Case{{"record", "--stack-size", "nan", "true"},
                "--stack-size: expected a number of bytes between 512 and 65528, got 'nan'"},
           Case{{"record", "-e", "page-faults", "-c", "nan", "true"},
                "--period: expected a whole number of events between 1 and 10^15, got 'nan'"},
           Case{
               {"record", "-F", "0x10", "true"},
               "--freq: expected a number of samples per second more than 0 and at most 1000000, got '0x10'"},
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

TEST_CASE("record --share without --yes and no terminal to ask on is refused before the program runs") {
  TempDir dir;
  std::string marker = dir.file("ran");
  auto r = run(
      {fxprof_bin(), "record", "--share", "-o", dir.file("p.json.gz"), "--", "sh", "-c", "touch " + marker});
  CHECK(r.status == 2);
  CHECK(
      r.err ==
      "fxprof record: --share asks before uploading and there is no terminal to ask on: give --yes to upload "
      "without asking (try `fxprof record --help`)\n");
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
  for (std::string cmd : {"record", "import", "load", "symbolicate", "export", "report", "diff", "share",
                          "push", "stat", "probes", "agent"}) {
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
