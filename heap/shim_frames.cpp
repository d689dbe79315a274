#include "heap/shim_frames.h"

#include <link.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

#include "heap/wire.h"

namespace fxprof::heap::shim {
namespace {

uintptr_t self_lo = 0, self_hi = 0;  // the shim's code

// Probed functions, run-time addresses: (lo, hi], as a return address can be a function's last byte + 1.
constexpr int kMaxProbed = 16;
uintptr_t probed_lo[kMaxProbed], probed_hi[kMaxProbed];
int probed = 0;

int find_self(dl_phdr_info* info, size_t, void*) {
  const auto here = reinterpret_cast<uintptr_t>(&find_self);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    if (here >= lo && here < hi) {
      self_lo = lo;
      self_hi = hi;
      return 1;
    }
  }
  return 0;
}

// The first object dl_iterate_phdr reports is the executable: its load bias.
int main_bias(dl_phdr_info* info, size_t, void* out) {
  *static_cast<uintptr_t*>(out) = info->dlpi_addr;
  return 1;
}

// "DEV:INO:LO-HI,..." of wire::kProbedEnv, when DEV:INO is this process's executable.
void read_probed() {
  const char* v = getenv(wire::kProbedEnv);
  struct stat exe;
  if (!v || stat("/proc/self/exe", &exe) != 0) return;
  char* p = nullptr;
  const unsigned long long dev = strtoull(v, &p, 10);
  if (*p != ':') return;
  const unsigned long long ino = strtoull(p + 1, &p, 10);
  if (*p != ':' || dev != exe.st_dev || ino != exe.st_ino) return;
  uintptr_t bias = 0;
  dl_iterate_phdr(main_bias, &bias);
  while (probed < kMaxProbed && (*p == ':' || *p == ',')) {
    const uintptr_t lo = strtoull(p + 1, &p, 16);
    if (*p != '-') return;
    const uintptr_t hi = strtoull(p + 1, &p, 16);
    probed_lo[probed] = bias + lo;
    probed_hi[probed++] = bias + hi;
  }
}

}  // namespace

void frames_init() {
  dl_iterate_phdr(find_self, nullptr);
  read_probed();
}

int own_frames(void* const* frames, int n) {
  int first = 0;
  while (first < n && reinterpret_cast<uintptr_t>(frames[first]) >= self_lo &&
         reinterpret_cast<uintptr_t>(frames[first]) < self_hi)
    ++first;
  return first;
}

bool inside_probed(void* const* frames, int n) {
  for (int i = 0; i < n && probed > 0; ++i) {
    const auto pc = reinterpret_cast<uintptr_t>(frames[i]);
    for (int j = 0; j < probed; ++j)
      if (pc > probed_lo[j] && pc <= probed_hi[j]) return true;
  }
  return false;
}

}  // namespace fxprof::heap::shim
