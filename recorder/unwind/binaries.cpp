#include "recorder/unwind/binaries.h"

#include <sys/stat.h>

namespace fxprof::recorder {

std::unique_ptr<Binary> open_binary(const std::string& path) {
  auto b = std::make_unique<Binary>();
  b->path = path;
  if (path == "[vdso]") {  // same kernel, same image: our own
    b->image = elf::own_vdso_image();
    b->identity = elf::own_vdso();
    return b;
  }
  if (path.empty() || path[0] != '/') return b;
  if (auto f = map_file(path); f.ok()) {
    b->file = std::move(f.value());
    b->image = b->file.bytes();
    b->identity = elf::parse(b->image);
  }
  return b;
}

const Binary& Binaries::get(const std::string& path) {
  struct stat st {};
  if (path != "[vdso]" && ::stat(path.c_str(), &st) != 0) {
    // Gone since it was opened (deleted while its mapping was being read): the binary last opened there.
    if (auto it = last_at_.find(path); it != last_at_.end()) return *it->second;
    st = {};
  }
  return get(path, st);
}

const Binary& Binaries::get(const std::string& path, const struct stat& st) {
  std::string key = path;
  if (path != "[vdso]")
    key += '\0' + std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino) + ':' +
           std::to_string(st.st_mtim.tv_sec) + '.' + std::to_string(st.st_mtim.tv_nsec);
  std::unique_ptr<Binary>& slot = by_key_[key];
  if (!slot) slot = open_binary(path);
  if (slot->identity) last_at_[path] = slot.get();
  return *slot;
}

size_t Binaries::evict(const std::function<bool(const Binary&)>& keep) {
  std::erase_if(last_at_, [&](const auto& at) { return !keep(*at.second); });
  return std::erase_if(by_key_, [&](const auto& entry) { return !keep(*entry.second); });
}

void Binaries::for_each_path(const std::function<void(const std::string&)>& f) const {
  for (const auto& [key, b] : by_key_) f(b->path);
}

}  // namespace fxprof::recorder
