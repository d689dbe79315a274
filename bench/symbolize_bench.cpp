// Symbolization benchmark: cold and warm /symbolicate/v5 (the server's endpoint over the symbolizer) over N
// addresses of one ELF file, against llvm-symbolizer and eu-addr2line asked the same thing (function names,
// inline chains, file:line) on the same addresses, all measured in the same run, as CPU time (user + system;
// the machine is shared). Usage:
//   fxprof_symbolize_bench FILE [--count N] [--warm-rounds R]
// Addresses are drawn (fixed seed) inside the file's function symbols; the tools get them as SVMAs on stdin.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "base/fd.h"
#include "elf/elf.h"
#include "model/profile.h"
#include "server/server.h"
#include "symbolizer/elf_file.h"
#include "symbolizer/symbolizer.h"

namespace sym = fxprof::symbolizer;

namespace {

// CPU seconds of this process (user + system): this machine is shared and noisy, CPU time much less so.
double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Runs argv with stdin from `in_path`, stdout to `out_path` (default /dev/null) and stderr to /dev/null;
// returns its CPU seconds (user + system) or -1.
double run_tool(const std::vector<std::string>& argv, const std::string& in_path,
                const std::string& out_path = "/dev/null") {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int in = open(in_path.c_str(), O_RDONLY);
    int null = open("/dev/null", O_WRONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(in, 0);
    dup2(out, 1);
    dup2(null, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  // eu-addr2line exits 1 when some address has no line info: that still measures the work.
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 127) return -1;
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// llvm-symbolizer's answer per address (blocks of "function\nfile:line:col\n" lines, innermost first, a
// blank line after each address): the outermost function of each, "??" when unknown.
std::vector<std::string> llvm_outermost(const std::string& path) {
  std::vector<std::string> out;
  auto text = fxprof::read_file(path);
  if (!text) return out;
  std::string last;
  size_t line_no = 0;
  for (size_t at = 0; at < text->size();) {
    size_t nl = text->find('\n', at);
    if (nl == std::string::npos) nl = text->size();
    const std::string line = text->substr(at, nl - at);
    at = nl + 1;
    if (line.empty()) {
      if (line_no > 0) out.push_back(last);
      line_no = 0;
      continue;
    }
    if (line_no++ % 2 == 0) last = line;
  }
  if (line_no > 0) out.push_back(last);
  return out;
}

// A name without its parameter list, for comparing two demanglers' spellings of one function.
std::string without_params(const std::string& n) {
  const size_t p = n.find('(');
  return p == std::string::npos || p == 0 ? n : n.substr(0, p);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [--count N] [--warm-rounds R] [--no-tools]\n", argv[0]);
    return 2;
  }
  std::string file = argv[1];
  size_t count = 10000;
  int warm_rounds = 20;
  bool tools = true;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--no-tools") tools = false;
    if (i + 1 >= argc) break;
    if (a == "--count") count = std::strtoull(argv[++i], nullptr, 10);
    if (a == "--warm-rounds") warm_rounds = std::atoi(argv[++i]);
  }
  auto obj = sym::ElfObject::open(file);
  if (!obj) {
    std::fprintf(stderr, "%s\n", obj.error().c_str());
    return 1;
  }
  std::string breakpad = fxprof::elf::breakpad_id((*obj)->build_id());
  uint64_t base = (*obj)->base_svma();
  sym::SymbolTable table;
  table.add_elf_symbols(**obj, base);
  table.finish();
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (size_t i = 0; i < table.size(); ++i) {
    const auto& s = table.at(i);
    if (s.size >= 4) ranges.emplace_back(s.start, s.size);
  }
  if (ranges.empty()) {
    std::fprintf(stderr, "%s has no sized function symbols\n", file.c_str());
    return 1;
  }
  std::mt19937_64 rng(12345);
  std::vector<uint64_t> addrs;
  for (size_t i = 0; i < count; ++i) {
    auto [start, size] = ranges[rng() % ranges.size()];
    addrs.push_back(start + rng() % size);
  }
  std::string debug_name = file.substr(file.rfind('/') + 1);
  std::string request =
      "{\"jobs\":[{\"memoryMap\":[[\"" + debug_name + "\",\"" + breakpad + "\"]],\"stacks\":[[";
  for (size_t i = 0; i < addrs.size(); ++i) {
    if (i) request += ',';
    request += "[0," + std::to_string(addrs[i]) + "]";
  }
  request += "]]}]}";
  char tmpl[] = "/tmp/fxprof-bench-XXXXXX";
  int fd = mkstemp(tmpl);
  std::string list;
  for (uint64_t a : addrs) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx\n", static_cast<unsigned long long>(a + base));
    list += buf;
  }
  if (write(fd, list.data(), list.size()) != static_cast<ssize_t>(list.size())) return 1;
  close(fd);
  // eu-addr2line re-walks the DIE tree for every address (minutes for 10,000 on a C++ binary): it gets the
  // first kEuCount addresses and its time is scaled linearly (which flatters it: its startup is counted many
  // times).
  constexpr size_t kEuCount = 300;
  char eu_tmpl[] = "/tmp/fxprof-bench-eu-XXXXXX";
  int eu_fd = mkstemp(eu_tmpl);
  size_t eu_n = std::min(kEuCount, addrs.size());
  size_t cut = 0;
  for (size_t i = 0; i < eu_n; ++i) cut = list.find('\n', cut) + 1;
  if (write(eu_fd, list.data(), cut) != static_cast<ssize_t>(cut)) return 1;
  close(eu_fd);

