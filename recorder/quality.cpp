// Data-quality lines and meta entries (design in quality.h).
#include "recorder/quality.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/path.h"
#include "recorder/host.h"

namespace fxprof::recorder {

namespace {

// "user NAME (UID)" / "NAME (GID)", or the number alone when the database does not know it.
std::string user_name(uid_t uid) {
  std::vector<char> buf(4096);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found)
    return "user " + std::string(found->pw_name) + " (" + std::to_string(uid) + ")";
  return "user " + std::to_string(uid);
}
std::string group_name(gid_t gid) {
  std::vector<char> buf(4096);
  group gr{};
  group* found = nullptr;
  if (getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found)
    return std::string(found->gr_name) + " (" + std::to_string(gid) + ")";
  return std::to_string(gid);
}

// The process of the busiest thread (most CPU time, then most samples: the thread the printed URL opens,
// gecko::gecko_busiest_thread), or null for a profile without threads.
model::Process* busiest_process(model::Profile& profile) {
  model::Process* best = nullptr;
  int64_t best_cpu = -1;
  size_t best_samples = 0;
  for (model::Process& p : profile.processes)
    for (const model::Thread& t : p.threads) {
      int64_t cpu = 0;
      for (const model::Sample& s : t.samples) cpu += std::max<int64_t>(s.cpu_delta_ns, 0);
      if (!best || cpu > best_cpu || (cpu == best_cpu && t.samples.size() > best_samples)) {
        best = &p;
        best_cpu = cpu;
        best_samples = t.samples.size();
      }
    }
  return best;
}

// Where a problem of process `pid` is marked: that process's main thread (its last process entry: the
// program after its execs), else (pid 0, or a process without threads) the busiest process's; no thread for
// a profile without threads.
struct MarkerPlace {
  model::Process* proc = nullptr;
  model::Thread* thread = nullptr;
};
MarkerPlace marker_place(model::Profile& profile, uint32_t pid) {
  model::Process* proc = nullptr;
  for (model::Process& p : profile.processes)
    if (pid != 0 && p.pid == pid && !p.threads.empty()) proc = &p;
  if (!proc) proc = busiest_process(profile);
  if (!proc) return {};
  for (model::Thread& t : proc->threads)
    if (t.is_main) return {proc, &t};
  return {proc, &proc->threads[0]};
}

// `time` moved into the thread's life: a problem of the whole recording (the first loss, its end) marked on
// a process that started later or ended sooner would sit outside its track (before its zero: a negative
// time), where the front end shows it on no track.
uint64_t within_life(const MarkerPlace& at, uint64_t time) {
  const uint64_t lo = std::max(at.thread->start_ns, at.proc->start_ns);
  uint64_t hi = at.thread->end_ns.value_or(at.proc->end_ns.value_or(UINT64_MAX));
  return std::clamp(time, lo, std::max(lo, hi));
}

void add_schema(model::Profile& profile, model::MarkerSchema schema) {
  for (const model::MarkerSchema& s : profile.meta.marker_schemas)
    if (s.name == schema.name) return;
  profile.meta.marker_schemas.push_back(std::move(schema));
}

}  // namespace

