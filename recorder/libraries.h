// fxprof recorder internals: the builder's libraries tracker (tracker.h). Executable file mappings, from
// MMAP2 records and, when attaching, from the /proc/PID/maps snapshot (the one parser,
// recorder/unwind/unwinder.h executable_mappings), become each process's libs (model::Lib, with the ELF
// identity of the recording's table of binaries, recorder/unwind/binaries.h) and the unwinder's mappings; the
// mapped files are kept open (kept_files.h) so that binaries deleted while they run can still be read. A
// forked child starts with its parent's libs, an exec drops the old program's.
//
// It is second in the list of trackers (trackers.cpp), right after the processes and threads, so that what
// the others see (the unwinder's mappings, jitdump processes) is what the record left. The builder's sample
// path asks it one thing, known_code().
//
// add_mapping() is the one place where an executable file mapping becomes a lib. The hook for loading a
// binary's symbols while the program runs is told a lib when a sample first lands in it (sampled()), not
// when it is mapped: python3 maps 11 binaries and its samples use 4-7 of them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "recorder/kept_files.h"
#include "recorder/tracker.h"
#include "recorder/unwind/binaries.h"
#include "recorder/unwind/unwinder.h"

namespace fxprof::recorder {

class LibraryTracker final : public Tracker {
 public:
  // The builder's entry of `pid` now, made (named from /proc) when it has none: a mapping may be the first
  // record of a process.
  using ProcessAt = std::function<model::Process&(uint32_t pid, uint64_t time_ns)>;
  // `unwinder` null: frame-pointer mode, with a table of binaries of its own.
  LibraryTracker(TrackerContext& c, Unwinder* unwinder, ProcessAt process_at);

  void forget_process(uint32_t pid) override {
    anon_code_.erase(pid);
    told_starts_.erase(pid);
  }
  void on_mmap2(const Mmap2Record& m) override;
  void on_fork(const ForkRecord& f) override;  // a child process starts with its parent's mappings
  void on_comm(const CommRecord& c) override;  // an exec: the old program's mappings are gone
  // Attach mode: the executable mappings of /proc/PID/maps, added as MMAP2 records would have been; returned
  // for the other trackers (Tracker::on_attached_mapping). `readable`: whether the maps could be read.
  std::vector<MapsEntry> attach(uint32_t pid, uint64_t time_ns, bool* readable = nullptr);
  // The last thread of `pid` exited (every tracker released its stacks): the unwinder forgets its mappings.
  void process_ended(uint32_t pid) override {
    if (unwinder_) unwinder_->on_exit(pid);
  }
  // Every record was handled: the libs of binaries deleted while they ran get their read_path.
  void finish() override { kept_.read_deleted_libs(c_.profile); }

  // Told each binary once (by its read path and build ID), with its lib, when a sample's stack first goes
  // through it (sampled(); recorder::Options::on_binary_sampled).
  std::function<void(const model::Lib&)> on_binary_sampled;
  // A user frame of a sample of `pid` at `ip`, new to the profile's frames (the builder asks only then):
  // the lib there is told to on_binary_sampled, the first time for its binary.
  void sampled(uint32_t pid, uint64_t ip);
  // Where a mapped file is read from instead of its path ("": the path), as a lib's read_path: a perf.data
  // file's binary that is gone or another now, read from its copy in perf's build-ID cache (perf_import.h).
  std::function<std::string(const std::string& path)> read_from;

  // Whether `ip` is inside an executable mapping of `pid` (a lib, or code without a file) known now.
  bool known_code(uint32_t pid, uint64_t ip) const;
  // Whether `ip` is the ELF entry point of the binary mapped there: where a process starts after execve,
  // so an exact instruction, never a return address.
  bool is_entry_point(uint32_t pid, uint64_t ip);

  const std::vector<std::string>& deleted_read() const { return kept_.deleted_read(); }
  const std::vector<std::string>& deleted_unreadable() const { return kept_.unreadable(); }
  std::vector<UniqueFd> take_kept_files() { return kept_.take(); }
  // A continuous recording's cut (recorder/window.h), once ended processes gave up their libs: what no
  // process of the profile maps any more goes, the unwinder's modules, the table's binaries (their mappings
  // and descriptors) and the kept descriptors, which are returned (the window's libs may read through
  // them). A binary mapped again later is opened again.
  std::vector<UniqueFd> release_unmapped();
  size_t kept_files() const { return kept_.kept(); }
  const Binaries& binaries() const { return *binaries_; }
  void keep_executable(uint32_t pid) { kept_.keep_executable(pid); }

 private:
  // An executable mapping; `prot` (PROT_* bits) picks the ELF segment the kernel mapped there. `dev`/`ino`
  // (MMAP2, /proc/PID/maps; 0 when unknown) identify the mapped file (KeptFiles::keep).
  void add_mapping(uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, uint32_t prot,
                   const std::string& path, uint64_t t, uint64_t dev, uint64_t ino);
  const elf::Identity* elf_for(const std::string& path);

  TrackerContext& c_;
  Unwinder* unwinder_;
  ProcessAt process_at_;
  // The recording's opened binaries: the unwinder's table (each binary opened and parsed once), or, in
  // frame-pointer mode, one of its own.
  Binaries own_binaries_;
  Binaries* binaries_;
  KeptFiles kept_;
  // Executable memory without a file (JIT code) per pid, [start, end): known code for known_code().
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> anon_code_;
  std::unordered_set<std::string> told_;  // binaries given to on_binary_sampled: read path '\n' build ID
  std::unordered_map<uint32_t, std::vector<uint64_t>> told_starts_;  // per pid: the libs' starts looked up
};

}  // namespace fxprof::recorder
