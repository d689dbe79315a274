// `fxprof diff BASE NEW`: what changed between two profiles: a table of the functions whose share changed
// most, a differential flame graph, and optionally the Firefox Profiler's comparison view of both.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "base/signals.h"
#include "base/temp_dir.h"
#include "base/terminal.h"
#include "base/url.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/profile_input.h"
#include "gecko/gecko.h"
#include "server/server.h"
#include "sinks/diff.h"
#include "sinks/heap_diff.h"
#include "sinks/heap_report.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof diff [OPTIONS] BASE NEW\n"
    "       fxprof diff [OPTIONS] BASE1 BASE2... -- NEW1 NEW2...\n"
    "\n"
    "Compares two saved profiles (for example before and after a change), symbolicated on the way. Prints\n"
    "the functions whose share of on-CPU samples changed most (self and total, in percentage points of each\n"
    "profile's samples, so runs of different length compare), and writes a differential flame graph: NEW's\n"
    "flame graph with boxes coloured by the change of their share (red grew, blue shrank).\n"
    "With several runs per side (before and after `--`), shares are each side's mean and the spread of a\n"
    "side's runs is shown; the flame graph compares the first run of each side.\n"
    "With --heap, compares the heaps of two profiles recorded with --heap instead: bytes and blocks\n"
    "allocated and leaked per allocation site, base and new (no flame graph).\n"
    "\n";

constexpr std::string_view kCommand = "diff";

// Serves both (already symbolicated) profiles until SIGINT/SIGTERM and prints the comparison URL.
// `port` 0: any free ports; else base on `port`, new on `port`+1, exactly.
int serve_both(model::Profile& base, model::Profile& next, const std::string& address, int port) {
  TempFolder dir("fxprof-diff");
  if (dir.path().empty()) {
    std::fprintf(stderr, "fxprof: cannot make a temporary folder\n");
    return 1;
  }
  const std::string files[2] = {dir.path() + "/base.json.gz", dir.path() + "/new.json.gz"};
  model::Profile* profiles[2] = {&base, &next};
  for (int i = 0; i < 2; ++i) {
    profiles[i]->meta.presymbolicated = true;  // names are in: the comparison view does not symbolicate
    if (auto s = gecko::write_gecko_profile(*profiles[i], files[i]); !s) {
      say(s.error());
      return 1;
    }
  }
  const sigset_t set = stop_signals();
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &set, &old);  // before the server threads start: they inherit it
  symbolizer::Symbolizer symbols;
  std::unique_ptr<server::ProfileServer> servers[2];
  for (int i = 0; i < 2; ++i) {
    server::ProfileServer::Config c;
    c.profile_path = files[i];
    c.address = address;
    c.port = port == 0 ? 0 : port + i;
    c.port_exact = port != 0;
    auto s = server::ProfileServer::start(c, symbols);
    if (!s) {
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      say(s.error());
      return 1;
    }
    servers[i] = std::move(*s);
  }
  // Each profile of the comparison must select a thread, or the front end refuses the URL ("No thread has
  // been selected in profile 0").
  auto view = [&](const server::ProfileServer& s, const model::Profile& p) {
    return from_url_link(s.profile_url(), "/calltree/?" + gecko::gecko_view_query(p));
  };
  std::printf("base profile: %s\nnew profile:  %s\n%s/compare/?profiles[]=%s&profiles[]=%s\n",
              servers[0]->profile_url().c_str(), servers[1]->profile_url().c_str(), profiler_origin().c_str(),
              url_encode(view(*servers[0], base)).c_str(), url_encode(view(*servers[1], next)).c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "fxprof: open the comparison URL above; Ctrl+C stops serving\n");
  int sig = 0;
  sigwait(&set, &sig);
  servers[0]->stop();
  servers[1]->stop();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return 0;
}

// What diff's command line says.
struct DiffArgs {
  InputOptions input;
  std::string out = "diff.svg", address = "127.0.0.1", gate_function;
  int port = 0;
  std::vector<std::string> files, new_files;
  bool separated = false;  // BASE... -- NEW...
  size_t limit = 10;
  bool serve = false, markdown = false, heap = false;
  std::optional<double> fail_above;
  sinks::SvgOptions svg;
  sinks::Clock clock = sinks::Clock::Cpu;
};

