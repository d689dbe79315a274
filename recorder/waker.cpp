#include "recorder/waker.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "base/fd.h"

#ifdef FXPROF_HAVE_WAKER_BPF
#include "recorder/waker_bpf.h"  // kWakerBpf: the compiled recorder/bpf/waker.bpf.c
#endif

namespace fxprof::recorder {

void WakerTracer::ObjectDeleter::operator()(bpf_object* o) const { bpf_object__close(o); }
void WakerTracer::LinkDeleter::operator()(bpf_link* l) const { bpf_link__destroy(l); }
void WakerTracer::RingDeleter::operator()(ring_buffer* r) const { ring_buffer__free(r); }

namespace {
int silent(enum libbpf_print_level, const char*, va_list) { return 0; }  // our one line says what failed
}  // namespace

Result<std::unique_ptr<WakerTracer>> WakerTracer::start() {
#ifndef FXPROF_HAVE_WAKER_BPF
  return Err("not built (clang was missing when fxprof was built)");
#else
  libbpf_set_print(silent);
  auto t = std::make_unique<WakerTracer>();
  LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "fxprof_waker");
  t->object_.reset(bpf_object__open_mem(kWakerBpf, sizeof kWakerBpf, &opts));
  if (!t->object_) return Err("cannot open the BPF program: " + errno_text(errno));
  if (int err = bpf_object__load(t->object_.get()); err != 0)
    return Err("cannot load the BPF program (" + errno_text(-err) + "; it needs root and a kernel with BTF)");
  bpf_program* prog = bpf_object__find_program_by_name(t->object_.get(), "fxprof_waking");
  if (!prog) return Err("the BPF program has no fxprof_waking");
  t->link_.reset(bpf_program__attach(prog));
  if (!t->link_) return Err("cannot attach to sched_waking: " + errno_text(errno));
  t->traced_fd_ = bpf_object__find_map_fd_by_name(t->object_.get(), "traced");
  const int ring_fd = bpf_object__find_map_fd_by_name(t->object_.get(), "wakings");
  if (t->traced_fd_ < 0 || ring_fd < 0) return Err("the BPF program has no maps");
  WakerTracer* self = t.get();
  t->ring_.reset(ring_buffer__new(
      ring_fd,
      [](void* ctx, void* data, size_t size) {
        auto* me = static_cast<WakerTracer*>(ctx);
        if (size >= sizeof(Waking) && me->sink_) {
          Waking w;
          std::memcpy(&w, data, sizeof w);
          me->sink_->push_back(w);
        }
        return 0;
      },
      self, nullptr));
  if (!t->ring_) return Err("cannot map the BPF ring buffer: " + errno_text(errno));
  return t;
#endif
}

WakerTracer::~WakerTracer() = default;

void WakerTracer::trace(uint32_t pid) {
  const uint8_t one = 1;
  if (traced_fd_ >= 0) bpf_map_update_elem(traced_fd_, &pid, &one, BPF_ANY);
}

void WakerTracer::drain(std::vector<Waking>& out) {
  if (!ring_) return;
  sink_ = &out;
  ring_buffer__consume(ring_.get());
  sink_ = nullptr;
}

}  // namespace fxprof::recorder
