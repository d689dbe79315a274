// fxprof recorder internals: the builder's JIT code tracker (tracker.h, recorder/jit.h). A process's perf
// map (/tmp/perf-PID.map) is followed while it runs once it has executable memory without a file (tick(),
// every reading round: new lines are stamped with the previous look's time); its jitdump, announced by the
// MMAP2 of the file (or found in /proc/PID/maps when attaching), is read when its last thread exits
// (release(Exit)) or at finish() for processes still running; finish() then names the JIT frames, by
// time. It follows the builder's process entries through the context (process_of, for_each_process) and
// forgets a pid's files when the pid gets a new entry (forget_process) or execs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "recorder/jit.h"
#include "recorder/tracker.h"

namespace fxprof::recorder {

class JitTracker final : public Tracker {
 public:
  explicit JitTracker(TrackerContext& c) : c_(c) {}
  void forget_process(uint32_t pid) override {
    procs_.erase(pid);
    following_.erase(pid);
  }
  void on_attached_mapping(uint32_t pid, const MapsEntry& e, uint64_t time_ns) override;
  void on_mmap2(const Mmap2Record& m) override;
  void on_comm(const CommRecord& c) override;  // an exec: the old program's files are not the new one's
  void on_fork(const ForkRecord& f) override;  // a child process has its parent's JIT code
  void tick(uint64_t now_ns) override;         // follows the perf maps of processes with JIT code
  void release(uint32_t pid, uint64_t before_ns, Release why) override;  // Exit: reads its files
  void finish() override;  // reads the files of processes still running, names the JIT frames

 private:
  struct JitProc {
    std::string jitdump;                      // the jit-PID.dump file the process mmapped ("" if none)
    std::optional<PerfMapFollower> perf_map;  // /tmp/perf-PID.map, followed while the process has JIT code
    bool read = false;                        // its JIT names were read (at exit, or at the end)
    bool anon_code = false;                   // it has executable memory without a file (JIT code)
  };
  // Reads the process's perf map and jitdump into its model::Process::jit, once.
  void read(uint32_t pid, JitProc& p);
  // Whose files may name a process's code (jit_file_untrusted).
  std::vector<uint32_t> file_owners(uint32_t pid);

  TrackerContext& c_;
  std::unordered_map<uint32_t, JitProc> procs_;  // by pid: the builder's current entry of each
  // The pids with JIT code whose maps tick() follows: not every process the recording ever saw (a recording
  // of the whole machine for an hour of builds has tens of thousands, looked through 40 times a second).
  std::unordered_set<uint32_t> following_;
};

}  // namespace fxprof::recorder
