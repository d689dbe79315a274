// A library's source files, confined to those its debug info names, opened without following symlinks.
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "base/fd.h"
#include "symbolizer/symbolizer_impl.h"

namespace fxprof::symbolizer {
namespace {

constexpr size_t kMaxSourceBytes = size_t{64} << 20;

// Opens an absolute path without following a symlink in any component. The debug info names the path, but
// whoever owns its folder can swap the file for a symlink (to /etc/shadow, to /dev/zero) between the build
// and our read: a root server would serve what the link points to. openat2(RESOLVE_NO_SYMLINKS) where the
// kernel has it (5.6+), else O_NOFOLLOW on each component. O_NONBLOCK: opening a FIFO must not wait for a
// writer (fstat then refuses it).
UniqueFd open_no_symlinks(const std::string& path) {
  constexpr int kFlags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  open_how how{};
  how.flags = kFlags;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how);
  if (fd >= 0 || errno != ENOSYS) return UniqueFd(static_cast<int>(fd));
  UniqueFd dir(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  size_t i = 1;
  while (dir.valid()) {
    size_t slash = path.find('/', i);
    std::string part = path.substr(i, slash == std::string::npos ? std::string::npos : slash - i);
    if (slash == std::string::npos) return UniqueFd(::openat(dir.get(), part.c_str(), kFlags | O_NOFOLLOW));
    dir = UniqueFd(::openat(dir.get(), part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    i = slash + 1;
  }
  return dir;
}

// Lexically normalized absolute path ("" when not absolute): removes ".", "..", and repeated slashes.
std::string normalize_path(std::string_view p) {
  if (p.empty() || p[0] != '/') return {};
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < p.size()) {
    while (i < p.size() && p[i] == '/') ++i;
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    std::string_view part = p.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = j;
  }
  std::string out;
  for (auto part : parts) {
    out += '/';
    out += part;
  }
  return out.empty() ? "/" : out;
}

}  // namespace

Answer<std::string> Symbolizer::source(std::string_view debug_name, std::string_view breakpad_id,
                                       uint64_t module_offset, std::string_view file) {
  std::string wanted = normalize_path(file);
  if (wanted.empty()) return Refusal{Refusal::kForbidden, "refusing a relative source path"};
  auto handle = impl_->cache.get(debug_name, breakpad_id);
  if (!handle) return Refusal{Refusal::kNotFound, handle.error()};
  std::string path;
  {
    Library& l = *handle->lib;
    std::lock_guard<std::mutex> lock(l.mu);
    DwarfIndex* dwarf = l.dwarf_index();
    if (!dwarf) return Refusal{Refusal::kNotFound, "no debug info for " + std::string(debug_name)};
    std::vector<std::string> files;
    dwarf->referenced_files(module_offset + l.base_svma, files);
    for (const auto& f : files) {
      if (f == file || normalize_path(f) == wanted) {
        path = normalize_path(f);
        break;
      }
    }
  }
  impl_->cache.account(*handle);
  if (path.empty())
    return Refusal{Refusal::kForbidden, "the debug info of " + std::string(debug_name) +
                                            " does not refer to " + std::string(file)};
  UniqueFd fd = open_no_symlinks(path);
  if (!fd.valid() && errno == ELOOP)
    return Refusal{Refusal::kForbidden, "refusing a source path through a symbolic link: " + path};
  if (!fd.valid()) return Refusal{Refusal::kNotFound, "source file not found: " + path};
  // The checks are on what was opened, not on the name: nothing can be swapped in between.
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Refusal{Refusal::kForbidden, "not a regular file: " + path};
  if (static_cast<uint64_t>(st.st_size) > kMaxSourceBytes)
    return Refusal{Refusal::kTooLarge, "source file too large: " + path};
  // Read at most the cap (plus one byte to notice a file that grew): the size is only what fstat saw.
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t have = 0;
  for (;;) {
    if (have == text.size()) text.resize(std::min(kMaxSourceBytes + 1, text.size() + 65536));
    ssize_t n = ::read(fd.get(), text.data() + have, text.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Refusal{Refusal::kNotFound, "cannot read " + path + ": " + errno_text(errno)};
    if (n == 0) break;
    have += static_cast<size_t>(n);
    if (have > kMaxSourceBytes) return Refusal{Refusal::kTooLarge, "source file too large: " + path};
  }
  text.resize(have);
  return text;
}

}  // namespace fxprof::symbolizer
