// The libraries tracker (libraries.h): executable mappings become libs and the unwinder's mappings.
#include "recorder/libraries.h"

#include <sys/mman.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <unordered_set>

#include "base/path.h"
#include "elf/elf.h"
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

LibraryTracker::LibraryTracker(TrackerContext& c, Unwinder* unwinder, ProcessAt process_at)
    : c_(c),
      unwinder_(unwinder),
      process_at_(std::move(process_at)),
      binaries_(unwinder ? &unwinder->binaries() : &own_binaries_),
      kept_(*binaries_) {}

const elf::Identity* LibraryTracker::elf_for(const std::string& path) {
  if (path != "[vdso]" && (path.empty() || path[0] != '/')) return nullptr;
  const Binary& b = binaries_->get(path);
  return b.identity ? &*b.identity : nullptr;
}

void LibraryTracker::add_mapping(uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, uint32_t prot,
                                 const std::string& path, uint64_t t, uint64_t dev, uint64_t ino) {
  if (path.empty() || (path[0] != '/' && path != "[vdso]")) return;  // no file to name it
  if (jitdump_pid(path) != 0) {  // a JIT runtime announcing its jitdump file: names, not code (jit_code.h)
    process_at_(pid, t);
    return;
  }
  // The binary is looked up (a stat of its path) once per mapping, by whoever comes first.
  const Binary* binary = nullptr;
  std::string from = read_from ? read_from(path) : std::string();
  if (from.empty())
    from = path[0] == '/' && ino != 0 ? kept_.keep(pid, start, start + len, path, dev, ino, &binary) : path;
  if (!binary && (from == "[vdso]" || from[0] == '/')) binary = &binaries_->get(from);
  if (unwinder_) unwinder_->on_mmap(pid, start, len, pgoff, path, prot, from, binary);
  const elf::Identity* elf = binary && binary->identity ? &*binary->identity : nullptr;
  if (!elf) return;
  model::Process& proc = process_at_(pid, t);
  for (const model::Lib& l : proc.libs)
    if (l.start == start && l.end == start + len && l.path == path)
      return;  // attach: /proc/maps and MMAP2 overlap
  proc.libs.push_back(make_lib(start, start + len, elf->lib_offset(pgoff, prot), path, *elf));
  if (from != path) proc.libs.back().read_path = from;
  if (auto it = told_starts_.find(pid); it != told_starts_.end())  // another binary where one was told
    std::erase(it->second, start);
}

void LibraryTracker::sampled(uint32_t pid, uint64_t ip) {
  if (!on_binary_sampled) return;
  const model::Process* p = c_.process_of(pid);
  if (!p) return;
  for (const model::Lib& l : p->libs) {
    if (ip < l.start || ip >= l.end) continue;
    // Most new addresses are in a mapping told already: asked by its start first, by name only once.
    std::vector<uint64_t>& told = told_starts_[pid];
    if (std::find(told.begin(), told.end(), l.start) != told.end()) return;
    told.push_back(l.start);
    if (told_.insert((l.read_path.empty() ? l.path : l.read_path) + '\n' + l.breakpad_id).second)
      on_binary_sampled(l);
    return;
  }
}

void LibraryTracker::on_mmap2(const Mmap2Record& m) {
  if (!(m.prot & PROT_EXEC)) return;
  const std::string path(m.path);
  if (is_anonymous_code(path)) {
    process_at_(m.pid, m.time);  // first: a new entry forgets the pid's code (forget_process)
    anon_code_[m.pid].emplace_back(m.addr, m.addr + m.len);
  }
  add_mapping(m.pid, m.addr, m.len, m.pgoff, m.prot, path, m.time, makedev(m.maj, m.min), m.ino);
}

void LibraryTracker::on_fork(const ForkRecord& f) {
  if (f.pid == f.ppid) return;  // a thread
  // The builder gave the child its entry already (forget_process): the parent's mappings are copied in.
  if (unwinder_) unwinder_->on_fork(f.ppid, f.pid);
  model::Process* parent = c_.process_of(f.ppid);
  model::Process* child = c_.process_of(f.pid);
  if (!parent || !child) return;
  child->libs = parent->libs;
  if (auto it = anon_code_.find(f.ppid); it != anon_code_.end()) anon_code_[f.pid] = it->second;
}

void LibraryTracker::on_comm(const CommRecord& c) {
  if (!c.exec) return;
  // The builder released the stacks taken before (Release::Exec) and gave the pid its entry for the new
  // program: a new one (no libs yet) or the old one, whose libs were the old program's.
  if (unwinder_) unwinder_->on_exec(c.pid);
  if (model::Process* p = c_.process_of(c.pid)) p->libs.clear();
  anon_code_.erase(c.pid);
  told_starts_.erase(c.pid);
}

std::vector<MapsEntry> LibraryTracker::attach(uint32_t pid, uint64_t time_ns, bool* readable) {
  auto maps = c_.procfs.read("/proc/" + std::to_string(pid) + "/maps");
  if (readable) *readable = static_cast<bool>(maps);
  if (!maps) return {};
  std::vector<MapsEntry> entries = executable_mappings(*maps);
  for (const MapsEntry& e : entries)
    add_mapping(pid, e.start, e.end - e.start, e.offset, e.prot, e.path, time_ns, e.dev, e.ino);
  return entries;
}

std::vector<UniqueFd> LibraryTracker::release_unmapped() {
  // Where the libs of the profile's processes are read from: an ended process's went at the cut.
  std::unordered_set<std::string> mapped{"[vdso]"};
  for (const model::Process& p : c_.profile.processes)
    for (const model::Lib& l : p.libs) {
      mapped.insert(l.path);
      if (!l.read_path.empty()) mapped.insert(l.read_path);
    }
  auto keep = [&mapped](const Binary& b) { return mapped.count(b.path) > 0; };
  if (unwinder_)
    (void)unwinder_->evict_unmapped(keep);  // and the binaries its modules left read
  else
    (void)own_binaries_.evict(keep);
  // A binary still in the table (a module reads it: a file that is no ELF, so no lib) keeps the descriptor
  // its path may name.
  binaries_->for_each_path([&mapped](const std::string& path) { mapped.insert(path); });
  return kept_.release_unmapped([&mapped](const std::string& path) { return mapped.count(path) > 0; });
}

bool LibraryTracker::known_code(uint32_t pid, uint64_t ip) const {
  const model::Process* p = c_.process_of(pid);
  if (!p) return false;
  for (const model::Lib& l : p->libs)
    if (ip >= l.start && ip < l.end) return true;
  if (auto it = anon_code_.find(pid); it != anon_code_.end())
    for (const auto& [start, end] : it->second)
      if (ip >= start && ip < end) return true;
  return false;
}

bool LibraryTracker::is_entry_point(uint32_t pid, uint64_t ip) {
  const model::Process* p = c_.process_of(pid);
  if (!p) return false;
  for (const model::Lib& l : p->libs) {
    if (ip < l.start || ip >= l.end) continue;
    const elf::Identity* elf = elf_for(l.read_path.empty() ? l.path : l.read_path);
    // ip - (start - offset) is SVMA - base SVMA (model::Lib::offset).
    return elf && elf->entry != 0 && ip - l.start + l.offset + elf->base_svma == elf->entry;
  }
  return false;
}

}  // namespace fxprof::recorder
