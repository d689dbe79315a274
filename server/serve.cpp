// serve_profile(): validate, register libs, serve, print the URL, open a browser, wait for Ctrl+C.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/signals.h"
#include "base/temp_dir.h"
#include "base/url.h"
#include "server/server.h"

extern char** environ;

namespace fxprof::server {
namespace {

// SIGINT/SIGTERM are blocked (and set to their default action, so that an inherited SIG_IGN cannot discard
// them) while we serve; the waiting thread takes them with sigtimedwait. Restored on scope exit.
class SignalScope {
 public:
  SignalScope() : set_(stop_signals()) {
    pthread_sigmask(SIG_BLOCK, &set_, &old_mask_);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGINT, &dfl, &old_int_);
    sigaction(SIGTERM, &dfl, &old_term_);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;
  // The signal taken, or 0 after `ms` milliseconds.
  int wait(int ms) {
    timespec ts{ms / 1000, static_cast<long>(ms % 1000) * 1000000L};
    int sig = sigtimedwait(&set_, nullptr, &ts);
    return sig > 0 ? sig : 0;
  }

 private:
  sigset_t set_;
  sigset_t old_mask_;
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Starts the browser (on `url`: the redirect page's, never one with the token) in its own session with no
// terminal I/O and does not wait for it (a browser started this way may run for hours). $BROWSER is a
// ':'-separated list of commands, "%s" standing for the URL.
pid_t launch_browser(const std::string& url) {
  std::vector<std::vector<std::string>> candidates;
  if (const char* b = std::getenv("BROWSER"); b && *b) {
    for (const std::string& cmd : split(b, ':')) {
      std::vector<std::string> argv = split(cmd, ' ');
      if (argv.empty()) continue;
      bool substituted = false;
      for (std::string& a : argv) {
        if (size_t at = a.find("%s"); at != std::string::npos) {
          a.replace(at, 2, url);
          substituted = true;
        }
      }
      if (!substituted) argv.push_back(url);
      candidates.push_back(std::move(argv));
    }
  }
  candidates.push_back({"xdg-open", url});

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  sigset_t empty;
  sigemptyset(&empty);
  const sigset_t defaults = stop_signals();
  posix_spawnattr_setsigmask(&attr, &empty);  // our blocked SIGINT/SIGTERM are not the browser's business
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  for (auto& argv : candidates) {
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    if (posix_spawnp(&pid, cargv[0], &fa, &attr, cargv.data(), environ) == 0) break;
    pid = -1;
  }
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return pid;
}

// The page the browser is opened on: a 0600 file in a fresh 0700 folder that redirects to the Firefox
// Profiler URL. The URL carries the token, and a browser's command line is world-readable
// (/proc/PID/cmdline, ps): only the file's name may go there (what Jupyter does). Removed with its folder
// when the server stops.
class RedirectPage {
 public:
  static Result<RedirectPage> create(const std::string& url) {
    const std::string base = temp_parent(true);
    RedirectPage page(TempFolder("fxprof", base));
    if (page.dir_.path().empty()) return Err("cannot create a folder in " + base + ": " + errno_text(errno));
    page.file_ = page.dir_.path() + "/open-profile.html";
    UniqueFd fd(::open(page.file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return Err("cannot create " + page.file_ + ": " + errno_text(errno));
    std::string href;
    for (char c : url) {
      switch (c) {
        case '&':
          href += "&amp;";
          break;
        case '"':
          href += "&quot;";
          break;
        case '<':
          href += "&lt;";
          break;
        case '>':
          href += "&gt;";
          break;
        default:
          href += c;
      }
    }
    const std::string html =
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"refresh\" content=\"0;url=" +
        href +
        "\">\n"
        "<title>fxprof</title></head>\n<body><p><a href=\"" +
        href + "\">Open the profile in the Firefox Profiler</a></p></body></html>\n";
    if (::write(fd.get(), html.data(), html.size()) != static_cast<ssize_t>(html.size()))
      return Err("cannot write " + page.file_ + ": " + errno_text(errno));
    return page;
  }
  RedirectPage(RedirectPage&&) noexcept = default;
  std::string file_url() const { return "file://" + url_encode(file_, "/"); }

 private:
  explicit RedirectPage(TempFolder dir) : dir_(std::move(dir)) {}
  TempFolder dir_;  // removed with the page when the server stops
  std::string file_;
};

bool have_display() {
  const char* x = std::getenv("DISPLAY");
  const char* w = std::getenv("WAYLAND_DISPLAY");
  return (x && *x) || (w && *w);
}

}  // namespace

Status serve_profile(const ServeOptions& options) {
  std::optional<symbolizer::Symbolizer> own;
  symbolizer::Symbolizer& symbols = options.symbolizer ? *options.symbolizer : own.emplace(options.symbols);
  if (options.libs) {
    for (const auto& lib : *options.libs) symbols.add_known_lib(lib);
  } else {
    auto info = inspect_profile(options.profile_path);
    if (!info) return Err(info.error());
    for (auto& lib : info->libs) symbols.add_known_lib(lib);
  }

  SignalScope signals;  // before any server thread exists, so that they all inherit the blocked mask
  ProfileServer::Config config;
  config.profile_path = options.profile_path;
  config.address = options.address;
  config.port = options.port;
  config.port_exact = options.port_exact;
  auto server = ProfileServer::start(config, symbols);
  if (!server) return Err(server.error());

  const std::string url =
      firefox_profiler_url((*server)->profile_url(), (*server)->symbol_server_url(), options.view);
  std::fprintf(stderr, "Local server listening at %s\n", (*server)->origin().c_str());
  if (options.address != "127.0.0.1" && options.address != "::1" && options.address != "[::1]" &&
      options.address != "localhost") {
    std::fprintf(
        stderr,
        "Warning: serving on %s: anyone who can reach it and has the URL's token can read the profile "
        "and the files it lists.\n",
        options.address.c_str());
  }
  // stdout, flushed: profiler-cli (and scripts) wait for this line there.
  std::fprintf(stdout, "%s\n", url.c_str());
  std::fflush(stdout);
  pid_t browser = -1;
  std::optional<RedirectPage> page;
  if (options.open_browser) {
    if (have_display()) {
      auto made = RedirectPage::create(url);
      if (made) {
        page.emplace(std::move(*made));
        browser = launch_browser(page->file_url());
      } else {
        std::fprintf(stderr, "%s\n", made.error().c_str());
      }
      if (browser < 0)
        std::fprintf(stderr, "Could not start a browser ($BROWSER or xdg-open): open the URL above.\n");
    } else {
      std::fprintf(stderr,
                   "No display (DISPLAY and WAYLAND_DISPLAY are unset): open the URL above in a browser.\n");
    }
  }
  // The front end that asks is the one the URL names (PROFILER_URL may point elsewhere).
  std::string front = profiler_origin();
  if (const size_t scheme = front.find("://"); scheme != std::string::npos) front.erase(0, scheme + 3);
  std::fprintf(stderr,
               "Chrome (142 and later) and newer Firefox versions ask whether %s may access\n"
               "devices on your local network: allow it, or the profile cannot be fetched from this server.\n"
               "Press Ctrl+C to stop.\n",
               front.c_str());

  Status result;
  for (;;) {
    if (signals.wait(250) != 0) break;
    if (browser > 0 && waitpid(browser, nullptr, WNOHANG) == browser) browser = -1;  // no zombie
    if (!(*server)->running()) {
      result = Err("the local server stopped unexpectedly");
      break;
    }
  }
  (*server)->stop();
  if (browser > 0) waitpid(browser, nullptr, WNOHANG);
  if (result)
    std::fprintf(stderr, "Server stopped; the profile stays in %s\n",
                 (options.kept_path.empty() ? options.profile_path : options.kept_path).c_str());
  return result;
}

}  // namespace fxprof::server
