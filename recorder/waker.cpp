#include "recorder/waker.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string_view>
#include <thread>

#include "base/fd.h"

#ifdef FXPROF_HAVE_WAKER_BPF
#include "recorder/waker_bpf.h"  // kWakerBpf: the compiled recorder/bpf/waker.bpf.c
#endif

namespace fxprof::recorder {

bool decode_waking(std::span<const std::byte> r, Waking& out) {
  if (r.size() < kWakingHeaderBytes) return false;
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, r.data() + at, 4);
    return v;
  };
  auto u64 = [&](size_t at) {
    uint64_t v;
    std::memcpy(&v, r.data() + at, 8);
    return v;
  };
  out.time = u64(0);
  out.waker_pid = u32(8);
  out.waker_tid = u32(12);
  out.wakee_pid = u32(16);
  out.wakee_tid = u32(20);
  out.uaddr = u64(24);
  out.regs = {.ip = u64(32),
              .sp = u64(40),
              .bp = u64(48),
              .bx = u64(56),
              .r12 = u64(64),
              .r13 = u64(72),
              .r14 = u64(80),
              .r15 = u64(88)};
  const uint32_t len = u32(96);
  out.flags = u32(100);
  if (len > r.size() - kWakingHeaderBytes) return false;
  out.stack.assign(r.data() + kWakingHeaderBytes, r.data() + kWakingHeaderBytes + len);
  return true;
}

void encode_waking(const Waking& w, std::vector<std::byte>& out) {
  const size_t at = out.size();
  out.resize(at + kWakingHeaderBytes + w.stack.size());
  std::byte* p = out.data() + at;
  auto put = [&](size_t off, auto v) { std::memcpy(p + off, &v, sizeof v); };
  put(0, w.time);
  put(8, w.waker_pid);
  put(12, w.waker_tid);
  put(16, w.wakee_pid);
  put(20, w.wakee_tid);
  put(24, w.uaddr);
  const uint64_t regs[8] = {w.regs.ip,  w.regs.sp,  w.regs.bp,  w.regs.bx,
                            w.regs.r12, w.regs.r13, w.regs.r14, w.regs.r15};
  std::memcpy(p + 32, regs, sizeof regs);
  put(96, static_cast<uint32_t>(w.stack.size()));
  put(100, w.flags);
  if (!w.stack.empty()) std::memcpy(p + kWakingHeaderBytes, w.stack.data(), w.stack.size());
}

