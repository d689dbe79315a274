// fxprof's heap uprobes (recorder/heap_uprobes.h): the entry points of an allocator linked into the program
// (je_malloc, mi_malloc, a Rust #[global_allocator]'s __rg_alloc, ...), which the LD_PRELOAD shim cannot
// see. An allocation function's entry saves its size argument per thread; its return sends {size, pointer}
// with the user stack (frame pointers: bpf_get_stack; the first frame, the return address into the caller,
// is right without them); a free function's entry sends its pointer. Attached by libbpf to the functions by
// name; uprobes only (fentry and kprobes are not needed).
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

// x86-64's user registers as saved at the trap.
struct pt_regs {
  unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp,
      ss;
};

#define FRAMES 32

// The record; recorder/heap_uprobes.cpp reads this layout.
struct heap_event {
  __u64 time;  // CLOCK_MONOTONIC ns
  __u32 pid, tid;
  __u64 addr;
  __u64 size;  // allocation: bytes asked for
  __u32 kind;  // 1 allocation, 2 free
  __u32 frames;
  __u64 stack[FRAMES];
};

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 8 << 20);
} events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64);    // pid_tgid
  __type(value, __u64);  // the size asked for
} pending SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} dropped SEC(".maps");  // records the ring buffer had no room for

static void drop(void) {
  __u32 zero = 0;
  __u64* n = bpf_map_lookup_elem(&dropped, &zero);
  if (n) __sync_fetch_and_add(n, 1);
}

SEC("uprobe")
int alloc_enter(struct pt_regs* ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  __u64 size = ctx->di;
  bpf_map_update_elem(&pending, &id, &size, BPF_ANY);
  return 0;
}

SEC("uretprobe")
int alloc_exit(struct pt_regs* ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  __u64* size = bpf_map_lookup_elem(&pending, &id);
  if (!size) return 0;
  __u64 n = *size;
  bpf_map_delete_elem(&pending, &id);
  if (!ctx->ax) return 0;  // failed: nothing allocated
  struct heap_event* e = bpf_ringbuf_reserve(&events, sizeof *e, 0);
  if (!e) {
    drop();
    return 0;
  }
  e->time = bpf_ktime_get_ns();
  e->pid = id >> 32;
  e->tid = (__u32)id;
  e->addr = ctx->ax;
  e->size = n;
  e->kind = 1;
  long got = bpf_get_stack(ctx, e->stack, sizeof e->stack, BPF_F_USER_STACK);
  e->frames = got > 0 ? (__u32)((__u64)got / 8) : 0;
  bpf_ringbuf_submit(e, 0);
  return 0;
}

SEC("uprobe")
int free_enter(struct pt_regs* ctx) {
  if (!ctx->di) return 0;
  struct heap_event* e = bpf_ringbuf_reserve(&events, sizeof *e, 0);
  if (!e) {
    drop();
    return 0;
  }
  __u64 id = bpf_get_current_pid_tgid();
  e->time = bpf_ktime_get_ns();
  e->pid = id >> 32;
  e->tid = (__u32)id;
  e->addr = ctx->di;
  e->size = 0;
  e->kind = 2;
  e->frames = 0;
  bpf_ringbuf_submit(e, 0);
  return 0;
}

char LICENSE[] SEC("license") = "GPL";
