#include "recorder/kallsyms.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/fd.h"

namespace fxprof::recorder {

KernelSymbols KernelSymbols::read() {
  KernelSymbols t;
  UniqueFd fd(open("/proc/kallsyms", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return t;
  // libdeflate's fastest level: 3 MB of names in a few ms (zlib's level 1 took 4x longer, beside the
  // program).
  std::unique_ptr<libdeflate_compressor, decltype(&libdeflate_free_compressor)> deflater(
      libdeflate_alloc_compressor(1), &libdeflate_free_compressor);
  if (!deflater) return t;
  std::string text;  // the lines of the block being filled
  std::string packed;
  size_t in_block = 0;
  Block open_block;
  auto seal = [&] {
    if (in_block == 0) return;
    packed.resize(libdeflate_deflate_compress_bound(deflater.get(), text.size()));
    packed.resize(
        libdeflate_deflate_compress(deflater.get(), text.data(), text.size(), packed.data(), packed.size()));
    open_block.packed.assign(packed);  // exactly its size (empty if it failed: its names read as "")
    t.blocks_.push_back(std::move(open_block));
    open_block = Block{};
    text.clear();
    in_block = 0;
  };
  // "ffffffff81000000 T _text\t[module]": the kernel hands it out 4 KiB a read; streamed through a small
  // buffer, no copy of the 5 MB text.
  std::vector<char> buf(1 << 16);
  size_t have = 0;
  bool any_address = false;
  uint64_t previous = 0;
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
    const bool new_run = t.count_ == 0 || addr < previous;
    if (new_run || in_block == kBlock) seal();
    if (new_run) t.run_starts_.push_back(t.blocks_.size());
    if (in_block == 0) open_block.first = addr;
    open_block.last = addr;
    previous = addr;
    char hex[20];
    const int n = std::snprintf(hex, sizeof hex, "%" PRIx64 " ", addr - open_block.first);
    text.append(hex, static_cast<size_t>(n)).append(line.substr(name_start, name_end - name_start));
    text.push_back('\n');
    ++in_block;
    ++t.count_;
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
  seal();
  if (!any_address) return KernelSymbols{};  // kernel.kptr_restrict hides addresses
  t.blocks_.shrink_to_fit();
  return t;
}

size_t KernelSymbols::memory_bytes() const {
  size_t n = blocks_.capacity() * sizeof(Block) + run_starts_.capacity() * sizeof(size_t);
  for (const Block& b : blocks_) n += b.packed.capacity() > 15 ? b.packed.capacity() + 1 : 0;
  return n;
}

std::vector<std::string> KernelSymbols::names(std::span<const uint64_t> addrs) const {
  if (blocks_.empty()) return {};
  std::vector<std::string> out(addrs.size());
  std::unique_ptr<libdeflate_decompressor, decltype(&libdeflate_free_decompressor)> inflater(
      libdeflate_alloc_decompressor(), &libdeflate_free_decompressor);
  if (!inflater) return out;
  // The inflated blocks of this call: (address, name) in the order listed.
  std::unordered_map<size_t, std::vector<std::pair<uint64_t, std::string>>> inflated;
  auto entries = [&](size_t b) -> const std::vector<std::pair<uint64_t, std::string>>& {
    auto [it, fresh] = inflated.try_emplace(b);
    if (!fresh) return it->second;
    std::string text(kBlock * 320, '\0');
    size_t size = 0;
    libdeflate_result rc;
    // Long names: inflated again with room enough.
    while ((rc = libdeflate_deflate_decompress(inflater.get(), blocks_[b].packed.data(),
                                               blocks_[b].packed.size(), text.data(), text.size(), &size)) ==
               LIBDEFLATE_INSUFFICIENT_SPACE &&
           text.size() < (size_t{64} << 20))
      text.resize(text.size() * 4);
    if (rc != LIBDEFLATE_SUCCESS) size = 0;
    for (size_t pos = 0; pos < size;) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos || nl > size) nl = size;
      const std::string_view line(text.data() + pos, nl - pos);
      const size_t sp = line.find(' ');
      uint64_t off = 0;
      for (size_t i = 0; i < sp && i < line.size(); ++i) {
        char c = line[i];
        off = off * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
      }
      if (sp != std::string_view::npos) it->second.emplace_back(blocks_[b].first + off, line.substr(sp + 1));
      pos = nl + 1;
    }
    return it->second;
  };
  for (size_t i = 0; i < addrs.size(); ++i) {
    const uint64_t q = addrs[i];
    bool found = false;
    uint64_t best = 0;
    const std::string* name = nullptr;
    // The greatest address at or below q in each run; of equal ones the last listed (later runs win ties).
    for (size_t r = 0; r < run_starts_.size(); ++r) {
      const auto from = blocks_.begin() + static_cast<ptrdiff_t>(run_starts_[r]);
      const auto to = r + 1 < run_starts_.size()
                          ? blocks_.begin() + static_cast<ptrdiff_t>(run_starts_[r + 1])
                          : blocks_.end();
      auto it = std::upper_bound(from, to, q, [](uint64_t v, const Block& b) { return v < b.first; });
      if (it == from) continue;
      --it;
      if (found && std::min(q, it->last) < best) continue;  // cannot reach the best so far
      const auto& e = entries(static_cast<size_t>(it - blocks_.begin()));
      auto at =
          std::upper_bound(e.begin(), e.end(), q,
                           [](uint64_t v, const std::pair<uint64_t, std::string>& s) { return v < s.first; });
      if (at == e.begin()) continue;
      --at;
      if (!found || at->first >= best) {
        found = true;
        best = at->first;
        name = &at->second;
      }
    }
    if (found) out[i] = *name;
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
