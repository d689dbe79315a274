// Outputs: what writing to a path means (resolve_output) and the writer that does it (AtomicFile).
// fxprof often runs as root and writes where other users can plant links (/tmp). Links are resolved here, one
// at a time, by fs.protected_symlinks' rule (base/fd.h); then the folder is opened component by component
// with O_NOFOLLOW and every later step is relative to it, so nothing swapped in after the check is followed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "base/fd.h"

namespace fxprof {
namespace {

std::string temp_name(const std::string& name) {
  std::random_device rd;
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".tmp.%08x", rd());
  return name + suffix;
}

// "-", /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N name a descriptor this process has open: write
// to it (a shell does the same for these names), whatever file is behind it. -1 for any other path.
int descriptor_name(const std::string& path) {
  if (path == "-" || path == "/dev/stdout") return STDOUT_FILENO;
  if (path == "/dev/stderr") return STDERR_FILENO;
  std::string_view rest;
  for (std::string_view prefix : {"/dev/fd/", "/proc/self/fd/"})
    if (path.starts_with(prefix)) rest = std::string_view(path).substr(prefix.size());
  int fd = -1;
  if (rest.empty() ||
      std::from_chars(rest.data(), rest.data() + rest.size(), fd).ptr != rest.data() + rest.size())
    return -1;
  return fd;
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string shown(const std::string& path) { return path == "-" ? "standard output" : path; }

// The components of `path`, last first (a stack: back() is the next one to walk).
void push_components(std::string_view path, std::vector<std::string>& todo) {
  std::vector<std::string> parts;
  for (size_t i = 0; i <= path.size();) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  todo.insert(todo.end(), parts.rbegin(), parts.rend());
}

bool trusted_owner(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

bool sticky_world_writable(const struct stat& dir) {
  return (dir.st_mode & S_ISVTX) != 0 && (dir.st_mode & S_IWOTH) != 0;
}

// Whether the link at `link` (lstat `st`), in folder `folder`, may be followed; `last`: it names the output
// itself. The last component's link must be ours or root's (a link another user owns leads where that user
// chose); on the way, the same in a sticky world-writable folder, as the kernel's protected_symlinks says.
Status may_follow(const std::string& link, const struct stat& st, const std::string& folder, bool last) {
  if (trusted_owner(st.st_uid)) return {};
  struct stat dir {};
  if (!last && ::stat(folder.empty() ? "/" : folder.c_str(), &dir) == 0 && !sticky_world_writable(dir))
    return {};
  return Err("refusing to write through " + link + ": a symbolic link owned by another user (uid " +
             std::to_string(st.st_uid) + ")" + (last ? "" : " in a world-writable folder"));
}

// `path` with every link resolved (each allowed by may_follow): an absolute path without links, naming an
// existing file or a new name in an existing folder.
Result<std::string> resolve_links(const std::string& path) {
  std::string cur;  // resolved so far, without links; "" is the root
  if (!path.starts_with('/')) {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) == nullptr) return Err("cannot write " + path + ": " + errno_text(errno));
    cur = std::string(cwd) == "/" ? "" : cwd;
  }
  std::vector<std::string> todo;
  push_components(path, todo);
  for (int hops = 0; !todo.empty();) {
    const std::string c = std::move(todo.back());
    todo.pop_back();
    if (c == ".") continue;
    if (c == "..") {
      cur = cur.empty() ? cur : cur.substr(0, cur.rfind('/'));
      continue;
    }
    const bool last = std::all_of(todo.begin(), todo.end(), [](const std::string& t) { return t == "."; });
    const std::string next = cur + "/" + c;
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0) {
      if (errno == ENOENT && last) return next;  // a new name
      return Err((errno == ENOENT ? "cannot create " : "cannot write ") + path + ": " + errno_text(errno));
    }
    if (!S_ISLNK(st.st_mode)) {
      cur = next;
      continue;
    }
    if (auto ok = may_follow(next, st, cur, last); !ok) return std::move(ok).take_error();
    char target[PATH_MAX];
    const ssize_t n = ::readlink(next.c_str(), target, sizeof target - 1);
    if (n < 0 || ++hops > 40) return Err("cannot write " + path + ": " + errno_text(n < 0 ? errno : ELOOP));
    if (target[0] == '/') cur.clear();
    push_components(std::string_view(target, static_cast<size_t>(n)), todo);
  }
  return cur.empty() ? std::string("/") : cur;
}

