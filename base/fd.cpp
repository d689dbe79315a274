#include "base/fd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

namespace fxprof {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    reset();
    addr_ = o.addr_;
    size_ = o.size_;
    o.addr_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void Mapping::reset() {
  if (addr_ != nullptr && size_ != 0) ::munmap(addr_, size_);
  addr_ = nullptr;
  size_ = 0;
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer (which may or may not be buf).
  const char* msg = strerror_r(err, buf, sizeof buf);
  return msg;
}

Result<MappedFile> map_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Err("cannot open " + path + ": " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Err("cannot stat " + path + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return Err(path + " is not a regular file");
  MappedFile out;
  if (st.st_size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (p == MAP_FAILED) return Err("cannot map " + path + ": " + errno_text(errno));
    out.map = Mapping(p, static_cast<size_t>(st.st_size));
  }
  out.fd = std::move(fd);
  return out;
}

Result<std::string> read_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Err("cannot open " + path + ": " + errno_text(errno));
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Err("cannot read " + path + ": " + errno_text(errno));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

namespace {

std::string temp_name(const std::string& path) {
  std::random_device rd;
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".tmp.%08x", rd());
  return path + suffix;
}

}  // namespace

Result<AtomicFile> AtomicFile::create(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  UniqueFd fd(::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600));
  if (fd.valid()) return AtomicFile(std::move(fd), std::string(), path);
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
    return Err("cannot create " + path + ": " + errno_text(errno));
  std::string temp = temp_name(path);
  fd.reset(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return Err("cannot create " + path + ": " + errno_text(errno));
  return AtomicFile(std::move(fd), std::move(temp), path);
}

AtomicFile& AtomicFile::operator=(AtomicFile&& o) noexcept {
  if (this != &o) {
    if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
    fd_ = std::move(o.fd_);
    temp_ = std::move(o.temp_);
    final_ = std::move(o.final_);
    committed_ = o.committed_;
    o.temp_.clear();
    o.committed_ = true;
  }
  return *this;
}

AtomicFile::~AtomicFile() {
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

Status AtomicFile::commit() {
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