  sym::KnownLib lib;
  lib.debug_name = debug_name;
  lib.breakpad_id = breakpad;
  lib.path = file;
  lib.code_id = fxprof::elf::hex((*obj)->build_id());
  sym::Options opts;
  opts.use_debuginfod = false;

  double cold;
  size_t found = 0, with_inlines = 0;
  {
    sym::Symbolizer s(opts);
    s.add_known_lib(lib);
    double t = cpu_now();
    auto r = fxprof::server::symbolicate_v5(s, request);
    cold = cpu_now() - t;
    if (r.http_status != 200) {
      std::fprintf(stderr, "error: %s\n", r.body.c_str());
      return 1;
    }
    std::printf("response: %zu bytes\n", r.body.size());
  }
  sym::Symbolizer s(opts);
  s.add_known_lib(lib);
  (void)fxprof::server::symbolicate_v5(s, request);
  double t = cpu_now();
  for (int i = 0; i < warm_rounds; ++i) (void)fxprof::server::symbolicate_v5(s, request);
  double warm = (cpu_now() - t) / warm_rounds;
  double t2 = cpu_now();
  for (int i = 0; i < warm_rounds; ++i) (void)s.lookup(debug_name, breakpad, addrs);
  double warm_lookup = (cpu_now() - t2) / warm_rounds;
  // Counted per address from the API (the JSON's "function" keys include the inlined frames').
  auto answers = s.lookup(debug_name, breakpad, addrs);
  if (!answers) {
    std::fprintf(stderr, "error: %s\n", answers.error().c_str());
    return 1;
  }
  for (const sym::SymbolInfo& a : *answers) {
    found += a.found;
    with_inlines += !a.inlines.empty();
  }

  double llvm = -1, eu = -1;
  char llvm_out[] = "/tmp/fxprof-bench-llvm-XXXXXX";
  close(mkstemp(llvm_out));
  if (tools)
    llvm = run_tool({"llvm-symbolizer", "--obj=" + file, "--inlining", "--functions=linkage", "--demangle"},
                    tmpl, llvm_out);
  // The answers must agree with llvm-symbolizer's (the outermost function of each address), or the times
  // compare different work.
  size_t agree = 0, compared = 0;
  std::string first_difference;
  if (llvm > 0) {
    const std::vector<std::string> theirs = llvm_outermost(llvm_out);
    for (size_t i = 0; i < theirs.size() && i < answers->size(); ++i) {
      const sym::SymbolInfo& a = (*answers)[i];
      const std::string ours = a.found ? a.function : "??";
      ++compared;
      if (ours == theirs[i] || without_params(ours) == without_params(theirs[i]))
        ++agree;
      else if (first_difference.empty())
        first_difference =
            std::to_string(addrs[i] + base) + ": fxprof '" + ours + "', llvm-symbolizer '" + theirs[i] + "'";
    }
  }
  unlink(llvm_out);
  if (tools) eu = run_tool({"eu-addr2line", "-e", file, "-f", "-i", "-C"}, eu_tmpl);
  if (eu > 0) eu *= static_cast<double>(addrs.size()) / static_cast<double>(eu_n);
  unlink(tmpl);
  unlink(eu_tmpl);

  std::printf("file: %s (%zu symbols)\n", file.c_str(), table.size());
  std::printf("addresses: %zu, named: %zu, with inlines: %zu\n", addrs.size(), found, with_inlines);
  std::printf("fxprof cold  (load + index + answer JSON): %8.1f ms CPU\n", cold * 1e3);
  std::printf("fxprof warm  /symbolicate/v5 JSON:         %8.2f ms CPU = %.2f M addresses/s\n", warm * 1e3,
              addrs.size() / warm / 1e6);
  std::printf("fxprof warm  lookup() API:                 %8.2f ms CPU = %.2f M addresses/s\n",
              warm_lookup * 1e3, addrs.size() / warm_lookup / 1e6);
  if (llvm > 0)
    std::printf("llvm-symbolizer:                           %8.1f ms CPU -> fxprof cold is %.2fx its time\n",
                llvm * 1e3, cold / llvm);
  else
    std::printf("llvm-symbolizer: not available\n");
  if (llvm > 0) {
    std::printf("answers agree with llvm-symbolizer's (outermost function): %zu of %zu addresses%s%s\n",
                agree, compared,
                first_difference.empty() ? "" : "; first difference: ", first_difference.c_str());
    if (compared < addrs.size() || agree * 100 < compared * 99) {
      std::fprintf(stderr, "error: fewer than 99%% of the answers agree with llvm-symbolizer's\n");
      return 1;
    }
  }
  if (eu > 0)
    std::printf("eu-addr2line (%zu addresses, scaled):     %8.1f ms CPU -> fxprof cold is %.3fx its time\n",
                eu_n, eu * 1e3, cold / eu);
  else
    std::printf("eu-addr2line: not available\n");
  return 0;
}
