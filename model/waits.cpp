// Typed waits and their markers (model/waits.h).
#include "model/waits.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <unordered_map>

namespace fxprof::model {

namespace {

constexpr std::pair<WaitReason, std::string_view> kReasons[] = {
    {WaitReason::Pending, "(pending)"},
    {WaitReason::Unknown, "unknown"},
    {WaitReason::NoStack, "unknown (no stack)"},
    {WaitReason::Futex, "futex"},
    {WaitReason::Condition, "condition variable"},
    {WaitReason::Join, "join"},
    {WaitReason::Semaphore, "semaphore"},
    {WaitReason::Io, "I/O"},
    {WaitReason::Sleep, "sleep"},
    {WaitReason::PageFault, "page fault"},
    {WaitReason::Preempted, "preempted"},
    {WaitReason::Signal, "signal"},
};

std::string_view string_field(const Profile& p, const Marker& m, std::string_view key) {
  for (const MarkerField& f : m.fields)
    if (f.is_string && f.string != kNoString && p.strings.get(f.key) == key) return p.strings.get(f.string);
  return {};
}

template <class T>
bool parse_number(std::string_view s, T& out, int base = 10) {
  return !s.empty() && std::from_chars(s.data(), s.data() + s.size(), out, base).ec == std::errc() &&
         std::from_chars(s.data(), s.data() + s.size(), out, base).ptr == s.data() + s.size();
}

// "NAME TID" -> (NAME, TID).
bool split_name_tid(std::string_view text, std::string_view& name, uint32_t& tid) {
  const size_t sp = text.rfind(' ');
  if (sp == std::string_view::npos || !parse_number(text.substr(sp + 1), tid)) return false;
  name = text.substr(0, sp);
  return true;
}

}  // namespace

std::string_view wait_reason_text(WaitReason r) {
  for (const auto& [reason, text] : kReasons)
    if (reason == r) return text;
  return "unknown";
}

std::optional<WaitReason> wait_reason_from_text(std::string_view text) {
  for (const auto& [reason, t] : kReasons)
    if (t == text) return reason;
  return std::nullopt;
}

std::string_view wait_marker_name(const Wait& w) {
  if (w.reason == WaitReason::Preempted) return "Preempted";
  return w.reason == WaitReason::Futex && w.lock ? "Lock wait" : "Blocked";
}

void make_wait_marker(Profile& p, Thread& t, const Wait& w) {
  if (w.marker >= t.markers.size()) return;
  Marker& m = t.markers[w.marker];
  m.name = p.strings.intern(wait_marker_name(w));
  m.fields.clear();
  auto add = [&](std::string_view key, std::string_view value) {
    m.fields.push_back({p.strings.intern(key), true, 0, p.strings.intern(value)});
  };
  add("reason", wait_reason_text(w.reason));
  char buf[64];
  if (w.lock && w.reason != WaitReason::Preempted) {
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(w.lock));
    add("lock", buf);
  }
  switch (w.waker) {
    case Waker::None:
      break;
    case Waker::Thread:
      std::snprintf(buf, sizeof buf, "%.40s %u",
                    w.waker_name == kNoString ? "thread" : p.strings.get(w.waker_name).data(), w.waker_tid);
      add("waker", buf);
      break;
    case Waker::Timer:
      add("waker", "timer");
      break;
    case Waker::Interrupt:
      add("waker", "interrupt");
      break;
    case Waker::Untraced:
      std::snprintf(buf, sizeof buf, "pid %u (not recorded)", w.waker_pid);
      add("waker", buf);
      break;
  }
  if (w.holder != kNoString) m.fields.push_back({p.strings.intern("holder"), true, 0, w.holder});
  if (w.waiter != kNoString && wait_marker_name(w) == "Lock wait")
    m.fields.push_back({p.strings.intern("waiter"), true, 0, w.waiter});
}

void read_waits(Profile& p) {
  std::unordered_map<uint32_t, uint32_t> pid_of;  // tid -> pid (a reused tid: the last process's)
  for (const Process& proc : p.processes)
    for (const Thread& t : proc.threads) pid_of[t.tid] = proc.pid;
  std::unordered_multimap<uint32_t, Thread*> by_tid;
  for (Process& proc : p.processes)
    for (Thread& t : proc.threads) {
      by_tid.emplace(t.tid, &t);
      t.waits.clear();
      for (size_t i = 0; i < t.markers.size(); ++i) {
        const Marker& m = t.markers[i];
        if (m.type == kNoString || p.strings.get(m.type) != "OffCpu") continue;
        const std::optional<WaitReason> reason = wait_reason_from_text(string_field(p, m, "reason"));
        if (!reason) continue;  // not a wait this version wrote: the marker stays as it is
        Wait w;
        w.start_ns = m.start_ns;
        w.end_ns = w.wake_ns = m.end_ns;
        w.reason = *reason;
        w.marker = static_cast<uint32_t>(i);
        std::string_view lock = string_field(p, m, "lock");
        if (lock.starts_with("0x")) parse_number(lock.substr(2), w.lock, 16);
        const std::string_view waker = string_field(p, m, "waker");
        std::string_view name;
        if (waker == "timer") {
          w.waker = Waker::Timer;
        } else if (waker == "interrupt") {
          w.waker = Waker::Interrupt;
        } else if (waker.starts_with("pid ") && waker.ends_with(" (not recorded)")) {
          w.waker = Waker::Untraced;
          parse_number(waker.substr(4, waker.size() - 4 - 15), w.waker_pid);
        } else if (split_name_tid(waker, name, w.waker_tid)) {
          w.waker = Waker::Thread;
          w.waker_name = p.strings.intern(name);
          w.waker_pid = pid_of.contains(w.waker_tid) ? pid_of[w.waker_tid] : 0;
        }
        if (std::string_view h = string_field(p, m, "holder"); !h.empty()) w.holder = p.strings.intern(h);
        if (std::string_view h = string_field(p, m, "waiter"); !h.empty()) w.waiter = p.strings.intern(h);
        t.waits.push_back(w);
      }
      std::sort(t.waits.begin(), t.waits.end(),
                [](const Wait& a, const Wait& b) { return a.start_ns < b.start_ns; });
    }
  // A Wakeup marker is the waker's side of one wait: its time and stack.
  for (const Process& proc : p.processes)
    for (const Thread& t : proc.threads)
      for (const Marker& m : t.markers) {
        if (m.name == kNoString || p.strings.get(m.name) != "Wakeup") continue;
        std::string_view name;
        uint32_t tid = 0;
        if (!split_name_tid(string_field(p, m, "wakee"), name, tid)) continue;
        for (auto [it, end] = by_tid.equal_range(tid); it != end; ++it)
          for (Wait& w : it->second->waits)
            // A wake may be stamped up to 1 ms before the switch-out (recorder/wakes.h).
            if (w.waker == Waker::Thread && w.waker_tid == t.tid && m.start_ns + 1'000'000 >= w.start_ns &&
                m.start_ns <= w.end_ns) {
              w.wake_ns = std::clamp(m.start_ns, w.start_ns, w.end_ns);  // as the recorder keeps it
              w.waker_stack = m.stack;
            }
      }
}

}  // namespace fxprof::model