namespace {

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

Result<std::unique_ptr<WakerTracer>> WakerTracer::start([[maybe_unused]] bool stacks,
                                                        [[maybe_unused]] std::span<const uint32_t> pids) {
#ifndef FXPROF_HAVE_WAKER_BPF
  return Err("not built (clang was missing when fxprof was built)");
#else
  auto t = std::make_unique<WakerTracer>();
  auto object = open_bpf("fxprof_waker", kWakerBpf, sizeof kWakerBpf);
  if (!object) return std::move(object).take_error();
  t->object_ = std::move(*object);
  // capture_stacks, the program's only read-only global: its .rodata, writable until the load.
  bpf_map* m = nullptr;
  bpf_object__for_each_map(m, t->object_.get()) {
    const std::string_view name = bpf_map__name(m);
    size_t size = 0;
    if (!name.ends_with(".rodata")) continue;
    const void* v = bpf_map__initial_value(m, &size);
    if (!v || size < sizeof(uint32_t)) continue;
    std::vector<std::byte> value(static_cast<const std::byte*>(v), static_cast<const std::byte*>(v) + size);
    const uint32_t on = stacks ? 1 : 0;
    std::memcpy(value.data(), &on, sizeof on);
    bpf_map__set_initial_value(m, value.data(), value.size());
  }
  if (auto st = load_bpf(t->object_, "it needs root and a kernel with BTF"); !st)
    return std::move(st).take_error();
  bpf_program* prog = bpf_object__find_program_by_name(t->object_.get(), "fxprof_waking");
  if (!prog) return Err("the BPF program has no fxprof_waking");
  t->prog_fd_ = bpf_program__fd(prog);
  t->traced_fd_ = bpf_object__find_map_fd_by_name(t->object_.get(), "traced");
  t->dropped_fd_ = bpf_object__find_map_fd_by_name(t->object_.get(), "dropped");
  if (t->traced_fd_ < 0 || t->dropped_fd_ < 0) return Err("the BPF program has no maps");
  for (uint32_t pid : pids) t->trace(pid);  // traced from the first wake it sees
  t->link_.reset(bpf_program__attach(prog));
  if (!t->link_) return Err("cannot attach to sched_waking: " + errno_text(errno));
  t->attached_ns_ = monotonic_ns();
  Result<BpfRing> r = BpfRing::open(t->object_.get(), "wakings");
  if (!r.ok()) return Err(r.error());
  t->ring_.emplace(std::move(*r));
  return t;
#endif
}

WakerTracer::~WakerTracer() = default;

void WakerTracer::trace(uint32_t pid) {
  const uint8_t one = 1;
  if (traced_fd_ >= 0) bpf_map_update_elem(traced_fd_, &pid, &one, BPF_ANY);
}

uint64_t WakerTracer::dropped() const {
  const uint32_t zero = 0;
  uint64_t n = 0;
  if (dropped_fd_ >= 0 && bpf_map_lookup_elem(dropped_fd_, &zero, &n) != 0) n = 0;
  return n;
}

std::pair<uint64_t, uint64_t> WakerTracer::run_stats() const {
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  if (prog_fd_ < 0 || bpf_obj_get_info_by_fd(prog_fd_, &info, &len) != 0) return {0, 0};
  return {info.run_cnt, info.run_time_ns};
}

int WakerTracer::fd() const { return ring_ ? ring_->fd() : -1; }

void WakerTracer::drain(std::vector<Waking>& out) {
  if (!ring_) return;
  ring_->consume([&](std::span<const std::byte> record) {
    Waking w;
    if (decode_waking(record, w)) out.push_back(std::move(w));
  });
}

// What the loading thread and the Session share: the thread may outlive the WakerLoader (abandoned).
struct WakerLoader::Shared {
  std::mutex mutex;
  std::optional<Result<std::unique_ptr<WakerTracer>>> result;
  bool abandoned = false;
  UniqueFd done{eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
};

namespace {

// The test hook (waker.h): one byte from the FIFO FXPROF_TEST_WAKER_GATE names, before loading.
void wait_for_test_gate() {
  const char* gate = std::getenv("FXPROF_TEST_WAKER_GATE");
  if (!gate || !*gate) return;
  UniqueFd fd(open(gate, O_RDONLY | O_CLOEXEC));
  char byte;
  while (fd.valid() && read(fd.get(), &byte, 1) < 0 && errno == EINTR) {
  }
}

}  // namespace

WakerLoader::WakerLoader(bool stacks, std::vector<uint32_t> pids)
    : shared_(std::make_shared<Shared>()), began_ns_(monotonic_ns()) {
  std::thread([shared = shared_, stacks, pids = std::move(pids)] {
    wait_for_test_gate();
    auto r = WakerTracer::start(stacks, pids);
    std::lock_guard lock(shared->mutex);
    if (shared->abandoned) return;  // the recording ended first: what was loaded is closed here
    shared->result.emplace(std::move(r));
    const uint64_t one = 1;
    if (write(shared->done.get(), &one, sizeof one) < 0) {
    }  // (an eventfd's counter cannot overflow from one write)
  }).detach();
}

WakerLoader::~WakerLoader() {
  std::lock_guard lock(shared_->mutex);
  shared_->abandoned = true;
  shared_->result.reset();  // a tracer loaded but never taken detaches here
}

int WakerLoader::fd() const { return shared_->done.get(); }

std::optional<Result<std::unique_ptr<WakerTracer>>> WakerLoader::take() {
  std::lock_guard lock(shared_->mutex);
  return std::exchange(shared_->result, std::nullopt);
}

}  // namespace fxprof::recorder
