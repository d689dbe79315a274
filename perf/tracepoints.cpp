#include "perf/tracepoints.h"

#include <charconv>
#include <cstring>
#include <string>

namespace fxprof::perf {
namespace {

// The offset and size of `field` in the format of tracepoint `event` ("sched_switch"), if the text has it.
std::optional<SchedFields::Field> format_field(std::string_view text, std::string_view event,
                                               std::string_view field) {
  const std::string name = "name: " + std::string(event) + "\n";
  const size_t at = text.find(name);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view format = text.substr(at);
  format = format.substr(0, format.find("print fmt:"));
  const std::string decl = " " + std::string(field) + ";";
  const size_t f = format.find(decl);
  if (f == std::string_view::npos) return std::nullopt;
  auto number = [&](std::string_view key) -> std::optional<uint32_t> {
    const size_t k = format.find(key, f);
    if (k == std::string_view::npos) return std::nullopt;
    uint32_t v = 0;
    const char* begin = format.data() + k + key.size();
    if (std::from_chars(begin, format.data() + format.size(), v).ec != std::errc()) return std::nullopt;
    return v;
  };
  const auto offset = number("offset:"), size = number("size:");
  if (!offset || !size || *size > 8) return std::nullopt;
  return SchedFields::Field{*offset, *size};
}

// The unsigned value of `f` in `raw`, if it lies inside.
std::optional<uint64_t> read(std::span<const std::byte> raw, SchedFields::Field f) {
  if (f.size == 0 || f.offset > raw.size() || raw.size() - f.offset < f.size) return std::nullopt;
  uint64_t v = 0;
  std::memcpy(&v, raw.data() + f.offset, f.size);  // little-endian, as the machines we read
  return v;
}

// common_flags (offset 2, one byte): TRACE_FLAG_HARDIRQ, _SOFTIRQ, _NMI.
constexpr uint8_t kInterruptFlags = 0x08 | 0x10 | 0x40;

}  // namespace

SchedFields::SchedFields(std::string_view text) {
  if (auto f = format_field(text, "sched_switch", "prev_pid")) prev_pid_ = *f;
  if (auto f = format_field(text, "sched_switch", "prev_state")) prev_state_ = *f;
  if (auto f = format_field(text, "sched_switch", "next_pid")) next_pid_ = *f;
  if (auto f = format_field(text, "sched_wakeup", "pid")) wake_pid_ = *f;
}

std::optional<SchedSwitch> SchedFields::sched_switch(std::span<const std::byte> raw) const {
  const auto prev = read(raw, prev_pid_), state = read(raw, prev_state_), next = read(raw, next_pid_);
  if (!prev || !state || !next) return std::nullopt;
  // The state's low byte is the task state; 0 (TASK_RUNNING, with TASK_REPORT_MAX above it for "R+") is a
  // preemption.
  return SchedSwitch{static_cast<uint32_t>(*prev), static_cast<uint32_t>(*next), (*state & 0xff) == 0};
}

std::optional<SchedWakeup> SchedFields::sched_wakeup(std::span<const std::byte> raw) const {
  const auto pid = read(raw, wake_pid_), flags = read(raw, {2, 1});
  if (!pid || !flags) return std::nullopt;
  return SchedWakeup{static_cast<uint32_t>(*pid), (*flags & kInterruptFlags) != 0};
}

}  // namespace fxprof::perf
