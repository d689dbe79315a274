// The libraries a program loads at its start, for their USDT probes (usdt.h linked_libraries).
#include <elf.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>

#include "base/fd.h"
#include "elf/usdt.h"

namespace fxprof::elf {

namespace {

template <class T>
bool read_at(std::span<const std::byte> image, uint64_t off, T& out) {
  if (off > image.size() || sizeof(T) > image.size() - off) return false;
  std::memcpy(&out, image.data() + off, sizeof(T));
  return true;
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// A colon-separated path list, $ORIGIN replaced by `origin`.
void add_dirs(std::string_view list, const std::string& origin, std::vector<std::string>& out) {
  while (!list.empty()) {
    const size_t colon = std::min(list.find(':'), list.size());
    std::string dir(list.substr(0, colon));
    list.remove_prefix(std::min(colon + 1, list.size()));
    for (const std::string_view o : {"$ORIGIN", "${ORIGIN}"})
      if (dir.starts_with(o)) dir = origin + dir.substr(o.size());
    if (!dir.empty()) out.push_back(dir);
  }
}

struct Dynamic {
  std::string interp;
  std::vector<std::string> needed;
  std::string rpath, runpath;
};

// The program interpreter and the dynamic section's names of a mapped ELF file.
Dynamic read_dynamic(std::span<const std::byte> image) {
  Dynamic d;
  Elf64_Ehdr eh;
  if (!read_at(image, 0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64)
    return d;
  std::vector<Elf64_Phdr> loads;
  std::vector<Elf64_Dyn> dyn;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!read_at(image, eh.e_phoff + uint64_t{i} * eh.e_phentsize, ph)) break;
    if (ph.p_type == PT_LOAD) loads.push_back(ph);
    if (ph.p_type == PT_INTERP && ph.p_offset < image.size()) {
      const auto* s = reinterpret_cast<const char*>(image.data() + ph.p_offset);
      d.interp.assign(s, strnlen(s, std::min<uint64_t>(ph.p_filesz, image.size() - ph.p_offset)));
    }
    if (ph.p_type == PT_DYNAMIC)
      for (uint64_t off = ph.p_offset; off + sizeof(Elf64_Dyn) <= ph.p_offset + ph.p_filesz;
           off += sizeof(Elf64_Dyn)) {
        Elf64_Dyn e;
        if (!read_at(image, off, e) || e.d_tag == DT_NULL) break;
        dyn.push_back(e);
      }
  }
  uint64_t strtab = 0;  // its file offset
  for (const Elf64_Dyn& e : dyn)
    if (e.d_tag == DT_STRTAB)
      for (const Elf64_Phdr& l : loads)
        if (e.d_un.d_ptr >= l.p_vaddr && e.d_un.d_ptr < l.p_vaddr + l.p_filesz)
          strtab = e.d_un.d_ptr - l.p_vaddr + l.p_offset;
  if (strtab == 0 || strtab >= image.size()) return d;
  auto str = [&](uint64_t off) {
    if (off >= image.size() - strtab) return std::string();
    const auto* s = reinterpret_cast<const char*>(image.data() + strtab + off);
    return std::string(s, strnlen(s, image.size() - strtab - off));
  };
  for (const Elf64_Dyn& e : dyn) {
    if (e.d_tag == DT_NEEDED) d.needed.push_back(str(e.d_un.d_val));
    if (e.d_tag == DT_RPATH) d.rpath = str(e.d_un.d_val);
    if (e.d_tag == DT_RUNPATH) d.runpath = str(e.d_un.d_val);
  }
  return d;
}

}  // namespace

std::vector<std::string> linked_libraries(const std::string& program) {
  std::vector<std::string> out;
  std::set<std::string> seen{program}, names;
  std::deque<std::string> todo{program};
  const char* ld_path = std::getenv("LD_LIBRARY_PATH");
  while (!todo.empty()) {
    const std::string path = todo.front();
    todo.pop_front();
    auto f = map_file(path);
    if (!f) continue;
    const Dynamic d = read_dynamic(f->bytes());
    std::vector<std::string> dirs;
    if (d.runpath.empty()) add_dirs(d.rpath, dir_of(path), dirs);
    if (ld_path) add_dirs(ld_path, dir_of(path), dirs);
    add_dirs(d.runpath, dir_of(path), dirs);
    add_dirs("/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib64:/usr/lib64:/lib:/usr/lib", "", dirs);
    std::vector<std::string> found;
    if (!d.interp.empty()) found.push_back(d.interp);
    for (const std::string& name : d.needed) {
      if (!names.insert(name).second) continue;  // ld.so loads one library of a name
      if (name.find('/') != std::string::npos) {
        found.push_back(name);
        continue;
      }
      for (const std::string& dir : dirs)
        if (::access((dir + "/" + name).c_str(), R_OK) == 0) {
          found.push_back(dir + "/" + name);
          break;
        }
    }
    for (std::string& lib : found) {
      if (char* real = ::realpath(lib.c_str(), nullptr)) {
        lib = real;
        std::free(real);
      }
      if (seen.insert(lib).second) {
        out.push_back(lib);
        todo.push_back(lib);
      }
    }
  }
  return out;
}

}  // namespace fxprof::elf
