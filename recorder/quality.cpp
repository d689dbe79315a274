// Data-quality lines and meta entries (design in quality.h).
#include "recorder/quality.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

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

}  // namespace

void report_quality(model::Profile& profile, std::span<const QualityProblem> problems) {
  for (const QualityProblem& q : problems) {
    if (!q.line.empty()) std::fprintf(stderr, "fxprof: %s\n", q.line.c_str());
    profile.meta.data_quality.push_back({q.label, q.count});
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
  if (!u.binary.empty()) return;
  // The new program's arguments are in place only once its exec has set up the stack: until then (a
  // reader faster than the exec) the command line reads empty, and the name is asked again at the end.
  const std::string dir = "/proc/" + std::to_string(u.pid);
  if (auto cmd = procfs.read(dir + "/cmdline"); cmd && !cmd->empty() && (*cmd)[0] != '\0') {
    u.binary = std::string(cmd->c_str());
    u.reason = unprofilable_reason(u.binary);
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
  q.line = "not profiled from their exec on: " + list +
           ". The kernel stops profiling a process that executes a setuid or setgid program or one you "
           "cannot read; ";
  // Root loses only programs that change to another user or group: no other user does better.
  q.line += geteuid() == 0 ? "to profile one, run a copy without its setuid and setgid bits (chmod ug-s)"
                           : "record as root, or make the program readable (chmod +r) and not setuid";
  return q;
}

QualityProblem lost_records_problem(uint64_t lost, uint64_t unknown_samples, size_t processes) {
  QualityProblem q;
  q.label = "Records lost (ring buffer overflow)";
  q.count = lost;
  q.line = std::to_string(lost) + " records lost (the reader fell behind; shown as \"Lost records\" markers)";
  if (unknown_samples > 0)
    q.line += ": " + std::to_string(unknown_samples) + " samples of " + std::to_string(processes) +
              " process" + (processes == 1 ? "" : "es") +
              " ran code whose mmap or exec record was lost, under \"(unknown code: records lost)\"; a "
              "process whose exec was lost keeps its parent's name";
  q.line += ". Lower -F, use --call-graph fp (smaller samples) or a larger --buffer-size";
  return q;
}

}  // namespace fxprof::recorder