// diff's table. Long because it is the table: one row an option, in --help's order.
Command diff_command(DiffArgs& a) {
  return Command{
      kCommand,
      kUsage,
      {
          {"", "--cpu-only", "", "compare shares of on-CPU samples (the default)",
           set(a.clock, sinks::Clock::Cpu)},
          {"", "--wall", "",
           "compare shares of on-CPU and blocked samples (never preempted ones:\n"
           "they measure the machine's load, not the program)",
           set(a.clock, sinks::Clock::Wall)},
          {"", "--heap", "",
           "compare the heaps instead (profiles recorded with --heap): per site, bytes\n"
           "and blocks allocated and leaked, base and new",
           set(a.heap, true)},
          suppress_option(a.input.suppress),
          {"", "--fail-above", "P",
           "a CI gate: exit 3 when a function's self share grew by more than P\n"
           "percentage points beyond the sampling error of both shares and by more\n"
           "than the spread of either side's runs. With --heap: when a site's bytes\n"
           "allocated or leaked grew by more than P% of BASE's bytes allocated\n"
           "(beyond the sampling error of sampled profiles)",
           number("--fail-above", {0, 100, "percentage points"}, [&](double n) { a.fail_above = n; })},
          {"", "--function", "NAME",
           "with --fail-above: gate on NAME's total share instead (the full\n"
           "signature or the bare name: hash_block finds app::hash_block(char const*))",
           store(a.gate_function)},
          {"", "--markdown", "", "print the table (and the gate's verdict) as Markdown, for a pull request",
           set(a.markdown, true)},
          {"-o", "--output", "SVG",
           "the differential flame graph (default diff.svg; \"-\" for standard output)", store(a.out)},
          limit_option(a.limit, "rows of the table (default 10)"),
          {"", "--no-inline", "", "inlined functions count as the function they were inlined into",
           set(a.svg.tree.inlined, false)},
          symbol_dir_option(a.input.symbols.symbol_dirs),
          marker_option(a.input.marker),
          {"", "--serve", "",
           "also serve both profiles (symbols baked in) and print the Firefox Profiler's\n"
           "comparison URL; runs until Ctrl+C",
           set(a.serve, true)},
          address_option(a.address, "address to serve on with --serve (default 127.0.0.1)"),
          {"-P", "--port", "PORT",
           "port of the first profile's server with --serve, the second's is PORT+1\n"
           "(default: any free ports)",
           number("--port", {1, 65534, "a port number (the second profile takes PORT+1)", true},
                  [&](double n) { a.port = static_cast<int>(n); })},
      },
      [&](const std::string& v) {
        (a.separated ? a.new_files : a.files).push_back(v);
        return std::string();
      },
      [&] {
        if (a.separated) return std::string("one `--` between the base runs and the new runs");
        a.separated = true;
        return std::string();
      }};
}

// Parses and checks the arguments: nullopt to go on, else the exit status (after --help or an error).
std::optional<int> parse_diff_args(std::span<char*> args, DiffArgs& a) {
  if (auto exit = parse_options(diff_command(a), args)) return *exit;
  if (!a.separated) {
    if (a.files.size() != 2)
      return usage_error(kCommand, "give two profiles: BASE NEW (or BASE... -- NEW...)");
    a.new_files.push_back(a.files.back());
    a.files.pop_back();
  }
  if (a.files.empty() || a.new_files.empty())
    return usage_error(kCommand, "give at least one profile on each side of `--`");
  if (!a.gate_function.empty() && !a.fail_above)
    return usage_error(kCommand, "--function goes with --fail-above");
  if (a.serve && (a.files.size() > 1 || a.new_files.size() > 1))
    return usage_error(kCommand, "--serve compares one profile with one profile");
  if (!a.input.suppress.empty() && !a.heap) return usage_error(kCommand, "--suppress goes with --heap");
  if (a.heap && (a.files.size() > 1 || a.new_files.size() > 1))
    return usage_error(kCommand, "--heap compares one profile with one profile");
  if (a.heap && (a.serve || a.markdown || a.clock != sinks::Clock::Cpu))
    return usage_error(kCommand, "--heap goes without --serve, --markdown and --wall");
  return std::nullopt;
}

// --fail-above: the functions over the gate (`failures`) and the verdict line ("" without a gate).
std::string gate_verdict(const sinks::Diff& d, const DiffArgs& a,
                         std::vector<const sinks::DiffRow*>& failures) {
  if (!a.fail_above) return std::string();
  const std::string& gate_function = a.gate_function;
  failures = sinks::gate_failures(d, *a.fail_above, gate_function);
  char buf[600];
  const bool self = gate_function.empty();
  const char* error = d.base_lost + d.new_lost ? "sampling error and lost records" : "sampling error";
  if (!failures.empty())
    std::snprintf(buf, sizeof buf, "gate failed: %s %s grew %+.2f points (limit %.2f, %s %.2f, spread %.2f)",
                  failures[0]->name.c_str(), self ? "self share" : "total share",
                  self ? failures[0]->self_change() : failures[0]->total_change(), *a.fail_above, error,
                  self ? failures[0]->self_margin : failures[0]->total_margin,
                  self ? failures[0]->self_noise() : failures[0]->total_noise());
  else
    std::snprintf(buf, sizeof buf,
                  "gate passed: no %s grew by more than %.2f points beyond the sampling error and the runs' "
                  "spread",
                  self ? "function's self share" : ("total share of " + gate_function).c_str(),
                  *a.fail_above);
  std::string verdict = buf;
  if (failures.size() > 1) verdict += " and " + std::to_string(failures.size() - 1) + " more";
  return verdict;
}

