// passes/kernel_time.h: kernel threads, hard interrupts and softirqs as categories, on hand-made profiles
// whose kernel stacks are the ones `record -a` gave on this machine (loopback TCP, the timer interrupt).
#include "passes/kernel_time.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "model/profile.h"

using namespace fxprof;
using model::Category;

namespace {

struct Builder {
  model::Profile p;

  model::FrameId kernel(const char* name) {
    model::Frame f;
    f.kind = model::FrameKind::Kernel;
    f.category = Category::Kernel;
    f.address = 0xffffffff81000000 + p.frames.size();
    f.name = p.strings.intern(name);
    return p.frames.intern(f);
  }
  model::FrameId user(const char* name) {
    model::Frame f;
    f.address = 0x1000 + p.frames.size();
    f.name = p.strings.intern(name);
    return p.frames.intern(f);
  }
  // `names`, root first: "u:" user frames, the others kernel ones.
  model::StackId stack(const std::vector<std::string>& names) {
    std::vector<model::FrameId> path;
    for (const std::string& n : names)
      path.push_back(n.starts_with("u:") ? user(n.c_str() + 2) : kernel(n.c_str()));
    return p.stacks.intern_path(path);
  }
  model::Thread& thread(bool kernel_threads) {
    model::Process& proc = p.processes.emplace_back();
    proc.kernel_threads = kernel_threads;
    return proc.threads.emplace_back();
  }
};

// Each frame of `s`, root first: "name:category".
std::vector<std::string> read(const model::Profile& p, model::StackId s) {
  std::vector<std::string> out;
  for (; s != model::kNoStack; s = p.stacks.prefix(s)) {
    const model::Frame& f = p.frames.get(p.stacks.frame(s));
    out.insert(out.begin(), std::string(p.strings.get(f.name)) + ":" +
                                p.meta.categories[static_cast<size_t>(f.category)].name);
  }
  return out;
}

}  // namespace

TEST_CASE("kernel time: softirqs, hard interrupts and kernel threads get categories of their own",
          "[passes]") {
  Builder b;
  model::Thread& app = b.thread(false);
  // A send over loopback: the receive runs as a softirq when the sender re-enables bottom halves.
  app.samples.push_back(
      {1, b.stack({"u:main", "u:send", "entry_SYSCALL_64", "__x64_sys_sendto", "__local_bh_enable_ip",
                   "do_softirq", "handle_softirqs", "net_rx_action"})});
  // The timer's hard interrupt, and the softirqs it runs on its exit.
  app.samples.push_back(
      {2, b.stack({"u:main", "u:spin", "asm_sysvec_apic_timer_interrupt", "sysvec_apic_timer_interrupt",
                   "__irq_exit_rcu", "handle_softirqs", "run_timer_softirq"})});
  app.samples.push_back(
      {3, b.stack({"u:main", "u:spin", "asm_common_interrupt", "common_interrupt", "handle_edge_irq"})});
  // A system call's own work stays Kernel; the same function as in the softirq is a frame of its own.
  app.samples.push_back({4, b.stack({"u:main", "u:send", "entry_SYSCALL_64", "net_rx_action"})});
  model::Thread& kworker = b.thread(true);
  kworker.samples.push_back({5, b.stack({"ret_from_fork", "kthread", "worker_thread", "process_one_work"})});
  kworker.samples.push_back({6, b.stack({"ret_from_fork", "kthread", "smpboot_thread_fn", "run_ksoftirqd",
                                         "handle_softirqs", "rcu_core"})});

  passes::categorize_kernel_time(b.p);

  using V = std::vector<std::string>;
  CHECK(read(b.p, app.samples[0].stack) == V{"main:User", "send:User", "entry_SYSCALL_64:Kernel",
                                             "__x64_sys_sendto:Kernel", "__local_bh_enable_ip:Kernel",
                                             "do_softirq:Softirq", "handle_softirqs:Softirq",
                                             "net_rx_action:Softirq"});
  CHECK(read(b.p, app.samples[1].stack) == V{"main:User", "spin:User", "asm_sysvec_apic_timer_interrupt:IRQ",
                                             "sysvec_apic_timer_interrupt:IRQ", "__irq_exit_rcu:IRQ",
                                             "handle_softirqs:Softirq", "run_timer_softirq:Softirq"});
  CHECK(read(b.p, app.samples[2].stack) == V{"main:User", "spin:User", "asm_common_interrupt:IRQ",
                                             "common_interrupt:IRQ", "handle_edge_irq:IRQ"});
  CHECK(read(b.p, app.samples[3].stack) ==
        V{"main:User", "send:User", "entry_SYSCALL_64:Kernel", "net_rx_action:Kernel"});
  CHECK(read(b.p, kworker.samples[0].stack) == V{"ret_from_fork:Kernel thread", "kthread:Kernel thread",
                                                 "worker_thread:Kernel thread",
                                                 "process_one_work:Kernel thread"});
  CHECK(read(b.p, kworker.samples[1].stack) == V{"ret_from_fork:Kernel thread", "kthread:Kernel thread",
                                                 "smpboot_thread_fn:Kernel thread", "run_ksoftirqd:Softirq",
                                                 "handle_softirqs:Softirq", "rcu_core:Softirq"});

  const passes::KernelTimeShares shares = passes::kernel_time_shares(b.p);
  CHECK(shares.samples == 6);
  CHECK(shares.softirq == 3);
  CHECK(shares.irq == 1);
  CHECK(shares.kernel_thread == 1);

  SECTION("idempotent, also on a profile read back without the kernel-threads flag") {
    std::vector<model::StackId> before;
    for (const model::Process& proc : b.p.processes)
      for (const model::Sample& s : proc.threads[0].samples) before.push_back(s.stack);
    b.p.processes[1].kernel_threads = false;
    passes::categorize_kernel_time(b.p);
    std::vector<model::StackId> after;
    for (const model::Process& proc : b.p.processes)
      for (const model::Sample& s : proc.threads[0].samples) after.push_back(s.stack);
    CHECK(after == before);
  }
}

TEST_CASE("kernel time: a profile without kernel names is left as it is", "[passes]") {
  Builder b;
  model::Thread& t = b.thread(true);
  model::Frame raw;
  raw.kind = model::FrameKind::Kernel;
  raw.category = Category::Kernel;
  raw.address = 0xffffffff81234567;
  const model::StackId s = b.p.stacks.intern(model::kNoStack, b.p.frames.intern(raw));
  t.samples.push_back({1, s});
  passes::categorize_kernel_time(b.p);
  CHECK(t.samples[0].stack == s);
  CHECK(passes::kernel_time_shares(b.p).kernel_thread == 0);
}
