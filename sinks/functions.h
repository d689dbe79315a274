// fxprof sinks: the function view of a profile that the non-Gecko sinks share (folded stacks, pprof, the
// SVG flame graph, the terminal report, diff).
//
// The Gecko format keeps frames as the model has them (one per address); every other format speaks of
// functions. A FunctionTable turns each model frame into a short chain of (function, line) entries, outermost
// first: the function that owns the address, then the functions inlined into it down to the innermost one.
// Functions are interned by (name, file, kind), so that thousands of addresses of one function become one
// entry: a 60 s recording has ~5k frames but usually < 2k functions, and the per-sample loops of the sinks
// only ever touch integer ids.
//
// Symbolicated frames (model/symbols.h) carry their function, file, line and inline depth: a chain of inlined
// functions is a run of frames, depth 0 (the function the code is in) to n (the innermost), so each frame
// gives one entry here, marked inlined when its depth is above 0. A frame without a name (user code that
// could not be symbolicated) is named after its library and offset, "libfoo.so+0x1234", like perf; without a
// library, "0x<address>".
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/profile.h"

namespace fxprof::sinks {

using FunctionId = uint32_t;

enum class FunctionKind : uint8_t { User, Kernel, Label };

struct Function {
  std::string name;         // demangled, as people read it
  std::string system_name;  // as the binary spells it (mangled); == name when unknown
  std::string file;         // source file, "" when unknown
  uint32_t start_line = 0;  // 0 when unknown
  FunctionKind kind = FunctionKind::User;
  int32_t lib = -1;  // index into FunctionTable::libs(), -1 for none
};

// One entry of a frame's inline chain.
struct FrameLine {
  FunctionId function = 0;
  uint32_t line = 0;     // 0 when unknown
  bool inlined = false;  // true for every entry after the first: it was inlined into the previous one
};

// A library as the sinks name it (processes' libs deduplicated by path and build ID).
struct LibInfo {
  std::string name, path, code_id;
};

// Which samples the function views count (issue 36). An off-CPU sample (recorder/offcpu.h) ends in a label
// of the Idle category that names why the thread was off the CPU: "[blocked: futex]", "[preempted]"...
// Shares of wall-clock samples move with the machine's load (a preempted thread waited for a CPU, not for
// the program), so every view ranks on-CPU samples unless asked otherwise.
enum class Clock : uint8_t {
  Cpu,      // on-CPU samples only: report, diff, export and the summary line by default
  Wall,     // every sample: on-CPU, blocked and preempted (--wall)
  Program,  // on-CPU and blocked, not preempted: diff --wall (preemption is the machine's state)
};

// The off-CPU leaves of a profile's frames, to classify samples by their stack in O(1).
class OffCpuFrames {
 public:
  enum Kind : uint8_t { OnCpu = 0, Blocked = 1, Preempted = 2 };
  explicit OffCpuFrames(const model::Profile& profile);
  Kind kind(model::StackId stack) const { return kinds_[profile_.stacks.frame(stack)]; }
  bool counts(model::StackId stack, Clock clock) const {
    const Kind k = kind(stack);
    return clock == Clock::Wall || k == OnCpu || (clock == Clock::Program && k == Blocked);
  }
  // The reason as the off-CPU line names it ("blocked: futex", "preempted"); "" for an on-CPU stack.
  std::string_view reason(model::StackId stack) const;

 private:
  const model::Profile& profile_;
  std::vector<Kind> kinds_;  // per frame
};

// Wall-clock time beside the on-CPU view: how many samples a part of the profile has, and how many of them
// were off the CPU, per reason.
struct WallTime {
  uint64_t samples = 0, on_cpu = 0;                       // samples with a stack
  std::vector<std::pair<std::string, uint64_t>> off_cpu;  // reason -> samples, most first
  // "blocked: futex 28.0%, preempted 12.0% of wall time"; "" when nothing was off the CPU.
  std::string format() const;
};
// Over the threads `select` keeps (process index, thread index; empty = all).
WallTime wall_time(const model::Profile& profile, const OffCpuFrames& off,
                   const std::function<bool(size_t, size_t)>& select = {});

class FunctionTable {
 public:
  // `only_process`: the index of the one process whose frames will be asked for (a pprof of one process,
  // the agent's series): the others' libraries are not indexed.
  explicit FunctionTable(const model::Profile& profile, size_t only_process = SIZE_MAX);

  // The chain of frame `f` as seen in process `process` (an index into profile.processes), outermost first.
  // Never empty.
  std::span<const FrameLine> lines(size_t process, model::FrameId f);
  const Function& function(FunctionId id) const { return functions_[id]; }
  size_t size() const { return functions_.size(); }
  const std::vector<LibInfo>& libs() const { return libs_; }
  // A label function (thread and process root frames, "(no stack)").
  FunctionId label(std::string_view name);
  // The model lib of process `process` that holds `address`, or nullptr.
  const model::Lib* lib_at(size_t process, uint64_t address) const;

 private:
  struct ProcessLibs {
    std::vector<const model::Lib*> sorted;  // by start, overlaps dropped
    std::vector<int32_t> lib_index;         // parallel: index into libs_
  };
  FunctionId intern(Function f);
  int32_t lib_id(const std::string& name, const std::string& path, const std::string& code_id);
  void resolve(size_t process, model::FrameId f, std::vector<FrameLine>& out);

  const model::Profile& profile_;
  std::vector<Function> functions_;
  std::unordered_map<std::string, FunctionId> index_;  // key: kind, name, file
  std::vector<LibInfo> libs_;
  std::unordered_map<std::string, int32_t> lib_ids_;  // path + '\0' + build ID -> index into libs_
  std::vector<ProcessLibs> process_libs_;
  // Chains per (process, frame), computed on first use: offsets into lines_. A frame's chain is the same
  // in every process unless it is an unsymbolicated address (named after the process's library).
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> chains_;
  std::vector<FrameLine> lines_;
  std::vector<FrameLine> scratch_;
};

}  // namespace fxprof::sinks
