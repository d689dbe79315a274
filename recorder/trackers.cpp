// The list of the builder's trackers (tracker.h).
#include "recorder/jit_code.h"
#include "recorder/losses.h"
#include "recorder/offcpu_spans.h"
#include "recorder/tracker.h"
#include "recorder/wakes.h"

namespace fxprof::recorder {

std::vector<std::unique_ptr<Tracker>> make_trackers(TrackerContext& context) {
  std::vector<std::unique_ptr<Tracker>> t;
  // Before the wakers: they read its out_since(), and its wake times are read before they move the stacks.
  t.push_back(std::make_unique<OffCpuTracker>(context));
  t.push_back(std::make_unique<LossTracker>(context));
  t.push_back(std::make_unique<WakeTracker>(context));
  t.push_back(std::make_unique<JitTracker>(context));  // last: its finish() names the JIT frames
  return t;
}

bool has_samples(const model::Process& p) {
  for (const model::Thread& t : p.threads)
    if (!t.samples.empty()) return true;
  return false;
}

}  // namespace fxprof::recorder
