// fxprof's USDT probes (recorder/usdt_probes.h): one program attached by libbpf (bpf_program__attach_usdt)
// at each probe asked for, in the executable and its libraries. libbpf's <bpf/usdt.bpf.h> reads the
// arguments where the probe's note says they are; each hit sends the time, the thread, the probe (the
// cookie's low 32 bits: its index in the recorder's list) and up to 12 arguments. The cookie's bits 32-43
// say which arguments are C strings: their first kStr bytes are read from the process at the hit (at most
// STRS strings a hit), while the pointer still points at them.
#include <linux/bpf.h>
#include <linux/types.h>
#include <stdbool.h>

// x86-64's user registers as saved at the trap (what usdt.bpf.h's register offsets index).
struct pt_regs {
  unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp,
      ss;
};

// The kernel's register names (di, ip), not user space's (rdi, rip), for bpf_tracing.h's macros.
#define __VMLINUX_H__
#include <bpf/bpf_helpers.h>
#include <bpf/usdt.bpf.h>

#define ARGS 12  // BPF_USDT_MAX_ARG_CNT
#define STRS 3
#define STR_LEN 64

// The record; recorder/usdt_probes.cpp reads this layout.
struct usdt_event {
  __u64 time;  // CLOCK_MONOTONIC ns
  __u32 pid, tid;
  __u32 probe;  // the cookie's low bits
  __u32 args;   // how many arguments the probe has
  __s64 arg[ARGS];
  char str[STRS][STR_LEN];  // the string arguments, in order, NUL-terminated
};

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 8 << 20);
} events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} dropped SEC(".maps");  // hits the ring buffer had no room for

SEC("usdt")
int usdt_hit(struct pt_regs* ctx) {
  struct usdt_event* e = bpf_ringbuf_reserve(&events, sizeof *e, 0);
  if (!e) {
    __u32 zero = 0;
    __u64* n = bpf_map_lookup_elem(&dropped, &zero);
    if (n) __sync_fetch_and_add(n, 1);
    return 0;
  }
  const __u64 cookie = bpf_usdt_cookie(ctx);
  const __u64 id = bpf_get_current_pid_tgid();
  e->time = bpf_ktime_get_ns();
  e->pid = id >> 32;
  e->tid = (__u32)id;
  e->probe = (__u32)cookie;
  int n = bpf_usdt_arg_cnt(ctx);
  e->args = n > 0 ? n : 0;
  __u32 s = 0;
  for (int i = 0; i < ARGS; i++) {
    long v = 0;
    if (i < n) bpf_usdt_arg(ctx, i, &v);
    e->arg[i] = v;
    if (((cookie >> (32 + i)) & 1) && s < STRS) {
      e->str[s][0] = 0;
      if (v) bpf_probe_read_user_str(e->str[s], STR_LEN, (const void*)v);
      s++;
    }
  }
  for (; s < STRS; s++) e->str[s][0] = 0;
  bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);  // the reader polls: a wakeup a hit would cost more than the hit
  return 0;
}

char LICENSE[] SEC("license") = "GPL";
