// The marker-file tracker (markers_tracker.h).
#include "recorder/markers_tracker.h"

#include <unistd.h>

#include "model/markers.h"
#include "recorder/quality.h"

namespace fxprof::recorder {

namespace {

// Whose files a process's markers may come from: its real and effective users (jit.h's rule).
std::vector<uint32_t> file_owners(Procfs& procfs, uint32_t pid) {
  std::vector<uint32_t> uids;
  if (auto status = procfs.read("/proc/" + std::to_string(pid) + "/status")) uids = status_uids(*status);
  if (uids.empty()) uids.push_back(static_cast<uint32_t>(::geteuid()));
  return uids;
}

}  // namespace

void MarkerTracker::on_mmap2(const Mmap2Record& m) {
  uint32_t named_pid = 0;
  const MarkerFileKind kind = marker_file_kind(m.path, &named_pid);
  if (kind == MarkerFileKind::None || named_pid != m.pid || m.path.empty() || m.path[0] != '/') return;
  if (!seen_.insert(std::to_string(m.pid) + " " + std::string(m.path)).second) return;  // a later window
  model::Process* proc = c_.process_of(m.pid);
  model::Thread* thread = c_.thread_of(m.tid);
  if (!proc || !thread || proc->threads.empty() || thread < proc->threads.data() ||
      thread >= proc->threads.data() + proc->threads.size())
    return;
  File f;
  f.pid = m.pid;
  f.process = static_cast<size_t>(proc - c_.profile.processes.data());
  f.thread = static_cast<size_t>(thread - proc->threads.data());
  f.kind = kind;
  f.follower = std::make_unique<MarkerFileFollower>(std::string(m.path), file_owners(c_.procfs, m.pid));
  files_.push_back(std::move(f));
}

void MarkerTracker::read(File& f, bool last) {
  if (f.done) return;
  f.done = last;
  model::Thread& t = c_.profile.processes[f.process].threads[f.thread];
  f.follower->poll(
      [&](std::string_view line) {
        model::Marker m;
        if (!parse_marker_line(line, f.kind, c_.profile, m)) {
          ++f.bad;
          return;
        }
        if (markers_ >= kMaxProgramMarkers) {
          ++dropped_;
          return;
        }
        ++markers_;
        t.markers.push_back(std::move(m));
      },
      last);
}

void MarkerTracker::tick(uint64_t) {
  for (File& f : files_) read(f, false);
}

void MarkerTracker::release(uint32_t pid, uint64_t, Release why) {
  if (why == Release::Exit || why == Release::End)
    for (File& f : files_)
      if (why == Release::End || f.pid == pid) read(f, true);
}

void MarkerTracker::finish() {
  for (File& f : files_) read(f, true);
  if (markers_ > 0) model::add_program_marker_schemas(c_.profile);
  std::vector<QualityProblem> problems;
  for (const File& f : files_) {
    const std::string& path = f.follower->path();
    if (!f.follower->untrusted().empty())
      problems.push_back({"Marker file not used (not the process's): " + f.follower->untrusted(), 1,
                          f.follower->untrusted() +
                              ": its markers were not used (a marker file must belong to the process's user "
                              "or root and be writable by no one else)",
                          f.pid});
    if (const uint64_t bad = f.bad + f.follower->too_long(); bad > 0)
      problems.push_back({"Marker lines not understood: " + path, bad,
                          path + ": " + std::to_string(bad) +
                              " lines are not markers (START_NS END_NS NAME expected) and were left out",
                          f.pid});
  }
  if (dropped_ > 0)
    problems.push_back({"Markers left out (over the limit)", dropped_,
                        std::to_string(dropped_) + " markers left out: a recording keeps at most " +
                            std::to_string(kMaxProgramMarkers) + " of the program's markers"});
  if (!problems.empty()) report_quality(c_.profile, problems);
}

}  // namespace fxprof::recorder
