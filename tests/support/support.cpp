#include "tests/support/support.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "base/fd.h"

extern char** environ;

namespace fxprof::test {

namespace {
void set_nonblock(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Forks a child in its own process group with stdin/stdout/stderr on the given fds (-1: /dev/null for
// stdin), the options' folder, user and environment, and execs argv. Returns the child's pid.
pid_t spawn(const std::vector<std::string>& argv, const CmdOptions& opts, int in_fd, int out_fd, int err_fd) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string s(*e);
    if (!opts.env.count(s.substr(0, s.find('=')))) env_strings.push_back(s);
  }
  for (const auto& [k, v] : opts.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(in_fd >= 0 ? in_fd : ::open("/dev/null", O_RDONLY), 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    if (!opts.cwd.empty() && ::chdir(opts.cwd.c_str()) != 0) _exit(126);
    if (opts.gid && ::setgid(*opts.gid) != 0) _exit(126);
    if (opts.uid && ::setuid(*opts.uid) != 0) _exit(126);
    environ = envp.data();
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "cannot exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}
}  // namespace

CmdResult run(const std::vector<std::string>& argv, const CmdOptions& opts) {
  CmdResult res;
  int out_pipe[2], err_pipe[2], in_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0 ||
      ::pipe2(in_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe failed");
  UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]), err_r(err_pipe[0]), err_w(err_pipe[1]);
  UniqueFd in_r(in_pipe[0]), in_w(in_pipe[1]);

  pid_t pid = spawn(argv, opts, opts.stdin_data ? in_r.get() : -1, out_w.get(), err_w.get());
  out_w.reset();
  err_w.reset();
  in_r.reset();
  if (opts.stdin_data) {
    (void)!::write(in_w.get(), opts.stdin_data->data(), opts.stdin_data->size());
  }
  in_w.reset();
  set_nonblock(out_r.get());
  set_nonblock(err_r.get());

  auto deadline = std::chrono::steady_clock::now() + opts.timeout;
  bool out_open = true, err_open = true;
  char buf[65536];
  while (out_open || err_open) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      res.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd fds[2] = {{out_open ? out_r.get() : -1, POLLIN, 0}, {err_open ? err_r.get() : -1, POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r > 0) {
        (i == 0 ? res.out : res.err).append(buf, static_cast<size_t>(r));
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        (i == 0 ? out_open : err_open) = false;
      }
    }
  }
  // Output closed (or timed out): wait for the child, still bounded by the deadline.
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      status = -1;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      res.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
    }
    ::usleep(2000);
  }
  if (res.timed_out)
    res.status = -1;
  else if (WIFEXITED(status))
    res.status = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    res.status = 128 + WTERMSIG(status);
  return res;
}

Background::Background(const std::vector<std::string>& argv, const CmdOptions& opts) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe");
  pid_ = spawn(argv, opts, -1, out_pipe[1], err_pipe[1]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  out_fd_ = out_pipe[0];
  err_fd_ = err_pipe[0];
  set_nonblock(out_fd_);
  set_nonblock(err_fd_);
}

Background::~Background() {
  if (!reaped_) stop(SIGTERM, std::chrono::seconds(5));
  if (!reaped_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  ::close(out_fd_);
  ::close(err_fd_);
}

namespace {

// Reads `fd` into `text` until a line from `scanned` on contains `needle`; that line, or "" on timeout or
// the pipe's end.
std::string wait_for(int fd, std::string& text, size_t& scanned, const std::string& needle,
                     std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  for (;;) {
    size_t nl;
    while ((nl = text.find('\n', scanned)) != std::string::npos) {
      std::string line = text.substr(scanned, nl - scanned);
      scanned = nl + 1;
      if (line.find(needle) != std::string::npos) return line;
    }
    if (std::chrono::steady_clock::now() > deadline) return "";
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0)
        text.append(buf, static_cast<size_t>(n));
      else if (n == 0)
        return "";
    }
  }
}

}  // namespace

std::string Background::wait_for_line(const std::string& needle, std::chrono::seconds timeout) {
  return wait_for(out_fd_, out_, scanned_, needle, timeout);
}

std::string Background::wait_for_err_line(const std::string& needle, std::chrono::seconds timeout) {
  return wait_for(err_fd_, err_, err_scanned_, needle, timeout);
}

