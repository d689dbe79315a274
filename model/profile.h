// fxprof model: the in-memory profile that the recorder builds and the exporter writes.
//
// Design (after samply's profile builder and mold's flat tables):
//  - Strings, frames and stacks are interned once into flat, profile-wide tables; a stack is a 32-bit index,
//    so a sample is 16 bytes and deduplication is free. Interning a stack that exists costs one hash lookup
//    and no allocation: the recording path allocates nothing per sample once its tables have grown.
//  - The stack table is a prefix tree in topological order: a stack's prefix always has a smaller index than
//    the stack itself (the Firefox Profiler loops forever otherwise). intern_stack() guarantees it because a
//    prefix must exist before a stack can name it.
//  - Frames hold raw addresses as recorded (user code is symbolicated lazily by the server, or on the model
//  by
//    model/symbols.h); kernel frames and labels carry a name. A symbolicated frame names its binary (a
//    profile-wide Binary), its lib-relative address, function, file, line and inline depth as plain fields,
//    so sinks (Gecko, folded, pprof, SVG, report) read them without parsing strings. Times are
//    CLOCK_MONOTONIC nanoseconds throughout; the exporter converts them to the
//    milliseconds-since-process-start the Gecko format wants.
//  - Numbers that shaped it: a 1 kHz recording of 8 busy threads for 60 s is ~500k samples (12 MB here) but
//    only ~10k distinct stacks and ~5k distinct frames in real programs.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fxprof::model {

using StringId = uint32_t;
using FrameId = uint32_t;
using StackId = uint32_t;
using BinaryId = uint32_t;
inline constexpr BinaryId kNoBinary = UINT32_MAX;  // a frame not (yet) tied to a binary
inline constexpr StackId kNoStack = UINT32_MAX;    // a sample without a stack
inline constexpr StringId kNoString = UINT32_MAX;  // an absent optional string

// Interns strings; ids are dense and stable. string_views returned stay valid for the table's lifetime.
class StringTable {
 public:
  StringId intern(std::string_view s);
  std::string_view get(StringId id) const { return strings_[id]; }
  size_t size() const { return strings_.size(); }

 private:
  std::deque<std::string> strings_;  // deque: growing never moves existing strings (the map keys view them)
  std::unordered_map<std::string_view, StringId> index_;
};

// Category indices written into meta.categories (the order matters: the first grey one is the default).
// Idle: off-CPU samples (a thread blocked or preempted, recorder/offcpu.h); the front end draws no CPU for
// it. KernelThread, Irq and Softirq are kernel frames of a kernel thread's sample and of code run for an
// interrupt (hard or soft) on whichever task it hit (passes/kernel_time.h): the graphs colour them apart.
enum class Category : uint8_t {
  Other = 0,
  User = 1,
  Kernel = 2,
  Idle = 3,
  KernelThread = 4,
  Irq = 5,
  Softirq = 6
};
struct CategoryInfo {
  std::string name;
  std::string color;
};

enum class FrameKind : uint8_t {
  Native,  // a user-space code address, written as "0x..." and symbolicated through the process's libs
  Kernel,  // a kernel address; named from /proc/kallsyms after recording ("name (in [kernel.kallsyms])")
  Label,   // a plain name (for example "(stack truncated)"), no address
};

struct Frame {
  // Native with binary == kNoBinary: absolute address in the process, as recorded (Kernel: likewise).
  // Native with a binary: the binary-relative address (what /symbolicate/v5 takes), process-independent.
  uint64_t address = 0;
  StringId name = kNoString;  // Kernel: symbol name once known; Label: the text; Native: the function once
                              // symbolicated (kNoString = unresolved)
  FrameKind kind = FrameKind::Native;
  Category category = Category::User;
  uint8_t inline_depth = 0;     // 0: the function the address is in; 1..: functions inlined into it
  BinaryId binary = kNoBinary;  // index into Profile::binaries
  StringId file = kNoString;    // source file of `name`, when known
  uint32_t line = 0;            // 0 = unknown
  bool operator==(const Frame&) const = default;
};

class FrameTable {
 public:
  FrameId intern(const Frame& f);
  const Frame& get(FrameId id) const { return frames_[id]; }
  Frame& mutable_frame(FrameId id) { return frames_[id]; }  // to name kernel frames after recording
  size_t size() const { return frames_.size(); }
  std::span<const Frame> all() const { return frames_; }

 private:
  struct KeyHash {
    size_t operator()(const Frame& k) const noexcept;
  };
  std::vector<Frame> frames_;
  std::unordered_map<Frame, FrameId, KeyHash> index_;
};

