// fxprof: a sampling profiler for Linux whose profiles open in the Firefox Profiler.
#include <unistd.h>

#include <cstdio>
#include <new>
#include <span>
#include <string_view>

#include "cli/commands.h"

namespace {

constexpr const char* kUsage =
    "fxprof: a sampling profiler for Linux whose profiles open in the Firefox Profiler\n"
    "\n"
    "Usage:\n"
    "  fxprof record [OPTIONS] [--] COMMAND [ARGS...]   launch COMMAND and profile it\n"
    "  fxprof record [OPTIONS] -p PID[,PID...]          profile running processes until Ctrl+C\n"
    "  fxprof import [OPTIONS] FILE                     make a profile of a perf.data file and open it\n"
    "  fxprof load [OPTIONS] FILE                       serve a saved profile and open it\n"
    "  fxprof symbolicate IN -o OUT                     bake symbols into a profile to share it\n"
    "  fxprof export folded|pprof|svg IN [-o OUT]       write a profile as folded stacks, pprof or a flame "
    "graph\n"
    "  fxprof report [OPTIONS] IN                       top functions and call tree in the terminal\n"
    "  fxprof diff [OPTIONS] BASE NEW                   what changed between two profiles (a CI gate)\n"
    "  fxprof share [OPTIONS] FILE                      upload a profile and print a link to share\n"
    "  fxprof push --pyroscope URL|--parca ADDR FILE    send a profile as pprof to Pyroscope or Parca\n"
    "  fxprof agent --pyroscope URL|--parca ADDR        profile the machine without end, pushing every 10 s\n"
    "  fxprof stat [OPTIONS] [--] COMMAND [ARGS...]     count events (page faults, cycles...) like perf "
    "stat\n"
    "  fxprof probes [OPTIONS] BINARY                   list a program's USDT probes (sys/sdt.h)\n"
    "\n"
    "Run `fxprof <command> --help` for the options of each command.\n";

// Out of memory (a huge or hostile profile, a `ulimit -v`) is a one-line error and exit status 1, not an
// abort: the first allocation that fails ends the program here. Nothing is written under an output's name
// (an unnamed temporary file vanishes with the process). write(2): the heap is what just failed.
[[noreturn]] void out_of_memory() {
  static constexpr char kMessage[] = "fxprof: out of memory\n";
  (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  std::set_new_handler(out_of_memory);
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string_view cmd = argv[1];
  std::span<char*> rest(argv + 2, static_cast<size_t>(argc - 2));
  if (cmd == "record") return fxprof::cli::cmd_record(rest);
  if (cmd == "import") return fxprof::cli::cmd_import(rest);
  if (cmd == "load") return fxprof::cli::cmd_load(rest);
  if (cmd == "symbolicate") return fxprof::cli::cmd_symbolicate(rest);
  if (cmd == "export") return fxprof::cli::cmd_export(rest);
  if (cmd == "report") return fxprof::cli::cmd_report(rest);
  if (cmd == "diff") return fxprof::cli::cmd_diff(rest);
  if (cmd == "share") return fxprof::cli::cmd_share(rest);
  if (cmd == "push") return fxprof::cli::cmd_push(rest);
  if (cmd == "stat") return fxprof::cli::cmd_stat(rest);
  if (cmd == "probes") return fxprof::cli::cmd_probes(rest);
  if (cmd == "agent") return fxprof::cli::cmd_agent(rest);
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "--version" || cmd == "-V") {
    std::puts("fxprof 0.1.0");
    return 0;
  }
  std::fprintf(stderr, "fxprof: unknown command '%.*s' (try `fxprof --help`)\n", static_cast<int>(cmd.size()),
               cmd.data());
  return 2;
}
