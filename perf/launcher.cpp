#include "perf/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace fxprof::perf {

namespace {

Status make_pipe(UniqueFd& r, UniqueFd& w) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return Err("cannot create a pipe: " + errno_text(errno));
  r.reset(p[0]);
  w.reset(p[1]);
  return {};
}

}  // namespace

Result<SuspendedChild> SuspendedChild::spawn(const std::vector<std::string>& argv, const sigset_t& child_mask,
                                             std::optional<rlimit> nofile) {
  if (argv.empty()) return Err("no command to run");
  UniqueFd resume_r, resume_w, error_r, error_w;
  if (auto s = make_pipe(resume_r, resume_w); !s) return std::move(s).take_error();
  if (auto s = make_pipe(error_r, error_w); !s) return std::move(s).take_error();
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls are made.
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) return Err("cannot fork: " + errno_text(errno));
  if (pid == 0) {
    close(resume_w.get());  // so that the parent going away reads as EOF
    close(error_r.get());
    char byte;
    ssize_t n;
    do {
      n = read(resume_r.get(), &byte, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) _exit(0);  // the profiler went away before starting us
    sigprocmask(SIG_SETMASK, &child_mask, nullptr);
    if (nofile) setrlimit(RLIMIT_NOFILE, &*nofile);
    execvp(cargv[0], cargv.data());
    int err = errno;
    ssize_t w = write(error_w.get(), &err, sizeof err);
    (void)w;
    _exit(127);
  }
  SuspendedChild c;
  c.pid_ = pid;
  c.name_ = argv[0];
  c.resume_w_ = std::move(resume_w);
  c.error_r_ = std::move(error_r);
  return c;  // resume_r and error_w close here, in the parent
}

SuspendedChild::SuspendedChild(SuspendedChild&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      name_(std::move(o.name_)),
      resume_w_(std::move(o.resume_w_)),
      error_r_(std::move(o.error_r_)),
      resumed_(o.resumed_) {}

SuspendedChild::~SuspendedChild() {
  if (pid_ > 0 && !resumed_) {
    resume_w_.reset();  // EOF: the child exits without exec
    int st;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
}

Status SuspendedChild::resume() {
  resumed_ = true;
  char byte = 'x';
  ssize_t n;
  do {
    n = write(resume_w_.get(), &byte, 1);
  } while (n < 0 && errno == EINTR);
  resume_w_.reset();
  int err = 0;
  do {
    n = read(error_r_.get(), &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  error_r_.reset();
  if (n == static_cast<ssize_t>(sizeof err)) {
    int st;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return Err("cannot run '" + name_ + "': " + errno_text(err), 127);
  }
  return {};
}

int exit_status_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

ChildReaper::ChildReaper(pid_t pid) : stop_(::eventfd(0, EFD_CLOEXEC)) {
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid() || !stop_.valid()) return;  // left to the kernel when fxprof exits
  thread_ = std::thread([pid, pidfd = std::move(pidfd), stop = stop_.get()] {
    pollfd p[2] = {{pidfd.get(), POLLIN, 0}, {stop, POLLIN, 0}};
    while (::poll(p, 2, -1) < 0 && errno == EINTR) {
    }
    if (p[0].revents == 0) return;  // stopped first
    int st;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
  });
}

ChildReaper::~ChildReaper() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(stop_.get(), &one, sizeof one);  // an eventfd write cannot fail
  thread_.join();
}

}  // namespace fxprof::perf