class StackTable {
 public:
  // Returns the stack (prefix, frame), creating it if new. `prefix` is kNoStack for a root.
  StackId intern(StackId prefix, FrameId frame);
  // Interns a whole stack given root first; returns kNoStack for an empty span.
  StackId intern_path(std::span<const FrameId> root_to_leaf);
  StackId prefix(StackId s) const { return nodes_[s].prefix; }
  FrameId frame(StackId s) const { return nodes_[s].frame; }
  size_t size() const { return nodes_.size(); }
  void reserve(size_t n) { nodes_.reserve(n); }

 private:
  // The table is a tree: each stack links its first few children (callees), the last found first.
  // Interning follows the parent it was just given (in cache: it was just made or found) to its children,
  // so a deep stack costs no hash-table cache miss per frame (a random slot in an index of 1M+ stacks was
  // 8% of a cc1plus recording with --heap=full), and a new chain below a new stack no lookup at all.
  // 16 bytes a stack (the index it replaces took 13-19 with its 8-byte key: reading profiles costs the same).
  struct Node {
    StackId prefix;
    FrameId frame;
    StackId first_child = kNoStack;
    StackId next_sibling = kNoStack;
  };
  // A stack's children past the first kListed (wide fans: the roots of truncated stacks, a dispatcher) go
  // to an open-addressing index: a slot is a stack id and 32 bits of its key's hash (so that a probe passes
  // other stacks without reading them), UINT64_MAX when free.
  static constexpr int kListed = 8;
  StackId find_wide(StackId prefix, FrameId frame, uint64_t h, size_t& free_slot) const;
  void rehash(size_t n);

  std::vector<Node> nodes_;
  StackId first_root_ = kNoStack;  // the roots' list (prefix kNoStack)
  std::vector<StackId> wide_;      // the stacks in the index, for rehash
  std::vector<uint64_t> slots_;
  int shift_ = 64;  // 64 - log2(capacity): a slot's home is the hash's top bits
};

// 16 bytes: a profile holds one per sample (an hour of 8 busy threads at 1 kHz is 28.8M of them), so the
// recorder's and the readers' memory per sample starts here (issue 15's budget: 24 bytes per sample
// recording, 40 reading). The CPU delta fits 32 bits: 2.1 s of CPU between two samples of one thread is
// beyond any sampling interval; a longer gap (a thread that ran unsampled) saturates at kMaxCpuDeltaNs.
struct Sample {
  uint64_t time_ns = 0;
  StackId stack = kNoStack;
  int32_t cpu_delta_ns = -1;  // CPU time the thread used since its previous sample; -1 = unknown
};
static_assert(sizeof(Sample) == 16);

inline constexpr int64_t kMaxCpuDeltaNs = INT32_MAX;

// A CPU delta in nanoseconds as Sample keeps it: negative = unknown (-1), beyond kMaxCpuDeltaNs saturated.
constexpr int32_t saturate_cpu_delta(int64_t ns) {
  if (ns < 0) return -1;
  return ns > kMaxCpuDeltaNs ? static_cast<int32_t>(kMaxCpuDeltaNs) : static_cast<int32_t>(ns);
}

// A marker field value: a number or a string (interned).
struct MarkerField {
  StringId key = kNoString;
  bool is_string = false;
  double number = 0;
  StringId string = kNoString;
};

enum class MarkerPhase : uint8_t { Instant = 0, Interval = 1, IntervalStart = 2, IntervalEnd = 3 };

struct Marker {
  StringId name = kNoString;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;  // unused for Instant
  MarkerPhase phase = MarkerPhase::Instant;
  Category category = Category::Other;
  StringId type = kNoString;  // payload type = a marker schema name; kNoString for no payload
  std::vector<MarkerField> fields;
  StackId stack = kNoStack;  // a backtrace (payload "stack"): every frame is a return address, even its leaf
  // The program said it (a marker file, NVTX, ITT: model/markers.h), not the recorder: what `report
  // --markers` and `--marker NAME` look at. Written as the payload's "fxprofProgram" and read back.
  bool program = false;
};

// One entry of meta.markerSchema (Gecko form).
struct MarkerSchemaField {
  std::string key, label, format;
};
struct MarkerSchema {
  std::string name;
  std::vector<std::string> display;  // e.g. "marker-chart", "marker-table", "timeline-overview"
  std::string chart_label, tooltip_label, table_label;
  std::vector<MarkerSchemaField> fields;
};

