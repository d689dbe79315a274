// JIT code names from perf maps and jitdump files (design in jit.h).
#include "recorder/jit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>

#include "base/fd.h"
#include "base/hex.h"
#include "base/path.h"

namespace fxprof::recorder {

namespace {

constexpr uint32_t kJitdumpMagic = 0x4A695444;  // "JiTD" written as a native uint32
constexpr uint32_t kJitCodeLoad = 0, kJitCodeMove = 1, kJitCodeClose = 3;
constexpr size_t kRecordHeader = 16;  // id, total_size, timestamp

template <class T>
T load(std::string_view image, size_t at) {
  T v;
  std::memcpy(&v, image.data() + at, sizeof v);
  return v;
}

// Reads a regular file (never blocks on a FIFO or device that happens to carry the name). Symbolic links
// are refused: anyone can create /tmp/perf-PID.map, and a link there must not make a recorder running as
// root copy lines of another file into a profile.
Result<std::string> read_regular(const std::string& path, std::span<const uint32_t> uids, std::string* untrusted) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW));
  if (!fd.valid()) return Err("cannot open " + path + ": " + errno_text(errno));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return Err(path + ": not a regular file");
  if (std::string why = jit_file_untrusted(st.st_uid, st.st_mode, uids); !why.empty()) {
    std::string message = path + ": " + why;
    if (untrusted != nullptr) *untrusted = message;
    return Err(std::move(message));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxJitFileBytes) return Err(path + ": too large");
  std::string out;
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // shorter than fstat said (truncated meanwhile): what was read
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  // Still being appended to: take what is there now.
  char buf[65536];
  for (ssize_t n; out.size() < kMaxJitFileBytes && (n = ::read(fd.get(), buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  return out;
}

}  // namespace

std::string jit_file_untrusted(uint32_t owner, uint32_t mode, std::span<const uint32_t> uids) {
  if (mode & (S_IWGRP | S_IWOTH))
    return (mode & S_IWOTH) ? "writable by others" : "writable by its group";
  if (owner == 0 || std::find(uids.begin(), uids.end(), owner) != uids.end()) return "";
  std::string users;
  for (size_t i = 0; i < uids.size(); ++i)
    if (std::find(uids.begin(), uids.begin() + static_cast<ptrdiff_t>(i), uids[i]) == uids.begin() + static_cast<ptrdiff_t>(i))
      users += (users.empty() ? "" : " or ") + std::to_string(uids[i]);
  return "owned by user " + std::to_string(owner) + ", not by the process's user (" + users + ") or root";
}

std::vector<model::JitCode> parse_perf_map(std::string_view text) {
  std::vector<model::JitCode> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t sp1 = line.find(' ');
    if (sp1 == std::string_view::npos) continue;
    size_t sp2 = line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos) continue;
    uint64_t start = 0, size = 0;
    if (!parse_hex(line.substr(0, sp1), start) || !parse_hex(line.substr(sp1 + 1, sp2 - sp1 - 1), size))
      continue;
    if (size == 0 || start + size < start) continue;
    out.push_back({start, start + size, std::string(line.substr(sp2 + 1))});
  }
  return out;
}

