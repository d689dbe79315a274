// A library's source files, confined to those its debug info names.
#include <sys/stat.h>

#include "base/fd.h"
#include "symbolizer/symbolizer_impl.h"

namespace fxprof::symbolizer {
namespace {

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
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return Refusal{Refusal::kNotFound, "source file not found: " + path};
  if (st.st_size > (64 << 20)) return Refusal{Refusal::kTooLarge, "source file too large: " + path};
  auto text = read_file(path);
  if (!text) return Refusal{Refusal::kNotFound, text.error()};
  return std::move(text).value();
}

}  // namespace fxprof::symbolizer
