// fxprof_longprofile_bench: writes a synthetic long profile through fxprof's own model and Gecko writer, for
// bench/longprofile.sh to measure what writing, reading and symbolicating it cost in memory per sample.
//
//   fxprof_longprofile_bench OUT SECONDS THREADS
//
// THREADS busy threads sampled at 1 kHz for SECONDS, in one process with seven libraries (~4000 functions).
// Stacks are shaped like a real program's: each thread walks a fixed call graph from _start through main
// into its own work, 8 to 40 frames deep, 2000 call paths per thread (a call tree: each branches off an
// earlier one) chosen with a skewed (Zipf-like) frequency, the leaf at one of 16 addresses in its function,
// and one sample in ten in a system call (four named kernel frames on top); CPU deltas around the interval,
// one in twenty samples off-CPU. Plus an RSS counter at 10 Hz. The libraries' paths do not exist, so `fxprof
// symbolicate` resolves nothing and writes every frame as "0x<offset> (in lib)": the memory it needs is the
// reading and the writing.
//
// Prints one line: `samples N model_kb K peak_kb P` (getrusage's peak RSS after building the model, and
// after writing it too).
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gecko/gecko.h"
#include "model/profile.h"

using namespace fxprof;

namespace {

constexpr uint64_t kT0 = 5'000'000'000'000;  // ns since boot
constexpr int kFunctionsPerLib = 600;
constexpr uint32_t kFunctionBytes = 0x400;

long peak_kb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  return x ^ (x >> 29);
}

struct Program {
  std::vector<uint64_t> function_start;  // absolute, all libraries
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s OUT SECONDS THREADS\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  const uint64_t seconds = std::strtoull(argv[2], nullptr, 10);
  const int threads = std::atoi(argv[3]);
  if (seconds == 0 || threads <= 0) {
    std::fprintf(stderr, "SECONDS and THREADS must be positive\n");
    return 2;
  }

  model::Profile p;
  p.meta.start_unix_ms = 1.76e12;
  p.meta.start_monotonic_ns = kT0;
  p.meta.end_monotonic_ns = kT0 + seconds * 1'000'000'000;
  p.meta.oscpu = "Linux 6.12.0";
  model::Process& proc = p.processes.emplace_back();
  proc.pid = 4242;
  proc.name = "longrun";
  proc.start_ns = kT0;
  proc.end_ns = *p.meta.end_monotonic_ns;

  const char* libs[] = {"longrun",     "libc.so.6",      "libstdc++.so.6", "libm.so.6",
                        "libssl.so.3", "libcrypto.so.3", "libz.so.1"};
  Program prog;
  for (size_t i = 0; i < std::size(libs); ++i) {
    model::Lib l;
    l.start = i == 0 ? 0x555555554000 : 0x7f0000000000 + i * 0x10000000;
    l.end = l.start + kFunctionsPerLib * kFunctionBytes;
    l.offset = 0;
    l.name = l.debug_name = libs[i];
    l.path = l.debug_path = std::string("/nonexistent/fxprof-bench/") + libs[i];
    char id[40];
    std::snprintf(id, sizeof id, "%016llX%016llX0", static_cast<unsigned long long>(mix(i, 1)),
                  static_cast<unsigned long long>(mix(i, 2)));
    l.breakpad_id = id;
    l.code_id = std::to_string(mix(i, 3));
    for (int f = 0; f < kFunctionsPerLib; ++f) prog.function_start.push_back(l.start + f * kFunctionBytes);
    proc.libs.push_back(std::move(l));
  }
  const size_t nfunc = prog.function_start.size();
  const char* kernel[] = {"entry_SYSCALL_64_after_hwframe",
                          "do_syscall_64",
                          "__x64_sys_futex",
                          "futex_wait",
                          "__x64_sys_read",
                          "vfs_read",
                          "__x64_sys_write",
                          "ksys_write"};
  std::vector<model::FrameId> kframes;
  for (size_t i = 0; i < std::size(kernel); ++i) {
    model::Frame f{0xffffffff81000000 + i * 0x100, p.strings.intern(kernel[i]), model::FrameKind::Kernel,
                   model::Category::Kernel};
    kframes.push_back(p.frames.intern(f));
  }

