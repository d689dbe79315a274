// Kernel threads, interrupts and softirqs as categories of their own (design in passes/kernel_time.h).
#include "passes/kernel_time.h"

#include <string_view>
#include <vector>

namespace fxprof::passes {
namespace {

using model::Category;

// What a kernel function starts, read root to leaf. The names are the x86-64 and generic entry points of
// Linux 5.x-6.x (arch/x86/include/asm/idtentry.h, kernel/softirq.c); a timer's hard interrupt that runs
// softirqs on its exit reads "asm_sysvec_apic_timer_interrupt ... __irq_exit_rcu; handle_softirqs".
enum class Entry : uint8_t { Unknown, None, Irq, Softirq };

Entry entry_of(std::string_view name) {
  for (std::string_view p : {"handle_softirqs", "__do_softirq", "do_softirq", "run_ksoftirqd"})
    if (name == p) return Entry::Softirq;
  for (std::string_view p :
       {"asm_common_interrupt", "common_interrupt", "asm_sysvec_", "sysvec_", "__sysvec_", "do_IRQ",
        "handle_irq_event", "__handle_irq_event_percpu", "irq_enter"})
    if (name.starts_with(p)) return Entry::Irq;
  return Entry::None;
}

class Categorizer {
 public:
  explicit Categorizer(model::Profile& p) : p_(p), entries_(p.frames.size(), Entry::Unknown) {}

  // The stack `s` with its kernel frames recategorised; `base` is the category of a kernel frame outside
  // any interrupt (Kernel, or KernelThread in a kernel thread's process).
  model::StackId run(model::StackId s, Category base) {
    if (s == model::kNoStack) return s;
    Memo& memo = base == Category::KernelThread ? kthread_ : task_;
    if (memo.stack.empty()) {
      memo.stack.assign(original_stacks_, kUnset);
      memo.state.assign(original_stacks_, base);
    }
    // Walks down to the first stack already done (or the root), then interns back up.
    path_.clear();
    model::StackId at = s;
    while (at != model::kNoStack && memo.stack[at] == kUnset) {
      path_.push_back(at);
      at = p_.stacks.prefix(at);
    }
    model::StackId out = at == model::kNoStack ? model::kNoStack : memo.stack[at];
    Category state = at == model::kNoStack ? base : memo.state[at];
    for (auto it = path_.rbegin(); it != path_.rend(); ++it) {
      const model::FrameId f = p_.stacks.frame(*it);
      const model::FrameId nf = recategorized(f, state);
      out = p_.stacks.intern(out, nf);
      memo.stack[*it] = out;
      memo.state[*it] = state;
    }
    return out;
  }

 private:
  static constexpr model::StackId kUnset = model::kNoStack;
  struct Memo {
    std::vector<model::StackId> stack;
    std::vector<Category> state;  // the category of kernel frames above this stack's leaf
  };

  // The frame `f` in state `state` (which it may change: an entry frame starts its own kind).
  model::FrameId recategorized(model::FrameId f, Category& state) {
    const model::Frame& fr = p_.frames.get(f);
    if (fr.kind != model::FrameKind::Kernel) return f;
    if (f < entries_.size() && entries_[f] == Entry::Unknown)
      entries_[f] = fr.name == model::kNoString ? Entry::None : entry_of(p_.strings.get(fr.name));
    const Entry e = f < entries_.size() ? entries_[f] : Entry::None;
    if (e == Entry::Irq) state = Category::Irq;  // a hard interrupt nested in a softirq is the interrupt's
    if (e == Entry::Softirq) state = Category::Softirq;
    // Run again on a profile read back (which has no kernel_threads flag): its frames say it already.
    if (state == Category::Kernel && fr.category == Category::KernelThread) state = Category::KernelThread;
    if (fr.category == state) return f;
    model::Frame copy = fr;
    copy.category = state;
    return p_.frames.intern(copy);
  }

  model::Profile& p_;
  std::vector<Entry> entries_;  // per frame id that existed at the start
  size_t original_stacks_ = p_.stacks.size();
  Memo task_, kthread_;
  std::vector<model::StackId> path_;
};

bool has_kernel_names(const model::Profile& p) {
  for (size_t i = 0; i < p.frames.size(); ++i) {
    const model::Frame& f = p.frames.get(static_cast<model::FrameId>(i));
    if (f.kind == model::FrameKind::Kernel && f.name != model::kNoString) return true;
  }
  return false;
}

}  // namespace

void categorize_kernel_time(model::Profile& profile) {
  if (!has_kernel_names(profile)) return;
  Categorizer c(profile);
  for (model::Process& proc : profile.processes) {
    const Category base = proc.kernel_threads ? Category::KernelThread : Category::Kernel;
    for (model::Thread& t : proc.threads)
      for (model::Sample& s : t.samples) s.stack = c.run(s.stack, base);
  }
}

KernelTimeShares kernel_time_shares(const model::Profile& profile) {
  KernelTimeShares out;
  for (const model::Process& proc : profile.processes)
    for (const model::Thread& t : proc.threads)
      for (const model::Sample& s : t.samples) {
        if (s.stack == model::kNoStack || profile.off_cpu(s.stack)) continue;
        const Category c = profile.frames.get(profile.stacks.frame(s.stack)).category;
        ++out.samples;
        out.kernel_thread += c == Category::KernelThread;
        out.irq += c == Category::Irq;
        out.softirq += c == Category::Softirq;
      }
  return out;
}

}  // namespace fxprof::passes
