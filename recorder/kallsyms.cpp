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

namespace {

// For each query address (sorted), the greatest text symbol at or below it. kallsyms is streamed through a
// small buffer: each symbol lands on the first query at or above it (best[i] = max), and a prefix maximum
// at the end extends it to the later queries. O(lines x log queries), no copy of the 5 MB file.
struct Best {
  uint64_t addr = 0;
  bool found = false;
  std::string name;
};

void consider(std::string_view line, const std::vector<uint64_t>& queries, std::vector<Best>& best) {
  // "ffffffff81000000 T _text\t[module]"
  size_t i = 0;
  uint64_t addr = 0;
  for (; i < line.size() && line[i] != ' '; ++i) {
    char c = line[i];
    addr = addr * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  if (i + 3 >= line.size()) return;
  char type = line[i + 1];
  if (type != 't' && type != 'T' && type != 'w' && type != 'W') return;
  auto it = std::lower_bound(queries.begin(), queries.end(), addr);
  if (it == queries.end()) return;
  Best& b = best[static_cast<size_t>(it - queries.begin())];
  // Aliases at one address (`__pi___x86_indirect_thunk_rax`, then `__x86_indirect_thunk_rax`): the last one
  // listed wins, as in perf, whose end fixup leaves only the last alias a non-zero size.
  if (b.found && b.addr > addr) return;
  size_t name_start = i + 3;
  size_t name_end = line.find_first_of(" \t", name_start);
  if (name_end == std::string_view::npos) name_end = line.size();
  b.addr = addr;
  b.found = true;
  b.name.assign(line.substr(name_start, name_end - name_start));
}

}  // namespace

std::vector<std::string> read_kallsyms(std::span<const uint64_t> addrs) {
  const std::vector<uint64_t> queries(addrs.begin(), addrs.end());
  std::vector<Best> best(queries.size());
  if (queries.empty()) return {};
  UniqueFd fd(open("/proc/kallsyms", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return {};
  std::vector<char> buf(1 << 17);
  size_t have = 0;
  bool any_address = false;
  for (;;) {
    ssize_t n = read(fd.get(), buf.data() + have, buf.size() - have);
    if (n <= 0) break;
    have += static_cast<size_t>(n);
    size_t pos = 0;
    for (;;) {
      auto* nl = static_cast<char*>(std::memchr(buf.data() + pos, '\n', have - pos));
      if (!nl) break;
      std::string_view line(buf.data() + pos, static_cast<size_t>(nl - (buf.data() + pos)));
      if (!any_address && line.size() > 16 && line.find_first_not_of('0', 0) < 16) any_address = true;
      consider(line, queries, best);
      pos = static_cast<size_t>(nl - buf.data()) + 1;
    }
    std::memmove(buf.data(), buf.data() + pos, have - pos);
    have -= pos;
    if (have == buf.size()) have = 0;  // an absurdly long line: drop it
  }
  if (!any_address) return {};  // kernel.kptr_restrict hides addresses
  for (size_t i = 1; i < best.size(); ++i)
    if (best[i - 1].found && (!best[i].found || best[i].addr < best[i - 1].addr)) best[i] = best[i - 1];
  std::vector<std::string> names(best.size());
  for (size_t i = 0; i < best.size(); ++i)
    if (best[i].found) names[i] = std::move(best[i].name);
  return names;
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
