// recorder/capture.h: a real recording, captured (its records and /proc answers as they came) and replayed
// through a new profile builder, gives the same profile: the same threads, samples, stacks (frame by frame),
// markers and RSS counter, and once symbolicated the same functions. Damaged files are errors, not profiles.
#include "recorder/capture.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gecko/gecko.h"
#include "gecko/gecko_reader.h"
#include "model/waits.h"
#include "passes/passes.h"
#include "passes/symbolicate.h"
#include "recorder/recorder.h"
#include "tests/support/support.h"

using namespace fxprof;
using fxprof::test::test_program;

namespace {

std::string frame_text(const model::Profile& p, model::FrameId id) {
  const model::Frame& f = p.frames.get(id);
  std::string s = std::to_string(static_cast<int>(f.kind)) + ":";
  if (f.binary != model::kNoBinary) s += p.binaries[f.binary].path + "+";
  char addr[32];
  std::snprintf(addr, sizeof addr, "%llx", static_cast<unsigned long long>(f.address));
  s += addr;
  if (f.name != model::kNoString) s += " " + std::string(p.strings.get(f.name));
  if (f.inline_depth) s += " inline " + std::to_string(f.inline_depth);
  return s;
}

// Leaf first, one frame a line.
std::string stack_text(const model::Profile& p, model::StackId id) {
  std::string s;
  for (; id != model::kNoStack; id = p.stacks.prefix(id)) s += frame_text(p, p.stacks.frame(id)) + "\n";
  return s;
}

// Everything the builder made, in one text per thread: name, samples (time, CPU delta, stack), markers.
std::map<uint32_t, std::string> threads_text(const model::Profile& p) {
  std::map<uint32_t, std::string> out;
  for (const model::Process& proc : p.processes)
    for (const model::Thread& t : proc.threads) {
      std::string& s = out[t.tid];
      s += "process " + std::to_string(proc.pid) + " " + proc.name + ", thread " + t.name + "\n";
      for (const model::Sample& smp : t.samples)
        s += "sample " + std::to_string(smp.time_ns) + " " + std::to_string(smp.cpu_delta_ns) + "\n" +
             stack_text(p, smp.stack);
      for (const model::Marker& m : t.markers) {
        // Not the summary's markers (recorder/quality.h): made after recording from its counts, not by the
        // builder, so a replay has none.
        const std::string_view type = m.type == model::kNoString ? "" : p.strings.get(m.type);
        if (type == "DataQuality" || type == "StackWalking") continue;
        s += "marker " + std::string(p.strings.get(m.name)) + " " + std::to_string(m.start_ns) + "-" +
             std::to_string(m.end_ns) + " fields " + std::to_string(m.fields.size()) + "\n" +
             stack_text(p, m.stack);
      }
    }
  return out;
}

uint64_t sample_count(const model::Profile& p) {
  uint64_t n = 0;
  for (const model::Process& proc : p.processes)
    for (const model::Thread& t : proc.threads) n += t.samples.size();
  return n;
}

// Self samples per function name, after symbolication.
std::map<std::string, uint64_t> self_functions(model::Profile& p) {
  symbolizer::Symbolizer symbols;
  passes::name_frames(p, symbols);  // the passes record runs after its sources, baked
  std::map<std::string, uint64_t> out;
  for (const model::Process& proc : p.processes)
    for (const model::Thread& t : proc.threads)
      for (const model::Sample& smp : t.samples) {
        if (smp.stack == model::kNoStack) continue;
        const model::Frame& f = p.frames.get(p.stacks.frame(smp.stack));
        ++out[f.name == model::kNoString ? "?" : std::string(p.strings.get(f.name))];
      }
  return out;
}

struct TempFile {
  std::string path = "/tmp/fxprof-capture-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  ~TempFile() { unlink(path.c_str()); }
  static inline int counter = 0;
};

// Wakeup markers with the waker's stack (the eBPF waker tracer, futex wakes: root only).
size_t wakeup_stacks(const model::Profile& p) {
  size_t n = 0;
  for (const model::Process& proc : p.processes)
    for (const model::Thread& t : proc.threads)
      for (const model::Marker& m : t.markers)
        n += m.name != model::kNoString && p.strings.get(m.name) == "Wakeup" && m.stack != model::kNoStack;
  return n;
}

// The OffCpu and Wakeup markers of each thread: name and fields, one a line (times are compared apart: the
// file keeps them as float milliseconds).
std::map<uint32_t, std::string> wait_markers_text(const model::Profile& p) {
  std::map<uint32_t, std::string> out;
  for (const model::Process& proc : p.processes)
    for (const model::Thread& t : proc.threads)
      for (const model::Marker& m : t.markers) {
        const std::string_view type = m.type == model::kNoString ? "" : p.strings.get(m.type);
        if (type != "OffCpu" && type != "Wakeup") continue;
        std::string& s = out[t.tid];
        s += p.strings.get(m.name);
        for (const model::MarkerField& f : m.fields)
          s += " " + std::string(p.strings.get(f.key)) + "=" + std::string(p.strings.get(f.string));
        s += "\n";
      }
  return out;
}

// `wakeups`: the live recording must have Wakeup markers with stacks.
void check_replay(const recorder::Options& base, const std::string& top_function = "rec_busy_spin",
                  size_t min_samples = 100, bool wakeups = false) {
  TempFile cap;
  recorder::Options opt = base;
  opt.capture_path = cap.path;
  auto rec = recorder::record(opt);
  REQUIRE(rec.ok());
  model::Profile& live = rec.value().profile;
  REQUIRE(sample_count(live) > min_samples);

  auto again = recorder::replay(cap.path);
  INFO((again.ok() ? "" : again.error()));
  REQUIRE(again.ok());
  model::Profile& replayed = again.value();

  CHECK(sample_count(replayed) == sample_count(live));
  const auto live_threads = threads_text(live), replayed_threads = threads_text(replayed);
  REQUIRE(live_threads.size() == replayed_threads.size());
  for (const auto& [tid, text] : live_threads) {
    INFO("thread " << tid);
    REQUIRE(replayed_threads.count(tid));
    CHECK(replayed_threads.at(tid) == text);  // frame by frame, in the same order
  }
  REQUIRE(live.processes.size() == replayed.processes.size());
  for (size_t i = 0; i < live.processes.size(); ++i) {
    CHECK(live.processes[i].libs.size() == replayed.processes[i].libs.size());
    REQUIRE(live.processes[i].counters.size() == replayed.processes[i].counters.size());
    for (size_t c = 0; c < live.processes[i].counters.size(); ++c)
      CHECK(live.processes[i].counters[c].samples.size() == replayed.processes[i].counters[c].samples.size());
  }
  // The same functions, the spinning one first among them (waits, "[blocked: ...]" and "[preempted]",
  // may hold more samples on a loaded machine).
  const auto live_fns = self_functions(live), replayed_fns = self_functions(replayed);
  CHECK(live_fns == replayed_fns);
  std::string top;
  uint64_t most = 0;
  for (const auto& [name, n] : live_fns)
    if (!name.starts_with("[") && n > most) {
      top = name;
      most = n;
    }
  CHECK(top == top_function);
  CHECK(wakeup_stacks(replayed) == wakeup_stacks(live));
  if (wakeups) CHECK(wakeup_stacks(live) > 0);
}

}  // namespace