std::string Background::err() {
  char buf[4096];
  ssize_t n;
  while ((n = ::read(err_fd_, buf, sizeof buf)) > 0) err_.append(buf, static_cast<size_t>(n));
  return err_;
}

int Background::stop(int sig, std::chrono::seconds timeout) {
  if (reaped_) return -1;
  ::kill(pid_, sig);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    // Keep draining the pipes so the child never blocks on a full one.
    while (::read(out_fd_, buf, sizeof buf) > 0) {
    }
    err();
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    ::usleep(5000);
  }
  return -1;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/fxprof-test-XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  ::chmod(tmpl.c_str(), 0755);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string source_dir() { return FXPROF_SOURCE_DIR; }
std::string build_dir() { return FXPROF_BUILD_DIR; }
std::string fxprof_bin() { return FXPROF_BIN; }
std::string demo_bin() { return FXPROF_DEMO_BIN; }
std::string test_program(const std::string& name) {
  return std::string(FXPROF_TEST_PROGRAMS_DIR) + "/" + name;
}

const passwd* ensure_test_user() {
  constexpr const char* kUser = "fxprof-test";
  if (const passwd* pw = getpwnam(kUser)) return pw;
  auto r = run({"useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", kUser});
  const passwd* pw = getpwnam(kUser);
  if (pw == nullptr)
    throw std::runtime_error("cannot create the test user " + std::string(kUser) + ": " + r.err);
  return pw;
}

CmdOptions as_test_user(const TempDir& dir) {
  const passwd* pw = ensure_test_user();
  if (::chown(dir.path().c_str(), pw->pw_uid, pw->pw_gid) != 0)
    throw std::runtime_error("cannot hand " + dir.path() + " to the test user");
  CmdOptions opts;
  opts.uid = pw->pw_uid;
  opts.gid = pw->pw_gid;
  opts.cwd = dir.path();
  opts.env["HOME"] = dir.path();
  return opts;
}

std::string gzip_text(std::string_view text) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  std::string out(deflateBound(&z, text.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate failed");
  return out;
}

std::string read_profile_text(const std::string& path) {
  auto data = read_file(path);
  if (!data) throw std::runtime_error(data.error());
  const std::string& raw = *data;
  if (raw.size() < 2 || static_cast<unsigned char>(raw[0]) != 0x1f ||
      static_cast<unsigned char>(raw[1]) != 0x8b)
    return raw;
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) throw std::runtime_error("inflateInit failed");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      throw std::runtime_error(path + ": corrupt gzip data");
    }
    out.append(buf, sizeof buf - z.avail_out);
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      throw std::runtime_error(path + ": truncated gzip data");
    }
  }
  inflateEnd(&z);
  return out;
}

simdjson::dom::element parse_json(simdjson::dom::parser& parser, const std::string& text) {
  simdjson::dom::element doc;
  auto err = parser.parse(text).get(doc);
  if (err) throw std::runtime_error(std::string("invalid JSON: ") + simdjson::error_message(err));
  return doc;
}

ProfilerCli::ProfilerCli() = default;

ProfilerCli::~ProfilerCli() {
  CmdOptions o;
  o.env["PROFILER_CLI_SESSION_DIR"] = session_.path();
  o.timeout = std::chrono::seconds(30);
  run({binary(), "stop", "--all"}, o);
}

std::string ProfilerCli::binary() {
  return source_dir() + "/tests/.profiler-cli/node_modules/.bin/profiler-cli";
}

CmdResult ProfilerCli::cmd(const std::vector<std::string>& args, const CmdOptions& extra) {
  CmdOptions o = extra;
  o.env["PROFILER_CLI_SESSION_DIR"] = session_.path();
  if (o.timeout == std::chrono::seconds(120)) o.timeout = std::chrono::seconds(90);
  std::vector<std::string> argv{binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, o);
}

CmdResult ProfilerCli::load(const std::string& profile, const std::string& symbol_server) {
  std::vector<std::string> args{profile};
  if (!symbol_server.empty()) {
    args.push_back("--symbol-server");
    args.push_back(symbol_server);
  }
  return load_args(args);
}

