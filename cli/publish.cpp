#include "cli/publish.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <set>

#include "base/terminal.h"
#include "base/url.h"
#include "gecko/gecko.h"
#include "sinks/output.h"
#include "sinks/pprof.h"

namespace fxprof::cli {
namespace {

// What a reader of the uploaded profile learns, said before it leaves the machine. Every name in it comes
// from the profile (another person's file, perhaps): each line goes through the one printer (say()).
void print_contents(const model::Profile& p, size_t bytes, bool stripped) {
  std::set<std::string> folders, threads;
  size_t nthreads = 0;
  std::string procs;
  for (const model::Process& proc : p.processes) {
    if (procs.size() < 300)
      procs += (procs.empty() ? "" : ", ") + proc.name + " (pid " + std::to_string(proc.pid) + ")";
    for (const model::Lib& l : proc.libs)
      if (auto slash = l.path.rfind('/'); slash != std::string::npos && slash > 0)
        folders.insert(l.path.substr(0, slash));
    for (const model::Thread& t : proc.threads) {
      ++nthreads;
      if (threads.size() < 8) threads.insert(t.name);
    }
  }
  std::string folder_list, thread_list;
  for (const auto& f : folders)
    if (folder_list.size() < 300) folder_list += (folder_list.empty() ? "" : ", ") + f;
  for (const auto& t : threads) thread_list += (thread_list.empty() ? "" : ", ") + t;
  char size[64];
  std::snprintf(size, sizeof size, "%.1f MB", static_cast<double>(bytes) / 1e6);
  const std::string& command = p.meta.machine.command_line;
  say("the profile (" + std::string(size) + ") holds:");
  say("  command line: " + (command.empty() ? std::string("(none recorded)") : command) +
      (stripped          ? " (arguments stripped)"
       : command.empty() ? ""
                         : " (--strip-args leaves the arguments out)"));
  say("  processes: " + procs);
  say("  " + std::to_string(nthreads) + " threads, named: " + thread_list +
      (nthreads > threads.size() ? ", ..." : ""));
  say("  paths of the program and its libraries, in: " + (folder_list.empty() ? "(none)" : folder_list));
  say("  function names, source file paths and the machine's OS and CPU");
}

bool confirm_upload() {
  std::fprintf(stderr, "fxprof: upload it? Anyone with the link can open it (unlisted, but public). [y/N] ");
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  return answer == "y" || answer == "Y" || answer == "yes";
}

}  // namespace

void strip_arguments(model::Profile& profile) {
  std::string& command = profile.meta.machine.command_line;
  if (command.empty() || command.starts_with("-p ")) return;
  command = command.substr(0, command.find(' '));
  profile.meta.product = "fxprof: " + command;
}

int share_profile(const std::string& path, const InputOptions& input, const ShareOptions& o) {
  auto profile = load_profile_for_sinks(path, input);
  if (!profile) {
    say(profile.error());
    return profile.exit_code();
  }
  return share_profile(*profile, o);
}

int share_profile(model::Profile& profile, const ShareOptions& o) {
  profile.meta.presymbolicated = true;  // self-contained: opens with no fxprof server
  if (o.strip_args) strip_arguments(profile);
  std::string gzip;
  if (auto s = gecko::write_gecko_profile(profile, *sinks::OutputFile::in_memory(gzip, true)); !s) {
    say(s.error());
    return 1;
  }
  if (!o.share_to.empty()) {
    if (auto s = share::put_profile(o.share_to, gzip, o.headers); !s) {
      say(s.error());
      return 1;
    }
    char size[32];
    std::snprintf(size, sizeof size, "%.1f MB", static_cast<double>(gzip.size()) / 1e6);
    say("stored " + std::string(size) +
        " at the URL given; the Firefox Profiler opens it only if the store sends CORS headers "
        "(Access-Control-Allow-Origin for " +
        profiler_origin() + ")");
    std::printf("%s\n", from_url_link(o.share_to).c_str());
    return 0;
  }
  print_contents(profile, gzip.size(), o.strip_args);
  if (gzip.size() > share::kUploadLimitBytes) {
    std::fprintf(stderr,
                 "fxprof: the profile is %.1f MB gzipped; the Firefox Profiler's store takes at most 150 MB "
                 "(record a shorter run, or use --share-to with your own store)\n",
                 static_cast<double>(gzip.size()) / 1e6);
    return 1;
  }
  if (!o.yes) {
    if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO)) {
      std::fprintf(stderr,
                   "fxprof: not uploaded: the link would be public; give --yes to upload without asking\n");
      return 1;
    }
    if (!confirm_upload()) {
      std::fprintf(stderr, "fxprof: not uploaded\n");
      return 1;
    }
  }
  say("uploading to " + o.upload_origin + " (the service takes at most 150 MB)...");
  auto token = share::upload_public(o.upload_origin, gzip);
  if (!token) {
    say(token.error());
    return 1;
  }
  std::printf("%s\n", share::public_link(*token).c_str());
  return 0;
}

std::string add_label(const std::string& kv, share::Labels& labels) {
  const size_t eq = kv.find('=');
  if (eq == std::string::npos) return "--label needs NAME=VALUE, not '" + kv + "'";
  std::string name = kv.substr(0, eq);
  if (auto s = share::check_label_name(name); !s) return s.error();
  labels.emplace_back(std::move(name), kv.substr(eq + 1));
  return "";
}

int push_profile(const std::string& path, const InputOptions& input, PushTargets t) {
  auto profile = load_profile_for_sinks(path, input);
  if (!profile) {
    say(profile.error());
    return profile.exit_code();
  }
  return push_profile(*profile, std::move(t));
}

int push_profile(model::Profile& profile, PushTargets t) {
  if (t.strip_args) strip_arguments(profile);
  if (t.options.app.empty()) t.options.app = profile.processes.empty() ? "fxprof" : profile.processes[0].name;
  const model::Meta& m = profile.meta;
  t.options.from_unix_s = static_cast<uint64_t>(m.start_unix_ms / 1000);
  uint64_t duration_ns = 0;
  if (m.end_monotonic_ns && *m.end_monotonic_ns > m.start_monotonic_ns)
    duration_ns = *m.end_monotonic_ns - m.start_monotonic_ns;
  t.options.until_unix_s =
      static_cast<uint64_t>((m.start_unix_ms + static_cast<double>(duration_ns) / 1e6) / 1000) + 1;
  std::string pprof;
  {
    const std::unique_ptr<sinks::OutputFile> out = sinks::OutputFile::in_memory(pprof, true);
    sinks::write_pprof(profile, *out);
    if (auto s = out->finish(); !s) {
      say(s.error());
      return 1;
    }
  }
  int rc = 0;
  if (!t.pyroscope.empty()) {
    auto push = t.pyroscope_ingest ? share::push_pyroscope_ingest : share::push_pyroscope;
    if (auto s = push(t.pyroscope, pprof, t.options); !s) {
      say(s.error());
      rc = 1;
    } else {
      say("pushed to Pyroscope at " + t.pyroscope + " as " + t.options.app);
    }
  }
  if (!t.parca.empty()) {
    if (auto s = share::push_parca(t.parca, pprof, t.options); !s) {
      say(s.error());
      rc = 1;
    } else {
      say("pushed to Parca at " + t.parca + " as " + t.options.app);
    }
  }
  return rc;
}

}  // namespace fxprof::cli
