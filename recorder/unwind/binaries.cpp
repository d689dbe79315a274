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
  std::string key = path;
  if (path != "[vdso]") {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) st = {};
    key += '\0' + std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino) + ':' +
           std::to_string(st.st_mtim.tv_sec) + '.' + std::to_string(st.st_mtim.tv_nsec);
  }
  std::unique_ptr<Binary>& slot = by_key_[key];
  if (!slot) slot = open_binary(path);
  return *slot;
}

}  // namespace fxprof::recorder
