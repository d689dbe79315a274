#include "cli/publish.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <set>

#include "base/fd.h"
#include "base/temp_dir.h"
#include "base/url.h"
#include "gecko/gecko.h"
#include "sinks/pprof.h"

namespace fxprof::cli {
namespace {

// What a reader of the uploaded profile learns, said before it leaves the machine.
void print_contents(const model::Profile& p, size_t bytes) {
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
  std::fprintf(stderr,
               "fxprof: the profile (%.1f MB) holds:\n"
               "  processes: %s\n"
               "  %zu threads, named: %s%s\n"
               "  paths of the program and its libraries, in: %s\n"
               "  function names, source file paths and the machine's OS and CPU\n",
               static_cast<double>(bytes) / 1e6, procs.c_str(), nthreads, thread_list.c_str(),
               nthreads > threads.size() ? ", ..." : "",
               folder_list.empty() ? "(none)" : folder_list.c_str());
}

bool confirm_upload() {
  std::fprintf(stderr, "fxprof: upload it? Anyone with the link can open it (unlisted, but public). [y/N] ");
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  return answer == "y" || answer == "Y" || answer == "yes";
}

}  // namespace

int share_profile(const std::string& path, const InputOptions& input, const ShareOptions& o) {
  auto profile = load_profile_for_sinks(path, input);
  if (!profile) {
    std::fprintf(stderr, "fxprof: %s\n", profile.error().c_str());
    return profile.exit_code();
  }
  profile->meta.presymbolicated = true;  // self-contained: opens with no fxprof server
  TempFolder dir("fxprof-share");
  if (dir.path().empty()) {
    std::fprintf(stderr, "fxprof: cannot make a temporary folder\n");
    return 1;
  }
  const std::string file = dir.path() + "/profile.json.gz";
  if (auto s = gecko::write_gecko_profile(*profile, file); !s) {
    std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
    return 1;
  }
  auto gzip = read_file(file);
  if (!gzip) {
    std::fprintf(stderr, "fxprof: %s\n", gzip.error().c_str());
    return 1;
  }
  if (!o.share_to.empty()) {
    if (auto s = share::put_profile(o.share_to, *gzip, o.headers); !s) {
      std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
      return 1;
    }
    std::fprintf(stderr,
                 "fxprof: stored %.1f MB at the URL given; the Firefox Profiler opens it only if the store "
                 "sends CORS headers (Access-Control-Allow-Origin for %s)\n",
                 static_cast<double>(gzip->size()) / 1e6, profiler_origin().c_str());
    std::printf("%s\n", from_url_link(o.share_to).c_str());
    return 0;
  }
  print_contents(*profile, gzip->size());
  if (gzip->size() > share::kUploadLimitBytes) {
    std::fprintf(stderr,
                 "fxprof: the profile is %.1f MB gzipped; the Firefox Profiler's store takes at most 150 MB "
                 "(record a shorter run, or use --share-to with your own store)\n",
                 static_cast<double>(gzip->size()) / 1e6);
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
  std::fprintf(stderr, "fxprof: uploading to %s (the service takes at most 150 MB)...\n",
               o.upload_origin.c_str());
  auto token = share::upload_public(o.upload_origin, *gzip);
  if (!token) {
    std::fprintf(stderr, "fxprof: %s\n", token.error().c_str());
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
    std::fprintf(stderr, "fxprof: %s\n", profile.error().c_str());
    return profile.exit_code();
  }
  if (t.options.app.empty())
    t.options.app = profile->processes.empty() ? "fxprof" : profile->processes[0].name;
  const model::Meta& m = profile->meta;
  t.options.from_unix_s = static_cast<uint64_t>(m.start_unix_ms / 1000);
  uint64_t duration_ns = 0;
  if (m.end_monotonic_ns && *m.end_monotonic_ns > m.start_monotonic_ns)
    duration_ns = *m.end_monotonic_ns - m.start_monotonic_ns;
  t.options.until_unix_s =
      static_cast<uint64_t>((m.start_unix_ms + static_cast<double>(duration_ns) / 1e6) / 1000) + 1;
  TempFolder dir("fxprof-push");
  if (dir.path().empty()) {
    std::fprintf(stderr, "fxprof: cannot make a temporary folder\n");
    return 1;
  }
  const std::string file = dir.path() + "/profile.pb.gz";
  if (auto s = sinks::write_pprof(*profile, file); !s) {
    std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
    return 1;
  }
  auto pprof = read_file(file);
  if (!pprof) {
    std::fprintf(stderr, "fxprof: %s\n", pprof.error().c_str());
    return 1;
  }
  int rc = 0;
  if (!t.pyroscope.empty()) {
    if (auto s = share::push_pyroscope(t.pyroscope, *pprof, t.options); !s) {
      std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
      rc = 1;
    } else {
      std::fprintf(stderr, "fxprof: pushed to Pyroscope at %s as %s\n", t.pyroscope.c_str(),
                   t.options.app.c_str());
    }
  }
  if (!t.parca.empty()) {
    if (auto s = share::push_parca(t.parca, *pprof, t.options); !s) {
      std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
      rc = 1;
    } else {
      std::fprintf(stderr, "fxprof: pushed to Parca at %s as %s\n", t.parca.c_str(), t.options.app.c_str());
    }
  }
  return rc;
}

}  // namespace fxprof::cli