Result<std::vector<model::JitCode>> parse_jitdump(std::string_view image) {
  if (image.size() < 40) return Err("not a jitdump file (too short)");
  const uint32_t magic = load<uint32_t>(image, 0);
  if (magic != kJitdumpMagic)
    return Err(magic == __builtin_bswap32(kJitdumpMagic) ? "a jitdump file of the other byte order"
                                                         : "not a jitdump file");
  const uint32_t header_size = load<uint32_t>(image, 8);
  if (header_size < 40 || header_size > image.size()) return Err("not a jitdump file (bad header size)");
  std::vector<model::JitCode> out;
  std::map<uint64_t, size_t> by_index;  // code_index -> entry in `out` (for JIT_CODE_MOVE)
  for (size_t at = header_size; image.size() - at >= kRecordHeader;) {
    const uint32_t id = load<uint32_t>(image, at);
    const uint32_t size = load<uint32_t>(image, at + 4);
    if (size < kRecordHeader || size > image.size() - at) break;  // truncated (still being written)
    std::string_view body = image.substr(at + kRecordHeader, size - kRecordHeader);
    at += size;
    if (id == kJitCodeClose) break;
    if (id == kJitCodeLoad) {
      // pid, tid, vma, code_addr, code_size, code_index, name\0, code bytes
      if (body.size() < 40) continue;
      const uint64_t code_addr = load<uint64_t>(body, 16), code_size = load<uint64_t>(body, 24);
      const uint64_t code_index = load<uint64_t>(body, 32);
      std::string_view rest = body.substr(40);
      size_t nul = rest.find('\0');
      if (nul == std::string_view::npos || code_size == 0 || code_addr + code_size < code_addr) continue;
      by_index[code_index] = out.size();
      out.push_back({code_addr, code_addr + code_size, std::string(rest.substr(0, nul))});
    } else if (id == kJitCodeMove) {
      // pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index
      if (body.size() < 48) continue;
      const uint64_t new_addr = load<uint64_t>(body, 24), code_size = load<uint64_t>(body, 32);
      auto it = by_index.find(load<uint64_t>(body, 40));
      if (it == by_index.end() || code_size == 0 || new_addr + code_size < new_addr) continue;
      std::string name = out[it->second].name;
      it->second = out.size();
      out.push_back({new_addr, new_addr + code_size, std::move(name)});
    }
  }
  return out;
}

Result<std::vector<model::JitCode>> read_perf_map(const std::string& path, std::span<const uint32_t> uids,
                                                  std::string* untrusted) {
  auto text = read_regular(path, uids, untrusted);
  if (!text) return std::move(text).take_error();
  return parse_perf_map(*text);
}

Result<std::vector<model::JitCode>> read_jitdump(const std::string& path, std::span<const uint32_t> uids,
                                                 std::string* untrusted) {
  auto image = read_regular(path, uids, untrusted);
  if (!image) return std::move(image).take_error();
  auto codes = parse_jitdump(*image);
  if (!codes) return Err(path + ": " + codes.error());
  return codes;
}

std::vector<model::JitCode> disjoint_jit_table(std::vector<model::JitCode> entries) {
  std::vector<model::JitCode> out;
  std::map<uint64_t, uint64_t> covered;  // start -> end of ranges taken by later entries (disjoint)
  for (auto e = entries.rbegin(); e != entries.rend(); ++e) {
    if (e->end <= e->start) continue;
    uint64_t s = e->start, end = e->end;
    // The covered ranges that overlap or touch [s, end), in order.
    auto it = covered.upper_bound(s);
    if (it != covered.begin() && std::prev(it)->second >= s) --it;
    uint64_t pos = s, merged_start = s, merged_end = end;
    auto first = it;
    for (; it != covered.end() && it->first <= end; ++it) {
      if (it->first > pos) out.push_back({pos, it->first, e->name});
      pos = std::max(pos, it->second);
      merged_start = std::min(merged_start, it->first);
      merged_end = std::max(merged_end, it->second);
    }
    if (pos < end) out.push_back({pos, end, e->name});
    covered.erase(first, it);
    covered.emplace(merged_start, merged_end);
  }
  std::sort(out.begin(), out.end(),
            [](const model::JitCode& a, const model::JitCode& b) { return a.start < b.start; });
  return out;
}

uint32_t jitdump_pid(std::string_view path) {
  const std::string_view base = base_name(path);
  if (!base.starts_with("jit-") || !base.ends_with(".dump")) return 0;
  std::string_view digits = base.substr(4, base.size() - 9);
  uint32_t pid = 0;
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  return r.ec == std::errc() && r.ptr == digits.data() + digits.size() ? pid : 0;
}

}  // namespace fxprof::recorder