// One allocation or free (`Native allocation` marker): bytes < 0 for a free, on the thread that allocated
// the block (so that the front end pairs frees with allocations by address within one thread's table).
struct Allocation {
  uint64_t time_ns = 0;
  StackId stack = kNoStack;  // where the block was allocated
  int64_t bytes = 0;
  uint64_t address = 0;
  uint32_t tid = 0;  // the thread that allocated (bytes > 0) or freed (bytes < 0)
  // A row may stand for many blocks (heap/source.cpp aggregates blocks of one stack and time bucket that
  // were freed in one bucket, or never): `count` blocks, `bytes` their sum, `address` a tag shared by the
  // row and its free row only. The front end's four summaries only ever sum rows per stack, so they stay
  // exact. at_peak: the row's blocks were allocated and not yet freed when the heap peaked.
  uint32_t count = 1;
  bool at_peak = false;
};

// A counter track (Gecko `counters`, `delta` written as its `count`). The front end picks the graph by
// category: "Memory" accumulates the deltas (a memory track: `delta` is the change since the previous
// sample); any other category draws `delta` per time since the previous sample, its tooltip the value
// itself (add_waiting_counters' "Threads waiting": `delta` is the number of threads in that interval).
struct CounterSample {
  uint64_t time_ns = 0;
  int64_t delta = 0;
  uint64_t count = 0;  // operations in the interval
};
struct Counter {
  std::string name, category, description;
  std::vector<CounterSample> samples;
};

// Why a thread was off the CPU (recorder/offcpu.h classifies it, passes/locks.h refines futex waits).
enum class WaitReason : uint8_t {
  Pending,    // the recorder has not named the kernel frames yet
  Unknown,    // a stack whose kernel frames name no wait we classify
  NoStack,    // no stack to read a reason from
  Futex,      // a futex: a lock when it has a lock address
  Condition,  // a condition variable's wait (a futex, once symbolicated)
  Join,       // a thread join (a futex, once symbolicated)
  Io,         // pipes, sockets, poll, terminals, disk
  Sleep,      // nanosleep and its kin
  PageFault,  // a fault that waited
  Preempted,  // runnable, waiting for a CPU (the run queue)
  Signal,     // sigsuspend, pause, sigtimedwait: waiting for a signal
  Semaphore,  // a semaphore's wait (sem_wait; Python's locks): a post ends it, no owner held it
};
// What ended a wait: a thread (named by tid), a timer or an interrupt (no thread), a process not recorded.
enum class Waker : uint8_t { None, Thread, Timer, Interrupt, Untraced };

// One off-CPU wait of a thread above the marker threshold, as typed facts (model/waits.h makes its `OffCpu`
// marker from them, the Gecko reader reads them back from it). `marker`: its marker's index in the thread's
// markers (the marker keeps the blocking stack and its place among the thread's markers).
struct Wait {
  uint64_t start_ns = 0, end_ns = 0;
  WaitReason reason = WaitReason::Unknown;
  Waker waker = Waker::None;
  uint64_t lock = 0;                      // the futex word's address (a lock wait), 0 = none
  uint32_t waker_pid = 0, waker_tid = 0;  // a Thread waker's; an Untraced one's pid; else 0
  StringId waker_name = kNoString;        // the waking thread's name as shown ("thread" when not known)
  uint64_t wake_ns = 0;            // when it was woken, within [start, end] (its end when not recorded)
  StackId waker_stack = kNoStack;  // the waker's stack at the wake (futex wakes, eBPF), its `Wakeup` marker's
  StringId holder = kNoString;     // the function that held the lock (passes::add_lock_holders)
  StringId waiter = kNoString;     // the function that waited, outside lock code (likewise; lock waits)
  uint32_t marker = UINT32_MAX;
};

struct Thread {
  uint32_t tid = 0;
  std::string name;
  bool is_main = false;            // the process's main thread (written as "GeckoMain")
  uint64_t start_ns = 0;           // registerTime
  std::optional<uint64_t> end_ns;  // unregisterTime
  std::vector<Sample> samples;     // the exporter sorts them by time
  std::vector<Marker> markers;
  std::vector<Allocation> allocations;  // sorted by time
  std::vector<Wait> waits;              // sorted by start
};

// An executable mapping of an ELF file in one process.
// relative address (what the symbol server gets) = address - (start - offset).
struct Lib {
  uint64_t start = 0, end = 0, offset = 0;
  std::string name;         // file name, shown in the call tree
  std::string path;         // absolute path at recording time
  std::string debug_name;   // usually == name
  std::string debug_path;   // usually == path
  std::string breakpad_id;  // 33 hex chars derived from the build ID ("" if unknown: never symbolicated)
  std::string code_id;      // the full build ID, lowercase hex
  std::string arch = "x86_64";
  // Where the file can be read now when `path` no longer can (a binary deleted or replaced while it ran:
  // the recorder's open descriptor, /proc/self/fd/N, alive while its Recording is). Never written out.
  std::string read_path;
};

