// tests/recorder's fixtures for recorder::record() on real programs: symbols of the test programs, frames and
// names of a sample, options, thread lookups, CPU logs, spawned programs (recorder_test.cpp,
// recorder_attach_test.cpp).
#pragma once

#include <elf.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "recorder/recorder.h"
#include "tests/support/support.h"

extern char** environ;

namespace fxprof::test::recorder_fixtures {

using namespace fxprof;
using fxprof::test::CpuLog;
using fxprof::test::process_cpu_ms;
using fxprof::test::test_program;

// ---- A tiny ELF symbol table reader: maps a lib-relative address to a function name (tests only). ----
struct Symbols {
  struct Sym {
    uint64_t start, size;
    std::string name;
  };
  std::vector<Sym> syms;
  uint64_t base_svma = 0;

  explicit Symbols(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    fstat(fd, &st);
    auto size = static_cast<size_t>(st.st_size);
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return;
    auto* b = static_cast<const char*>(p);
    auto* eh = reinterpret_cast<const Elf64_Ehdr*>(b);
    auto* ph = reinterpret_cast<const Elf64_Phdr*>(b + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; ++i)
      if (ph[i].p_type == PT_LOAD) {
        base_svma = ph[i].p_vaddr;
        break;
      }
    auto* sh = reinterpret_cast<const Elf64_Shdr*>(b + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; ++i) {
      if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
      auto* s = reinterpret_cast<const Elf64_Sym*>(b + sh[i].sh_offset);
      const char* strtab = b + sh[sh[i].sh_link].sh_offset;
      for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k)
        if (ELF64_ST_TYPE(s[k].st_info) == STT_FUNC && s[k].st_value)
          syms.push_back({s[k].st_value, s[k].st_size, strtab + s[k].st_name});
    }
    munmap(p, size);
  }
  std::string lookup(uint64_t svma) const {
    for (const Sym& s : syms)
      if (svma >= s.start && svma < s.start + std::max<uint64_t>(s.size, 1)) return s.name;
    return "";
  }
};

class Symbolizer {
 public:
  // Function name of `address` in `proc` ("" if unknown); return addresses are looked up at address - 1.
  std::string name(const model::Process& proc, uint64_t address, bool is_return_address) {
    uint64_t a = is_return_address ? address - 1 : address;
    for (const model::Lib& l : proc.libs) {
      if (a < l.start || a >= l.end) continue;
      auto it = cache_.find(l.path);
      if (it == cache_.end()) it = cache_.emplace(l.path, std::make_unique<Symbols>(l.path)).first;
      uint64_t rel = a - (l.start - l.offset);
      return it->second->lookup(rel + it->second->base_svma);
    }
    return "";
  }

 private:
  std::map<std::string, std::unique_ptr<Symbols>> cache_;
};

// The frames of a stack, leaf first.
inline std::vector<model::Frame> frames_of(const model::Profile& p, model::StackId s) {
  std::vector<model::Frame> out;
  for (; s != model::kNoStack; s = p.stacks.prefix(s)) out.push_back(p.frames.get(p.stacks.frame(s)));
  return out;
}

// Names of the native frames of a stack, leaf first.
inline std::vector<std::string> names_of(const model::Profile& p, const model::Process& proc,
                                         model::StackId s, Symbolizer& sym) {
  std::vector<std::string> out;
  bool leaf = true;
  for (const model::Frame& f : frames_of(p, s)) {
    if (f.kind == model::FrameKind::Native) {
      out.push_back(sym.name(proc, f.address, !leaf));
      leaf = false;
    } else if (f.kind == model::FrameKind::Label) {
      out.push_back(std::string(p.strings.get(f.name)));
    }
  }
  return out;
}

inline std::string lib_of(const model::Process& proc, uint64_t address) {
  for (const model::Lib& l : proc.libs)
    if (address >= l.start && address < l.end) return l.name;
  return "";
}

// Whether a frame name is `s` or, for the mangled names of functions in anonymous namespaces, holds it.
inline bool contains(const std::vector<std::string>& v, const std::string& s) {
  for (const std::string& n : v)
    if (n == s || (s.size() > 6 && n.find(s) != std::string::npos)) return true;
  return false;
}

inline recorder::Options opts(std::vector<std::string> cmd,
                              recorder::CallGraph cg = recorder::CallGraph::FramePointer) {
  recorder::Options o;
  o.command = std::move(cmd);
  o.call_graph = cg;
  return o;
}

inline const model::Thread* find_thread(const model::Process& p, const std::string& name) {
  for (const model::Thread& t : p.threads)
    if (t.name == name) return &t;
  return nullptr;
}

inline size_t count_samples(const model::Process& p) {
  size_t n = 0;
  for (const model::Thread& t : p.threads) n += t.samples.size();
  return n;
}

// The CPU time the kernel's context-switch records give a process while it was recorded (the samples' CPU
// deltas, which keep adding up across lost samples). Attach and --duration recordings have no other exact
// window: /proc's CPU time read around record() also counts what ran while fxprof attached and finished.
inline double recorded_cpu_ms(const model::Process& p) {
  double ns = 0;
  for (const model::Thread& t : p.threads)
    for (const model::Sample& s : t.samples)
      if (s.cpu_delta_ns > 0) ns += static_cast<double>(s.cpu_delta_ns);
  return ns / 1e6;
}

// The programs the recorder launches inherit our environment: while alive, they log their CPU time into
// `log` (tests/programs/cpu_log.h).
class LogCpuInto {
 public:
  explicit LogCpuInto(const CpuLog& log) { setenv(CpuLog::kVariable, log.path().c_str(), 1); }
  ~LogCpuInto() { unsetenv(CpuLog::kVariable); }
  LogCpuInto(const LogCpuInto&) = delete;
  LogCpuInto& operator=(const LogCpuInto&) = delete;
};

// Starts a program outside the recorder (for attach tests), logging into `log`; kills and reaps it on
// destruction.
class Spawned {
 public:
  Spawned(std::vector<std::string> argv, const CpuLog& log) {
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    LogCpuInto env(log);
    if (posix_spawn(&pid_, a[0], nullptr, nullptr, a.data(), environ) != 0) pid_ = -1;
  }
  ~Spawned() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int st;
      waitpid(pid_, &st, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // Running (not exited, not a zombie).
  bool alive() const {
    siginfo_t si{};
    return pid_ > 0 && waitid(P_PID, static_cast<id_t>(pid_), &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           si.si_pid == 0;
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace fxprof::test::recorder_fixtures