  // The call graph: function f calls children mix(f, c) % nfunc, c < 4; a call site's return address is a
  // fixed place in the caller.
  auto return_address = [&](size_t caller, size_t callee) {
    return prog.function_start[caller] + 8 + mix(caller, callee) % (kFunctionBytes - 16);
  };
  const uint64_t samples_per_thread = seconds * 1000;
  for (int ti = 0; ti < threads; ++ti) {
    std::mt19937_64 rng(static_cast<uint64_t>(ti) + 1);
    // The thread's call paths (root first: _start, __libc_start_main, main, the thread's entry, its work).
    constexpr size_t kPaths = 2000;
    std::vector<std::vector<size_t>> paths(kPaths);
    for (size_t k = 0; k < kPaths; ++k) {  // a call tree: each path branches off an earlier one
      std::vector<size_t>& path = paths[k];
      path = {0, nfunc - 1, 1, 2 + static_cast<size_t>(ti)};
      if (k > 0) {
        const std::vector<size_t>& base = paths[rng() % k];
        const size_t keep = 4 + rng() % (base.size() - 3);
        path.assign(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(keep));
      }
      const size_t depth = std::max(path.size() + 1, size_t{8} + rng() % 33);
      while (path.size() < depth) path.push_back(mix(path.back(), rng() % 4) % nfunc);
    }
    // Interned once: the stack of each path up to its leaf's caller, and its leaf function.
    std::vector<model::StackId> prefix(kPaths);
    std::vector<size_t> leaf(kPaths);
    for (size_t k = 0; k < kPaths; ++k) {
      model::StackId s = model::kNoStack;
      const auto& path = paths[k];
      for (size_t j = 0; j + 1 < path.size(); ++j) {
        uint64_t addr = j == 0 ? prog.function_start[0] + 0x25 : return_address(path[j - 1], path[j]);
        s = p.stacks.intern(s, p.native_frame(addr));
      }
      prefix[k] = s;
      leaf[k] = path.back();
    }
    model::Thread& t = proc.threads.emplace_back();
    t.tid = proc.pid + static_cast<uint32_t>(ti);
    t.name = ti == 0 ? "longrun" : "worker " + std::to_string(ti);
    t.is_main = ti == 0;
    t.start_ns = kT0;
    t.samples.reserve(samples_per_thread);
    std::uniform_real_distribution<double> u(0, 1);
    for (uint64_t i = 0; i < samples_per_thread; ++i) {
      const double x = u(rng);
      const size_t k = static_cast<size_t>(static_cast<double>(kPaths) * x * x * x);  // skewed
      uint64_t ip = prog.function_start[leaf[k]] + (rng() % 16) * (kFunctionBytes / 16);
      model::StackId s = p.stacks.intern(prefix[k], p.native_frame(ip));
      const uint64_t r = rng() % 20;
      if (r < 2) {  // in a system call
        s = p.stacks.intern(s, kframes[0]);
        s = p.stacks.intern(s, kframes[1]);
        const size_t call = (r + i) % 3;  // futex, read or write
        s = p.stacks.intern(s, kframes[2 + 2 * call]);
        s = p.stacks.intern(s, kframes[3 + 2 * call]);
      }
      const int32_t cpu = r == 19 ? 0 : 900'000 + static_cast<int32_t>(rng() % 200'000);
      t.samples.push_back({kT0 + i * 1'000'000 + rng() % 50'000, s, cpu});
    }
  }
  model::Counter& rss = proc.counters.emplace_back();
  rss.name = "RSS";
  rss.category = "Memory";
  rss.description = "resident set size";
  for (uint64_t i = 0; i < seconds * 10; ++i)
    rss.samples.push_back({kT0 + i * 100'000'000, static_cast<int64_t>(i % 7) * 4096 - 12288, 1});

  const long model_kb = peak_kb();
  if (auto s = gecko::write_gecko_profile(p, out); !s) {
    std::fprintf(stderr, "fxprof_longprofile_bench: %s\n", s.error().c_str());
    return 1;
  }
  std::printf("samples %llu model_kb %ld peak_kb %ld stacks %zu frames %zu\n",
              static_cast<unsigned long long>(samples_per_thread * static_cast<uint64_t>(threads)), model_kb,
              peak_kb(), p.stacks.size(), p.frames.size());
  return 0;
}
