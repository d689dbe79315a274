// fxprof's heap uprobes (recorder/heap_uprobes.h): the entry points of an allocator linked into the program
// (je_malloc, mi_malloc, a Rust #[global_allocator]'s __rg_alloc, ...), which the LD_PRELOAD shim cannot
// see. An allocation function's entry saves its size argument per thread (calloc's product, realloc's old
// block, posix_memalign's out pointer); its return sends {size, pointer} (a realloc also the free of the block
// it replaced) with the user stack (frame pointers: bpf_get_stack; the first frame, the return address into the caller,
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

// A call in progress on a thread: what its return needs. `depth`: calls of probed functions made inside it
// (an allocator whose calloc calls its own malloc, a realloc that frees): counted once, as the outer call.
struct call {
  __u64 size;   // bytes asked for
  __u64 old;    // realloc: the block it replaces
  __u64 out;    // posix_memalign: where the block's address is written
  __u64 depth;
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64);  // pid_tgid
  __type(value, struct call);
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

// An allocation (kind 1, with the user stack) or a free (kind 2) into the ring buffer.
static __always_inline void emit(struct pt_regs* ctx, __u64 id, __u32 kind, __u64 addr, __u64 size) {
  struct heap_event* e = bpf_ringbuf_reserve(&events, sizeof *e, 0);
  if (!e) {
    drop();
    return;
  }
  e->time = bpf_ktime_get_ns();
  e->pid = id >> 32;
  e->tid = (__u32)id;
  e->addr = addr;
  e->size = size;
  e->kind = kind;
  e->frames = 0;
  if (kind == 1) {
    long got = bpf_get_stack(ctx, e->stack, sizeof e->stack, BPF_F_USER_STACK);
    e->frames = got > 0 ? (__u32)((__u64)got / 8) : 0;
  }
  bpf_ringbuf_submit(e, 0);
}

// An allocation function's entry: a call of the thread's own, or one inside another (depth).
static __always_inline int enter(__u64 size, __u64 old, __u64 out) {
  __u64 id = bpf_get_current_pid_tgid();
  struct call* c = bpf_map_lookup_elem(&pending, &id);
  if (c) {
    c->depth++;
    return 0;
  }
  struct call fresh = {size, old, out, 0};
  bpf_map_update_elem(&pending, &id, &fresh, BPF_ANY);
  return 0;
}

// The call ending now, or 0 when it was one inside another (or unknown).
static __always_inline int leave(__u64 id, struct call* out) {
  struct call* c = bpf_map_lookup_elem(&pending, &id);
  if (!c) return 0;
  if (c->depth > 0) {
    c->depth--;
    return 0;
  }
  *out = *c;
  bpf_map_delete_elem(&pending, &id);
  return 1;
}

SEC("uprobe")
int alloc_enter(struct pt_regs* ctx) { return enter(ctx->di, 0, 0); }  // malloc(size), __rg_alloc(size, align)

SEC("uprobe")
int calloc_enter(struct pt_regs* ctx) { return enter(ctx->di * ctx->si, 0, 0); }  // calloc(n, size)

SEC("uprobe")
int memalign_enter(struct pt_regs* ctx) { return enter(ctx->si, 0, 0); }  // aligned_alloc(align, size)

SEC("uprobe")
int realloc_enter(struct pt_regs* ctx) { return enter(ctx->si, ctx->di, 0); }  // realloc(old, size)

// __rg_realloc(old, old_size, align, new_size)
SEC("uprobe")
int rust_realloc_enter(struct pt_regs* ctx) { return enter(ctx->cx, ctx->di, 0); }

SEC("uprobe")
int posix_memalign_enter(struct pt_regs* ctx) { return enter(ctx->dx, 0, ctx->di); }  // (out, align, size)

SEC("uretprobe")
int alloc_exit(struct pt_regs* ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  struct call c;
  if (!leave(id, &c)) return 0;
  // A realloc that moved or freed its block (NULL with size 0); a failed one left it where it was.
  if (c.old && (ctx->ax || c.size == 0)) emit(ctx, id, 2, c.old, 0);
  if (ctx->ax) emit(ctx, id, 1, ctx->ax, c.size);
  return 0;
}

SEC("uretprobe")
int posix_memalign_exit(struct pt_regs* ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  struct call c;
  if (!leave(id, &c) || ctx->ax != 0 || !c.out) return 0;  // it returns 0 on success
  __u64 block = 0;
  if (bpf_probe_read_user(&block, sizeof block, (void*)c.out) != 0 || !block) return 0;
  emit(ctx, id, 1, block, c.size);
  return 0;
}

SEC("uprobe")
int free_enter(struct pt_regs* ctx) {
  if (!ctx->di) return 0;
  __u64 id = bpf_get_current_pid_tgid();
  if (bpf_map_lookup_elem(&pending, &id)) return 0;  // inside an allocation function (a realloc's own free)
  emit(ctx, id, 2, ctx->di, 0);
  return 0;
}

char LICENSE[] SEC("license") = "GPL";
