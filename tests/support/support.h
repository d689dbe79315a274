// Test support shared by every test binary: running real commands (fxprof, test programs, perf, profiler-cli)
// with a time limit, temporary folders, reading (gzip) profiles, and the paths CMake passes in.
#pragma once

#include <pwd.h>
#include <simdjson.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fxprof::test {

struct CmdResult {
  int status = -1;  // exit status, or 128+signal, or -1 when it could not start / timed out
  bool timed_out = false;
  std::string out;  // stdout
  std::string err;  // stderr
};

struct CmdOptions {
  std::map<std::string, std::string> env;  // added to (or overriding) the inherited environment
  std::chrono::seconds timeout{120};
  std::string cwd;
  std::optional<std::string> stdin_data;  // default: /dev/null
  std::optional<uid_t> uid;               // run as this user (root tests of the unprivileged path)
  std::optional<gid_t> gid;
};

// Runs argv[0] (searched in PATH) and collects its output. Kills the whole process group on timeout.
CmdResult run(const std::vector<std::string>& argv, const CmdOptions& opts = {});

// A child process that runs while the test goes on (a server, a program to attach to). Destruction sends
// SIGTERM, then SIGKILL after a second, and reaps it.
class Background {
 public:
  explicit Background(const std::vector<std::string>& argv, const CmdOptions& opts = {});
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  pid_t pid() const { return pid_; }
  // Reads stdout until a line contains `needle`; returns that line ("" on timeout or exit).
  std::string wait_for_line(const std::string& needle,
                            std::chrono::seconds timeout = std::chrono::seconds(60));
  // The same for stderr.
  std::string wait_for_err_line(const std::string& needle,
                                std::chrono::seconds timeout = std::chrono::seconds(60));
  // Sends `sig` and waits for the exit status (128+signal when killed), or -1 on timeout.
  int stop(int sig, std::chrono::seconds timeout = std::chrono::seconds(30));
  const std::string& out() const { return out_; }
  std::string err();  // what it wrote to stderr so far (reads what is available)

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  std::string out_, err_;
  size_t scanned_ = 0, err_scanned_ = 0;
  bool reaped_ = false;
};

// A fresh folder under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string source_dir();                           // the project's source folder
std::string build_dir();                            // the CMake build folder
std::string fxprof_bin();                           // build/fxprof
std::string demo_bin();                             // the bundled demo program
std::string test_program(const std::string& name);  // a program from tests/programs/
// The ordinary user the unprivileged tests run as ("fxprof-test"), created on first use. Throws when it
// cannot be created.
const passwd* ensure_test_user();

// Options that run a command as the test user, in `dir` (handed to that user), with HOME there. Throws when
// the user cannot be made or the folder not handed over.
CmdOptions as_test_user(const TempDir& dir);

// `text` as one gzip member (level 6), for tests that write .gz files.
std::string gzip_text(std::string_view text);

// Reads a profile file, inflating it when it is gzip (by magic, not by name). Throws on I/O errors (tests).
std::string read_profile_text(const std::string& path);

// Parses JSON text into a simdjson DOM; the parser must outlive the element.
simdjson::dom::element parse_json(simdjson::dom::parser& parser, const std::string& text);

// The structural lint of the Gecko profile rules in ../shared/docs/firefox-profiler-format.md; returns the
// problems found (empty = valid). Every profile a test writes goes through it.
std::vector<std::string> lint_gecko_profile(const std::string& json_text);

// The Firefox Profiler's own import and symbolication code, through @firefox-devtools/profiler-cli (installed
// into tests/.profiler-cli by `make test`). Each instance has its own session folder and stops its daemons
// when destroyed.
class ProfilerCli {
 public:
  ProfilerCli();
  ~ProfilerCli();
  ProfilerCli(const ProfilerCli&) = delete;
  ProfilerCli& operator=(const ProfilerCli&) = delete;
  static std::string binary();  // path of the profiler-cli script
  // `profiler-cli load FILE [--symbol-server URL]`.
  CmdResult load(const std::string& profile, const std::string& symbol_server = "");
  // `profiler-cli load ARGS...` with any options (for example --with-samply and its environment).
  CmdResult load_args(const std::vector<std::string>& args, const CmdOptions& opts = {});
  // Selects the thread named `name` (as `thread list` shows it); false if there is none.
  bool select_thread(const std::string& name);
  // Any other subcommand, e.g. {"thread", "samples-top-down"} or {"profile", "info", "--json"}.
  CmdResult cmd(const std::vector<std::string>& args, const CmdOptions& extra = {});

 private:
  TempDir session_;
};

// `fxprof load --no-open FILE` running in the background: our own server, as users run it.
class FxprofServer {
 public:
  explicit FxprofServer(const std::string& profile, const std::vector<std::string>& extra_args = {});
  // The symbol server URL (http://127.0.0.1:PORT/TOKEN) decoded from the printed Firefox Profiler URL;
  // "" if the server did not come up (then err() says why).
  const std::string& symbol_server() const { return symbol_server_; }
  const std::string& profiler_url() const { return url_; }
  std::string err() { return proc_.err(); }

 private:
  Background proc_;
  std::string url_, symbol_server_;
};

// The CPU time the test programs log (tests/programs/cpu_log.h): put env() into the program's environment,
// then expect samples = logged CPU time x frequency (CHECK_SAMPLES). The file is created world-writable, so a
// program run as another user can log too.
class CpuLog {
 public:
  CpuLog();
  static constexpr const char* kVariable = "FXPROF_TEST_CPU_LOG";
  const std::string& path() const { return path_; }
  // CPU milliseconds logged under `label`, summed over its entries (0 when none).
  double ms(const std::string& label) const;
  size_t count(const std::string& label) const;
  // Waits until `label` has been logged `times` times (programs saying they are ready); false on timeout.
  bool wait_for(const std::string& label, size_t times = 1,
                std::chrono::seconds timeout = std::chrono::seconds(60)) const;
  std::string text() const;  // the whole log, for INFO

 private:
  TempDir dir_;
  std::string path_;
};

// CPU time of a running process, all its threads (from /proc/PID/task/*/schedstat), in milliseconds.
double process_cpu_ms(pid_t pid);

// Percent-decoding of a URL component.
std::string url_decode(std::string_view s);

}  // namespace fxprof::test

// What a sample count must be: CPU time x frequency, within +-25% (the cpu-clock event samples CPU time, so
// this holds on a loaded machine too; a floor would let a recorder that loses most samples pass).
#define CHECK_SAMPLES(samples, cpu_ms, hz)                                                                   \
  do {                                                                                                       \
    const double fxprof_expected_ = (cpu_ms) * (hz) / 1000.0;                                                \
    const double fxprof_got_ = static_cast<double>(samples);                                                 \
    INFO("samples " << fxprof_got_ << ", expected " << fxprof_expected_ << " (" << (cpu_ms) << " ms CPU at " \
                    << (hz) << " Hz) +-25%");                                                                \
    CHECK(fxprof_expected_ > 0);                                                                             \
    CHECK(fxprof_got_ >= 0.75 * fxprof_expected_);                                                           \
    CHECK(fxprof_got_ <= 1.25 * fxprof_expected_);                                                           \
  } while (0)