// A binary as symbolication sees it: one entry per (debug_name, breakpad_id) across all processes, so that
// frames of the same code in several processes share their symbols. Built from the Lib mappings by
// index_binaries() (model/symbols.h) or by a reader.
struct Binary {
  std::string name, path, debug_name, debug_path, breakpad_id, code_id, arch;
  std::string read_path;  // Lib::read_path
  // Only binaries with both identities can be looked up (the front end asks for no others either).
  bool symbolicatable() const { return !debug_name.empty() && !breakpad_id.empty(); }
};

// Code a process generated at run time (a JIT), named by the runtime itself in /tmp/perf-PID.map or a
// jitdump file (recorder/jit.h). Absolute addresses [start, end) in the process, and when the code was
// there (CLOCK_MONOTONIC, like samples): from `from_ns` (a jitdump record's time; for a perf map line, the
// last time the recorder had read the file without it; 0: before the recording) until `until_ns` (moved or
// unloaded; UINT64_MAX: never). Runtimes reuse addresses, so one address may have many entries over time.
struct JitCode {
  uint64_t start = 0, end = 0;
  std::string name;
  uint64_t from_ns = 0, until_ns = UINT64_MAX;
};

struct Process {
  uint32_t pid = 0;
  std::string name;                // processName, e.g. the command's base name
  uint64_t start_ns = 0;           // meta.startTime of this process
  std::optional<uint64_t> end_ns;  // shutdownTime
  std::vector<Lib> libs;           // the exporter sorts them and drops overlaps
  std::vector<Thread> threads;
  std::vector<Counter> counters;
  // JIT code named by the process (in the order the runtime wrote it, a later entry winning at equal
  // times) and the file the names came from (its base name is the pseudo-library of those frames, as perf
  // shows it: "perf-PID.map", "jit-PID.dump"). The recorder reads them when the process exits (the files
  // are the process's, gone or reused later) and names the frames at once, each by the code that was at
  // its address at its sample's time (model::name_jit_frames): a saved profile carries the names, not the
  // tables.
  std::vector<JitCode> jit;
  std::string jit_source;
  bool kernel_threads = false;  // -a's "[kernel threads]": every kernel thread of the machine (pid 2)
};

