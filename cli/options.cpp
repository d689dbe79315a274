#include "cli/options.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace fxprof::cli {
namespace {

constexpr size_t kHelpColumn = 27;  // where --help's text starts, after "  -o, --output FILE"

const Option kHelpOption{"-h", "--help", "", "this help", nullptr};

bool is_option(std::string_view a) { return a.size() > 1 && a[0] == '-' && a != "--"; }

// What `args[pos]` gives to `o`: nullopt when it is not `o`; `needs_value` when the value is the next
// argument.
struct Match {
  std::string value;
  bool needs_value = false;
  std::string_view spelled;  // the name as given, for "option -o needs a value"
};
std::optional<Match> match(const Option& o, std::string_view a) {
  const bool optional_value = !o.value.empty() && o.value.front() == '[';
  if (o.value.empty() || optional_value) {
    if (a == o.short_name || a == o.long_name) return Match{std::string(o.implied)};
    if (!optional_value) return std::nullopt;
  }
  for (std::string_view name : {o.long_name, o.short_name}) {
    if (name.empty() || a.substr(0, name.size()) != name) continue;
    if (a.size() == name.size()) return Match{"", true, name};
    // A long name takes its value after '='; a short one right after it (-F100).
    if (name == o.long_name && a[name.size()] == '=') return Match{std::string(a.substr(name.size() + 1))};
    if (name == o.short_name && !optional_value) return Match{std::string(a.substr(name.size()))};
  }
  return std::nullopt;
}

}  // namespace

Option heading(std::string_view text) { return Option{"", "", "", text, nullptr}; }

int usage_error(std::string_view command, std::string_view msg) {
  std::fprintf(stderr, "fxprof %.*s: %.*s (try `fxprof %.*s --help`)\n", static_cast<int>(command.size()),
               command.data(), static_cast<int>(msg.size()), msg.data(), static_cast<int>(command.size()),
               command.data());
  return 2;
}

namespace {

// A range's bound as people write it: 4096, 0.5, 2^40 (a power of two from 2^20), 10^15.
std::string bound_text(double v) {
  char buf[64];
  if (v == std::floor(v) && v >= 0x1p20 && std::exp2(std::floor(std::log2(v))) == v) {
    std::snprintf(buf, sizeof buf, "2^%d", static_cast<int>(std::log2(v)));
  } else if (v == std::floor(v) && v >= 1e7 && std::pow(10.0, std::round(std::log10(v))) == v) {
    std::snprintf(buf, sizeof buf, "10^%d", static_cast<int>(std::round(std::log10(v))));
  } else if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%g", v);
  }
  return buf;
}

// Decimal digits with at most one '.', then an optional exponent: what strtod alone would also take as
// "nan", "inf", "0x1p3" or " 5" is not a number here.
bool decimal(std::string_view s) {
  size_t i = 0, digits = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) ++digits;
  if (i < s.size() && s[i] == '.')
    for (++i; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) ++digits;
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    const size_t from = i;
    for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
    }
    if (i == from) return false;
  }
  return i == s.size();
}

}  // namespace

std::optional<double> parse_number(std::string_view option, const std::string& s, const Range& range,
                                   std::string& error) {
  std::optional<double> v;
  if (decimal(s)) {
    char* end = nullptr;
    v = std::strtod(s.c_str(), &end);
    if (!std::isfinite(*v) || *v < range.lo || (range.above_lo && *v == range.lo) || *v > range.hi ||
        (range.whole && *v != std::floor(*v)))
      v.reset();
  }
  if (v) return v;
  const std::string shown = s.size() > 40 ? s.substr(0, 40) + "..." : s;
  error = std::string(option) + ": expected " + std::string(range.what) + " " +
          (range.above_lo ? "more than " + bound_text(range.lo) + " and at most "
                          : "between " + bound_text(range.lo) + " and ") +
          bound_text(range.hi) + ", got '" + shown + "'";
  return std::nullopt;
}

std::optional<int> parse_options(const Command& command, std::span<char*> args,
                                 std::vector<std::string>* rest) {
  auto fail = [&](const std::string& msg) -> std::optional<int> { return usage_error(command.name, msg); };
  for (size_t pos = 0; pos < args.size(); ++pos) {
    std::string_view a = args[pos];
    if (!is_option(a)) {
      if (!command.operand) {  // the profiled command starts here
        if (a == "--") ++pos;
        if (rest) rest->assign(args.begin() + static_cast<ptrdiff_t>(pos), args.end());
        return std::nullopt;
      }
      std::string error;
      if (a == "--")
        error = command.separator ? command.separator() : "";
      else
        error = command.operand(std::string(a));
      if (!error.empty()) return fail(error);
      continue;
    }
    if (match(kHelpOption, a)) {
      std::fputs(help_text(command).c_str(), stdout);
      return 0;
    }
    const Option* found = nullptr;
    std::optional<Match> m;
    for (const Option& o : command.options) {
      if (o.long_name.empty()) continue;  // a heading
      if ((m = match(o, a))) {
        found = &o;
        break;
      }
    }
    if (!found) return fail("unknown option '" + std::string(a) + "'");
    if (m->needs_value) {
      if (++pos == args.size()) return fail("option " + std::string(m->spelled) + " needs a value");
      m->value = args[pos];
    }
    if (std::string error = found->take(m->value); !error.empty()) return fail(error);
  }
  return std::nullopt;
}

