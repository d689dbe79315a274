#include "heap/shim_pipe.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "heap/wire.h"

namespace fxprof::heap::shim {

int pipe_fd = -1;
std::atomic<bool> pipe_cut{false};

namespace {

dev_t pipe_dev = 0;
ino_t pipe_ino = 0;

bool our_pipe() {
  struct stat st;
  return fstat(pipe_fd, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_dev == pipe_dev && st.st_ino == pipe_ino;
}

// The write loop with SIGPIPE blocked; a SIGPIPE the write raised (the reader is gone) is taken back, unless
// the program had one pending already.
bool write_blocking_sigpipe(const char* p, size_t n) {
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  // Only a program that blocks SIGPIPE itself can have one pending (else it was delivered): one call less
  // per chunk for the others.
  const bool was_pending =
      sigismember(&old, SIGPIPE) == 1 && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
  bool ok = true;
  while (n > 0) {
    const ssize_t w = write(pipe_fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ok = false;
      break;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  if (!ok && errno == EPIPE && !was_pending) {
    const timespec zero{};
    sigtimedwait(&pipe_only, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

}  // namespace

void move_high(int fds[2]) {
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  // Below the recorder's pipe (heap/source.cpp puts it at the limit - 64, at most 960).
  const rlim_t top = files.rlim_cur > 128 ? files.rlim_cur - 128 : 10;
  const int base = static_cast<int>(top < 10 ? 10 : top > 900 ? 900 : top);
  for (int i = 0; i < 2; ++i) {
    const int high = fcntl(fds[i], F_DUPFD_CLOEXEC, base);
    if (high < 0) continue;  // (a limit of a few files): where it is
    close(fds[i]);
    fds[i] = high;
  }
}

void pipe_open() {
  const char* fd = getenv(wire::kFdEnv);
  const char* id = getenv(wire::kPipeEnv);
  if (!fd || !id) return;
  char* end = nullptr;
  pipe_dev = static_cast<dev_t>(strtoull(id, &end, 10));
  if (*end != ':') return;
  pipe_ino = static_cast<ino_t>(strtoull(end + 1, nullptr, 10));
  pipe_fd = atoi(fd);
  if (pipe_fd < 0 || pipe_ino == 0 || !our_pipe()) pipe_fd = -1;
}

bool pipe_write(const void* data, size_t n) {
  if (!sending()) return false;
  if (!our_pipe() || !write_blocking_sigpipe(static_cast<const char*>(data), n)) {
    pipe_cut.store(true, std::memory_order_relaxed);
    return false;
  }
  return true;
}

}  // namespace fxprof::heap::shim
