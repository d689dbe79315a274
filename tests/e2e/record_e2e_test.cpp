// fxprof record, end to end: real programs, real perf events, profiles linted and then loaded and
// symbolicated by the Firefox Profiler's own code (profiler-cli) through our own server.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include "tests/e2e/e2e.h"

using namespace fxprof::test;

namespace {

void require_lint_clean(const std::string& text) {
  auto problems = lint_gecko_profile(text);
  for (const auto& p : problems) UNSCOPED_INFO(p);
  REQUIRE(problems.empty());
}

// True when profiler-cli's call tree `tree` has a frame `lib!name`, inlined if `inlined`. GCC's DWARF names
// the demo's functions plainly, clang's by their linkage names ("(anonymous namespace)::name(args)"): the
// sanitizer build is clang's, the user's build usually GCC's, and both must pass.
bool has_frame(const std::string& tree, const std::string& lib, const std::string& name,
               bool inlined = false) {
  for (size_t at = tree.find(lib + "!"); at != std::string::npos; at = tree.find(lib + "!", at + 1)) {
    size_t p = at + lib.size() + 1;
    if (tree.compare(p, 23, "(anonymous namespace)::") == 0) p += 23;
    if (tree.compare(p, name.size(), name) != 0) continue;
    char next = p + name.size() < tree.size() ? tree[p + name.size()] : ' ';
    if (next != ' ' && next != '(') continue;  // a longer name with this prefix
    if (!inlined) return true;
    auto end = tree.find(" [total", p);
    if (tree.substr(p, end - p).find("(inl)") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("the demo: threads, names and a symbolicated call tree through our server", "[e2e]") {
  TempDir dir;
  std::string out = dir.file("demo.json.gz");
  auto r = record(out, {demo_bin()});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("fxprof: recorded") != std::string::npos);
  std::string text = read_profile_text(out);
  require_lint_clean(text);

  auto threads = summarize(text);
  const ThreadSummary* main_t = find_thread(threads, "GeckoMain");
  REQUIRE(main_t != nullptr);
  CHECK(main_t->process == "fxprof_demo");
  CHECK(threads.size() >= 3);  // the demo's named worker threads

  ProfilerCli cli;
  auto server = load_through_fxprof(cli, out);
  CHECK(server->symbol_server().rfind("http://127.0.0.1:", 0) == 0);
  REQUIRE(cli.select_thread("GeckoMain"));
  auto tree = cli.cmd({"thread", "samples-top-down"});
  INFO(tree.out << tree.err);
  REQUIRE(tree.status == 0);
  // Symbolicated by our server: names, not addresses, rooted at the program's entry.
  CHECK(tree.out.find("fxprof_demo!_start") != std::string::npos);
  CHECK(tree.out.find("fxprof_demo!main") != std::string::npos);
  CHECK(tree.out.find("libc.so.6!") != std::string::npos);
  // A worker thread: its start routine under libc's thread entry, and the inlined helper.
  REQUIRE(cli.select_thread("demo-primes"));
  auto primes = cli.cmd({"thread", "samples-top-down"});
  INFO(primes.out);
  CHECK(primes.out.find("libc.so.6!start_thread") != std::string::npos);
  CHECK(has_frame(primes.out, "fxprof_demo", "demo_compute_primes"));
  CHECK(has_frame(primes.out, "fxprof_demo", "demo_is_prime", /*inlined=*/true));
}

TEST_CASE("named threads each get their samples", "[e2e]") {
  TempDir dir;
  std::string out = dir.file("threads.json");
  CpuLog cpu;
  auto r = record(out, {test_program("e2e_threads")}, {}, {.env = {{CpuLog::kVariable, cpu.path()}}});
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::string text = read_profile_text(out);
  require_lint_clean(text);
  auto threads = summarize(text);
  for (std::string name : {"GeckoMain", "e2e-alpha", "e2e-beta"}) {
    const ThreadSummary* t = find_thread(threads, name);
    INFO(name << "\n" << cpu.text());
    REQUIRE(t != nullptr);
    // Each thread's samples are its own CPU time at 1 kHz (about 300 ms each).
    CHECK_SAMPLES(t->samples, cpu.ms(name == "GeckoMain" ? "main" : name), 1000);
    CHECK(t->process == "e2e_threads");
  }

  ProfilerCli cli;
  auto server = load_through_fxprof(cli, out);
  REQUIRE(cli.select_thread("e2e-alpha"));
  auto tree = cli.cmd({"thread", "samples-top-down"});
  INFO(tree.out);
  CHECK(tree.out.find("alpha_spin") != std::string::npos);
  CHECK(tree.out.find("beta_spin") == std::string::npos);
}

TEST_CASE("kernel frames sit under a syscall-heavy function", "[e2e]") {
  TempDir dir;
  std::string out = dir.file("sys.json");
  auto r = record(out, {test_program("e2e_syscalls")});
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::string text = read_profile_text(out);
  require_lint_clean(text);
  auto threads = summarize(text);
  const ThreadSummary* t = find_thread(threads, "GeckoMain");
  REQUIRE(t != nullptr);
  CHECK(t->kernel_frames > 0);

  ProfilerCli cli;
  auto server = load_through_fxprof(cli, out);
  REQUIRE(cli.select_thread("GeckoMain"));  // never whichever thread profiler-cli selects first
  auto tree = cli.cmd({"thread", "samples-bottom-up"});
  INFO(tree.out);
  // Bottom-up: kernel functions are the leaves, read_zero_loop is among their callers.
  CHECK(tree.out.find("[kernel.kallsyms]") != std::string::npos);
  auto funcs = cli.cmd({"thread", "samples-top-down", "--search", "read_zero_loop"});
  INFO(funcs.out);
  CHECK(funcs.out.find("read_zero_loop") != std::string::npos);
  CHECK(funcs.out.find("[kernel.kallsyms]") != std::string::npos);
}

TEST_CASE("fxprof exits as the program did, and still writes the profile", "[e2e]") {
  struct Case {
    std::vector<std::string> args;
    int status;
  };
  for (const Case& c : {Case{{}, 0}, Case{{"exit", "3"}, 3}, Case{{"segv"}, 128 + 11},
                        Case{{"abort"}, 128 + 6}, Case{{"kill"}, 128 + 9}}) {
    TempDir dir;
    std::string out = dir.file("p.json.gz");
    std::vector<std::string> argv{test_program("e2e_exit")};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    CpuLog cpu;
    auto r = record(out, argv, {}, {.env = {{CpuLog::kVariable, cpu.path()}}});
    INFO(r.err);
    CHECK(r.status == c.status);
    REQUIRE(access(out.c_str(), F_OK) == 0);
    std::string text = read_profile_text(out);
    require_lint_clean(text);
    auto threads = summarize(text);
    const ThreadSummary* t = find_thread(threads, "GeckoMain");
    REQUIRE(t != nullptr);
    CHECK_SAMPLES(t->samples, cpu.ms("main"), 1000);  // ~150 ms busy before the exit
  }
}

TEST_CASE("a command that cannot run: one line, exit 127, no profile", "[e2e]") {
  TempDir dir;
  std::string out = dir.file("p.json.gz");
  auto r = record(out, {"/nonexistent/fxprof-no-such-program"});
  CHECK(r.status == 127);
  CHECK(r.err == "fxprof: cannot run '/nonexistent/fxprof-no-such-program': No such file or directory\n");
  CHECK(access(out.c_str(), F_OK) != 0);
  auto r2 = record(out, {"fxprof-no-such-program-in-path"});
  CHECK(r2.status == 127);
  CHECK(r2.err == "fxprof: cannot run 'fxprof-no-such-program-in-path': No such file or directory\n");
}

TEST_CASE("record -d: a program that ends while fxprof serves is reaped, not left a zombie", "[e2e]") {
  TempDir dir;
  const std::string fifo = dir.file("fifo"), pid_file = dir.file("pid");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // The program waits on the FIFO past the 0.2 s recorded, until the test writes to it while fxprof serves.
  Background rec({fxprof_bin(), "record", "-d", "0.2", "-n", "-q", "-o", dir.file("p.json.gz"), "--", "sh",
                  "-c", "echo $$ > " + pid_file + "; read x < " + fifo});
  REQUIRE_FALSE(rec.wait_for_line("/from-url/").empty());
  std::ifstream pid_in(pid_file);
  int pid = 0;
  REQUIRE(pid_in >> pid);
  {
    std::ofstream w(fifo);
    w << "go\n";
  }
  // The exit is the program's; the reaping fxprof's: up to 20 s for both on a busy machine.
  const std::string proc = "/proc/" + std::to_string(pid);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (::access(proc.c_str(), F_OK) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ifstream stat(proc + "/stat");
  std::string line;
  std::getline(stat, line);
  INFO("still there: " << line);
  CHECK(::access(proc.c_str(), F_OK) != 0);
  CHECK(rec.stop(SIGINT) == 0);
}
