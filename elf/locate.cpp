#include <dlfcn.h>
#include <elfutils/debuginfod.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "base/fd.h"
#include "base/path.h"
#include "elf/elf.h"

namespace fxprof::elf {

namespace {

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? std::string() : path.substr(0, slash);
}

// libdebuginfod is loaded on first use. Linking it pulls in libcurl and GnuTLS, whose constructors cost about
// 18 ms at every start of fxprof (measured: 20 ms for `fxprof --version` against 2 ms without them), while
// most runs never ask a debuginfod server.
struct DebuginfodApi {
  debuginfod_client* (*begin)() = nullptr;
  int (*find_debuginfo)(debuginfod_client*, const unsigned char*, int, char**) = nullptr;
  void (*end)(debuginfod_client*) = nullptr;
};

const DebuginfodApi* debuginfod_api() {
  static const DebuginfodApi* api = []() -> const DebuginfodApi* {
    void* lib = ::dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return nullptr;
    static DebuginfodApi a;
    a.begin = reinterpret_cast<decltype(a.begin)>(::dlsym(lib, "debuginfod_begin"));
    a.find_debuginfo =
        reinterpret_cast<decltype(a.find_debuginfo)>(::dlsym(lib, "debuginfod_find_debuginfo"));
    a.end = reinterpret_cast<decltype(a.end)>(::dlsym(lib, "debuginfod_end"));
    return a.begin && a.find_debuginfo && a.end ? &a : nullptr;
  }();
  return api;
}

// `path` with its links resolved when the file it names is a regular file inside `root` (resolved) that the
// user running fxprof or root owns and no one else may write to; "" otherwise.
std::string inside(const std::string& root, const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return {};
  std::string r(real);
  std::free(real);
  struct stat st;
  if (!r.starts_with(root + "/") || ::stat(r.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      (st.st_uid != ::geteuid() && st.st_uid != 0) || (st.st_mode & (S_IWGRP | S_IWOTH)))
    return {};
  return r;
}

// A cache folder, resolved, when it is one fxprof may read from: the user's or root's, writable by no one
// else; "" otherwise.
std::string trusted_cache(const std::string& root) {
  char* real = ::realpath(root.c_str(), nullptr);
  if (real == nullptr) return {};
  std::string r(real);
  std::free(real);
  struct stat st;
  if (::stat(r.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || (st.st_uid != ::geteuid() && st.st_uid != 0) ||
      (st.st_mode & (S_IWGRP | S_IWOTH)))
    return {};
  return r;
}

// A local place a debug file is looked for; `crc` set: a debuglink's, checked.
struct Candidate {
  std::string path;
  const uint32_t* crc = nullptr;
};

// The local places, in order: the build-ID trees, perf's build-ID caches, the dwz alt link's places, the
// debuglink's (gdb's rule: beside the binary, its .debug, the debug dirs), then <symbol dir>/<debug
// name>.debug.
std::vector<Candidate> local_candidates(const DebugQuery& q, const LocatorOptions& options,
                                        const std::string& want) {
  std::vector<Candidate> out;
  std::string rel = "/.build-id/" + want.substr(0, 2) + "/" + want.substr(2) + ".debug";
  for (const auto& root : options.debug_dirs) out.push_back({root + rel});
  for (const auto& root : options.symbol_dirs) out.push_back({root + rel});
  for (std::string& path : perf_cache_files(options.perf_caches, want, q.binary_path)) out.push_back({path});
  if (!q.altlink.empty()) {
    if (q.altlink.starts_with('/'))
      out.push_back({q.altlink});
    else if (!q.binary_path.empty())
      out.push_back({dir_of(q.binary_path) + "/" + q.altlink});
    const std::string name(base_name(q.altlink));
    if (!name.empty() && name != "..")
      for (const auto& root : options.symbol_dirs) out.push_back({root + "/" + name});
  }
  if (!q.debuglink.empty() && q.debuglink.find('/') == std::string::npos && !q.binary_path.empty()) {
    std::string dir = dir_of(q.binary_path);
    out.push_back({dir + "/" + q.debuglink, &q.debuglink_crc});
    out.push_back({dir + "/.debug/" + q.debuglink, &q.debuglink_crc});
    if (q.binary_path.starts_with('/'))
      for (const auto& root : options.debug_dirs)
        out.push_back({root + dir + "/" + q.debuglink, &q.debuglink_crc});
    for (const auto& root : options.symbol_dirs) out.push_back({root + "/" + q.debuglink, &q.debuglink_crc});
  }
  const bool plain_name =
      !q.debug_name.empty() && q.debug_name.find('/') == std::string::npos && q.debug_name != "..";
  if (plain_name)
    for (const auto& d : options.symbol_dirs) out.push_back({d + "/" + q.debug_name + ".debug"});
  return out;
}

// debuginfod (when DEBUGINFOD_URLS is set): the downloaded file, when `try_path` takes it.
template <typename TryPath, typename Note>
std::optional<std::string> from_debuginfod(const DebugQuery& q, const LocatorOptions& options,
                                           TryPath& try_path, Note& note) {
  const char* urls = std::getenv("DEBUGINFOD_URLS");
  if (!options.use_debuginfod || urls == nullptr || *urls == '\0') return std::nullopt;
  const DebuginfodApi* api = debuginfod_api();
  if (api == nullptr) note("debuginfod: libdebuginfod.so.1 cannot be loaded");
  debuginfod_client* client = api ? api->begin() : nullptr;
  if (client == nullptr) return std::nullopt;
  char* path = nullptr;
  int fd = api->find_debuginfo(client, q.build_id.data(), static_cast<int>(q.build_id.size()), &path);
  std::optional<std::string> found;
  if (fd >= 0) {
    ::close(fd);
    if (path != nullptr && try_path(path, nullptr)) found = std::string(path);
  } else {
    note("debuginfod: " + errno_text(-fd));
  }
  std::free(path);
  api->end(client);
  return found;
}

}  // namespace

std::vector<std::string> default_perf_caches() {
  std::vector<std::string> roots;
  if (const char* dir = std::getenv("PERF_BUILDID_DIR"); dir && *dir) roots.emplace_back(dir);
  if (const char* home = std::getenv("HOME"); home && *home == '/')
    roots.push_back(std::string(home) + "/.debug");
  return roots;
}

std::vector<std::string> perf_cache_files(const std::vector<std::string>& roots, const std::string& id,
                                          const std::string& recorded_path) {
  std::vector<std::string> out;
  if (id.size() < 3 || id.find_first_not_of("0123456789abcdef") != std::string::npos) return out;
  for (const std::string& given : roots) {
    const std::string root = trusted_cache(given);
    if (root.empty()) continue;
    const std::string link = root + "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2);
    std::vector<std::string> places = {link + "/elf", link + "/debug", link};
    if (recorded_path.starts_with('/') && recorded_path.find("/../") == std::string::npos)
      for (const char* f : {"/elf", "/debug"}) places.push_back(root + recorded_path + "/" + id + f);
    for (const std::string& p : places)
      if (std::string r = inside(root, p); !r.empty() && std::find(out.begin(), out.end(), r) == out.end())
        out.push_back(std::move(r));
  }
  return out;
}

std::optional<std::string> locate_debug_file(const DebugQuery& q, const LocatorOptions& options,
                                             const std::function<bool(const std::string& path)>& accept,
                                             std::vector<std::string>* notes) {
  if (q.build_id.empty()) return std::nullopt;
  auto note = [&](std::string s) {
    if (notes) notes->push_back(std::move(s));
  };
  const std::string want = hex(q.build_id);
  // Each candidate: exists, is not the binary itself, has the build ID, and the caller takes it.
  auto try_path = [&](const std::string& path, const uint32_t* crc) -> bool {
    if (path.empty() || path == q.binary_path || !is_file(path)) return false;
    auto id = read_file(path);
    if (!id) {
      note(path + ": not an ELF64 file");
      return false;
    }
    if (crc != nullptr && !id->dwz_altlink) {  // dwz rewrites a debug file after its debuglink was made
      auto got = file_crc32(path);
      if (!got || *got != *crc) {
        note(path + ": debuglink CRC mismatch");
        return false;
      }
    }
    if (id->build_id != q.build_id) {
      note(path + " has build ID " + (id->build_id.empty() ? std::string("(none)") : hex(id->build_id)) +
           ", not " + want);
      return false;
    }
    return accept(path);
  };
  for (const Candidate& c : local_candidates(q, options, want))
    if (try_path(c.path, c.crc)) return c.path;
  return from_debuginfod(q, options, try_path, note);
}

}  // namespace fxprof::elf
