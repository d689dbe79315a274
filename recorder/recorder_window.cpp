// The recorder's continuous mode (recorder.h Options::window_s, `fxprof agent`): one recording whose
// samples are cut into windows while it runs. The events, the ring buffers, the processes, threads and
// libraries (and the unwinder's tables) live as long as the recording; each window takes only its samples,
// in a profile of its own that holds just the frames and stacks they use.
#include <algorithm>
#include <unordered_map>

#include "recorder/kallsyms.h"
#include "recorder/session.h"
#include "recorder/window.h"

namespace fxprof::recorder::internal {

namespace {

// /proc as the session sees it, but the kernel's names from one table read at the first window:
// /proc/kallsyms costs ~40 ms of kernel time per read, too much for every window (a module loaded later is
// unnamed).
class CachedKallsyms final : public Procfs {
 public:
  CachedKallsyms(Procfs& base, const KernelSymbols& table) : base_(base), table_(table) {}
  Result<std::string> read(const std::string& path) override { return base_.read(path); }
  std::vector<uint32_t> list(const std::string& dir) override { return base_.list(dir); }
  std::vector<std::string> kernel_symbols(std::span<const uint64_t> addrs) override {
    return table_.names(addrs);
  }

 private:
  Procfs& base_;
  const KernelSymbols& table_;
};

// Copies what the samples of `from` use into `to`: frames (their strings and binaries) and stacks, each
// once, by memo.
class WindowCopier {
 public:
  WindowCopier(const model::Profile& from, model::Profile& to) : from_(from), to_(to) {}

  model::StackId stack(model::StackId s) {
    if (s == model::kNoStack) return s;
    if (auto it = stacks_.find(s); it != stacks_.end()) return it->second;
    const model::StackId prefix = stack(from_.stacks.prefix(s));  // depth: a stack's length (<= 1,100)
    const model::StackId copy = to_.stacks.intern(prefix, frame(from_.stacks.frame(s)));
    stacks_.emplace(s, copy);
    return copy;
  }

 private:
  model::FrameId frame(model::FrameId f) {
    if (auto it = frames_.find(f); it != frames_.end()) return it->second;
    model::Frame copy = from_.frames.get(f);
    copy.name = string(copy.name);
    copy.file = string(copy.file);
    if (copy.binary != model::kNoBinary) copy.binary = binary(copy.binary);
    const model::FrameId id = to_.frames.intern(copy);
    frames_.emplace(f, id);
    return id;
  }
  model::StringId string(model::StringId s) {
    return s == model::kNoString ? s : to_.strings.intern(from_.strings.get(s));
  }
  model::BinaryId binary(model::BinaryId b) {
    auto [it, added] = binaries_.try_emplace(b, static_cast<model::BinaryId>(to_.binaries.size()));
    if (added) to_.binaries.push_back(from_.binaries[b]);
    return it->second;
  }

  const model::Profile& from_;
  model::Profile& to_;
  std::unordered_map<model::StackId, model::StackId> stacks_;
  std::unordered_map<model::FrameId, model::FrameId> frames_;
  std::unordered_map<model::BinaryId, model::BinaryId> binaries_;
};

}  // namespace

}  // namespace fxprof::recorder::internal

namespace fxprof::recorder {

model::Profile take_window(model::Profile& live, ProfileBuilder& builder, uint64_t from_ns, uint64_t until_ns,
                           std::vector<UniqueFd>* released_files) {
  model::Profile out_profile;
  out_profile.meta = live.meta;
  out_profile.meta.start_monotonic_ns = from_ns;
  out_profile.meta.end_monotonic_ns = until_ns;
  internal::WindowCopier copy(live, out_profile);
  for (model::Process& p : live.processes) {
    model::Process* out = nullptr;
    for (model::Thread& t : p.threads) {
      if (!t.samples.empty()) {
        if (!out) {
          out = &out_profile.processes.emplace_back();
          out->pid = p.pid;
          out->name = p.name;
          out->start_ns = p.start_ns;
          out->end_ns = p.end_ns;
          out->libs = p.libs;
        }
        model::Thread& ot = out->threads.emplace_back();
        ot.tid = t.tid;
        ot.name = t.name;
        ot.is_main = t.is_main;
        ot.start_ns = t.start_ns;
        ot.end_ns = t.end_ns;
        ot.samples = std::move(t.samples);
        for (model::Sample& s : ot.samples) s.stack = copy.stack(s.stack);
      }
      std::vector<model::Sample>().swap(t.samples);
      std::vector<model::Marker>().swap(t.markers);
      std::vector<model::Wait>().swap(t.waits);
      std::vector<model::Allocation>().swap(t.allocations);
    }
    // Ended, its last thread too: nothing of it is needed again (as TaskTracker::drop_if_empty, after its
    // last thread's exit). Not while a thread runs on after the leader's exit: the task tracker still
    // holds that thread by its index here (the agent crashed in TaskTracker::on_exit writing its end).
    // Its name goes too: a command line (a compiler's is kilobytes) for each program a build starts.
    if (p.end_ns && std::all_of(p.threads.begin(), p.threads.end(),
                                [](const model::Thread& t) { return t.end_ns != 0; })) {
      std::vector<model::Lib>().swap(p.libs);
      std::vector<model::Thread>().swap(p.threads);
      std::vector<model::Counter>().swap(p.counters);
      std::vector<model::JitCode>().swap(p.jit);
      std::string().swap(p.name);
      std::string().swap(p.jit_source);
    }
  }
  // After the ended processes' libs went: what only they mapped is unmapped and closed.
  std::vector<UniqueFd> released = builder.release_unmapped();
  if (released_files)
    for (UniqueFd& fd : released) released_files->push_back(std::move(fd));
  (void)builder.forget_interned();  // after the copy: the window holds its own
  return out_profile;
}

}  // namespace fxprof::recorder

namespace fxprof::recorder::internal {

// The window [its start, now): its samples move into a profile of their own (take_window), given to
// Options::on_window. False when on_window says to stop.
bool Session::cut_window(uint64_t now) {
  Recording w;
  w.profile = take_window(rec_.profile, *builder_, window_start_ns_, now, &w.open_files);
  if (!cfg_.exclude_kernel) {
    if (!window_kernel_) window_kernel_ = KernelSymbols::read();
    CachedKallsyms names(*procfs_, *window_kernel_);
    name_kernel_frames(w.profile, names);
  }
  w.stats.samples = 0;
  for (const model::Process& p : w.profile.processes)
    for (const model::Thread& t : p.threads) w.stats.samples += t.samples.size();
  w.stats.processes = static_cast<uint32_t>(w.profile.processes.size());
  w.stats.frequency_hz = static_cast<double>(freq_);
  window_start_ns_ = now;
  return opt_.on_window(w);
}

}  // namespace fxprof::recorder::internal