// The folder `dir` (absolute, no links), opened one component at a time, never following a link: a link
// swapped in since resolve_links() fails here instead of leading elsewhere.
Result<UniqueFd> open_folder(const std::string& dir, const std::string& path) {
  UniqueFd fd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  std::vector<std::string> todo;
  push_components(dir, todo);
  while (fd.valid() && !todo.empty()) {
    fd.reset(::openat(fd.get(), todo.back().c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    todo.pop_back();
  }
  if (!fd.valid())
    return Err("cannot write " + path + ": " +
               (errno == ELOOP ? "its folder was replaced by a link" : errno_text(errno)));
  return fd;
}

// A device, FIFO or socket `name` in `dir`: another user's FIFO or socket in a sticky world-writable folder
// is refused (what is written there goes to that user). Opened non-blocking: a FIFO without a reader is
// polled for `wait_ms` (signals may be blocked: a blocking open could never be interrupted), then refused.
Result<UniqueFd> open_stream(int dir, const std::string& name, const struct stat& st, const std::string& path,
                             int wait_ms) {
  struct stat folder {};
  if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode) && !trusted_owner(st.st_uid) &&
      ::fstat(dir, &folder) == 0 && sticky_world_writable(folder) && st.st_uid != folder.st_uid)
    return Err("refusing to write " + path + ": another user's (uid " + std::to_string(st.st_uid) +
               ") FIFO or socket in a world-writable folder");
  const int flags = O_WRONLY | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  UniqueFd fd(::openat(dir, name.c_str(), flags));
  for (int waited = 0; !fd.valid() && errno == ENXIO && S_ISFIFO(st.st_mode) && waited < wait_ms;
       waited += 20) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    fd.reset(::openat(dir, name.c_str(), flags));
  }
  if (!fd.valid() && errno == ENXIO && S_ISFIFO(st.st_mode)) {
    char waited[32];
    std::snprintf(waited, sizeof waited, "%.3g s", wait_ms / 1000.0);
    return Err("cannot write " + path + ": nobody opened the FIFO for reading within " + waited);
  }
  if (!fd.valid()) return Err("cannot write " + path + ": " + errno_text(errno));
  struct stat now {};
  if (::fstat(fd.get(), &now) != 0 || now.st_ino != st.st_ino || now.st_dev != st.st_dev)
    return Err("cannot write " + path + ": it was replaced while being opened");
  const int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl < 0 || ::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK) != 0)
    return Err("cannot write " + path + ": " + errno_text(errno));
  return fd;
}

}  // namespace

Result<OutputTarget> resolve_output(const std::string& path) {
  if (path.empty()) return Err("no output file named");
  if (int fd = descriptor_name(path); fd >= 0) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY)
      return Err("cannot write " + shown(path) + ": " +
                 (flags < 0 ? errno_text(errno) : "not open for writing"));
    return OutputTarget{OutputKind::kStream, path, fd};
  }
  auto real = resolve_links(path);
  if (!real) return std::move(real).take_error();
  struct stat st {};
  if (::lstat(real->c_str(), &st) != 0) {
    if (errno != ENOENT) return Err("cannot write " + path + ": " + errno_text(errno));
    return OutputTarget{OutputKind::kReplace, *real};
  }
  if (S_ISDIR(st.st_mode)) return Err("cannot write " + path + ": it is a directory");
  return OutputTarget{S_ISREG(st.st_mode) ? OutputKind::kReplace : OutputKind::kStream, *real};
}

