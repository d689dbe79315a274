#include "recorder/offcpu.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "base/terminal.h"
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
// Waiting for data. poll, select and epoll are named by their system calls and their own functions: the
// functions that sleep (ep_poll, do_poll) are inlined on current kernels (6.18:
// schedule_hrtimeout_range_clock under do_epoll_wait, do_sys_poll, do_select), and pipes read in
// anon_pipe_read since 6.14.
constexpr std::array<std::string_view, 40> kIo = {"pipe_read",
                                                  "pipe_write",
                                                  "anon_pipe_read",
                                                  "anon_pipe_write",
                                                  "wait_woken",
                                                  "io_schedule",
                                                  "io_schedule_timeout",
                                                  "ep_poll",
                                                  "do_epoll_wait",
                                                  "do_epoll_pwait",
                                                  "__x64_sys_epoll_wait",
                                                  "__x64_sys_epoll_pwait",
                                                  "__x64_sys_epoll_pwait2",
                                                  "do_select",
                                                  "core_sys_select",
                                                  "do_pselect",
                                                  "__x64_sys_select",
                                                  "__x64_sys_pselect6",
                                                  "poll_schedule_timeout",
                                                  "do_sys_poll",
                                                  "do_poll",
                                                  "__x64_sys_poll",
                                                  "__x64_sys_ppoll",
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
                                                  "inet_csk_accept",
                                                  "tcp_recvmsg",
                                                  "__x64_sys_accept4",
                                                  "__x64_sys_recvfrom",
                                                  "__x64_sys_recvmsg"};

// Waiting for a signal: sigsuspend (and the old sigsuspend), pause, sigtimedwait (sigwait, sigwaitinfo).
constexpr std::array<std::string_view, 7> kSignal = {
    "__x64_sys_rt_sigsuspend",         "sigsuspend",      "__x64_sys_pause",
    "__x64_sys_rt_sigtimedwait",       "do_sigtimedwait", "__x64_sys_sigsuspend",
    "__x64_sys_rt_sigtimedwait_time32"};

}  // namespace

BlockReason classify_kernel_frames(std::span<const std::string_view> names) {
  bool futex = false, sleep = false, io = false, signal = false;
  for (std::string_view n : names) {
    if (any_named(n, kPageFault)) return BlockReason::PageFault;
    if (n.starts_with("futex_") || n.starts_with("__futex_") || named(n, "do_futex") ||
        named(n, "__x64_sys_futex") || named(n, "__x64_sys_futex_wait"))
      futex = true;
    else if (any_named(n, kSleep) || named(n, "__x64_sys_clock_nanosleep"))
      sleep = true;
    else if (any_named(n, kIo))
      io = true;
    else if (any_named(n, kSignal))
      signal = true;
  }
  if (futex) return BlockReason::Futex;
  if (sleep) return BlockReason::Sleep;
  if (io) return BlockReason::Io;
  if (signal) return BlockReason::Signal;
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
    case BlockReason::Signal:
      return "[blocked: signal]";
    case BlockReason::Preempted:
      return "[preempted]";
    case BlockReason::Unknown:
      break;
  }
  return "[blocked]";
}

model::WaitReason wait_reason(BlockReason r) {
  switch (r) {
    case BlockReason::Futex:
      return model::WaitReason::Futex;
    case BlockReason::Io:
      return model::WaitReason::Io;
    case BlockReason::Sleep:
      return model::WaitReason::Sleep;
    case BlockReason::PageFault:
      return model::WaitReason::PageFault;
    case BlockReason::Signal:
      return model::WaitReason::Signal;
    case BlockReason::Preempted:
      return model::WaitReason::Preempted;
    case BlockReason::Unknown:
      break;
  }
  return model::WaitReason::Unknown;
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
    case BlockReason::Signal:
      return "signal";
    case BlockReason::Preempted:
      return "preempted";
    case BlockReason::Unknown:
      break;
  }
  return "unknown";
}

}  // namespace fxprof::recorder
