// fxprof's off-CPU waker tracer (recorder/waker.h): at every sched_waking of a thread of a traced process,
// one record into a ring buffer: {time, waker, wakee, where the wake came from (an interrupt, a task we do
// not trace, or a traced one)}, and, when a traced
// waker is in a futex system call (it unlocked a lock, signalled a condition variable), the futex word (RDI),
// the waker's user registers at the system call (the ones the recorder's DWARF unwinder needs: IP, SP, BP, BX,
// R12-R15) and a copy of its user stack from SP, for the recorder to unwind like a sample. Compiled with
// clang -target bpf; CO-RE: task_struct and pt_regs are declared with only the fields read, relocated by
// libbpf against the running kernel's BTF (/sys/kernel/btf/vmlinux), so no vmlinux.h or bpftool is needed.
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

struct task_struct {
  int pid;
  int tgid;
  void* stack;  // its kernel stack's lowest address
} __attribute__((preserve_access_index));

// x86-64's user registers as saved at kernel entry (the top of the task's kernel stack).
struct pt_regs {
  unsigned long r15, r14, r13, r12, bp, bx, di, orig_ax, ip, sp;
} __attribute__((preserve_access_index));

// Bytes of the waker's user stack copied from SP. 8 KiB (the off-CPU samples' default) missed the holders
// of stdio's lock: glibc's buffered_vfprintf keeps an 8 KiB buffer on the stack below its caller, and it is
// what unlocks. 16 KiB: bench/offcpu.sh's futex scenario (recorder/waker.h has the figures).
#define STACK_MAX 16384

// The record; recorder/waker.cpp's decode_waking reads this layout. Wakes without a stack end at `stack`.
struct waking {
  __u64 time;  // CLOCK_MONOTONIC ns, as the perf records (use_clockid)
  __u32 waker_pid, waker_tid, wakee_pid, wakee_tid;
  __u64 uaddr;      // the futex word (the waker's RDI at the system call); 0: not a futex wake
  __u64 regs[8];    // ip, sp, bp, bx, r12, r13, r14, r15
  __u32 stack_len;  // bytes of `stack` (0: no stack)
  __u32 flags;      // WAKE_* below
  __u8 stack[STACK_MAX];
};

// Where the wake came from. An interrupt wakes in whatever task it hit: that task is not the waker.
#define WAKE_INTERRUPT 1  // a hard interrupt, softirq or NMI (a timer: a sleep's end, poll timeouts; I/O)
#define WAKE_UNTRACED 4   // a task of a process we do not trace (ids only: its name is not known here)

// Whether this wake is an interrupt's (x86-64). An interrupt that hits kernel code runs on the CPU's
// interrupt stack (so do softirqs run at local_bh_enable, and NMIs), off the current task's kernel stack
// (THREAD_SIZE, 16 KiB). One that hits user code runs on the task's stack, but the task then entered the
// kernel by no system call: its saved orig_ax is -1 (the APIC timer and other system vectors, hrtimers:
// a sleep's end). A task that wakes another by itself is in a system call (futex, write, exit...). (The
// CPU's preempt count would say it all, but __preempt_count is not in kallsyms on kernels without
// CONFIG_KALLSYMS_ALL: the verifier cannot resolve it.)
#define TASK_STACK_BYTES 16384

static __u32 interrupt_flags(struct task_struct* current, void* ctx, struct pt_regs* regs) {
  if ((long)BPF_CORE_READ(regs, orig_ax) < 0) return WAKE_INTERRUPT;
  const __u64 base = (__u64)BPF_CORE_READ(current, stack);
  // Where the tracepoint's arguments are: on the kernel stack of the code that hit it (the program's own
  // stack may be a per-CPU one). As a number: a pointer spilled and read back (the verifier lets a program
  // compare no pointer with a number otherwise).
  __u64 here = 0, spilled = (__u64)ctx;
  if (bpf_probe_read_kernel(&here, sizeof here, &spilled) != 0) return 0;
  return here - base < TASK_STACK_BYTES ? 0 : WAKE_INTERRUPT;
}

#define RING_BYTES (1 << 24)

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, RING_BYTES);
} wakings SEC(".maps");

// The reader (its poll) is woken only once the ring is a quarter full: a wake-up per record would cost an
// irq_work each and wake the reader as often as the program wakes its threads.
static __u64 wake_flag(void) {
  return bpf_ringbuf_query(&wakings, BPF_RB_AVAIL_DATA) > RING_BYTES / 4 ? BPF_RB_FORCE_WAKEUP
                                                                          : BPF_RB_NO_WAKEUP;
}

// The traced processes (tgid -> 1), kept by the recorder.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, __u8);
} traced SEC(".maps");

// Where a record with a stack is assembled (too large for the BPF stack) before it is copied out at its size.
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct waking);
} scratch SEC(".maps");