TEST_CASE("capture and replay: a launched program's DWARF recording, two threads, off-CPU", "[recorder]") {
  recorder::Options opt;
  opt.command = {test_program("rec_busy"), "spin", "300", "2"};
  opt.off_cpu = true;
  check_replay(opt);
}

TEST_CASE("capture and replay: lock waits and the wakers' stacks (eBPF)", "[recorder]") {
  REQUIRE(geteuid() == 0);  // the suite runs as root: the eBPF waker tracer loads
  recorder::Options opt;
  opt.command = {test_program("offcpu_locks")};
  opt.off_cpu = true;
  opt.off_cpu_threshold_ms = 0;
  opt.wakers_from_start =
      true;  // every wake from the program's first (by default the tracer loads beside it)
  check_replay(opt, "offcpu_hold_lock", 50, true);
}

TEST_CASE("capture and replay: frame pointers, CPU samples only", "[recorder]") {
  recorder::Options opt;
  opt.command = {test_program("rec_busy"), "spin", "300"};
  opt.call_graph = recorder::CallGraph::FramePointer;
  check_replay(opt);
}

TEST_CASE("replay: a damaged capture is an error", "[recorder]") {
  TempFile bad;
  { std::ofstream(bad.path) << "not a capture"; }
  auto r = recorder::replay(bad.path);
  REQUIRE(!r.ok());
  CHECK(r.error() == bad.path + ": not an fxprof capture");

  // A real capture cut in the middle of an entry.
  TempFile cap;
  recorder::Options opt;
  opt.command = {test_program("rec_busy"), "spin", "50"};
  opt.capture_path = cap.path;
  REQUIRE(recorder::record(opt).ok());
  std::ifstream in(cap.path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() > 100);
  { std::ofstream(cap.path, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 3); }
  auto cut = recorder::replay(cap.path);
  REQUIRE(!cut.ok());
  CHECK(cut.error() == cap.path + ": truncated capture");
  CHECK(recorder::replay("/nonexistent/capture").error().find("/nonexistent/capture") != std::string::npos);
}

