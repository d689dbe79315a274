// The fxprof command line: usage errors are one line and a non-zero exit, and the README documents every
// option that `--help` lists.
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
           Case{{"record", "--call-graph", "lbr", "true"}, "--call-graph must be dwarf or fp"},
           Case{{"record", "--stack-size", "100000", "true"},
                "--stack-size must be between 512 and 65528 bytes"},
           Case{{"record", "-p", "12x"}, "--pid needs process ids, like 123,456"},
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

TEST_CASE("an unwritable output is an error, and no profile appears") {
  auto r = run({fxprof_bin(), "record", "--save-only", "-o", "/nonexistent-dir/p.json.gz", "--", "true"});
  CHECK(r.status != 0);
  CHECK(r.err.find("fxprof: cannot create /nonexistent-dir/p.json.gz") != std::string::npos);
}

TEST_CASE("the README documents every option of every command's --help") {
  auto readme = fxprof::read_file(source_dir() + "/README.md");
  REQUIRE(readme);
  std::regex opt(R"((^|[ ,])(--[a-z][a-z-]+|-[a-zA-Z])\b)");
  for (std::string cmd : {"record", "load", "symbolicate", "export", "report", "diff"}) {
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
