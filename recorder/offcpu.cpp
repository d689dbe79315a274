#include "recorder/offcpu.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "model/profile.h"

namespace fxprof::recorder {

namespace {

// A kernel function name as kallsyms gives it, maybe with a compiler suffix (".isra.0", ".constprop.0").
bool named(std::string_view name, std::string_view fn) {
  return name.starts_with(fn) && (name.size() == fn.size() || name[fn.size()] == '.');
}
bool any_named(std::string_view name, std::span<const std::string_view> fns) {
  return std::any_of(fns.begin(), fns.end(), [&](std::string_view f) { return named(name, f); });
}

constexpr std::array<std::string_view, 7> kPageFault = {
    "handle_mm_fault", "do_user_addr_fault", "exc_page_fault",   "do_page_fault",
    "__do_fault",      "filemap_fault",      "__handle_mm_fault"};
constexpr std::array<std::string_view, 4> kSleep = {"do_nanosleep", "hrtimer_nanosleep", "common_nsleep",
                                                    "__x64_sys_nanosleep"};
constexpr std::array<std::string_view, 22> kIo = {"pipe_read",
                                                  "pipe_write",
                                                  "wait_woken",
                                                  "io_schedule",
                                                  "io_schedule_timeout",
                                                  "ep_poll",
                                                  "do_select",
                                                  "do_sys_poll",
                                                  "do_poll",
                                                  "unix_stream_read_generic",
                                                  "sk_wait_data",
                                                  "n_tty_read",
                                                  "wait_for_completion_io",
                                                  "folio_wait_bit_common",
                                                  "__wait_on_buffer",
                                                  "ksys_read",
                                                  "ksys_write",
                                                  "vfs_read",
                                                  "vfs_write",
                                                  "__x64_sys_read",
                                                  "__x64_sys_write",
                                                  "inet_csk_accept"};

}  // namespace

BlockReason classify_kernel_frames(std::span<const std::string_view> names) {
  bool futex = false, sleep = false, io = false;
  for (std::string_view n : names) {
    if (any_named(n, kPageFault)) return BlockReason::PageFault;
    if (n.starts_with("futex_") || n.starts_with("__futex_") || named(n, "do_futex") ||
        named(n, "__x64_sys_futex") || named(n, "__x64_sys_futex_wait"))
      futex = true;
    else if (any_named(n, kSleep) || named(n, "__x64_sys_clock_nanosleep"))
      sleep = true;
    else if (any_named(n, kIo))
      io = true;
  }
  if (futex) return BlockReason::Futex;
  if (sleep) return BlockReason::Sleep;
  if (io) return BlockReason::Io;
  return BlockReason::Unknown;
}

std::string_view reason_label(BlockReason r) {
  switch (r) {
    case BlockReason::Futex:
      return "[blocked: futex]";
    case BlockReason::Io:
      return "[blocked: I/O]";
    case BlockReason::Sleep:
      return "[blocked: sleep]";
    case BlockReason::PageFault:
      return "[blocked: page fault]";
    case BlockReason::Preempted:
      return "[preempted]";
    case BlockReason::Unknown:
      break;
  }
  return "[blocked]";
}

std::string_view reason_text(BlockReason r) {
  switch (r) {
    case BlockReason::Futex:
      return "futex";
    case BlockReason::Io:
      return "I/O";
    case BlockReason::Sleep:
      return "sleep";
    case BlockReason::PageFault:
      return "page fault";
    case BlockReason::Preempted:
      return "preempted";
    case BlockReason::Unknown:
      break;
  }
  return "unknown";
}

}  // namespace fxprof::recorder

namespace fxprof::recorder {

std::string lock_wait_summary(const model::Profile& profile, size_t n) {
  struct Lock {
    std::string_view address;
    uint64_t ns = 0, waits = 0;
    std::set<uint32_t> threads;
  };
  std::map<std::string_view, Lock> locks;
  for (const model::Process& proc : profile.processes)
    for (const model::Thread& t : proc.threads)
      for (const model::Marker& m : t.markers) {
        if (m.name == model::kNoString || profile.strings.get(m.name) != "Lock wait") continue;
        for (const model::MarkerField& f : m.fields) {
          if (!f.is_string || f.string == model::kNoString || profile.strings.get(f.key) != "lock") continue;
          Lock& l = locks[profile.strings.get(f.string)];
          l.address = profile.strings.get(f.string);
          l.ns += m.end_ns > m.start_ns ? m.end_ns - m.start_ns : 0;
          ++l.waits;
          l.threads.insert(t.tid);
        }
      }
  std::vector<const Lock*> order;
  for (const auto& [address, l] : locks) order.push_back(&l);
  std::sort(order.begin(), order.end(), [](const Lock* a, const Lock* b) { return a->ns > b->ns; });
  std::string out;
  char buf[160];
  for (size_t i = 0; i < order.size() && i < n; ++i) {
    const Lock& l = *order[i];
    std::snprintf(buf, sizeof buf, "%s%.*s %.1f ms in %llu wait%s by %zu thread%s", out.empty() ? "" : ", ",
                  static_cast<int>(l.address.size()), l.address.data(), static_cast<double>(l.ns) / 1e6,
                  static_cast<unsigned long long>(l.waits), l.waits == 1 ? "" : "s", l.threads.size(),
                  l.threads.size() == 1 ? "" : "s");
    out += buf;
  }
  return out;
}

void add_waiting_counters(model::Profile& profile, uint64_t interval_ns) {
  if (interval_ns == 0) return;
  std::vector<std::pair<uint64_t, uint64_t>> cells;  // one thread's waits as [first, last] cells
  for (model::Process& proc : profile.processes) {
    std::map<uint64_t, int64_t> change;  // cell -> change in waiting threads at its start
    for (const model::Thread& t : proc.threads) {
      cells.clear();
      for (const model::Marker& m : t.markers) {
        if (m.name == model::kNoString || profile.strings.get(m.name) != "Lock wait") continue;
        const uint64_t s = m.start_ns > proc.start_ns ? m.start_ns - proc.start_ns : 0;
        const uint64_t e = m.end_ns > proc.start_ns ? m.end_ns - proc.start_ns : 0;
        cells.emplace_back(s / interval_ns, (e > s ? e - 1 : s) / interval_ns);
      }
      // A thread counts once per cell, however many of its waits touch it.
      std::sort(cells.begin(), cells.end());
      for (size_t i = 0; i < cells.size();) {
        uint64_t first = cells[i].first, last = cells[i].second;
        for (++i; i < cells.size() && cells[i].first <= last + 1; ++i) last = std::max(last, cells[i].second);
        ++change[first];
        --change[last + 1];
      }
    }
    if (change.empty()) continue;
    model::Counter c{
        "Threads waiting", "Locks", "Threads waiting on a lock (futex) during each sampling interval", {}};
    auto emit = [&](uint64_t cell, int64_t n) {
      if (!c.samples.empty() && c.samples.back().time_ns >= proc.start_ns + cell * interval_ns) return;
      c.samples.push_back({proc.start_ns + cell * interval_ns, n, 0});
    };
    int64_t waiting = 0;
    for (auto it = change.begin(); it != change.end(); ++it) {
      const uint64_t cell = it->first;
      if (waiting == 0 && cell > 0) emit(cell - 1, 0);  // a run starts after a regular zero cell
      waiting += it->second;
      const uint64_t until = std::next(it) == change.end() ? cell + 1 : std::next(it)->first;
      for (uint64_t k = cell; k < until && (waiting > 0 || k == cell); ++k) emit(k, waiting);
    }
    proc.counters.push_back(std::move(c));
  }
}

}  // namespace fxprof::recorder
