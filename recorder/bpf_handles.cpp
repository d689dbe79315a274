#include "recorder/bpf_handles.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <string>

namespace fxprof::recorder {

void BpfObjectClose::operator()(bpf_object* o) const { bpf_object__close(o); }
void BpfLinkDestroy::operator()(bpf_link* l) const { bpf_link__destroy(l); }

namespace {
int silent(enum libbpf_print_level, const char*, va_list) { return 0; }
}  // namespace

Result<BpfObject> open_bpf(const char* name, const unsigned char* bytes, size_t size) {
  libbpf_set_print(silent);
  LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = name);
  BpfObject object(bpf_object__open_mem(bytes, size, &opts));
  if (!object) return Err("cannot open the BPF program: " + errno_text(errno));
  return object;
}

Status load_bpf(const BpfObject& object, std::string_view needs) {
  if (int err = bpf_object__load(object.get()); err != 0) {
    std::string m = "cannot load the BPF program (" + errno_text(-err) + ")";
    if (!needs.empty()) m += ": " + std::string(needs);
    return Err(std::move(m));
  }
  return {};
}

}  // namespace fxprof::recorder