struct Meta {
  std::string product = "fxprof";
  double interval_ms = 1.0;
  double start_unix_ms = 0;  // wall clock at start_monotonic_ns
  uint64_t start_monotonic_ns = 0;
  std::optional<uint64_t> end_monotonic_ns;
  std::vector<CategoryInfo> categories{
      {"Other", "grey"},          {"User", "yellow"}, {"Kernel", "orange"},  {"Idle", "transparent"},
      {"Kernel thread", "brown"}, {"IRQ", "red"},     {"Softirq", "magenta"}};
  std::vector<MarkerSchema> marker_schemas;
  std::string oscpu;  // e.g. "Linux 6.1.0-18-amd64 x86_64"
  // The machine and what was recorded (recorder/machine.h); 0 and "" when unknown.
  struct Machine {
    std::string cpu_name;  // meta.CPUName
    uint32_t physical_cpus = 0, logical_cpus = 0;
    uint64_t main_memory = 0;  // bytes, meta.mainMemory
    std::string command_line;  // meta.arguments: the command launched, or "-p PIDS"
  };
  Machine machine;
  bool presymbolicated = false;
  // Read back from meta.fxprofSelectedThread (written: the busiest thread's index in the Gecko file, the
  // URL's thread=N), so that `fxprof load` selects it without reading the samples.
  std::optional<uint64_t> selected_thread;
  // DWARF stack walking (record's default): the stacks unwound, and those whose walk stopped at the end of
  // the stack copy (truncated) or found no rule (failed), before the kernel's frame-pointer chain was
  // spliced on. Written as a meta.extra section ("Stack walking").
  // Stacks that went through code without CFI (JIT code, trampolines) by the validated frame-pointer rule
  // (frame_pointer) or by scanning the stack copy for a return address (scanned): recovered heuristically.
  struct StackWalk {
    uint64_t stacks = 0, truncated = 0, failed = 0;
    uint64_t frame_pointer = 0, scanned = 0;
  };
  std::optional<StackWalk> stack_walk;
  // Data-quality problems the recording had (recorder/quality.h: the one mechanism that also prints their
  // line): what was affected and where (the label names the binary, process or cause) and how many. Written
  // as a meta.extra section ("Data quality"), read back by the Gecko reader, so `symbolicate` keeps it.
  // A kind the later passes act on (the diff gate allows for lost records); the label is what is written,
  // and the reader gives the kind back from it (problem_kind).
  enum class ProblemKind : uint8_t { Other, LostRecords };
  static constexpr std::string_view kLostRecordsLabel = "Records lost (ring buffer overflow)";
  struct Problem {
    std::string label;
    uint64_t count = 0;
    ProblemKind kind = ProblemKind::Other;
  };
  static ProblemKind problem_kind(std::string_view label) {
    return label == kLostRecordsLabel ? ProblemKind::LostRecords : ProblemKind::Other;
  }
  std::vector<Problem> data_quality;
  // The records the kernel dropped (ring buffer overflow): with them went samples, up to one each.
  uint64_t lost_records() const {
    uint64_t n = 0;
    for (const Problem& q : data_quality)
      if (q.kind == ProblemKind::LostRecords) n += q.count;
    return n;
  }
  // Adds `p` unless an entry with its label is there (a profile symbolicated again, or named in two passes,
  // keeps one); whether it was added.
  bool add_problem(Problem p) {
    for (const Problem& q : data_quality)
      if (q.label == p.label) return false;
    data_quality.push_back(std::move(p));
    return true;
  }
  // `record --heap`: what the aggregated allocation rows cannot give back (written as meta.fxprofHeap).
  struct HeapStats {
    bool sampled = false;  // the figures are estimates from Poisson samples every rate_bytes on average
    double rate_bytes = 0;
    uint64_t temporary = 0;        // blocks freed by the allocating thread before it allocated anything else
    uint64_t temporary_error = 0;  // sampled: the estimated count's standard error
    int64_t peak_bytes = 0;        // every process's heap bytes together, at their highest
    uint64_t peak_time_ns = 0;
    struct SizeBin {
      uint64_t max_size = 0;  // blocks of (previous bin's max_size, max_size] bytes
      uint64_t count = 0, bytes = 0;
    };
    std::vector<SizeBin> sizes;  // powers of two, bins without blocks left out
  };
  std::optional<HeapStats> heap;
};

// The label frame over fxprof's own work inside a profiled process (the --heap shim, libfxprof_heap.so:
// its unwinding and its pipe writes), so that it is not taken for the program's (recorder/own_frames.h).
inline constexpr std::string_view kHeapShimLabel = "fxprof heap shim";

struct Profile {
  Meta meta;
  StringTable strings;
  FrameTable frames;
  StackTable stacks;
  std::vector<Process> processes;  // processes[0] is the top-level one (the launched or first attached)
  std::vector<Binary> binaries;    // what Frame::binary points to

  // The binary for a mapping (existing or new), deduplicated by (debug_name, breakpad_id), else by path.
  BinaryId intern_binary(const Lib& lib);
  std::unordered_map<std::string, BinaryId> binary_index;  // intern_binary's key -> id

  // Conveniences for builders.
  FrameId native_frame(uint64_t address) {
    return frames.intern({address, kNoString, FrameKind::Native, Category::User});
  }
  FrameId kernel_frame(uint64_t address) {
    return frames.intern({address, kNoString, FrameKind::Kernel, Category::Kernel});
  }
  FrameId label_frame(std::string_view text, Category c = Category::Other) {
    return frames.intern({0, strings.intern(text), FrameKind::Label, c});
  }
  // Whether a sample with this stack is wall-clock time of a blocked or preempted thread, not CPU time:
  // its leaf is an Idle label ("[blocked: futex]", "[preempted]", recorder/offcpu.h). kNoStack: no.
  bool off_cpu(StackId s) const {
    if (s == kNoStack) return false;
    const Frame& leaf = frames.get(stacks.frame(s));
    return leaf.kind == FrameKind::Label && leaf.category == Category::Idle;
  }
};

// The "Threads waiting" counter of each process with `Lock wait` markers: per sampling interval (a grid of
// `interval_ns` from the process start), how many of its threads waited on a lock (futex) during any part
// of it. Cells are written only around waits (a zero before and after each run of busy cells), so a long
// idle recording costs nothing; the grid is regular where it matters because the front end draws a
// counter of an unknown category as count per time (Gecko `count`, a line-rate graph, tooltip the count).
void add_waiting_counters(model::Profile& profile, uint64_t interval_ns);

}  // namespace fxprof::model
