// fxprof recorder internals: the builder's marker-file tracker (tracker.h, recorder/markers.h). A file is
// followed from the MMAP2 record of its first mapping (a name of recorder/markers.h's kinds, whose pid is
// the mapping process's), its markers going to the thread that mapped it; every reading round (tick())
// reads what was added, the process's exit (release(Exit)) and the recording's end read the rest. finish()
// names the threads their lines named (recorder/markers.h: after the kernel's names, which they replace),
// adds the marker schemas and says, once, what could not be used.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "recorder/markers.h"
#include "recorder/tracker.h"

namespace fxprof::recorder {

class MarkerTracker final : public Tracker {
 public:
  explicit MarkerTracker(TrackerContext& c) : c_(c) {}
  void on_mmap2(const Mmap2Record& m) override;
  void tick(uint64_t now_ns) override;
  void release(uint32_t pid, uint64_t before_ns, Release why) override;
  void finish() override;

  uint64_t markers() const { return markers_; }

 private:
  struct File {
    uint32_t pid = 0;
    size_t process = 0, thread = 0;  // where its markers go: indices into the profile (stable: appended only)
    MarkerFileKind kind = MarkerFileKind::None;
    std::unique_ptr<MarkerFileFollower> follower;
    uint64_t bad = 0;
    bool done = false;
  };
  void read(File& f, bool last);

  TrackerContext& c_;
  std::vector<File> files_;
  std::unordered_set<std::string> seen_;  // "PID path" of the files followed
  // Threads named by lines of their process's files, (process index, tid) -> name: applied in finish().
  std::map<std::pair<size_t, uint32_t>, std::string> names_;
  uint64_t markers_ = 0, dropped_ = 0;
};

}  // namespace fxprof::recorder
