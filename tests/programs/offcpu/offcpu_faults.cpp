// Off-CPU test program: the main thread waits on major page faults in offcpu_fault_phase. It writes a 4 MiB
// file in the directory argv[1] (unlinked at once: nothing is left behind), syncs it and drops its pages from
// the page cache with posix_fadvise(DONTNEED) (this file's pages only: nothing machine-wide), maps it with
// MADV_RANDOM (no read-ahead: every page is its own read) and touches every page, so each touch faults and
// waits for the disk. Rounds (unmap, drop, map, touch) repeat until the touching took 100 ms of wall time or
// 64 rounds, so the wait spans many sampling intervals however fast the disk is. It logs "majflt" (the major
// faults of the touching, from getrusage: 0 means the file system kept the pages, as tmpfs does) and
// "resident" (pages still cached after the first drop, from mincore).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "wall_log.h"

namespace {

constexpr size_t kSize = 4u << 20;

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

struct Map {
  void* p = MAP_FAILED;
  size_t len = 0;
  Map(int fd, size_t n) : p(mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0)), len(n) {}
  ~Map() {
    if (p != MAP_FAILED) munmap(p, len);
  }
  Map(const Map&) = delete;
  Map& operator=(const Map&) = delete;
};

long major_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_majflt;
}

volatile unsigned long sink;

// One read per page: each is a major fault that waits for the disk.
__attribute__((noinline)) void offcpu_fault_phase(const volatile unsigned char* p, size_t n, size_t page) {
  unsigned long sum = 0;
  for (size_t off = 0; off < n; off += page) sum += p[off];
  sink = sum;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string path = std::string(argv[1]) + "/offcpu_faults.XXXXXX";
  Fd file(mkstemp(path.data()));
  if (file.fd < 0) return 3;
  unlink(path.c_str());
  std::vector<unsigned char> block(1u << 20, 0x5a);
  for (size_t done = 0; done < kSize; done += block.size())
    if (write(file.fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) return 4;
  if (fdatasync(file.fd) != 0) return 5;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));

  double touching_ms = 0;
  long faults = 0;
  for (int round = 0; round < 64 && touching_ms < 100; ++round) {
    // Clean and unmapped: DONTNEED drops every page of the file from the page cache.
    if (posix_fadvise(file.fd, 0, 0, POSIX_FADV_DONTNEED) != 0) return 6;
    Map m(file.fd, kSize);
    if (m.p == MAP_FAILED) return 7;
    if (madvise(m.p, kSize, MADV_RANDOM) != 0) return 8;
    if (round == 0) {
      std::vector<unsigned char> resident(kSize / page);
      if (mincore(m.p, kSize, resident.data()) != 0) return 9;
      size_t n = 0;
      for (unsigned char r : resident) n += r & 1;
      ms_log("resident", static_cast<double>(n));
    }
    const long f0 = major_faults();
    const double t0 = monotonic_ms();
    offcpu_fault_phase(static_cast<const volatile unsigned char*>(m.p), kSize, page);
    touching_ms += monotonic_ms() - t0;
    faults += major_faults() - f0;
  }
  ms_log("majflt", static_cast<double>(faults));
  ms_log("touching", touching_ms);
  return 0;
}
