// What is lock code (passes/locks.h): the plumbing by name, and a program's own thin wrappers of it by what
// their machine code calls.
#include <algorithm>
#include <cctype>
#include <string>

#include "passes/locks.h"

namespace fxprof::passes {
namespace {

enum class Call : uint8_t { Acquire, Release, Either, Error, Other };

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// What a call's target does, by its name ("pthread_mutex_unlock@plt", "std::mutex::unlock()").
Call call_kind(std::string_view name) {
  if (const size_t at = name.find('@'); at != std::string_view::npos) name = name.substr(0, at);
  if (name.empty()) return Call::Other;
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (is_lock_plumbing("", name)) {
    for (std::string_view release :
         {"unlock", "post", "signal", "broadcast", "wake", "release", "notify", "~"})
      if (contains(lower, release)) return Call::Release;
    for (std::string_view acquire : {"lock", "wait", "acquire"})
      if (contains(lower, acquire)) return Call::Acquire;
    return Call::Either;  // syscall, futex
  }
  // Error reporting on a path the wrapper takes when the lock call failed (postgres's elog: errstart,
  // errmsg, errfinish; errno; libstdc++'s __throw_system_error; a canary's __stack_chk_fail).
  for (std::string_view error : {"err", "abort", "assert", "throw", "panic", "fatal", "__stack_chk_fail",
                                 "terminate", "_unwind_resume"})
    if (contains(lower, error)) return Call::Error;
  return Call::Other;
}

// Whether an inlined function's name is a lock operation's ("leveldb::port::Mutex::Unlock()"): inlined, it
// has no code of its own to read, so the name and its place (right above lock code) tell.
bool lock_operation_name(std::string_view name) {
  if (const size_t paren = name.find('('); paren != std::string_view::npos) name = name.substr(0, paren);
  if (const size_t colons = name.rfind("::"); colons != std::string_view::npos)
    name = name.substr(colons + 2);
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (std::string_view op :
       {"lock", "unlock", "acquire", "release", "signal", "signalall", "notify", "notify_one", "notify_all",
        "post", "wait", "lock_shared", "unlock_shared", "readlock", "readunlock", "writelock", "writeunlock"})
    if (lower == op) return true;
  return false;
}

// The first frame of `stack`, leaf first, that is not lock code; "" at an unnamed frame or when none is.
std::string_view first_outside(const model::Profile& profile, model::StackId stack, LockCode* code,
                               bool skip_kernel) {
  LockCode names_only;
  LockCode& is_lock_code = code ? *code : names_only;
  bool above_lock_code = false;
  for (model::StackId s = stack; s != model::kNoStack; s = profile.stacks.prefix(s)) {
    const model::Frame& f = profile.frames.get(profile.stacks.frame(s));
    if (f.kind == model::FrameKind::Label || (skip_kernel && f.kind == model::FrameKind::Kernel)) continue;
    if (f.name == model::kNoString) return {};
    if (is_lock_code(profile, f) ||
        (above_lock_code && f.inline_depth > 0 && lock_operation_name(profile.strings.get(f.name)))) {
      above_lock_code = true;
      continue;
    }
    return profile.strings.get(f.name);
  }
  return {};
}

}  // namespace

LockWay lock_wrapper(const symbolizer::FunctionCalls& calls, const std::function<LockWay(uint64_t)>& wraps) {
  if (calls.indirect > 0) return LockWay::None;
  size_t acquire = 0, release = 0, either = 0;
  for (const symbolizer::FunctionCalls::Call& c : calls.calls) {
    Call k = call_kind(c.name);
    if (k == Call::Other && wraps) {
      const LockWay w = wraps(c.target);
      k = w == LockWay::Acquire   ? Call::Acquire
          : w == LockWay::Release ? Call::Release
          : w == LockWay::Either  ? Call::Either
                                  : Call::Other;
    }
    switch (k) {
      case Call::Acquire:
        ++acquire;
        break;
      case Call::Release:
        ++release;
        break;
      case Call::Either:
        ++either;
        break;
      case Call::Error:
        break;
      case Call::Other:
        return LockWay::None;
    }
  }
  if (acquire > 0 && release > 0) return LockWay::None;  // a critical section
  return acquire > 0   ? LockWay::Acquire
         : release > 0 ? LockWay::Release
         : either > 0  ? LockWay::Either
                       : LockWay::None;
}

bool LockCode::operator()(const model::Profile& profile, const model::Frame& f) {
  const model::Binary* b = f.binary < profile.binaries.size() ? &profile.binaries[f.binary] : nullptr;
  if (f.name != model::kNoString &&
      is_lock_plumbing(b ? std::string_view(b->name) : "", profile.strings.get(f.name)))
    return true;
  if (!symbols_ || f.kind != model::FrameKind::Native || !b || !b->symbolicatable()) return false;
  return wrapper(*b, f.address, 0) != LockWay::None;
}

LockWay LockCode::wrapper(const model::Binary& b, uint64_t address, int depth) {
  // None meanwhile: a cycle of calls ends there.
  auto [it, fresh] = wrappers_.try_emplace({b.breakpad_id, address}, LockWay::None);
  if (!fresh) return it->second;
  auto calls = symbols_->function_calls(b.debug_name, b.breakpad_id, address, kMaxWrapperBytes);
  // A call into another function of the binary may be a wrapper in turn (Mutex::Unlock calling an
  // out-of-line one of its own), up to two levels down.
  const LockWay way = calls.ok()
                          ? lock_wrapper(calls.value(),
                                         [&](uint64_t target) {
                                           return depth < 2 ? wrapper(b, target, depth + 1) : LockWay::None;
                                         })
                          : LockWay::None;
  it->second = way;  // a std::map's iterator outlives the inserts of the calls above
  return way;
}

std::string_view lock_holder(const model::Profile& profile, model::StackId stack, LockCode* code) {
  return first_outside(profile, stack, code, false);
}

std::string_view lock_waiter(const model::Profile& profile, model::StackId stack, LockCode* code) {
  return first_outside(profile, stack, code, true);
}

}  // namespace fxprof::passes