CmdResult ProfilerCli::load_args(const std::vector<std::string>& load_args, const CmdOptions& opts) {
  std::vector<std::string> args{"load"};
  args.insert(args.end(), load_args.begin(), load_args.end());
  // On a loaded machine the daemon can miss profiler-cli's fixed 500 ms start-up window; it keeps starting
  // and loads the profile anyway ("retrying often works"), so wait for it to answer instead of failing.
  CmdResult r = cmd(args, opts);
  if (r.status != 0 && (r.out + r.err).find("did not become ready") != std::string::npos) {
    for (int i = 0; i < 120; ++i) {
      ::usleep(500 * 1000);
      CmdResult st = cmd({"profile", "info"});
      if (st.status == 0) {
        r.status = 0;
        r.out += st.out;
        break;
      }
    }
  }
  return r;
}

bool ProfilerCli::select_thread(const std::string& name) {
  CmdResult list = cmd({"thread", "list"});
  size_t pos = 0;
  while (pos < list.out.size()) {
    size_t nl = list.out.find('\n', pos);
    std::string line = list.out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? list.out.size() : nl + 1;
    // "* t-0     GeckoMain  demo     4242  2.000ms        0"
    size_t h = line.find("t-");
    if (h == std::string::npos || h > 4) continue;
    size_t h_end = line.find(' ', h);
    size_t n_start = line.find_first_not_of(' ', h_end);
    if (n_start == std::string::npos) continue;
    if (line.compare(n_start, name.size(), name) == 0 &&
        (n_start + name.size() == line.size() || line[n_start + name.size()] == ' ')) {
      return cmd({"thread", "select", line.substr(h, h_end - h)}).status == 0;
    }
  }
  return false;
}

CpuLog::CpuLog() : path_(dir_.file("cpu.log")) {
  UniqueFd fd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666));
  if (!fd.valid()) throw std::runtime_error("cannot create " + path_);
  ::fchmod(fd.get(), 0666);
}

std::string CpuLog::text() const {
  auto t = read_file(path_);
  return t ? *t : std::string();
}

double CpuLog::ms(const std::string& label) const {
  double total = 0;
  std::string t = text();
  size_t pos = 0;
  while (pos < t.size()) {
    size_t nl = t.find('\n', pos);
    if (nl == std::string::npos) break;  // a line being written
    std::string line = t.substr(pos, nl - pos);
    pos = nl + 1;
    size_t sp = line.rfind(' ');
    if (sp != std::string::npos && line.compare(0, sp, label) == 0 && sp == label.size())
      total += std::strtod(line.c_str() + sp + 1, nullptr);
  }
  return total;
}

size_t CpuLog::count(const std::string& label) const {
  size_t n = 0;
  std::string t = text(), prefix = label + " ";
  for (size_t pos = 0; pos < t.size();) {
    size_t nl = t.find('\n', pos);
    if (nl == std::string::npos) break;
    if (t.compare(pos, prefix.size(), prefix) == 0) ++n;
    pos = nl + 1;
  }
  return n;
}

bool CpuLog::wait_for(const std::string& label, size_t times, std::chrono::seconds timeout) const {
  // inotify wakes us when the file is written; the bounded poll is only a backstop.
  UniqueFd in(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (in.valid()) ::inotify_add_watch(in.get(), path_.c_str(), IN_MODIFY | IN_CLOSE_WRITE);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (count(label) < times) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    pollfd p{in.get(), POLLIN, 0};
    if (::poll(&p, in.valid() ? 1 : 0, 200) > 0) {
      char buf[4096];
      while (::read(in.get(), buf, sizeof buf) > 0) {
      }
    }
  }
  return true;
}

double process_cpu_ms(pid_t pid) {
  double ns = 0;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      auto s = read_file(dir + "/" + e->d_name + "/schedstat");  // "on-cpu-ns wait-ns timeslices"
      if (s) ns += std::strtod(s->c_str(), nullptr);
    }
    ::closedir(d);
  }
  return ns / 1e6;
}

std::string url_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

FxprofServer::FxprofServer(const std::string& profile, const std::vector<std::string>& extra_args)
    : proc_([&] {
        std::vector<std::string> argv{fxprof_bin(), "load", "--no-open"};
        argv.insert(argv.end(), extra_args.begin(), extra_args.end());
        argv.push_back(profile);
        return argv;
      }()) {
  url_ = proc_.wait_for_line("profiler.firefox.com", std::chrono::seconds(60));
  size_t q = url_.find("symbolServer=");
  if (q != std::string::npos) {
    std::string enc = url_.substr(q + 13);
    size_t end = enc.find_first_of("& \t\r");
    symbol_server_ = url_decode(enc.substr(0, end));
  }
}

}  // namespace fxprof::test