// Records that did not fit in the ring buffer (the reader fell behind), for the recorder's lost count.
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} dropped SEC(".maps");

static void drop(void) {
  __u32 zero = 0;
  __u64* n = bpf_map_lookup_elem(&dropped, &zero);
  if (n) __sync_fetch_and_add(n, 1);
}

// Set by the recorder before loading (.rodata): 0 in frame-pointer mode, which has no unwinder for them.
const volatile __u32 capture_stacks = 1;

#define NR_FUTEX 202       // x86-64 futex(2)
#define NR_FUTEX_WAKE 454  // x86-64 futex_wake(2), Linux 6.7

SEC("tp_btf/sched_waking")
int fxprof_waking(__u64* ctx) {
  struct task_struct* p = (struct task_struct*)ctx[0];
  __u32 wakee_pid = BPF_CORE_READ(p, tgid);
  if (!bpf_map_lookup_elem(&traced, &wakee_pid)) return 0;
  __u64 id = bpf_get_current_pid_tgid();
  __u32 waker_pid = id >> 32;
  // Every wake of a traced thread is sent: its time ends the wait (what follows is waiting for a CPU). The
  // waker is named only when it is a traced task's own doing, not an interrupt's that hit it.
  struct task_struct* current = bpf_get_current_task_btf();
  // The current task's user registers, saved at its kernel entry (the top of its kernel stack).
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(current);
  __u32 flags = interrupt_flags(current, ctx, regs);
  if (!flags && !bpf_map_lookup_elem(&traced, &waker_pid)) flags = WAKE_UNTRACED;
  const __u64 time = bpf_ktime_get_ns();
  const __u32 wakee_tid = BPF_CORE_READ(p, pid);

  // In a futex system call: the registers saved at its entry are the waker's user registers.
  const long nr = capture_stacks && !flags ? (long)BPF_CORE_READ(regs, orig_ax) : -1;
  __u32 zero = 0;
  struct waking* e = (nr == NR_FUTEX || nr == NR_FUTEX_WAKE) ? bpf_map_lookup_elem(&scratch, &zero) : 0;
  if (!e) {  // ids only: the cheap path
    struct waking* r = bpf_ringbuf_reserve(&wakings, __builtin_offsetof(struct waking, stack), 0);
    if (!r) {
      drop();
      return 0;
    }
    r->time = time;
    r->waker_pid = waker_pid;
    r->waker_tid = (__u32)id;
    r->wakee_pid = wakee_pid;
    r->wakee_tid = wakee_tid;
    r->uaddr = 0;
    for (int i = 0; i < 8; ++i) r->regs[i] = 0;
    r->stack_len = 0;
    r->flags = flags;
    bpf_ringbuf_submit(r, wake_flag());
    return 0;
  }
  e->time = time;
  e->waker_pid = waker_pid;
  e->waker_tid = (__u32)id;
  e->wakee_pid = wakee_pid;
  e->wakee_tid = wakee_tid;
  e->uaddr = BPF_CORE_READ(regs, di);
  e->regs[0] = BPF_CORE_READ(regs, ip);
  const __u64 sp = BPF_CORE_READ(regs, sp);
  e->regs[1] = sp;
  e->regs[2] = BPF_CORE_READ(regs, bp);
  e->regs[3] = BPF_CORE_READ(regs, bx);
  e->regs[4] = BPF_CORE_READ(regs, r12);
  e->regs[5] = BPF_CORE_READ(regs, r13);
  e->regs[6] = BPF_CORE_READ(regs, r14);
  e->regs[7] = BPF_CORE_READ(regs, r15);
  e->flags = 0;
  // The copy fails as a whole when it crosses the top of the stack: then up to the end of SP's page and
  // three more, one more, or the end of SP's page alone (a thread near its stack's top: main's, shallow).
  __u32 len = STACK_MAX;
  if (bpf_probe_read_user(e->stack, STACK_MAX, (const void*)sp) != 0) {
    __u32 page = 4096 - (__u32)(sp & 4095);  // 1..4096
    if (page > 4096) page = 4096;
    // Largest first: a failed read zeroes the copy.
    len = 0;
#if STACK_MAX >= 16384
    if (bpf_probe_read_user(e->stack, page + 3 * 4096, (const void*)sp) == 0) len = page + 3 * 4096;
#endif
    if (!len && bpf_probe_read_user(e->stack, page + 4096, (const void*)sp) == 0) len = page + 4096;
    if (!len && bpf_probe_read_user(e->stack, page, (const void*)sp) == 0) len = page;
  }
  e->stack_len = len;
  __u64 size = __builtin_offsetof(struct waking, stack) + (__u64)len;
  if (size > sizeof(struct waking)) size = sizeof(struct waking);
  if (bpf_ringbuf_output(&wakings, e, size, wake_flag()) != 0) drop();
  return 0;
}

char LICENSE[] SEC("license") = "GPL";