Result<AtomicFile> AtomicFile::create(const std::string& path, int fifo_wait_ms) {
  auto target = resolve_output(path);
  if (!target) return std::move(target).take_error();
  if (target->fd >= 0) {  // "-", /dev/fd/N: written in place
    UniqueFd fd(::fcntl(target->fd, F_DUPFD_CLOEXEC, 0));
    if (!fd.valid()) return Err("cannot write " + shown(path) + ": " + errno_text(errno));
    AtomicFile f(std::move(fd), shown(path));
    f.stream_ = true;
    return f;
  }
  const std::string& final_path = target->path;
  auto dir = open_folder(parent_of(final_path), path);
  if (!dir) return std::move(dir).take_error();
  const std::string name = final_path.substr(final_path.rfind('/') + 1);
  struct stat st {};
  const bool exists = ::fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (!exists && errno != ENOENT) return Err("cannot write " + path + ": " + errno_text(errno));
  if (exists && S_ISLNK(st.st_mode)) return Err("cannot write " + path + ": it was replaced by a link");
  if (exists && S_ISDIR(st.st_mode)) return Err("cannot write " + path + ": it is a directory");
  if (exists && !S_ISREG(st.st_mode)) {
    // A device or pipe is written in place (O_TRUNC is ignored by both); never created, never replaced.
    auto fd = open_stream(dir->get(), name, st, path, fifo_wait_ms);
    if (!fd) return std::move(fd).take_error();
    AtomicFile f(std::move(*fd), path);
    f.stream_ = true;
    return f;
  }
  AtomicFile f(UniqueFd(::openat(dir->get(), ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600)), final_path);
  f.dir_ = std::move(*dir);
  f.name_ = name;
  if (f.fd_.valid()) return f;
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
    return Err("cannot create " + path + ": " + errno_text(errno));
  std::string temp = temp_name(name);
  f.fd_.reset(
      ::openat(f.dir_.get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!f.fd_.valid()) return Err("cannot create " + path + ": " + errno_text(errno));
  f.temp_ = std::move(temp);
  return f;
}

Result<OutputKind> AtomicFile::check(const std::string& path) {
  auto target = resolve_output(path);
  if (!target) return std::move(target).take_error();
  if (target->kind == OutputKind::kStream) {
    if (target->fd < 0 && ::faccessat(AT_FDCWD, target->path.c_str(), W_OK, AT_EACCESS) != 0)
      return Err("cannot write " + path + ": " + errno_text(errno));
    return OutputKind::kStream;
  }
  auto probe = create(path);
  if (!probe) return std::move(probe).take_error();
  return OutputKind::kReplace;
}

AtomicFile& AtomicFile::operator=(AtomicFile&& o) noexcept {
  if (this != &o) {
    if (!committed_ && !temp_.empty()) ::unlinkat(dir_.get(), temp_.c_str(), 0);
    fd_ = std::move(o.fd_);
    dir_ = std::move(o.dir_);
    name_ = std::move(o.name_);
    temp_ = std::move(o.temp_);
    final_ = std::move(o.final_);
    committed_ = o.committed_;
    stream_ = o.stream_;
    o.temp_.clear();
    o.committed_ = true;
  }
  return *this;
}

AtomicFile::~AtomicFile() {
  if (!committed_ && !temp_.empty()) ::unlinkat(dir_.get(), temp_.c_str(), 0);
}

Status AtomicFile::commit() {
  if (stream_) {
    if (::close(fd_.release()) != 0) return Err("cannot write " + final_ + ": " + errno_text(errno));
    committed_ = true;
    return {};
  }
  // Data on disk before the name: after a crash the final name holds the old file or the whole new one.
  if (::fsync(fd_.get()) != 0) return Err("cannot write " + final_ + ": " + errno_text(errno));
  if (temp_.empty()) {
    // Unnamed: give it a temporary name (linkat cannot replace an existing file), then rename it.
    std::string temp = temp_name(name_);
    std::string proc = "/proc/self/fd/" + std::to_string(fd_.get());
    if (::linkat(AT_FDCWD, proc.c_str(), dir_.get(), temp.c_str(), AT_SYMLINK_FOLLOW) != 0)
      return Err("cannot write " + final_ + ": " + errno_text(errno));
    temp_ = std::move(temp);
  }
  if (::close(fd_.release()) != 0) return Err("cannot write " + final_ + ": " + errno_text(errno));
  // renameat replaces the name itself: a link planted there since is replaced, never followed.
  if (::renameat(dir_.get(), temp_.c_str(), dir_.get(), name_.c_str()) != 0)
    return Err("cannot rename " + parent_of(final_) + "/" + temp_ + " to " + final_ + ": " +
               errno_text(errno));
  committed_ = true;
  return {};
}

}  // namespace fxprof