// --heap: the heaps' table and the gate on bytes.
int diff_heap(const model::Profile& base, const model::Profile& next, const DiffArgs& a) {
  for (const auto& [p, f] : {std::pair{&base, &a.files[0]}, std::pair{&next, &a.new_files[0]}})
    if (!sinks::has_heap_data(*p)) {
      std::fprintf(stderr, "fxprof: %s has no heap data (record it with `fxprof record --heap`)\n",
                   f->c_str());
      return 1;
    }
  const sinks::HeapDiff d = sinks::diff_heaps(base, next);
  std::fputs(sinks::format_heap_diff(d, a.limit).c_str(), stdout);
  if (!a.fail_above) return std::fflush(stdout) == 0 ? 0 : 1;
  const auto failures = sinks::heap_gate_failures(d, *a.fail_above, a.gate_function);
  const double limit = *a.fail_above / 100.0 * static_cast<double>(d.base_bytes);
  if (failures.empty()) {
    std::printf("fxprof: gate passed: no %s allocated or leaked %s more than %.2f%% of the base's %s%s\n",
                a.gate_function.empty() ? "site" : a.gate_function.c_str(),
                sinks::heap_bytes_text(static_cast<int64_t>(limit)).c_str(), *a.fail_above,
                sinks::heap_bytes_text(d.base_bytes).c_str(), d.sampled ? " beyond the sampling error" : "");
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  const sinks::HeapDiffRow& r = *failures[0];
  const bool leaked = static_cast<double>(r.leaked_change()) > limit + static_cast<double>(r.leaked_margin);
  std::printf(
      "fxprof: gate failed: %s %s grew %s (limit %s: %.2f%% of the base's %s%s)%s\n", r.name.c_str(),
      leaked ? "bytes leaked" : "bytes allocated",
      sinks::heap_bytes_text(leaked ? r.leaked_change() : r.bytes_change()).c_str(),
      sinks::heap_bytes_text(static_cast<int64_t>(limit)).c_str(), *a.fail_above,
      sinks::heap_bytes_text(d.base_bytes).c_str(),
      d.sampled
          ? ("; sampling error " + sinks::heap_bytes_text(leaked ? r.leaked_margin : r.bytes_margin)).c_str()
          : "",
      failures.size() > 1 ? (" and " + std::to_string(failures.size() - 1) + " more").c_str() : "");
  std::fflush(stdout);
  return 3;
}

}  // namespace

// The passes of a diff: parse, load both sides' runs, diff and gate, the table, the flame graph, serve.
int cmd_diff(std::span<char*> args) {
  DiffArgs a;
  if (auto exit = parse_diff_args(args, a)) return *exit;
  std::vector<model::Profile> base_runs, new_runs;
  for (auto* side : {&a.files, &a.new_files}) {
    for (const std::string& f : *side) {
      auto profile = load_profile_for_sinks(f, a.input);
      if (!profile) {
        say(profile.error());
        return profile.exit_code();
      }
      (side == &a.files ? base_runs : new_runs).push_back(std::move(*profile));
    }
  }
  model::Profile& base = base_runs.front();
  model::Profile& next = new_runs.front();
  if (a.heap) return diff_heap(base, next, a);
  sinks::Diff d = sinks::diff_runs(base_runs, new_runs, a.svg.tree.inlined, a.clock);
  if (!a.gate_function.empty() && std::none_of(d.rows.begin(), d.rows.end(), [&](const sinks::DiffRow& r) {
        return sinks::function_matches(r.name, a.gate_function);
      })) {
    std::fprintf(stderr, "fxprof: --function %s: no function of that name in either profile\n",
                 a.gate_function.c_str());
    return 1;
  }
  a.svg.tree.clock = d.clock;
  std::vector<const sinks::DiffRow*> failures;
  const std::string verdict = gate_verdict(d, a, failures);
  // With the SVG on standard output, the table goes to stderr.
  std::FILE* table_out = a.out == "-" ? stderr : stdout;
  if (a.markdown) {
    std::fputs(sinks::format_diff_markdown(d, a.limit, verdict).c_str(), table_out);
  } else {
    std::fputs(sinks::format_diff(d, a.limit).c_str(), table_out);
    if (!verdict.empty()) std::fprintf(table_out, "fxprof: %s\n", verdict.c_str());
  }
  std::fflush(table_out);
  a.svg.subtitle = a.files[0] + " -> " + a.new_files[0];
  if (auto s = sinks::write_diff_svg(base, next, a.out, a.svg); !s) {
    say(s.error());
    return s.exit_code();
  }
  if (a.out != "-") std::fprintf(stderr, "fxprof: wrote %s\n", a.out.c_str());
  if (a.serve) return serve_both(base, next, a.address, a.port);
  return failures.empty() ? 0 : 3;
}

}  // namespace fxprof::cli
