// fxprof base: RAII owners for the OS resources every module touches (file descriptors, memory mappings) and
// small helpers around them. Nothing here allocates on a hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"

namespace fxprof {

// Owns one file descriptor; closes it on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Owns one mmap'ed region; munmaps it on destruction. Move-only.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* addr, size_t size) : addr_(addr), size_(size) {}
  ~Mapping() { reset(); }
  Mapping(Mapping&& o) noexcept : addr_(o.addr_), size_(o.size_) {
    o.addr_ = nullptr;
    o.size_ = 0;
  }
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  void* data() const { return addr_; }
  size_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(addr_), size_}; }
  std::string_view view() const { return {static_cast<const char*>(addr_), size_}; }
  void reset();
  // Gives up ownership without unmapping (the region is the caller's now, or already gone).
  void* release() {
    void* addr = addr_;
    addr_ = nullptr;
    size_ = 0;
    return addr;
  }

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

// A private, read-write, zero-filled anonymous mapping of `size` bytes rounded up to whole pages (nothing is
// touched: a page costs its fault only when first written). From kHugePageBytes on, the mapping is rounded up
// to whole huge pages, aligned on one and advised MADV_HUGEPAGE, so that with transparent huge pages in
// `madvise` mode (or `always`) a large buffer fills with one fault per 2 MiB instead of one per 4 KiB: on a
// VM, faults are much of what filling a fresh buffer costs.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;
Result<Mapping> map_anonymous(size_t size);
// Grows an anonymous mapping (from map_anonymous) to at least `size` bytes, keeping its contents: mremap
// moves the pages, nothing is copied. The mapping may move.
Status grow_anonymous(Mapping& map, size_t size);

// A read-only, private mapping of a whole file (an empty file gives an empty mapping).
struct MappedFile {
  UniqueFd fd;
  Mapping map;
  std::span<const std::byte> bytes() const { return map.bytes(); }
  std::string_view view() const { return map.view(); }
};
Result<MappedFile> map_file(const std::string& path);

// Reads a whole (small or /proc) file into a string.
Result<std::string> read_file(const std::string& path);

// "strerror(errno)" without the thread-safety trap of strerror().
std::string errno_text(int err);

// What writing to an output path means; decided here for every writer (record, export, symbolicate, diff,
// stat, report):
//  - a new name or a regular file: replaced atomically (AtomicFile below); behind a symlink the file the
//    link leads to is replaced and the link stays (a dangling link's target is created);
//  - "-", /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: that open descriptor, written as a stream
//    (as a shell's redirection does: a `>> log` behind it is appended to, not replaced);
//  - a device, FIFO or socket (/dev/null, a named pipe): opened and written as a stream, never replaced;
//  - a directory: refused.
// Links are followed as the kernel's fs.protected_symlinks=1 would, whatever this machine's setting: the last
// component's link only when it belongs to the user running fxprof or to root, and a link in a sticky
// world-writable folder (/tmp) on the way likewise; a FIFO or socket another user owns in such a folder is
// refused too (protected_fifos). Otherwise: one line naming the link and its owner.
enum class OutputKind { kReplace, kStream };
struct OutputTarget {
  OutputKind kind = OutputKind::kReplace;
  std::string path;  // the file to replace (links followed: no link left in it), or the stream to open
  int fd = -1;       // for "-" and /dev/fd/N style names: the descriptor to write to (not owned)
};
Result<OutputTarget> resolve_output(const std::string& path);

// How long create() waits for a FIFO's reader (it polls: signals may be blocked while it waits).
inline constexpr int kFifoReaderWaitMs = 10'000;

// Writes an output as resolve_output() says. For a replaced file: it appears under its final name only when
// complete: an unnamed O_TMPFILE in the target folder, fsynced, linked under a temporary name and renamed
// over the target (readers never see a half-written file; a killed writer leaves nothing behind). Mode 0600:
// profiles hold command lines and paths, as perf.data does. Where O_TMPFILE is not supported, a named
// `NAME.tmp.XXXXXXXX` file is used instead. The folder is opened once, without following links, and every
// later step is relative to it: a link planted after the check changes nothing. For a stream, the bytes go
// straight to it and commit() closes it; a FIFO nobody reads within `fifo_wait_ms` is an error.
class AtomicFile {
 public:
  static Result<AtomicFile> create(const std::string& path, int fifo_wait_ms = kFifoReaderWaitMs);
  // How a writer checks, before long work, that it will be able to write `path`: a replaced file's temporary
  // is created and dropped; a stream is checked for write permission but not opened (opening a FIFO would
  // wait for its reader, and closing it would end the reader's input).
  static Result<OutputKind> check(const std::string& path);
  AtomicFile(AtomicFile&& o) noexcept
      : fd_(std::move(o.fd_)),
        dir_(std::move(o.dir_)),
        name_(std::move(o.name_)),
        temp_(std::move(o.temp_)),
        final_(std::move(o.final_)),
        committed_(o.committed_),
        stream_(o.stream_) {
    o.temp_.clear();
    o.committed_ = true;
  }
  AtomicFile& operator=(AtomicFile&& o) noexcept;
  ~AtomicFile();  // removes the temporary file unless commit() succeeded

  int fd() const { return fd_.get(); }
  bool stream() const { return stream_; }
  // Replaced file: fsyncs, names and renames; the rename is the commit point. Stream: closes.
  Status commit();

 private:
  AtomicFile(UniqueFd fd, std::string final_path) : fd_(std::move(fd)), final_(std::move(final_path)) {}
  UniqueFd fd_;
  UniqueFd dir_;      // the target's folder (O_PATH, opened without following links)
  std::string name_;  // the target's name in dir_
  std::string temp_;  // the temporary name in dir_ ("" while unnamed, O_TMPFILE)
  std::string final_;
  bool committed_ = false;
  bool stream_ = false;
};

}  // namespace fxprof