void report_quality(model::Profile& profile, std::span<const QualityProblem> problems) {
  const uint64_t end = profile.meta.end_monotonic_ns.value_or(profile.meta.start_monotonic_ns);
  auto field = [&](std::string_view key, double n) {
    return model::MarkerField{profile.strings.intern(key), false, n, model::kNoString};
  };
  auto mark = [&](MarkerPlace at, std::string_view name, std::string_view type, uint64_t time,
                  std::vector<model::MarkerField> fields) {
    if (!at.thread) return;
    model::Marker m;
    m.name = profile.strings.intern(name);
    m.start_ns = m.end_ns = within_life(at, time);
    m.type = profile.strings.intern(type);
    m.fields = std::move(fields);
    at.thread->markers.push_back(std::move(m));
  };
  if (!problems.empty()) {
    model::MarkerSchema s;
    s.name = "DataQuality";
    s.display = {"marker-chart", "marker-table", "timeline-overview"};
    s.chart_label = s.tooltip_label = s.table_label = "{marker.data.what} ({marker.data.count})";
    s.fields = {{"what", "Problem", "string"}, {"count", "Count", "integer"}};
    add_schema(profile, std::move(s));
  }
  for (const QualityProblem& q : problems) {
    if (!q.line.empty()) std::fprintf(stderr, "fxprof: %s\n", q.line.c_str());
    profile.meta.data_quality.push_back({q.label, q.count, model::Meta::problem_kind(q.label)});
    std::vector<QualityProblem::Mark> marks = q.marks;
    if (marks.empty()) marks.push_back({q.pid, q.time_ns, q.label, q.count});
    for (const QualityProblem::Mark& k : marks) {
      model::MarkerField what{profile.strings.intern("what"), true, 0, profile.strings.intern(k.label)};
      mark(marker_place(profile, k.pid), "Data quality", "DataQuality", k.time_ns ? k.time_ns : end,
           {what, field("count", static_cast<double>(k.count))});
    }
  }
  if (const auto& sw = profile.meta.stack_walk) {
    model::MarkerSchema s;
    s.name = "StackWalking";
    s.display = {"marker-chart", "marker-table"};
    s.chart_label = s.tooltip_label = s.table_label =
        "{marker.data.stacks} stacks unwound, {marker.data.failed} failed";
    s.fields = {{"stacks", "Stacks unwound (DWARF)", "integer"},
                {"truncated", "Ended at the end of the stack copy", "integer"},
                {"failed", "Failed (no unwind information)", "integer"},
                {"framePointer", "Through code without CFI by frame pointers", "integer"},
                {"scanned", "Through code without CFI by stack scanning", "integer"}};
    add_schema(profile, std::move(s));
    mark(marker_place(profile, 0), "Stack walking", "StackWalking", end,
         {field("stacks", static_cast<double>(sw->stacks)),
          field("truncated", static_cast<double>(sw->truncated)),
          field("failed", static_cast<double>(sw->failed)),
          field("framePointer", static_cast<double>(sw->frame_pointer)),
          field("scanned", static_cast<double>(sw->scanned))});
  }
}

std::string unprofilable_reason(const std::string& path) {
  if (path.empty()) return "";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  // fs/exec.c: an exec whose new effective ids differ from the real ones is not dumpable, and the kernel
  // removes its perf events (perf_event_exit_task) whoever profiles it.
  if ((st.st_mode & S_ISUID) && st.st_uid != getuid())
    return st.st_uid == 0 ? "setuid root" : "setuid to " + user_name(st.st_uid);
  if ((st.st_mode & S_ISGID) && (st.st_mode & S_IXGRP) && st.st_gid != getgid())
    return "setgid group " + group_name(st.st_gid);
  // Root reads every file (CAP_DAC_OVERRIDE): only others lose an unreadable one.
  if (geteuid() != 0 && faccessat(AT_FDCWD, path.c_str(), R_OK, AT_EACCESS) != 0) {
    char mode[16];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("not readable by you (mode ") + mode + ")";
  }
  return "";
}

UnfollowedExec exec_without_mappings(uint32_t pid, const std::string& comm) {
  UnfollowedExec u;
  u.pid = pid;
  const std::string path = command_path(comm);
  u.reason = unprofilable_reason(path);
  u.binary = u.reason.empty() ? comm : path;
  return u;
}

std::string command_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* env = std::getenv("PATH");
  std::string_view rest = env && *env ? env : "/usr/local/bin:/bin:/usr/bin";
  while (!rest.empty()) {
    size_t colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

std::vector<uint32_t> status_uids(std::string_view status) {
  const size_t at = status.find("\nUid:");
  if (at == std::string_view::npos) return {};
  std::vector<uint32_t> uids;
  const char* p = status.data() + at + 5;
  const char* end = status.data() + status.size();
  for (int i = 0; i < 2; ++i) {
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    uint32_t uid = 0;
    auto [next, ec] = std::from_chars(p, end, uid);
    if (ec != std::errc()) return {};
    uids.push_back(uid);
    p = next;
  }
  return uids;
}

std::optional<UnfollowedExec> exec_not_followed(Procfs& procfs, uint32_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  auto stat_text = procfs.read(dir + "/stat");
  if (!stat_text) return std::nullopt;  // gone: it exited
  const size_t paren = stat_text->rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat_text->size()) return std::nullopt;
  const char state = (*stat_text)[paren + 2];
  if (state == 'Z' || state == 'X') return std::nullopt;  // exiting: a real exit
  // A non-dumpable task's files belong to root (or the setuid owner), not to its real user. So do those of a
  // task that has no memory any more (exiting, between exit_mm and the zombie state); such a task's status
  // has no Vm lines. It is read before the owner, so that a task exiting in between is not taken for one.
  auto status = procfs.read(dir + "/status");
  if (!status || status->find("\nVmSize:") == std::string::npos) return std::nullopt;
  const std::vector<uint32_t> uids = status_uids(*status);
  if (uids.empty()) return std::nullopt;
  struct stat st {};
  if (::stat((dir + "/environ").c_str(), &st) != 0 || st.st_uid == uids[0]) return std::nullopt;
  UnfollowedExec u;
  u.pid = pid;
  name_unfollowed(procfs, u);
  return u;
}

