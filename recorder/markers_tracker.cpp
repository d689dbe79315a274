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

constexpr size_t kMaxThreadNames = 65536;  // names kept (a program naming made-up thread ids is bounded)

// The name a ".thread_name" line gives (recorder/markers.h) and the thread it names; false for a marker.
bool thread_name_of(const model::Profile& p, const model::Marker& m, uint32_t writer, std::string& name,
                    uint32_t& tid) {
  bool named = false;
  tid = writer;
  for (const model::MarkerField& f : m.fields) {
    const std::string_view key = p.strings.get(f.key);
    if (key == model::kMarkerCategoryKey && f.is_string && p.strings.get(f.string) == kThreadNameCategory)
      named = true;
    else if (key == "tid" && !f.is_string && f.number >= 1 && f.number <= UINT32_MAX)
      tid = static_cast<uint32_t>(f.number);
  }
  if (named) name = std::string(p.strings.get(m.name));
  return named;
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
        std::string name;
        if (uint32_t tid = 0; thread_name_of(c_.profile, m, t.tid, name, tid)) {
          if (names_.size() < kMaxThreadNames || names_.count({f.process, tid}))
            names_[{f.process, tid}] = name;
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
  // The last name a thread was given; a main thread keeps its process's (the profile shows it by that).
  for (const auto& [thread, name] : names_)
    for (model::Thread& t : c_.profile.processes[thread.first].threads)
      if (t.tid == thread.second && !t.is_main) t.name = name;
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
