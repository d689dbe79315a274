#include "passes/unbake.h"

#include <sys/stat.h>

#include <unordered_map>

#include "elf/elf.h"

namespace fxprof::passes {
namespace {

// Why a baked binary cannot be served from disk, or "" when it can.
std::string why_not_servable(const model::Binary& b) {
  if (b.breakpad_id.empty()) return "no build ID";
  std::optional<elf::Identity> id;
  if (b.path == "[vdso]") {
    id = elf::own_vdso();
    if (!id) return "no vDSO here";
  } else {
    struct stat st {};
    if (b.path.empty() || b.path[0] != '/' || ::stat(b.path.c_str(), &st) != 0) return "not on disk";
    id = elf::read_file(b.path);
    if (!id) return "not an ELF file";
  }
  if (id->build_id.empty() || elf::breakpad_id(id->build_id) != b.breakpad_id)
    return b.path == "[vdso]" ? "another kernel's" : "rebuilt since";
  return {};
}

// The absolute address of binary-relative `rel` in process `proc` (lib.offset: address - (start - offset) is
// the relative address), or 0 when none of its mappings of `b` covers it.
uint64_t absolute(const model::Process& proc, const model::Binary& b, uint64_t rel) {
  for (const model::Lib& l : proc.libs) {
    if (l.debug_name != b.debug_name || l.breakpad_id != b.breakpad_id) continue;
    const uint64_t abs = rel + l.start - l.offset;
    if (abs >= l.start && abs < l.end) return abs;
  }
  return 0;
}

}  // namespace

UnbakeResult unbake(model::Profile& profile) {
  UnbakeResult r;
  std::vector<bool> servable(profile.binaries.size());
  for (size_t i = 0; i < profile.binaries.size(); ++i) {
    const model::Binary& b = profile.binaries[i];
    if (!b.symbolicatable()) continue;
    const std::string why = why_not_servable(b);
    servable[i] = why.empty();
    if (servable[i])
      ++r.binaries;
    else
      r.missing.push_back((b.name.empty() ? b.debug_name : b.name) + " (" + why + ")");
  }
  if (r.binaries == 0) return r;
  profile.meta.presymbolicated = false;  // else the front end asks the server for nothing
  model::StackTable& stacks = profile.stacks;
  for (model::Process& proc : profile.processes) {
    std::unordered_map<model::StackId, model::StackId> map;  // old stack -> this process's
    // A stack's new id: its prefix's, then its frame as an address (an inlined frame joins its caller's,
    // which holds the same address).
    auto remap = [&](auto& self, model::StackId s) -> model::StackId {
      if (s == model::kNoStack) return s;
      if (auto it = map.find(s); it != map.end()) return it->second;
      const model::StackId prefix = self(self, stacks.prefix(s));
      const model::FrameId fid = stacks.frame(s);
      model::Frame f = profile.frames.get(fid);
      model::StackId out;
      if (f.kind != model::FrameKind::Native || f.binary == model::kNoBinary || !servable[f.binary]) {
        out = stacks.intern(prefix, fid);
      } else if (f.inline_depth > 0 && prefix != model::kNoStack) {
        out = prefix;
      } else if (const uint64_t abs = absolute(proc, profile.binaries[f.binary], f.address); abs == 0) {
        out = stacks.intern(prefix, fid);  // not mapped in this process as recorded: keep the name
      } else {
        model::Frame raw;
        raw.kind = model::FrameKind::Native;
        raw.category = f.category;
        raw.address = abs;
        out = stacks.intern(prefix, profile.frames.intern(raw));
      }
      map.emplace(s, out);
      return out;
    };
    auto fix = [&](model::StackId& s) { s = remap(remap, s); };
    for (model::Thread& t : proc.threads) {
      for (model::Sample& smp : t.samples) fix(smp.stack);
      for (model::Allocation& a : t.allocations) fix(a.stack);
      for (model::Wait& w : t.waits) fix(w.waker_stack);
      for (model::Marker& m : t.markers) fix(m.stack);
    }
  }
  return r;
}

std::string unbake_line(const UnbakeResult& r) {
  if (r.missing.empty()) return {};
  std::string names;
  for (size_t i = 0; i < r.missing.size(); ++i) {
    if (i > 0) names += i + 1 == r.missing.size() ? " and " : ", ";
    names += r.missing[i];
  }
  return "served with the names saved in the profile (no source, assembly or inlined functions) for " + names;
}

}  // namespace fxprof::passes
