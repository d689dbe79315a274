// fxprof recorder: launches or attaches to processes, samples every thread of every process with perf events,
// and builds the in-memory profile (model/profile.h).
//
// (The design notes and numbers that shaped it are written by the recorder's implementation; see README.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/profile.h"

namespace fxprof::recorder {

enum class CallGraph { Dwarf, FramePointer };

struct Options {
  std::vector<std::string> command;  // launch mode: argv of the program to run
  std::vector<int> pids;             // attach mode: running processes
  double frequency_hz = 1000;        // -F/--freq
  CallGraph call_graph = CallGraph::Dwarf;
  uint32_t stack_size = 32768;       // --stack-size: bytes of user stack copied per sample (DWARF mode)
  double duration_s = 0;             // --duration: 0 = until the program exits (launch) or Ctrl-C (attach)
  bool verbose = false;
};

struct Stats {
  uint64_t samples = 0;
  uint64_t lost_records = 0;
  uint32_t threads = 0;
  uint32_t processes = 0;
  double duration_s = 0;
};

struct Recording {
  model::Profile profile;
  int exit_status = 0;  // launch mode: the program's exit status (128+signal if killed); attach mode: 0
  Stats stats;
};

// Records until the launched program exits, the duration elapses, or SIGINT/SIGTERM (attach mode). Notices
// (no PMU, paranoid level, clamped rate) go to stderr. An exec failure is an Error with exit_code 127 and the
// message "cannot run 'NAME': <strerror>".
Result<Recording> record(const Options& options);

}  // namespace fxprof::recorder
