// A tiny JIT: copies three hand-assembled x86-64 functions into anonymous memory (mapped writable, then
// made executable with mprotect, as JIT runtimes do), names them in /tmp/perf-PID.map and in a jitdump
// file (DIR/jit-PID.dump, mmapped PROT_EXEC so that the kernel announces it), and runs each for a fixed
// amount of CPU time:
//   main -> run_phase -> jit_hot_loop                    leaf JIT code with a frame pointer (push rbp)
//   main -> run_phase -> jit_calls_back -> c_callback    JIT code calling back into C (C has CFI)
//   main -> run_phase -> jit_nofp_loop                   JIT code with rbp = 0 (no frame pointer chain)
// Names: jit_hot_loop only in the perf map; jit_nofp_loop only in the jitdump; jit_calls_back in both,
// as "jit_calls_back_map" in the map (the jitdump, read last, must win).
// Usage: jit_prog DIR [MS per phase, default 300]. Logs "hot", "callback", "nofp" with each phase's CPU ms
// (cpu_log.h's format), and the JIT code's address range as "code 0xSTART 0xEND" on stdout.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../cpu_log.h"

namespace {

// Appends "LABEL MS" in cpu_log's format (a phase's CPU time, not the thread's total).
void log_ms(const char* label, double ms) {
  const char* path = std::getenv("FXPROF_TEST_CPU_LOG");
  if (!path || !*path) return;
  char line[128];
  int n = std::snprintf(line, sizeof line, "%s %.3f\n", label, ms);
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return;
  ssize_t w = write(fd, line, static_cast<size_t>(n));
  (void)w;
  close(fd);
}

// uint64_t jit_hot_loop(uint64_t n): push rbp; mov rbp,rsp; xor eax,eax; L: add rax,3; imul rax,rax,5;
// dec rdi; jnz L; pop rbp; ret
const uint8_t kHot[] = {0x55, 0x48, 0x89, 0xe5, 0x31, 0xc0, 0x48, 0x83, 0xc0, 0x03, 0x48,
                        0x6b, 0xc0, 0x05, 0x48, 0xff, 0xcf, 0x75, 0xf3, 0x5d, 0xc3};
// void jit_calls_back(void (*fn)(), uint64_t n): push rbp; mov rbp,rsp; push rbx; push r12; mov r12,rdi;
// mov rbx,rsi; L: call r12; dec rbx; jnz L; pop r12; pop rbx; pop rbp; ret
const uint8_t kCallsBack[] = {0x55, 0x48, 0x89, 0xe5, 0x53, 0x41, 0x54, 0x49, 0x89, 0xfc, 0x48, 0x89, 0xf3,
                              0x41, 0xff, 0xd4, 0x48, 0xff, 0xcb, 0x75, 0xf8, 0x41, 0x5c, 0x5b, 0x5d, 0xc3};
// uint64_t jit_nofp_loop(uint64_t n): mov r11,rbp; xor ebp,ebp; xor eax,eax; L: add rax,3; imul rax,rax,5;
// dec rdi; jnz L; mov rbp,r11; ret   (the return address is at [rsp] throughout the loop)
const uint8_t kNoFp[] = {0x49, 0x89, 0xeb, 0x31, 0xed, 0x31, 0xc0, 0x48, 0x83, 0xc0, 0x03, 0x48,
                         0x6b, 0xc0, 0x05, 0x48, 0xff, 0xcf, 0x75, 0xf3, 0x4c, 0x89, 0xdd, 0xc3};

volatile uint64_t g_sink;

struct Fn {
  const char* map_name;   // in the perf map (nullptr: not there)
  const char* dump_name;  // in the jitdump (nullptr: not there)
  const uint8_t* code;
  size_t size;
  uint64_t addr = 0;
};

void put(std::vector<uint8_t>& out, const void* p, size_t n) {
  auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

extern "C" {
__attribute__((noinline)) void c_callback() {
  uint64_t x = g_sink;
  for (int i = 0; i < 2000; ++i) x = x * 2862933555777941757ull + 3037000493ull;
  g_sink = x;
}

// Calls `fn` until the thread has used `ms` of CPU; returns the CPU ms used.
__attribute__((noinline)) double run_phase(uint64_t (*fn)(uint64_t), double ms) {
  double start = thread_cpu_ms();
  while (thread_cpu_ms() - start < ms) g_sink = g_sink + fn(200000);
  return thread_cpu_ms() - start;
}
__attribute__((noinline)) double run_callback_phase(void (*jit)(void (*)(), uint64_t), double ms) {
  double start = thread_cpu_ms();
  while (thread_cpu_ms() - start < ms) jit(c_callback, 100);
  return thread_cpu_ms() - start;
}
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: jit_prog DIR [MS]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const double ms = argc > 2 ? std::atof(argv[2]) : 300;
  Fn fns[] = {{"jit_hot_loop", nullptr, kHot, sizeof kHot},
              {"jit_calls_back_map", "jit_calls_back", kCallsBack, sizeof kCallsBack},
              {nullptr, "jit_nofp_loop", kNoFp, sizeof kNoFp}};

  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 1;
  auto* code = static_cast<uint8_t*>(mem);
  std::memset(code, 0xcc, page);  // int3 between functions
  size_t at = 0;
  for (Fn& f : fns) {
    std::memcpy(code + at, f.code, f.size);
    f.addr = reinterpret_cast<uint64_t>(code + at);
    at += (f.size + 63) & ~size_t{63};
  }
  if (mprotect(mem, page, PROT_READ | PROT_EXEC) != 0) return 1;

  const pid_t pid = getpid();
  // The perf map.
  std::string map_path = "/tmp/perf-" + std::to_string(pid) + ".map";
  if (FILE* m = std::fopen(map_path.c_str(), "w")) {
    for (const Fn& f : fns)
      if (f.map_name) std::fprintf(m, "%lx %zx %s\n", static_cast<unsigned long>(f.addr), f.size, f.map_name);
    std::fclose(m);
  }
  // The jitdump: header, one JIT_CODE_LOAD per function, mmapped PROT_EXEC as the specification asks.
  std::vector<uint8_t> dump;
  const uint32_t magic = 0x4A695444, version = 1, header_size = 40, mach = 62 /* EM_X86_64 */, pad = 0;
  const uint32_t upid = static_cast<uint32_t>(pid);
  const uint64_t ts = now_ns(), flags = 0;
  for (const void* p : {static_cast<const void*>(&magic), static_cast<const void*>(&version),
                        static_cast<const void*>(&header_size), static_cast<const void*>(&mach),
                        static_cast<const void*>(&pad), static_cast<const void*>(&upid)})
    put(dump, p, 4);
  put(dump, &ts, 8);
  put(dump, &flags, 8);
  uint64_t index = 0;
  for (const Fn& f : fns) {
    if (!f.dump_name) continue;
    const uint32_t id = 0;  // JIT_CODE_LOAD
    const uint32_t total = static_cast<uint32_t>(16 + 40 + std::strlen(f.dump_name) + 1 + f.size);
    const uint64_t rts = now_ns(), size = f.size, idx = index++;
    put(dump, &id, 4);
    put(dump, &total, 4);
    put(dump, &rts, 8);
    put(dump, &upid, 4);
    put(dump, &upid, 4);  // tid
    put(dump, &f.addr, 8);
    put(dump, &f.addr, 8);
    put(dump, &size, 8);
    put(dump, &idx, 8);
    put(dump, f.dump_name, std::strlen(f.dump_name) + 1);
    put(dump, f.code, f.size);
  }
  std::string dump_path = dir + "/jit-" + std::to_string(pid) + ".dump";
  int fd = open(dump_path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, dump.data(), dump.size()) != static_cast<ssize_t>(dump.size())) return 1;
  void* marker = mmap(nullptr, page, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  if (marker == MAP_FAILED) return 1;
  std::printf("code 0x%lx 0x%lx\n", static_cast<unsigned long>(fns[0].addr),
              static_cast<unsigned long>(fns[2].addr + fns[2].size));
  std::fflush(stdout);

  using Loop = uint64_t (*)(uint64_t);
  using CallsBack = void (*)(void (*)(), uint64_t);
  log_ms("hot", run_phase(reinterpret_cast<Loop>(fns[0].addr), ms));
  log_ms("callback", run_callback_phase(reinterpret_cast<CallsBack>(fns[1].addr), ms));
  log_ms("nofp", run_phase(reinterpret_cast<Loop>(fns[2].addr), ms));
  munmap(marker, page);
  close(fd);
  return 0;
}
