// fxprof recorder internals: owning handles of libbpf's objects, and opening and loading one (the waker
// tracer, the heap uprobes and the USDT probes each load one embedded BPF object and attach links to it).
// Declared without libbpf's headers so that headers holding them stay free of it; closing an object detaches
// nothing a link still holds, so links are destroyed first (declare them after the object).
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "base/fd.h"
#include "base/result.h"

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

// Opens the embedded program `bytes` (recorder/bpf/embed.cmake) as `name`, libbpf's own messages silenced
// (our one line says what failed). Its globals can be set before load_bpf().
Result<BpfObject> open_bpf(const char* name, const unsigned char* bytes, size_t size);
// Loads it into the kernel; `needs`, when given, ends the error ("uprobes need root").
Status load_bpf(const BpfObject& object, std::string_view needs);

}  // namespace fxprof::recorder
