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

// Appends what `fd` holds from its position on (a file still being appended to: what is there now), up
// to kMaxJitFileBytes in all.
void read_rest(int fd, std::string& out) {
  char buf[65536];
  for (ssize_t n; out.size() < kMaxJitFileBytes;) {
    n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
}

Result<std::string> read_regular(const std::string& path, std::span<const uint32_t> uids,
                                 std::string* untrusted) {
  struct stat st {};
  auto fd = open_regular(path, st, uids, untrusted);
  if (!fd) return std::move(fd).take_error();
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  read_rest(fd->get(), out);
  return out;
}

}  // namespace

std::string untrusted_file(const std::string& path, const struct stat& st, std::span<const uint32_t> uids) {
  std::string why = jit_file_untrusted(st.st_uid, st.st_mode, uids);
  return why.empty() ? why : path + ": " + why;
}

Result<UniqueFd> open_regular(const std::string& path, struct stat& st, std::span<const uint32_t> uids,
                              std::string* untrusted) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW));
  if (!fd.valid()) return Err("cannot open " + path + ": " + errno_text(errno));
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return Err(path + ": not a regular file");
  if (std::string message = untrusted_file(path, st, uids); !message.empty()) {
    if (untrusted != nullptr) *untrusted = message;
    return Err(std::move(message));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxJitFileBytes) return Err(path + ": too large");
  return fd;
}

std::string jit_file_untrusted(uint32_t owner, uint32_t mode, std::span<const uint32_t> uids) {
  if (mode & (S_IWGRP | S_IWOTH)) return (mode & S_IWOTH) ? "writable by others" : "writable by its group";
  if (owner == 0 || std::find(uids.begin(), uids.end(), owner) != uids.end()) return "";
  std::string users;
  for (size_t i = 0; i < uids.size(); ++i)
    if (std::find(uids.begin(), uids.begin() + static_cast<ptrdiff_t>(i), uids[i]) ==
        uids.begin() + static_cast<ptrdiff_t>(i))
      users += (users.empty() ? "" : " or ") + std::to_string(uids[i]);
  return "owned by user " + std::to_string(owner) + ", not by the process's user (" + users + ") or root";
}

