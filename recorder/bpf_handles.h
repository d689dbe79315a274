// fxprof recorder internals: owning handles of libbpf's objects (the waker tracer, the heap uprobes and the
// USDT probes each load one BPF object and attach links to it). Declared without libbpf's headers so that
// headers holding them stay free of it; closing an object detaches nothing a link still holds, so links
// are destroyed first (declare them after the object).
#pragma once

#include <memory>

struct bpf_object;
struct bpf_link;

namespace fxprof::recorder {

struct BpfObjectClose {
  void operator()(bpf_object* o) const;
};
struct BpfLinkDestroy {
  void operator()(bpf_link* l) const;
};
using BpfObject = std::unique_ptr<bpf_object, BpfObjectClose>;
using BpfLink = std::unique_ptr<bpf_link, BpfLinkDestroy>;

}  // namespace fxprof::recorder