// The typed waits (model/waits.h) of a real recording with wakers and lock holders: the Gecko file's markers
// are made from them, and the reader gives back the same waits, whose markers are the same again. (The
// markers are byte-identical to those written before waits were typed: checked on these captures against
// main's binary when the waits were introduced.)
TEST_CASE("capture and replay: waits, wakers and holders read back from the Gecko file as the same waits",
          "[recorder]") {
  REQUIRE(geteuid() == 0);  // the eBPF waker tracer
  TempFile cap;
  recorder::Options opt;
  opt.command = {test_program("offcpu_locks")};
  opt.off_cpu = true;
  opt.off_cpu_threshold_ms = 0;
  opt.wakers_from_start = true;
  opt.capture_path = cap.path;
  REQUIRE(recorder::record(opt).ok());
  auto replayed = recorder::replay(cap.path);
  REQUIRE(replayed.ok());
  model::Profile& p = replayed.value();
  symbolizer::Symbolizer symbols;
  passes::name_frames(p, symbols);  // the passes record runs after its sources, baked
  size_t waits = 0, woken = 0, held = 0;
  for (const model::Process& proc : p.processes)
    for (const model::Thread& t : proc.threads)
      for (const model::Wait& w : t.waits) {
        ++waits;
        woken += w.waker_stack != model::kNoStack;
        held += w.holder != model::kNoString;
      }
  CHECK(woken > 0);
  CHECK(held > 0);
  TempFile file;
  REQUIRE(gecko::write_gecko_profile(p, file.path));
  auto back = gecko::read_gecko_profile(file.path);
  REQUIRE(back.ok());
  size_t back_waits = 0, back_woken = 0, back_held = 0;
  for (const model::Process& proc : back->processes)
    for (const model::Thread& t : proc.threads)
      for (const model::Wait& w : t.waits) {
        ++back_waits;
        back_woken += w.waker_stack != model::kNoStack;
        back_held += w.holder != model::kNoString;
      }
  CHECK(back_waits == waits);
  CHECK(back_woken == woken);
  CHECK(back_held == held);
  // The same times, to the microsecond.
  std::map<uint32_t, const model::Thread*> recorded;
  for (const model::Process& proc : p.processes)
    for (const model::Thread& t : proc.threads) recorded[t.tid] = &t;
  for (const model::Process& proc : back->processes)
    for (const model::Thread& t : proc.threads) {
      REQUIRE(recorded.count(t.tid));
      const std::vector<model::Wait>& was = recorded[t.tid]->waits;
      REQUIRE(t.waits.size() == was.size());
      for (size_t i = 0; i < was.size(); ++i) {
        CHECK(std::llabs(int64_t(t.waits[i].start_ns - was[i].start_ns)) <= 1000);
        CHECK(std::llabs(int64_t(t.waits[i].end_ns - was[i].end_ns)) <= 1000);
        CHECK(std::llabs(int64_t(t.waits[i].wake_ns - was[i].wake_ns)) <= 1000);
        CHECK(t.waits[i].reason == was[i].reason);
        CHECK(t.waits[i].waker == was[i].waker);
        CHECK(t.waits[i].waker_pid == was[i].waker_pid);
        CHECK(t.waits[i].lock == was[i].lock);
        CHECK(t.waits[i].waker_tid == was[i].waker_tid);
      }
    }
  // The markers made from the waits read back, made again from the waits read: the same names and fields.
  const auto before = wait_markers_text(p);
  for (model::Process& proc : back->processes)
    for (model::Thread& t : proc.threads)
      for (const model::Wait& w : t.waits) model::make_wait_marker(*back, t, w);
  const auto after = wait_markers_text(*back);
  for (const auto& [tid, text] : before) {
    INFO("thread " << tid);
    REQUIRE(after.count(tid));
    const std::string& other = after.at(tid);
    size_t i = 0;
    while (i < text.size() && i < other.size() && text[i] == other[i]) ++i;
    const size_t line = text.rfind('\n', i) == std::string::npos ? 0 : text.rfind('\n', i) + 1;
    INFO("recorded: " << text.substr(line, 200) << "\nread back: " << other.substr(line, 200));
    CHECK(other == text);
  }
}

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

