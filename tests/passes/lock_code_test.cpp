// passes/lock_code.cpp: a program's own thin lock wrappers told by their machine code, on a test program of
// ours (tests/programs/offcpu/mutex_wrapper.cpp, GCC -O2 -g), and the rule on hand-made call lists.
#include <catch2/catch.hpp>
#include <string>

#include "model/profile.h"
#include "passes/locks.h"
#include "tests/support/sym_programs.h"

using namespace fxprof::passes;
using namespace fxprof::test::sym_programs;
using fxprof::test::test_program;

TEST_CASE("lock code: a thin Mutex wrapper is told from its callers by its calls", "[passes]") {
  const std::string path = test_program("mutex_wrapper");
  Prog p = prog(path);
  const auto syms = nm_symbols(path);
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, path, "mutex_wrapper"));
  auto way = [&](const char* mangled, uint64_t offset = 0) {
    auto calls =
        s.function_calls("mutex_wrapper", p.breakpad, syms.at(mangled).addr + offset, kMaxWrapperBytes);
    INFO(mangled);
    return calls.ok() ? lock_wrapper(calls.value()) : LockWay::None;
  };
  // store::port::Mutex::Unlock(): a call to pthread_mutex_unlock@plt and abort@plt on its error path.
  auto unlock = s.function_calls("mutex_wrapper", p.breakpad,
                                 syms.at("_ZN5store4port5Mutex6UnlockEv").addr + 4, kMaxWrapperBytes);
  REQUIRE(unlock.ok());
  CHECK(unlock.value().start == syms.at("_ZN5store4port5Mutex6UnlockEv").addr);
  REQUIRE(unlock.value().calls.size() == 2);
  CHECK(unlock.value().calls[0].name == "pthread_mutex_unlock@plt");
  CHECK(unlock.value().calls[1].name == "abort@plt");
  CHECK(way("_ZN5store4port5Mutex6UnlockEv", 4) == LockWay::Release);
  CHECK(way("_ZN5store4port5Mutex4LockEv") == LockWay::Acquire);
  // The callers compute under the lock: no wrappers, whichever of their addresses is asked.
  CHECK(way("_Z14append_journalv") == LockWay::None);
  CHECK(way("_Z13compact_indexv", 8) == LockWay::None);
  CHECK(way("main") == LockWay::None);  // too large, and it calls printf

  // Through LockCode, on frames as the symbolicate pass leaves them: the wrapper is lock code, its caller
  // is not; without a symbolizer only the names count.
  using namespace fxprof::model;
  Profile prof;
  prof.binaries.push_back(
      {.name = "mutex_wrapper", .debug_name = "mutex_wrapper", .breakpad_id = p.breakpad});
  auto frame = [&](const char* mangled, const char* name) {
    Frame f;
    f.address = syms.at(mangled).addr + 4;
    f.binary = 0;
    f.name = prof.strings.intern(name);
    return f;
  };
  LockCode code(&s), names_only;
  CHECK(code(prof, frame("_ZN5store4port5Mutex6UnlockEv", "store::port::Mutex::Unlock()")));
  CHECK(code(prof, frame("_ZN5store4port5Mutex4LockEv", "store::port::Mutex::Lock()")));
  CHECK_FALSE(code(prof, frame("_Z14append_journalv", "append_journal()")));
  CHECK_FALSE(names_only(prof, frame("_ZN5store4port5Mutex6UnlockEv", "store::port::Mutex::Unlock()")));
}

TEST_CASE("lock code: the wrapper rule on call lists", "[passes]") {
  auto calls = [](std::initializer_list<const char*> names, size_t indirect = 0) {
    fxprof::symbolizer::FunctionCalls c;
    uint64_t at = 0x1000;
    for (const char* n : names) c.calls.push_back({at += 16, n});
    c.indirect = indirect;
    return c;
  };
  // postgres's PGSemaphoreUnlock: sem_post, errno, and elog(FATAL)'s errstart_cold, errmsg_internal,
  // errfinish.
  CHECK(lock_wrapper(calls({"__errno_location@plt", "sem_post@plt", "errstart_cold", "errmsg_internal",
                            "errfinish"})) == LockWay::Release);
  CHECK(lock_wrapper(calls({"sem_wait@plt", "__errno_location@plt"})) == LockWay::Acquire);
  CHECK(lock_wrapper(calls({"pthread_mutex_unlock@plt"})) == LockWay::Release);  // leveldb: a tail jump
  CHECK(lock_wrapper(calls({"syscall@plt"})) == LockWay::Either);
  // A critical section: it locks and unlocks (the code that held the lock).
  CHECK(lock_wrapper(calls({"pthread_mutex_lock@plt", "pthread_mutex_unlock@plt"})) == LockWay::None);
  // Other work, an indirect call, no call at all: no wrapper.
  CHECK(lock_wrapper(calls({"pthread_mutex_unlock@plt", "memcpy@plt"})) == LockWay::None);
  CHECK(lock_wrapper(calls({"pthread_mutex_unlock@plt"}, 1)) == LockWay::None);
  CHECK(lock_wrapper(calls({})) == LockWay::None);
  CHECK(lock_wrapper(calls({"__stack_chk_fail@plt"})) == LockWay::None);
  // A call into the program that `wraps` says is a wrapper counts its way.
  auto c = calls({"port::Mutex::Unlock()"});
  CHECK(lock_wrapper(c) == LockWay::None);
  CHECK(lock_wrapper(c, [](uint64_t) { return LockWay::Release; }) == LockWay::Release);
  CHECK(lock_wrapper(calls({"port::Mutex::Unlock()", "pthread_mutex_lock@plt"}),
                     [](uint64_t) { return LockWay::Release; }) == LockWay::None);
}
