#include "base/fd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

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

namespace {
size_t page_size() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}
size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
}  // namespace

Result<Mapping> map_anonymous(size_t size) {
  if (size == 0) return Mapping();
  const bool huge = size >= kHugePageBytes;
  const size_t len = round_up(size, huge ? kHugePageBytes : page_size());
  if (len < size || len > SIZE_MAX - kHugePageBytes)
    return Err("cannot map " + std::to_string(size) + " bytes: too large");
  // For huge pages, map one huge page more and trim to a huge-page boundary at both ends.
  const size_t span = huge ? len + kHugePageBytes : len;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return Err("cannot map " + std::to_string(size) + " bytes: " + errno_text(errno));
  if (!huge) return Mapping(p, len);
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = round_up(base, kHugePageBytes);
  if (aligned > base) ::munmap(p, aligned - base);
  if (const size_t tail = base + span - (aligned + len); tail > 0)
    ::munmap(reinterpret_cast<void*>(aligned + len), tail);
  Mapping out(reinterpret_cast<void*>(aligned), len);
  // Only advice: without transparent huge pages the buffer is filled 4 KiB at a time, as without it.
  (void)::madvise(out.data(), len, MADV_HUGEPAGE);
  return out;
}

Status grow_anonymous(Mapping& map, size_t size) {
  if (size <= map.size()) return {};
  if (map.data() == nullptr) {
    auto fresh = map_anonymous(size);
    if (!fresh) return std::move(fresh).take_error();
    map = std::move(*fresh);
    return {};
  }
  const size_t len = round_up(size, size >= kHugePageBytes ? kHugePageBytes : page_size());
  if (len < size) return Err("cannot map " + std::to_string(size) + " bytes: too large");
  void* p = ::mremap(map.data(), map.size(), len, MREMAP_MAYMOVE);
  if (p == MAP_FAILED) return Err("cannot map " + std::to_string(size) + " bytes: " + errno_text(errno));
  (void)map.release();  // the old range is gone (moved or grown in place): not to be unmapped again
  map = Mapping(p, len);
  if (len >= kHugePageBytes) (void)::madvise(p, len, MADV_HUGEPAGE);
  return {};
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

}  // namespace fxprof
