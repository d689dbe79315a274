// The list of the builder's trackers (tracker.h).
#include "recorder/jit_code.h"
#include "recorder/libraries.h"
#include "recorder/losses.h"
#include "recorder/markers_tracker.h"
#include "recorder/offcpu_spans.h"
#include "recorder/tasks.h"
#include "recorder/tracker.h"
#include "recorder/wakes.h"

namespace fxprof::recorder {

FirstTrackers make_trackers(TrackerContext& context, std::vector<std::unique_ptr<Tracker>>& t) {
  // What the task tracker's changes mean to every tracker of the list (`t` outlives them: the builder's):
  // the same call on each.
  auto to_each = [&t](auto hook) {
    return [&t, hook](auto... args) {
      for (const std::unique_ptr<Tracker>& x : t) (x.get()->*hook)(args...);
    };
  };
  auto tasks = std::make_unique<TaskTracker>(
      context.profile, context.procfs,
      TaskTracker::Hooks{to_each(&Tracker::forget_process), to_each(&Tracker::forget_thread),
                         to_each(&Tracker::release), to_each(&Tracker::process_ended),
                         [&context] { return context.counts.lost; }});
  tasks->serve(context);
  TaskTracker& task_ref = *tasks;
  auto libs = std::make_unique<LibraryTracker>(
      context, context.unwinder, [&task_ref](uint32_t pid, uint64_t time_ns) -> model::Process& {
        return task_ref.process_at(pid, time_ns);
      });
  LibraryTracker& lib_ref = *libs;
  // First: each record's process and thread registered, then its mappings, before any other sees it.
  t.push_back(std::move(tasks));
  t.push_back(std::move(libs));
  // Before the wakers: they read its out_since(), and its wake times are read before they move the stacks.
  t.push_back(std::make_unique<OffCpuTracker>(context));
  t.push_back(std::make_unique<LossTracker>(context));
  t.push_back(std::make_unique<WakeTracker>(context));
  t.push_back(std::make_unique<MarkerTracker>(context));
  t.push_back(std::make_unique<JitTracker>(context));  // last: its finish() names the JIT frames
  return {task_ref, lib_ref};
}

bool has_samples(const model::Process& p) {
  for (const model::Thread& t : p.threads)
    if (!t.samples.empty()) return true;
  return false;
}

}  // namespace fxprof::recorder