std::vector<model::JitCode> parse_perf_map(std::string_view text, uint64_t seen_ns) {
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
    out.push_back({start, start + size, std::string(line.substr(sp2 + 1)), seen_ns});
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
  // flags (at 32): JITDUMP_FLAGS_ARCH_TIMESTAMP means TSC counts, not CLOCK_MONOTONIC: no times then.
  const bool monotonic = (load<uint64_t>(image, 32) & 1) == 0;
  if (header_size < 40 || header_size > image.size()) return Err("not a jitdump file (bad header size)");
  std::vector<model::JitCode> out;
  std::map<uint64_t, size_t> by_index;  // code_index -> entry in `out` (for JIT_CODE_MOVE)
  for (size_t at = header_size; image.size() - at >= kRecordHeader;) {
    const uint32_t id = load<uint32_t>(image, at);
    const uint32_t size = load<uint32_t>(image, at + 4);
    if (size < kRecordHeader || size > image.size() - at) break;  // truncated (still being written)
    const uint64_t time = monotonic ? load<uint64_t>(image, at + 8) : 0;
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
      out.push_back({code_addr, code_addr + code_size, std::string(rest.substr(0, nul)), time});
    } else if (id == kJitCodeMove) {
      // pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index
      if (body.size() < 48) continue;
      const uint64_t new_addr = load<uint64_t>(body, 24), code_size = load<uint64_t>(body, 32);
      auto it = by_index.find(load<uint64_t>(body, 40));
      if (it == by_index.end() || code_size == 0 || new_addr + code_size < new_addr) continue;
      std::string name = out[it->second].name;
      out[it->second].until_ns = std::max(time, out[it->second].from_ns);  // gone from its old place
      it->second = out.size();
      out.push_back({new_addr, new_addr + code_size, std::move(name), time});
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

std::vector<model::JitCode> merge_jit_sources(std::vector<model::JitCode> perf_map,
                                              std::vector<model::JitCode> jitdump) {
  if (jitdump.empty()) return perf_map;
  // The jitdump's code as sorted, disjoint ranges.
  std::vector<std::pair<uint64_t, uint64_t>> dumped;
  for (const model::JitCode& c : jitdump)
    if (c.end > c.start) dumped.emplace_back(c.start, c.end);
  std::sort(dumped.begin(), dumped.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& r : dumped) {
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  std::erase_if(perf_map, [&](const model::JitCode& c) {
    auto it = std::upper_bound(merged.begin(), merged.end(), std::make_pair(c.start, UINT64_MAX));
    if (it != merged.begin() && std::prev(it)->second > c.start) return true;  // one starts before, ends in
    return it != merged.end() && it->first < c.end;                            // one starts inside
  });
  perf_map.insert(perf_map.end(), std::make_move_iterator(jitdump.begin()),
                  std::make_move_iterator(jitdump.end()));
  return perf_map;
}

void PerfMapFollower::poll(uint64_t now_ns) {
  auto forget = [&] {
    fd_ = UniqueFd();
    entries_.clear();
    partial_.clear();
    offset_ = kept_bytes_ = dropped_ = 0;
    long_line_ = capped_ = false;
  };
  struct stat at_path {};
  const bool there = ::lstat(path_.c_str(), &at_path) == 0;
  // Replaced (another program's map: a pid reused) or truncated: start over. Deleted (runtimes that remove
  // their map at exit): the open file still holds every line, kept and read to its end.
  if (fd_.valid() && there &&
      (at_path.st_dev != dev_ || at_path.st_ino != ino_ || static_cast<uint64_t>(at_path.st_size) < offset_))
    forget();
  // Owner and mode again on what is open: a map that became another user's, or writable by others, while
  // it was followed is refused as a whole (its lines may be that user's), like one that was so from the
  // start.
  struct stat now {};
  if (fd_.valid() && fstat(fd_.get(), &now) == 0) {
    if (std::string message = untrusted_file(path_, now, uids_); !message.empty()) {
      untrusted_ = std::move(message);
      forget();
    }
  }
  if (!fd_.valid() && there) {
    struct stat st {};
    if (auto fd = open_regular(path_, st, uids_, &untrusted_)) {
      fd_ = std::move(*fd);
      dev_ = st.st_dev;
      ino_ = st.st_ino;
    }
  }
  if (fd_.valid()) read_lines();
  last_ns_ = now_ns;
}

// kFollowChunkBytes at a time, each chunk's complete lines parsed at once: the text held is one chunk and a
// line, whatever the map's size (a 1 GiB map was read whole, then parsed).
void PerfMapFollower::read_lines() {
  constexpr size_t kFollowChunkBytes = size_t{4} << 20, kMaxLineBytes = size_t{64} << 10;
  std::vector<char> buf(kFollowChunkBytes);
  for (;;) {
    if (offset_ >= kMaxJitFileBytes) {
      capped_ = true;
      return;
    }
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), kMaxJitFileBytes - offset_));
    const ssize_t n = ::read(fd_.get(), buf.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    offset_ += static_cast<uint64_t>(n);
    std::string_view chunk(buf.data(), static_cast<size_t>(n));
    if (long_line_) {  // the rest of a line too long to be a function's: skipped
      const size_t nl = chunk.find('\n');
      if (nl == std::string_view::npos) continue;
      chunk.remove_prefix(nl + 1);
      long_line_ = false;
    }
    if (const size_t last = chunk.rfind('\n'); last != std::string_view::npos) {
      partial_.append(chunk.substr(0, last + 1));
      keep(parse_perf_map(partial_, last_ns_));
      partial_.clear();
      chunk.remove_prefix(last + 1);
    }
    partial_.append(chunk);
    if (partial_.size() > kMaxLineBytes) {
      partial_.clear();
      long_line_ = true;
    }
  }
}

// At most max_entry_bytes_ of entries: the rest are counted, for the data-quality line.
void PerfMapFollower::keep(std::vector<model::JitCode> lines) {
  for (model::JitCode& c : lines) {
    const size_t cost = sizeof(model::JitCode) + c.name.size();
    if (kept_bytes_ + cost > max_entry_bytes_) {
      ++dropped_;
      continue;
    }
    kept_bytes_ += cost;
    entries_.push_back(std::move(c));
  }
}

std::vector<model::JitCode> PerfMapFollower::finish() {
  const uint64_t before = last_ns_;
  poll(last_ns_);
  if (!long_line_) keep(parse_perf_map(partial_, before));
  partial_.clear();
  if (dropped_ > 0) {
    const size_t mib = max_entry_bytes_ >> 20;
    const std::string cap = mib << 20 == max_entry_bytes_ ? std::to_string(mib) + " MiB"
                                                          : std::to_string(max_entry_bytes_ >> 10) + " KiB";
    dropped_text_ = path_ + ": " + std::to_string(dropped_) + " functions after the first " +
                    std::to_string(entries_.size()) + " (" + cap + " of names) have no names";
  }
  if (capped_)
    dropped_text_ += (dropped_text_.empty() ? path_ + ": " : "; ") + std::string("lines after its first ") +
                     std::to_string(kMaxJitFileBytes >> 30) + " GiB were not read";
  return std::move(entries_);
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
