// Outputs: what writing to a path means (resolve_output) and the writer that does it (AtomicFile).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "base/fd.h"

namespace fxprof {
namespace {

std::string temp_name(const std::string& path) {
  std::random_device rd;
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".tmp.%08x", rd());
  return path + suffix;
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
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Err("cannot write " + path + ": it is a directory");
    if (!S_ISREG(st.st_mode)) return OutputTarget{OutputKind::kStream, path};
    // A regular file, maybe behind links: replace the file, keep the links.
    char real[PATH_MAX];
    if (::realpath(path.c_str(), real) == nullptr)
      return Err("cannot write " + path + ": " + errno_text(errno));
    return OutputTarget{OutputKind::kReplace, real};
  }
  if (errno != ENOENT) return Err("cannot write " + path + ": " + errno_text(errno));
  // A new name, or a link to one: the name the last link gives is created.
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat lst {};
    if (::lstat(p.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) return OutputTarget{OutputKind::kReplace, p};
    char target[PATH_MAX];
    const ssize_t n = ::readlink(p.c_str(), target, sizeof target - 1);
    if (n < 0) return Err("cannot write " + path + ": " + errno_text(errno));
    std::string t(target, static_cast<size_t>(n));
    p = t.starts_with('/') ? t : parent_of(p) + "/" + t;
  }
  return Err("cannot write " + path + ": " + errno_text(ELOOP));
}

Result<AtomicFile> AtomicFile::create(const std::string& path) {
  auto target = resolve_output(path);
  if (!target) return std::move(target).take_error();
  if (target->kind == OutputKind::kStream) {
    // A device or pipe is written in place (O_TRUNC is ignored by both); never created, never replaced.
    UniqueFd fd(target->fd >= 0 ? ::fcntl(target->fd, F_DUPFD_CLOEXEC, 0)
                                : ::open(target->path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC));
    if (!fd.valid()) return Err("cannot write " + shown(path) + ": " + errno_text(errno));
    return AtomicFile(std::move(fd), std::string(), shown(path), true);
  }
  const std::string& final_path = target->path;
  UniqueFd fd(::open(parent_of(final_path).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600));
  if (fd.valid()) return AtomicFile(std::move(fd), std::string(), final_path);
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
    return Err("cannot create " + path + ": " + errno_text(errno));
  std::string temp = temp_name(final_path);
  fd.reset(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return Err("cannot create " + path + ": " + errno_text(errno));
  return AtomicFile(std::move(fd), std::move(temp), final_path);
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
    if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
    fd_ = std::move(o.fd_);
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
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
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
    std::string temp = temp_name(final_);
    std::string proc = "/proc/self/fd/" + std::to_string(fd_.get());
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, temp.c_str(), AT_SYMLINK_FOLLOW) != 0)
      return Err("cannot write " + final_ + ": " + errno_text(errno));
    temp_ = std::move(temp);
  }
  if (::close(fd_.release()) != 0) return Err("cannot write " + final_ + ": " + errno_text(errno));
  if (::rename(temp_.c_str(), final_.c_str()) != 0)
    return Err("cannot rename " + temp_ + " to " + final_ + ": " + errno_text(errno));
  committed_ = true;
  return {};
}

}  // namespace fxprof
