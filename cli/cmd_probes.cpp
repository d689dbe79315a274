// `fxprof probes BINARY`: the USDT probes (<sys/sdt.h>'s SystemTap notes) a binary offers, as `perf list
// sdt` and `bpftrace -l 'usdt:BINARY:*'` list them, with their arguments and semaphores.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/json_writer.h"
#include "base/terminal.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "elf/usdt.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof probes [OPTIONS] BINARY\n"
    "\n"
    "Lists the USDT probes of BINARY (a path, or a program found in PATH): the static tracepoints that\n"
    "<sys/sdt.h> (DTRACE_PROBE, STAP_PROBE) leaves in a program or library, as PROVIDER:NAME with each\n"
    "argument's size and location. A probe with a semaphore computes its arguments only while traced.\n"
    "\n";

constexpr std::string_view kCommand = "probes";

// BINARY as given when it names a path, else the first executable of that name in PATH (as a shell would).
std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (!dirs.empty()) {
    const size_t colon = std::min(dirs.find(':'), dirs.size());
    std::string dir(dirs.substr(0, colon));
    dirs.remove_prefix(std::min(colon + 1, dirs.size()));
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

void print_json(const std::string& path, const std::vector<elf::UsdtProbe>& probes) {
  std::string out;
  JsonWriter w(out);
  w.begin_object().key("binary").value(path).key("probes").begin_array();
  for (const elf::UsdtProbe& p : probes) {
    w.begin_object().key("provider").value(p.provider).key("name").value(p.name);
    w.key("address").value(hex(p.address));
    if (p.semaphore != 0) w.key("semaphore").value(hex(p.semaphore));
    w.key("arguments").begin_array();
    for (const elf::UsdtArgument& a : p.args)
      w.begin_object()
          .key("size")
          .value(uint64_t(a.size))
          .key("signed")
          .value(a.is_signed)
          .key("location")
          .value(a.location)
          .end_object();
    w.end_array().end_object();
  }
  w.end_array().end_object();
  std::printf("%s\n", out.c_str());
}

void print_text(const std::string& path, const std::vector<elf::UsdtProbe>& probes) {
  if (probes.empty()) {
    std::printf("%s has no USDT probes (no .note.stapsdt section)\n", terminal_safe(path).c_str());
    return;
  }
  std::printf("%zu USDT probe%s in %s:\n", probes.size(), probes.size() == 1 ? "" : "s",
              terminal_safe(path).c_str());
  for (const elf::UsdtProbe& p : probes) {
    std::string line = "  " + p.provider + ":" + p.name;
    line += "  (" + std::to_string(p.args.size()) + (p.args.size() == 1 ? " argument" : " arguments");
    if (!p.arguments.empty()) line += ": " + p.arguments;
    line += p.semaphore != 0 ? "; semaphore)" : ")";
    std::printf("%s\n", terminal_safe(line).c_str());
  }
}

}  // namespace

int cmd_probes(std::span<char*> args) {
  std::string binary;
  bool json = false;
  const Command command{kCommand,
                        kUsage,
                        {{"", "--json", "",
                          "print the probes as JSON (provider, name, address, semaphore, "
                          "arguments)",
                          set(json, true)}},
                        one_operand(binary, "binary")};
  if (auto exit = parse_options(command, args)) return *exit;
  if (binary.empty()) return usage_error(kCommand, "which binary? give BINARY (a path or a program in PATH)");
  const std::string path = find_program(binary);
  auto probes = elf::read_usdt_probes(path);
  if (!probes) {
    say(probes.error());
    return 1;
  }
  if (json)
    print_json(path, *probes);
  else
    print_text(path, *probes);
  return 0;
}

}  // namespace fxprof::cli