void name_unfollowed(Procfs& procfs, UnfollowedExec& u) {
  if (!u.reason.empty()) return;
  // The new program's arguments are in place only once its exec has set up the stack: until then (a
  // reader faster than the exec) the command line reads empty, and the name is asked again at the end.
  const std::string dir = "/proc/" + std::to_string(u.pid);
  if (auto cmd = procfs.read(dir + "/cmdline"); cmd && !cmd->empty() && (*cmd)[0] != '\0') {
    // argv[0] as typed ("passwd"): the reason is the file's, which PATH finds.
    u.binary = command_path(std::string(cmd->c_str()));
    u.reason = unprofilable_reason(u.binary);
  } else if (!u.binary.empty()) {  // gone: the name known so far, looked up in PATH
    u.reason = unprofilable_reason(command_path(u.binary));
  }
}

QualityProblem unfollowed_problem(std::span<const UnfollowedExec> execs) {
  QualityProblem q;
  q.count = execs.size();
  std::string names, list;
  for (size_t i = 0; i < execs.size() && i < 3; ++i) {
    const UnfollowedExec& e = execs[i];
    const std::string binary = e.binary.empty() ? "a program" : e.binary;
    names += (i ? ", " : "") + std::string(base_name(binary));
    list += (i ? ", " : "") + binary + " (pid " + std::to_string(e.pid) + (e.reason.empty() ? "" : ": ") +
            e.reason + ")";
  }
  if (execs.size() > 3) list += " and " + std::to_string(execs.size() - 3) + " more";
  q.label = "Not profiled after exec (setuid or unreadable binary): " + names;
  for (const UnfollowedExec& e : execs)  // each on its own process, at its own exec
    q.marks.push_back({e.pid, e.time_ns,
                       "Not profiled after exec (" +
                           (e.reason.empty() ? std::string("setuid or unreadable") : e.reason) +
                           "): " + (e.binary.empty() ? std::string("a program") : e.binary),
                       1});
  q.line = "not profiled from their exec on: " + list +
           ". The kernel stops profiling a process that executes a setuid or setgid program or one you "
           "cannot read; ";
  // Root loses only programs that change to another user or group: no other user does better.
  q.line += geteuid() == 0 ? "to profile one, run a copy without its setuid and setgid bits (chmod ug-s)"
                           : "record as root, or make the program readable (chmod +r) and not setuid";
  return q;
}

QualityProblem lost_records_problem(uint64_t lost, uint64_t unknown_samples, size_t processes,
                                    uint64_t first_ns) {
  QualityProblem q;
  q.label = std::string(model::Meta::kLostRecordsLabel);
  q.count = lost;
  q.time_ns = first_ns;  // pid 0: on the process the user sees first
  q.line = std::to_string(lost) + " records lost (the reader fell behind; shown as \"Lost records\" markers)";
  if (unknown_samples > 0)
    q.line += ": " + std::to_string(unknown_samples) + " samples of " + std::to_string(processes) +
              " process" + (processes == 1 ? "" : "es") +
              " ran code whose mmap or exec record was lost, under \"(unknown code: records lost)\"; a "
              "process whose exec was lost keeps its parent's name";
  q.line += ". Lower -F, use --call-graph fp (smaller samples) or a larger --buffer-size";
  return q;
}

uint64_t earliest_marker(const model::Profile& profile, std::string_view name) {
  uint64_t first = 0;
  for (const model::Process& p : profile.processes)
    for (const model::Thread& t : p.threads)
      for (const model::Marker& m : t.markers)
        if (m.name != model::kNoString && profile.strings.get(m.name) == name &&
            (first == 0 || m.start_ns < first))
          first = m.start_ns;
  return first;
}

}  // namespace fxprof::recorder
