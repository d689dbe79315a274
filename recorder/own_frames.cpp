#include "recorder/own_frames.h"

#include <unordered_map>
#include <utility>
#include <vector>

#include "model/waits.h"

namespace fxprof::recorder {

uint64_t mark_heap_shim_frames(model::Profile& profile) {
  uint64_t marked = 0;
  model::FrameId label = 0;
  bool have_label = false;
  std::vector<model::FrameId> path;
  for (model::Process& proc : profile.processes) {
    std::vector<std::pair<uint64_t, uint64_t>> shim;  // [start, end) of the shim's code in this process
    for (const model::Lib& l : proc.libs)
      if (l.name.starts_with("libfxprof_heap")) shim.emplace_back(l.start, l.end);
    if (shim.empty()) continue;
    if (!have_label) {
      label = profile.label_frame(model::kHeapShimLabel, model::Category::Other);
      have_label = true;
    }
    auto in_shim = [&](model::FrameId id) {
      const model::Frame& f = profile.frames.get(id);
      if (f.kind != model::FrameKind::Native || f.binary != model::kNoBinary) return false;
      for (auto [start, end] : shim)
        if (f.address >= start && f.address < end) return true;
      return false;
    };
    // Per process: the same addresses are other code in another process.
    std::unordered_map<model::StackId, model::StackId> done;
    auto relabel = [&](model::StackId stack) {
      if (stack == model::kNoStack) return stack;
      auto [it, fresh] = done.try_emplace(stack, stack);
      if (!fresh) return it->second;
      path.clear();
      for (model::StackId s = stack; s != model::kNoStack; s = profile.stacks.prefix(s))
        path.push_back(profile.stacks.frame(s));  // leaf first
      size_t outer = path.size();                 // the shim frame nearest the root
      size_t shim_frames = 0;
      for (size_t i = 0; i < path.size(); ++i)
        if (path[i] == label) {
          return it->second;  // marked already
        } else if (in_shim(path[i])) {
          outer = i;
          ++shim_frames;
        }
      if (outer == path.size()) return it->second;
      // The shim's entry alone, calling out (its malloc in glibc's malloc): the allocator's work, the
      // program's. The shim's own work runs in functions of its own (alloc_slow, the pipe write) or in the
      // entry itself (the leaf).
      if (shim_frames == 1 && outer > 0) return it->second;
      model::StackId s = model::kNoStack;
      for (size_t i = path.size(); i-- > 0;) {
        if (i == outer) s = profile.stacks.intern(s, label);
        s = profile.stacks.intern(s, path[i]);
      }
      it->second = s;
      return s;
    };
    for (model::Thread& t : proc.threads) {
      for (model::Sample& smp : t.samples) {
        const model::StackId s = relabel(smp.stack);
        marked += s != smp.stack;
        smp.stack = s;
      }
      for (model::Marker& m : t.markers) m.stack = relabel(m.stack);
    }
    model::for_each_waker_stack(profile, proc, [&](model::StackId& s) { s = relabel(s); });
  }
  return marked;
}

}  // namespace fxprof::recorder
