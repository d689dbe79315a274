#include "cli/options.h"

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

std::optional<double> parse_number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') return std::nullopt;
  return v;
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

Take number(std::function<bool(double)> ok, std::string error, std::function<void(double)> set) {
  return [ok = std::move(ok), error = std::move(error), set = std::move(set)](const std::string& v) {
    auto n = parse_number(v);
    if (!n || !ok(*n)) return error;
    set(*n);
    return std::string();
  };
}

Option symbol_dir_option(std::vector<std::string>& dirs, std::string_view help) {
  return {"", "--symbol-dir", "DIR", help, append(dirs)};
}

Option pid_option(std::vector<int>& pids, std::string_view help) {
  return {"-p", "--pid", "PID[,PID...]", help, [&pids](const std::string& v) {
            for (size_t start = 0; start <= v.size();) {
              const size_t comma = v.find(',', start);
              auto n = parse_number(v.substr(start, comma == std::string::npos ? comma : comma - start));
              if (!n || *n < 1 || *n != static_cast<int>(*n))
                return std::string("--pid needs process ids, like 123,456");
              pids.push_back(static_cast<int>(*n));
              if (comma == std::string::npos) break;
              start = comma + 1;
            }
            return std::string();
          }};
}

Option duration_option(double& seconds, std::string_view help) {
  return {"-d", "--duration", "SECONDS", help,
          number([](double n) { return n > 0; }, "--duration needs a positive number of seconds",
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
  return {"", "--limit", "N", help,
          number([](double n) { return !(n < 1 || n != static_cast<size_t>(n)); },
                 "--limit needs a positive number", [&limit](double n) { limit = static_cast<size_t>(n); })};
}

Option address_option(std::string& address, std::string_view help) {
  return {"", "--address", "ADDR", help, store(address)};
}

Option marker_option(std::string& name) {
  return {"", "--marker", "NAME",
          "only the samples inside the program's NAME markers, on their thread\n"
          "(`fxprof report --markers` lists them)",
          [&name](const std::string& v) {
            return v.empty() ? std::string("--marker needs a marker name") : (name = v, std::string());
          }};
}

Take one_operand(std::string& into, std::string_view what) {
  return [&into, what](const std::string& v) {
    if (!into.empty()) return "one " + std::string(what) + " at a time ('" + v + "')";
    into = v;
    return std::string();
  };
}

}  // namespace fxprof::cli
