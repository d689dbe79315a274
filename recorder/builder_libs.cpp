// The profile builder's libraries (builder.h): executable mappings (MMAP2 records, /proc/PID/maps) become
// libs, and the mapped files are kept open so that binaries deleted while they run can still be read.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "base/fd.h"
#include "base/path.h"
#include "elf/elf.h"
#include "recorder/builder.h"
#include "recorder/jit.h"

namespace fxprof::recorder {

namespace {

// A lib for an executable mapping [start, end) whose relative addresses are SVMA - base SVMA
// (elf::Identity::lib_offset gives `offset`).
model::Lib make_lib(uint64_t start, uint64_t end, uint64_t offset, const std::string& path,
                    const elf::Identity& elf) {
  model::Lib lib;
  lib.start = start;
  lib.end = end;
  lib.offset = offset;
  lib.path = path;
  lib.name = base_name(path);
  lib.debug_name = lib.name;
  lib.debug_path = lib.path;
  if (!elf.build_id.empty()) {
    lib.breakpad_id = fxprof::elf::breakpad_id(elf.build_id);
    lib.code_id = fxprof::elf::hex(elf.build_id);
  }
  return lib;
}

}  // namespace

const elf::Identity* ProfileBuilder::elf_for(const std::string& path) {
  if (path != "[vdso]" && (path.empty() || path[0] != '/')) return nullptr;
  const Binary& b = binaries_->get(path);
  return b.identity ? &*b.identity : nullptr;
}

void ProfileBuilder::add_mapping(uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, uint32_t prot,
                                 const std::string& path, uint64_t t, uint64_t dev, uint64_t ino) {
  if (path.empty() || (path[0] != '/' && path != "[vdso]")) return;  // no file to name it
  if (jitdump_pid(path) != 0) {  // a JIT runtime announcing its jitdump file: names, not code (jit_code.h)
    process(pid, t);
    return;
  }
  const std::string from =
      path[0] == '/' && ino != 0 ? kept_.keep(pid, start, start + len, path, dev, ino) : path;
  if (unwinder_) unwinder_->on_mmap(pid, start, len, pgoff, path, prot, from);
  const elf::Identity* elf = elf_for(from);
  if (!elf) return;
  model::Process& proc = profile_.processes[process(pid, t).proc];
  for (const model::Lib& l : proc.libs)
    if (l.start == start && l.end == start + len && l.path == path)
      return;  // attach: /proc/maps and MMAP2 overlap
  proc.libs.push_back(make_lib(start, start + len, elf->lib_offset(pgoff, prot), path, *elf));
  if (from != path) proc.libs.back().read_path = from;
  if (on_binary_mapped) on_binary_mapped(proc.libs.back());
}

void ProfileBuilder::on_mmap2(const Mmap2Record& m) {
  if (auto pr = procs_.find(m.pid); pr != procs_.end()) pr->second.exec_unmapped = false;
  if (!(m.prot & PROT_EXEC)) return;
  const std::string path(m.path);
  if (is_anonymous_code(path)) process(m.pid, m.time).anon_code.emplace_back(m.addr, m.addr + m.len);
  add_mapping(m.pid, m.addr, m.len, m.pgoff, m.prot, path, m.time, makedev(m.maj, m.min), m.ino);
}

}  // namespace fxprof::recorder