std::string help_text(const Command& command) {
  std::string out(command.usage);
  auto add = [&](const Option& o) {
    if (o.long_name.empty()) {
      out.append(o.help).append("\n");
      return;
    }
    std::string left = "  ";
    if (!o.short_name.empty()) left.append(o.short_name).append(", ");
    left.append(o.long_name);
    if (!o.value.empty()) left.append(o.value.front() == '[' ? "" : " ").append(o.value);
    // Names too long for the column put the help on the next line.
    left.append(left.size() + 2 <= kHelpColumn ? kHelpColumn - left.size() : 0, ' ');
    if (left.size() > kHelpColumn) left.append("\n").append(kHelpColumn, ' ');
    out.append(left);
    for (char ch : o.help) {
      out += ch;
      if (ch == '\n') out.append(kHelpColumn, ' ');
    }
    out += '\n';
  };
  for (const Option& o : command.options) add(o);
  add(kHelpOption);
  return out;
}

Take store(std::string& into) {
  return [&into](const std::string& v) {
    into = v;
    return std::string();
  };
}

Take append(std::vector<std::string>& into) {
  return [&into](const std::string& v) {
    into.push_back(v);
    return std::string();
  };
}

Take number(std::string_view option, Range range, std::function<void(double)> set) {
  return [option, range, set = std::move(set)](const std::string& v) {
    std::string error;
    if (auto n = parse_number(option, v, range, error)) set(*n);
    return error;
  };
}

Option symbol_dir_option(std::vector<std::string>& dirs, std::string_view help) {
  return {"", "--symbol-dir", "DIR", help, append(dirs)};
}

Take id_list(std::string_view option, std::string_view what, std::function<void(uint32_t)> add) {
  return [option = std::string(option), what = std::string(what) + ", each a whole number",
          add = std::move(add)](const std::string& v) {
    for (size_t start = 0; start <= v.size();) {
      const size_t comma = v.find(',', start);
      std::string error;
      auto n = parse_number(option, v.substr(start, comma == std::string::npos ? comma : comma - start),
                            {1, 4194304, what, true}, error);  // (the kernel's highest pid_max)
      if (!n) return error;
      add(static_cast<uint32_t>(*n));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return std::string();
  };
}

Option pid_option(std::vector<int>& pids, std::string_view help) {
  return {"-p", "--pid", "PID[,PID...]", help,
          id_list("--pid", "process ids", [&pids](uint32_t id) { pids.push_back(static_cast<int>(id)); })};
}

Option duration_option(double& seconds, std::string_view help) {
  // At most a year: the timer's nanoseconds must not overflow, and 1e19 is a typo.
  return {"-d", "--duration", "SECONDS", help,
          number("--duration", {0, 31536000, "a number of seconds", false, true},
                 [&seconds](double n) { seconds = n; })};
}

Option header_option(std::vector<std::string>& headers, std::string_view help) {
  return {"", "--header", "'NAME: VALUE'", help, [&headers](const std::string& v) {
            if (v.find(':') == std::string::npos) return std::string("--header needs 'NAME: VALUE'");
            headers.push_back(v);
            return std::string();
          }};
}

Option limit_option(size_t& limit, std::string_view help) {
  return {"", "--limit", "N", help, number("--limit", {1, 1e9, "a whole number", true}, [&limit](double n) {
            limit = static_cast<size_t>(n);
          })};
}

Option address_option(std::string& address, std::string_view help) {
  return {"", "--address", "ADDR", help, store(address)};
}

Option suppress_option(std::vector<std::string>& functions) {
  return {"", "--suppress", "FUNC",
          "(with --heap) leave out the allocations whose stack contains FUNC (the full\n"
          "signature or the bare name), as heaptrack_print's suppressions; says how many\n"
          "(repeatable)",
          [&functions](const std::string& v) {
            return v.empty() ? std::string("--suppress needs a function name")
                             : (functions.push_back(v), std::string());
          }};
}

Option marker_option(std::string& name) {
  return {"", "--marker", "NAME",
          "only the samples inside the program's NAME markers, on their thread\n"
          "(`fxprof report --markers` lists them)",
          [&name](const std::string& v) {
            return v.empty() ? std::string("--marker needs a marker name") : (name = v, std::string());
          }};
}

Option latency_option(bool& on) {
  return {"", "--latency", "",
          "weigh each on-CPU sample by 1/(threads of the recording running at its\n"
          "moment), as perf report --latency does: a parallel program's serial parts\n"
          "stand out (each sample left stands for one interval of its running time)",
          set(on, true)};
}

Take one_operand(std::string& into, std::string_view what) {
  return [&into, what](const std::string& v) {
    if (!into.empty()) return "one " + std::string(what) + " at a time ('" + v + "')";
    into = v;
    return std::string();
  };
}

}  // namespace fxprof::cli
