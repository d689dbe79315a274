#include "recorder/kallsyms.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"

namespace fxprof::recorder {

KernelSymbols KernelSymbols::read() {
  KernelSymbols t;
  UniqueFd fd(open("/proc/kallsyms", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return t;
  t.syms_.reserve(1 << 17);
  t.names_.reserve(size_t{3} << 20);
  // "ffffffff81000000 T _text\t[module]": the kernel hands it out 4 KiB a read; streamed through a small
  // buffer, no copy of the 5 MB text.
  std::vector<char> buf(1 << 17);
  size_t have = 0;
  bool any_address = false;
  auto consider = [&](std::string_view line) {
    size_t i = 0;
    uint64_t addr = 0;
    for (; i < line.size() && line[i] != ' '; ++i) {
      char c = line[i];
      addr = addr * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    any_address |= addr != 0;
    if (i + 3 >= line.size()) return;
    char type = line[i + 1];
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') return;
    size_t name_start = i + 3;
    size_t name_end = line.find_first_of(" \t", name_start);
    if (name_end == std::string_view::npos) name_end = line.size();
    t.syms_.push_back({addr, static_cast<uint32_t>(t.names_.size()), static_cast<uint32_t>(name_end - name_start)});
    t.names_.append(line.substr(name_start, name_end - name_start));
  };
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data() + have, buf.size() - have);
    if (n <= 0) break;
    have += static_cast<size_t>(n);
    size_t pos = 0;
    for (;;) {
      auto* nl = static_cast<char*>(std::memchr(buf.data() + pos, '\n', have - pos));
      if (!nl) break;
      consider(std::string_view(buf.data() + pos, static_cast<size_t>(nl - (buf.data() + pos))));
      pos = static_cast<size_t>(nl - buf.data()) + 1;
    }
    std::memmove(buf.data(), buf.data() + pos, have - pos);
    have -= pos;
    if (have == buf.size()) have = 0;  // an absurdly long line: drop it
  }
  if (!any_address) return KernelSymbols{};  // kernel.kptr_restrict hides addresses
  // vmlinux's symbols come sorted, the modules' and BPF programs' after them. Stable: of several names at
  // one address the last listed stays last, and names() picks it (`__pi___x86_indirect_thunk_rax`, then
  // `__x86_indirect_thunk_rax`: perf's end fixup leaves only the last alias a non-zero size).
  auto by_addr = [](const Sym& a, const Sym& b) { return a.addr < b.addr; };
  if (!std::is_sorted(t.syms_.begin(), t.syms_.end(), by_addr))
    std::stable_sort(t.syms_.begin(), t.syms_.end(), by_addr);
  t.syms_.shrink_to_fit();
  t.names_.shrink_to_fit();
  return t;
}

std::vector<std::string> KernelSymbols::names(std::span<const uint64_t> addrs) const {
  if (syms_.empty()) return {};
  std::vector<std::string> out(addrs.size());
  for (size_t i = 0; i < addrs.size(); ++i) {
    auto it = std::upper_bound(syms_.begin(), syms_.end(), addrs[i],
                               [](uint64_t a, const Sym& s) { return a < s.addr; });
    if (it == syms_.begin()) continue;
    --it;
    out[i].assign(names_, it->name, it->len);
  }
  return out;
}

std::vector<std::string> read_kallsyms(std::span<const uint64_t> addrs) {
  if (addrs.empty()) return {};
  return KernelSymbols::read().names(addrs);
}

size_t name_kernel_frames(model::Profile& profile, Procfs& procfs) {
  std::vector<model::FrameId> kernel;
  std::vector<uint64_t> queries;
  for (model::FrameId i = 0; i < profile.frames.size(); ++i)
    if (profile.frames.get(i).kind == model::FrameKind::Kernel) {
      kernel.push_back(i);
      queries.push_back(profile.frames.get(i).address);
    }
  if (kernel.empty()) return 0;
  std::sort(queries.begin(), queries.end());
  queries.erase(std::unique(queries.begin(), queries.end()), queries.end());
  const std::vector<std::string> names = procfs.kernel_symbols(queries);
  if (names.size() != queries.size()) return 0;  // hidden addresses

  size_t named = 0;
  for (model::FrameId id : kernel) {
    uint64_t addr = profile.frames.get(id).address;
    size_t q = static_cast<size_t>(std::lower_bound(queries.begin(), queries.end(), addr) - queries.begin());
    if (names[q].empty()) continue;
    profile.frames.mutable_frame(id).name = profile.strings.intern(names[q]);
    ++named;
  }
  return named;
}

}  // namespace fxprof::recorder
