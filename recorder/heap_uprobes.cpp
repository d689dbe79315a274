#include "recorder/heap_uprobes.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>

#include "base/fd.h"
#include "recorder/bpf_handles.h"
#include "recorder/bpf_ring.h"

#ifdef FXPROF_HAVE_HEAP_UPROBES_BPF
#include "recorder/heap_uprobes_bpf.h"  // kHeapUprobesBpf: the compiled recorder/bpf/heap_uprobes.bpf.c
#endif

namespace fxprof::recorder {
namespace {

// heap_uprobes.bpf.c's struct heap_event.
constexpr size_t kFrames = 32;
struct Event {
  uint64_t time;
  uint32_t pid, tid;
  uint64_t addr, size;
  uint32_t kind, frames;
  uint64_t stack[kFrames];
};

// The BPF program on the entry of a function of `role` (bpf/heap_uprobes.bpf.c), reading its arguments.
const char* entry_program(heap::AllocatorRole role) {
  using R = heap::AllocatorRole;
  switch (role) {
    case R::Alloc:
      return "alloc_enter";
    case R::Calloc:
      return "calloc_enter";
    case R::Memalign:
      return "memalign_enter";
    case R::Realloc:
      return "realloc_enter";
    case R::RustRealloc:
      return "rust_realloc_enter";
    case R::PosixMemalign:
      return "posix_memalign_enter";
    default:
      return nullptr;
  }
}

}  // namespace

struct HeapUprobes::Bpf {
  BpfObject object;
  std::vector<BpfLink> links;
  std::optional<BpfRing> ring;  // mapped once (bpf_ring.h)
  int dropped_fd = -1;
  std::mutex mu;  // the ring buffer: drained by the reader thread, then by finish()
};

HeapUprobes::HeapUprobes() : bpf_(std::make_unique<Bpf>()) {}

HeapUprobes::~HeapUprobes() {
  stop_.store(true);
  if (reader_.joinable()) reader_.join();
}

Result<std::unique_ptr<HeapUprobes>> HeapUprobes::start(
    [[maybe_unused]] const std::string& path, [[maybe_unused]] const std::vector<std::string>& functions) {
#ifndef FXPROF_HAVE_HEAP_UPROBES_BPF
  return Err("not built (clang was missing when fxprof was built)");
#else
  std::unique_ptr<HeapUprobes> u(new HeapUprobes());
  Bpf& b = *u->bpf_;
  auto object = open_bpf("fxprof_heap", kHeapUprobesBpf, sizeof kHeapUprobesBpf);
  if (!object) return std::move(object).take_error();
  b.object = std::move(*object);
  if (auto st = load_bpf(b.object, "uprobes need root"); !st) return std::move(st).take_error();
  auto program = [&](const char* name) { return bpf_object__find_program_by_name(b.object.get(), name); };
  bpf_program* exit = program("alloc_exit");
  bpf_program* free = program("free_enter");
  bpf_program* posix_exit = program("posix_memalign_exit");
  if (!exit || !free || !posix_exit) return Err("the BPF program lacks its functions");
  // A Rust program's __rg_alloc/__rg_dealloc see every Rust allocation whatever the allocator behind them:
  // with them, the allocator's own entry points would count each block twice.
  const bool rust = std::find(functions.begin(), functions.end(), "__rg_alloc") != functions.end();
  for (const std::string& f : functions) {
    const heap::AllocatorRole role = heap::allocator_role(f);
    if (role == heap::AllocatorRole::Other || (rust && !f.starts_with("__rg_"))) continue;
    auto attach = [&](bpf_program* prog, bool ret) {
      LIBBPF_OPTS(bpf_uprobe_opts, uo, .retprobe = ret, .func_name = f.c_str());
      bpf_link* link = prog ? bpf_program__attach_uprobe_opts(prog, -1, path.c_str(), 0, &uo) : nullptr;
      if (link) b.links.emplace_back(link);
      return link != nullptr;
    };
    // Each role's entry program reads its arguments (heap/heap.h); all but free return through an exit.
    const char* entry = entry_program(role);
    const bool ok = role == heap::AllocatorRole::Free
                        ? attach(free, false)
                        : attach(program(entry), false) &&
                              attach(role == heap::AllocatorRole::PosixMemalign ? posix_exit : exit, true);
    if (!ok) return Err("cannot attach a uprobe to " + f + " in " + path + ": " + errno_text(errno));
    u->attached_.push_back(f);
  }
  if (u->attached_.empty()) return Err("no allocator function to probe in " + path);
  b.dropped_fd = bpf_object__find_map_fd_by_name(b.object.get(), "dropped");
  Result<BpfRing> ring = BpfRing::open(b.object.get(), "events");
  if (!ring.ok()) return Err(ring.error());
  b.ring.emplace(std::move(*ring));
  HeapUprobes* self = u.get();
  u->reader_ = std::thread([self] {
    while (!self->stop_.load()) {
      std::lock_guard lock(self->bpf_->mu);
      if (self->bpf_->ring->wait(50)) self->consume();
    }
  });
  return u;
#endif
}

std::vector<heap::ExternalCall> HeapUprobes::finish() {
  bpf_->links.clear();  // detached: nothing more comes in
  stop_.store(true);
  if (reader_.joinable()) reader_.join();
  if (bpf_->ring) consume();
  std::stable_sort(calls_.begin(), calls_.end(),
                   [](const heap::ExternalCall& a, const heap::ExternalCall& b) { return a.time < b.time; });
  return std::move(calls_);
}

void HeapUprobes::consume() {
  bpf_->ring->consume([this](std::span<const std::byte> data) {
    if (data.size() < sizeof(Event)) return;
    Event e;
    std::memcpy(&e, data.data(), sizeof e);
    heap::ExternalCall c{e.time, e.pid, e.tid, e.addr, e.size, e.kind == 1, {}};
    if (c.alloc) c.stack.assign(e.stack, e.stack + std::min<size_t>(e.frames, kFrames));
    calls_.push_back(std::move(c));
  });
}

uint64_t HeapUprobes::dropped() const {
  const uint32_t zero = 0;
  uint64_t n = 0;
  if (bpf_->dropped_fd >= 0 && bpf_map_lookup_elem(bpf_->dropped_fd, &zero, &n) != 0) n = 0;
  return n;
}

}  // namespace fxprof::recorder
