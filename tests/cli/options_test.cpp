// The option tables' parser (cli/options.h): every spelling of a value, the errors, where the options end,
// and the --help layout the README test reads.
#include "cli/options.h"

#include <catch2/catch.hpp>

using namespace fxprof::cli;

namespace {

// Runs the parser on `words`; `err` gets what it printed on stderr.
struct Parsed {
  std::optional<int> exit;
  std::string err;
};
Parsed parse(const Command& c, std::vector<std::string> words, std::vector<std::string>* rest = nullptr) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  std::FILE* saved = stderr;
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture);
  stderr = capture;
  Parsed p{parse_options(c, argv, rest), ""};
  stderr = saved;
  std::rewind(capture);
  for (int ch; (ch = std::fgetc(capture)) != EOF;) p.err += static_cast<char>(ch);
  std::fclose(capture);
  return p;
}

struct Values {
  std::string out, mode;
  std::vector<std::string> dirs, operands;
  bool quiet = false;
};

Command table(Values& v, bool with_operands) {
  Command c{"demo",
            "Usage: fxprof demo\n\n",
            {heading("Group:"),
             {"-o", "--output", "FILE", "where to write", store(v.out)},
             {"-q", "--quiet", "", "say less", set(v.quiet, true)},
             {"", "--heap", "[=MODE]", "a mode\nin two lines",
              [&v](const std::string& m) {
                return m == "bad" ? std::string("--heap must be good") : (v.mode = m, "");
              },
              "sampled"},
             {"", "--a-very-long-option-name", "VALUE", "wraps", store(v.out)},
             symbol_dir_option(v.dirs)},
            nullptr};
  if (with_operands) c.operand = append(v.operands);
  return c;
}

}  // namespace

TEST_CASE("values are taken in each spelling, repeatable ones add up") {
  Values v;
  auto p =
      parse(table(v, true), {"-oa", "--symbol-dir=x", "--symbol-dir", "y", "in", "--", "-q", "--heap=full"});
  CHECK(!p.exit);
  CHECK(v.out == "a");
  CHECK(v.dirs == std::vector<std::string>{"x", "y"});
  CHECK(v.operands == std::vector<std::string>{"in"});
  CHECK(v.quiet);  // `--` is skipped where a command takes operands
  CHECK(v.mode == "full");
  Values w;
  CHECK(!parse(table(w, true), {"--heap", "-o", "b"}).exit);
  CHECK(w.mode == "sampled");
  CHECK(w.out == "b");
}

TEST_CASE("the first word or `--` ends the options of a command that runs one") {
  Values v;
  std::vector<std::string> rest;
  CHECK(!parse(table(v, false), {"-q", "prog", "-o", "x"}, &rest).exit);
  CHECK(rest == std::vector<std::string>{"prog", "-o", "x"});
  CHECK(v.out.empty());
  CHECK(!parse(table(v, false), {"--", "-q"}, &rest).exit);
  CHECK(rest == std::vector<std::string>{"-q"});
}

TEST_CASE("usage errors are one line naming the command and exit 2") {
  Values v;
  const Command c = table(v, true);
  auto unknown = parse(c, {"--bogus"});
  CHECK(unknown.exit == 2);
  CHECK(unknown.err == "fxprof demo: unknown option '--bogus' (try `fxprof demo --help`)\n");
  CHECK(parse(c, {"-o"}).err == "fxprof demo: option -o needs a value (try `fxprof demo --help`)\n");
  CHECK(parse(c, {"--output"}).err ==
        "fxprof demo: option --output needs a value (try `fxprof demo --help`)\n");
  CHECK(parse(c, {"--heap=bad"}).err == "fxprof demo: --heap must be good (try `fxprof demo --help`)\n");
  CHECK(parse(c, {"-qx"}).err == "fxprof demo: unknown option '-qx' (try `fxprof demo --help`)\n");
  std::string in;
  Command one = table(v, true);
  one.operand = one_operand(in, "profile");
  CHECK(parse(one, {"a", "b"}).err ==
        "fxprof demo: one profile at a time ('b') (try `fxprof demo --help`)\n");
}

TEST_CASE("a number row takes what its range accepts and refuses anything else with one line") {
  double got = 0;
  const Take take = number("--x", {0, 100, "a number of things", false, true}, [&](double n) { got = n; });
  CHECK(take("2.5").empty());
  CHECK(got == 2.5);
  CHECK(take("1e2").empty());
  CHECK(got == 100);
  const std::string expected = "--x: expected a number of things more than 0 and at most 100, got '";
  for (const char* bad : {"0", "3x", "", "nan", "NaN", "inf", "-inf", "infinity", "1e300", "1e-400x", " 5",
                          "5 ", "0x10", "100.5", "1e", "."})
    CHECK(take(bad) == expected + bad + "'");
  CHECK(got == 100);
}

TEST_CASE("the one number parser: whole numbers, bounds written as people do, long values cut") {
  std::string error;
  const Range bytes{1, 0x1p40, "a number of bytes"};
  CHECK(parse_number("--r", "1099511627776", bytes, error) == 0x1p40);
  CHECK(!parse_number("--r", "1099511627777", bytes, error));
  CHECK(error == "--r: expected a number of bytes between 1 and 2^40, got '1099511627777'");
  CHECK(!parse_number("--c", "2.5", {1, 1e15, "a whole number of events", true}, error));
  CHECK(error == "--c: expected a whole number of events between 1 and 10^15, got '2.5'");
  CHECK(parse_number("--c", "+7", {1, 1e15, "a whole number", true}, error) == 7);
  CHECK(parse_number("--t", "0", {0, 1000, "ms"}, error) == 0);
  CHECK(!parse_number("--t", std::string(100, '9'), {0, 1000, "ms"}, error));
  CHECK(error == "--t: expected ms between 0 and 1000, got '" + std::string(40, '9') + "...'");
}

TEST_CASE("--help lists the table with its text at column 27 and -h last") {
  Values v;
  CHECK(help_text(table(v, true)) ==
        "Usage: fxprof demo\n\n"
        "Group:\n"
        "  -o, --output FILE        where to write\n"
        "  -q, --quiet              say less\n"
        "  --heap[=MODE]            a mode\n"
        "                           in two lines\n"
        "  --a-very-long-option-name VALUE\n"
        "                           wraps\n"
        "  --symbol-dir DIR         also look for symbol files in DIR (repeatable)\n"
        "  -h, --help               this help\n");
}
