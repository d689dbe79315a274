// fxprof command line: one table of options per command drives its parsing and its --help text (the README
// test compares that text with README.md), so an option is spelled, explained and checked in one row.
//
// Accepts `-x VALUE`, `-xVALUE`, `--long VALUE` and `--long=VALUE`; `--` and, for record and stat, the first
// word that is not an option end the options (what follows is the profiled command and its own options, as
// in samply).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fxprof::cli {

// Takes an option's value (empty for a flag) or an operand: "" when accepted, else the usage error's text.
using Take = std::function<std::string(const std::string& value)>;

struct Option {
  std::string_view short_name;  // "-o", or empty
  std::string_view long_name;   // "--output"; empty in a heading
  // What follows the name in --help: "FILE" (a value), "[=MODE]" (an optional value joined by '='), or
  // empty for a flag.
  std::string_view value;
  std::string_view help;  // '\n' starts a line indented under the first in --help
  Take take;
  std::string_view implied = {};  // "[=MODE]" given alone takes this value
};

// A line of --help between groups of options ("\nOutput:").
Option heading(std::string_view text);

struct Command {
  std::string_view name;        // "record": errors read "fxprof record: ..."
  std::string_view usage;       // --help's text above the options
  std::vector<Option> options;  // --help lists them in this order; -h, --help is added last
  // Each word that is not an option. Without it, the first such word (or `--`) ends the options and it and
  // what follows are the profiled command (`rest`).
  Take operand;
  // `--` among operands; without it `--` is skipped.
  std::function<std::string()> separator;
};

// Parses `args` (after the command's name) by the table: nullopt to go on, else the exit status after
// printing --help (0) or a usage error (2).
std::optional<int> parse_options(const Command& command, std::span<char*> args,
                                 std::vector<std::string>* rest = nullptr);
// --help's text: the usage, then each option's names at two spaces and its help at column 27.
std::string help_text(const Command& command);

// A usage error of `fxprof COMMAND`: one line on stderr pointing at its --help; returns exit status 2.
int usage_error(std::string_view command, std::string_view msg);

// The one number parser of every numeric option of every command: a finite decimal number (digits, one '.',
// an exponent; no "nan", "inf", hex, spaces or trailing text) within a range. Out-of-range values are refused
// rather than clamped: `-d 1e19` or `--heap-rate 1e300` are mistakes, and a cast of one overflows.
struct Range {
  double lo = 0, hi = 0;
  std::string_view what;  // "a number of bytes", "a whole number of events"
  bool whole = false;     // an integer
  bool above_lo = false;  // lo itself is refused ("more than 0")
};
// The value of `s` for `option`, or the one-line error ("--heap-rate: expected a number of bytes between 1
// and 2^40, got 'nan'").
std::optional<double> parse_number(std::string_view option, const std::string& s, const Range& range,
                                   std::string& error);

// A row's Take for a number in `range`, given to `set`.
Take number(std::string_view option, Range range, std::function<void(double)> set);
// A row's Take for "ID[,ID...]": each a whole number from 1 to the kernel's highest pid_max (process and
// thread ids alike), given to `add`; `what` names them in the error ("process ids").
Take id_list(std::string_view option, std::string_view what, std::function<void(uint32_t)> add);

// Takes that only store: the value as given, one more of a repeatable one, a flag's setting.
Take store(std::string& into);
Take append(std::vector<std::string>& into);
template <class T>
Take set(T& target, T value) {
  return [&target, value](const std::string&) {
    target = value;
    return std::string();
  };
}

// Rows several commands share, each checked the same everywhere.
Option symbol_dir_option(std::vector<std::string>& dirs,
                         std::string_view help = "also look for symbol files in DIR (repeatable)");
Option pid_option(std::vector<int>& pids, std::string_view help);
Option duration_option(double& seconds, std::string_view help);
Option header_option(std::vector<std::string>& headers, std::string_view help);
Option limit_option(size_t& limit, std::string_view help);
Option address_option(std::string& address, std::string_view help);
// --marker NAME: only the samples inside the program's NAME markers (cli/profile_input.h).
Option marker_option(std::string& name);
// --suppress FUNC (repeatable; report, export and diff with --heap).
Option suppress_option(std::vector<std::string>& functions);
// --latency (model/latency.h).
Option latency_option(bool& on);
// The one operand a command reads; a second one is "one WHAT at a time ('word')".
Take one_operand(std::string& into, std::string_view what);

}  // namespace fxprof::cli
