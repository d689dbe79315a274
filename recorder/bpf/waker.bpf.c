// fxprof's off-CPU waker tracer (recorder/waker.h): at every sched_waking of a thread of a traced process,
// woken by a thread of a traced process, one event {time, waker, wakee} into a ring buffer. Compiled with
// clang -target bpf; CO-RE: task_struct is declared with only the fields read, relocated by libbpf against
// the running kernel's BTF (/sys/kernel/btf/vmlinux), so no vmlinux.h or bpftool is needed.
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

struct task_struct {
  int pid;
  int tgid;
} __attribute__((preserve_access_index));

struct waking {
  __u64 time;  // CLOCK_MONOTONIC ns, as the perf records (use_clockid)
  __u32 waker_pid, waker_tid, wakee_pid, wakee_tid;
};

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 22);
} wakings SEC(".maps");

// The traced processes (tgid -> 1), kept by the recorder.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, __u8);
} traced SEC(".maps");

SEC("tp_btf/sched_waking")
int fxprof_waking(__u64* ctx) {
  struct task_struct* p = (struct task_struct*)ctx[0];
  __u32 wakee_pid = BPF_CORE_READ(p, tgid);
  if (!bpf_map_lookup_elem(&traced, &wakee_pid)) return 0;
  __u64 id = bpf_get_current_pid_tgid();
  __u32 waker_pid = id >> 32;
  // Interrupts (timers, I/O completion) wake in whatever task runs: only wakers we trace mean something.
  if (!bpf_map_lookup_elem(&traced, &waker_pid)) return 0;
  struct waking* e = bpf_ringbuf_reserve(&wakings, sizeof *e, 0);
  if (!e) return 0;
  e->time = bpf_ktime_get_ns();
  e->waker_pid = waker_pid;
  e->waker_tid = (__u32)id;
  e->wakee_pid = wakee_pid;
  e->wakee_tid = BPF_CORE_READ(p, pid);
  bpf_ringbuf_submit(e, 0);
  return 0;
}

char LICENSE[] SEC("license") = "GPL";