// The Gecko files of replayed captures, byte for byte: a capture replays to the same bytes every time, which
// is what makes them the check of a refactoring of the builder or the driver. With FXPROF_GOLDEN_DIR (which
// keeps the captures, recorded by the first run there) and FXPROF_GOLDEN_TAG, each file is also kept there,
// named with the tag: run it before and after the change with two tags and compare their files with cmp (the
// captures depend on this machine's binaries: they are not checked in).
TEST_CASE("golden: replayed captures give the same Gecko bytes", "[recorder]") {
  const char* golden = std::getenv("FXPROF_GOLDEN_DIR");
  const char* tag = std::getenv("FXPROF_GOLDEN_TAG");
  test::TempDir temp;
  const std::string dir = golden && tag ? std::string(golden) : temp.path();
  struct Case {
    const char* name;
    std::vector<std::string> command;
    bool off_cpu;
    recorder::CallGraph graph;
  };
  const Case cases[] = {
      {"busy-dwarf-offcpu", {test_program("rec_busy"), "spin", "300", "2"}, true, recorder::CallGraph::Dwarf},
      {"locks-wakers", {test_program("offcpu_locks")}, true, recorder::CallGraph::Dwarf},
      {"busy-fp", {test_program("rec_busy"), "spin", "300"}, false, recorder::CallGraph::FramePointer},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string cap = dir + "/" + c.name + ".cap";
    if (access(cap.c_str(), R_OK) != 0) {
      recorder::Options opt;
      opt.command = c.command;
      opt.off_cpu = c.off_cpu;
      opt.off_cpu_threshold_ms = 0;
      opt.wakers_from_start = true;  // the same wakes, captured from the program's start
      opt.call_graph = c.graph;
      opt.capture_path = cap;
      REQUIRE(recorder::record(opt).ok());
    }
    std::string bytes[2];
    for (int i = 0; i < 2; ++i) {
      auto p = recorder::replay(cap);
      REQUIRE(p.ok());
      symbolizer::Symbolizer symbols;
      passes::name_frames(p.value(), symbols);
      const std::string out =
          dir + "/" + c.name + "." + (golden && tag ? std::string(tag) : "replay") + ".json";
      REQUIRE(gecko::write_gecko_profile(p.value(), out));
      bytes[i] = file_bytes(out);
    }
    REQUIRE(bytes[0].size() > 1000);
    CHECK(bytes[0] == bytes[1]);
  }
}
