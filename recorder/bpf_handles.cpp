#include "recorder/bpf_handles.h"

#include <bpf/libbpf.h>

namespace fxprof::recorder {

void BpfObjectClose::operator()(bpf_object* o) const { bpf_object__close(o); }
void BpfLinkDestroy::operator()(bpf_link* l) const { bpf_link__destroy(l); }

}  // namespace fxprof::recorder
