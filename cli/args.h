// fxprof command line: a small option parser shared by the subcommands.
//
// Accepts `-x VALUE`, `-xVALUE`, `--long VALUE` and `--long=VALUE`; stops at `--` or, when asked, at the
// first argument that is not an option (what follows is the profiled command and its own options, as in
// samply).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fxprof::cli {

// A usage error of `fxprof COMMAND`: one line on stderr pointing at its --help, exit status 2.
inline int usage_error(std::string_view command, std::string_view msg) {
  std::fprintf(stderr, "fxprof %.*s: %.*s (try `fxprof %.*s --help`)\n", static_cast<int>(command.size()),
               command.data(), static_cast<int>(msg.size()), msg.data(), static_cast<int>(command.size()),
               command.data());
  return 2;
}

class ArgParser {
 public:
  // `args` excludes the program and subcommand names.
  explicit ArgParser(std::span<char*> args) : args_(args) {}

  bool done() const { return pos_ >= args_.size(); }
  // True when the next argument is an option (not "--", not a plain word).
  bool at_option() const {
    if (done()) return false;
    std::string_view a = args_[pos_];
    return a.size() > 1 && a[0] == '-' && a != "--";
  }
  // Consumes "--" if it is next.
  bool take_separator() {
    if (!done() && std::string_view(args_[pos_]) == "--") {
      ++pos_;
      return true;
    }
    return false;
  }
  // Matches a flag without value (-s / --save-only).
  bool flag(std::string_view short_name, std::string_view long_name) {
    if (done()) return false;
    std::string_view a = args_[pos_];
    if ((!short_name.empty() && a == short_name) || (!long_name.empty() && a == long_name)) {
      ++pos_;
      return true;
    }
    return false;
  }
  // Matches an option with a value; on a missing value sets error().
  std::optional<std::string> option(std::string_view short_name, std::string_view long_name) {
    if (done()) return std::nullopt;
    std::string_view a = args_[pos_];
    auto take_next = [&](std::string_view name) -> std::optional<std::string> {
      if (pos_ + 1 >= args_.size()) {
        error_ = "option " + std::string(name) + " needs a value";
        pos_ = args_.size();
        return std::nullopt;
      }
      pos_ += 2;
      return std::string(args_[pos_ - 1]);
    };
    if (!long_name.empty()) {
      if (a == long_name) return take_next(long_name);
      if (a.size() > long_name.size() && a.substr(0, long_name.size()) == long_name &&
          a[long_name.size()] == '=') {
        ++pos_;
        return std::string(a.substr(long_name.size() + 1));
      }
    }
    if (!short_name.empty()) {
      if (a == short_name) return take_next(short_name);
      if (a.size() > short_name.size() && a.substr(0, short_name.size()) == short_name) {
        ++pos_;
        return std::string(a.substr(short_name.size()));
      }
    }
    return std::nullopt;
  }
  // The current argument (for "unknown option" messages) and the rest.
  std::string_view peek() const { return done() ? std::string_view() : std::string_view(args_[pos_]); }
  std::vector<std::string> rest() {
    std::vector<std::string> out(args_.begin() + static_cast<ptrdiff_t>(pos_), args_.end());
    pos_ = args_.size();
    return out;
  }
  std::string take() { return std::string(args_[pos_++]); }
  const std::string& error() const { return error_; }

 private:
  std::span<char*> args_;
  size_t pos_ = 0;
  std::string error_;
};

// Parses a number, or nullopt when `s` is not one entirely.
inline std::optional<double> parse_number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') return std::nullopt;
  return v;
}

}  // namespace fxprof::cli
