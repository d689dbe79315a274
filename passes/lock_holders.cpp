// add_lock_holders_unsymbolicated (passes/locks.h): "Held by" for a profile that is served unsymbolicated.
// The front end names the Wakeup markers' stacks lazily, but a marker field is written once, with the file:
// so the Wakeup stacks alone (a few hundred frames, not the samples') are copied into a small profile of
// their own, with the processes' mappings, named there, and their holders brought back.
#include <string>
#include <unordered_map>
#include <vector>

#include "passes/locks.h"

namespace fxprof::passes {
namespace {

// Copies stacks of `from` into `to` (frames and their strings re-interned), each prefix once.
class StackCopier {
 public:
  StackCopier(const model::Profile& from, model::Profile& to) : from_(from), to_(to) {}

  model::StackId copy(model::StackId s) {
    if (s == model::kNoStack) return s;
    if (auto it = stacks_.find(s); it != stacks_.end()) return it->second;
    const model::StackId prefix = copy(from_.stacks.prefix(s));  // recursion depth = stack depth (< 1k)
    model::Frame f = from_.frames.get(from_.stacks.frame(s));
    if (f.name != model::kNoString) f.name = to_.strings.intern(from_.strings.get(f.name));
    if (f.file != model::kNoString) f.file = to_.strings.intern(from_.strings.get(f.file));
    const model::StackId out = to_.stacks.intern(prefix, to_.frames.intern(f));
    stacks_.emplace(s, out);
    return out;
  }

 private:
  const model::Profile& from_;
  model::Profile& to_;
  std::unordered_map<model::StackId, model::StackId> stacks_;
};

}  // namespace

void add_lock_holders_unsymbolicated(model::Profile& profile,
                                     const std::function<void(model::Profile&)>& symbolicate,
                                     LockCode& code) {
  model::Profile wakes;
  wakes.binaries = profile.binaries;  // frames keep their binary ids
  wakes.binary_index = profile.binary_index;
  const model::StringId wakeup = wakes.strings.intern("Wakeup");
  // The original stack of each copied Wakeup and Lock wait marker, in the order of wakes' processes and
  // markers.
  std::vector<model::StackId> originals;
  for (const model::Process& proc : profile.processes) {
    model::Process copy;
    StackCopier copier(profile, wakes);
    model::Thread t;
    for (const model::Thread& th : proc.threads)
      for (const model::Marker& m : th.markers) {
        if (m.stack == model::kNoStack || m.name == model::kNoString) continue;
        const std::string_view name = profile.strings.get(m.name);
        if (name != "Wakeup" && name != "Lock wait") continue;
        model::Marker w;
        w.name = name == "Wakeup" ? wakeup : wakes.strings.intern(name);
        w.stack = copier.copy(m.stack);
        t.markers.push_back(std::move(w));
        originals.push_back(m.stack);
      }
    if (t.markers.empty()) continue;
    copy.pid = proc.pid;
    copy.name = proc.name;
    copy.libs = proc.libs;
    copy.threads.push_back(std::move(t));
    wakes.processes.push_back(std::move(copy));
  }
  if (originals.empty()) return;
  symbolicate(wakes);
  std::unordered_map<model::StackId, std::string> holders, waiters;
  std::unordered_map<model::StackId, model::StackId> named;  // original stack -> its copy in `wakes`
  size_t i = 0;
  for (const model::Process& proc : wakes.processes)
    for (const model::Marker& m : proc.threads[0].markers) {
      named.try_emplace(originals[i], m.stack);
      if (m.name == wakeup)
        holders.try_emplace(originals[i], std::string(lock_holder(wakes, m.stack, &code)));
      else
        waiters.try_emplace(originals[i], std::string(lock_waiter(wakes, m.stack, &code)));
      ++i;
    }
  auto copy_of = [&](model::StackId s) {
    auto it = named.find(s);
    return it == named.end() ? model::kNoStack : it->second;
  };
  // Joins, condition and semaphore waits first, so that none gets a holder or counts as lock contention.
  classify_futex_waits(profile, [&](model::StackId wait, model::StackId waker) {
    const model::StackId w = copy_of(wait);
    return w == model::kNoStack ? FutexWait::Unknown : classify_futex_wait(wakes, w, copy_of(waker));
  });
  auto from = [](const std::unordered_map<model::StackId, std::string>& names) {
    return [&names](model::StackId s) {
      auto it = names.find(s);
      return it == names.end() ? std::string() : it->second;
    };
  };
  add_lock_holders(profile, &code, {from(holders), from(waiters)});
}

}  // namespace fxprof::passes
