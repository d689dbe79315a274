// The heap pipe as a source (sources.h): the heap library's reader and folding threads (heap/heap.h) and
// uprobes on an allocator linked into the program (heap_uprobes.h), started before the program is forked and
// finished at the driver's finish.
#include <algorithm>
#include <utility>

#include "recorder/heap_uprobes.h"
#include "recorder/sources.h"

namespace fxprof::recorder {

namespace {

class HeapPipe final : public Source {
 public:
  HeapPipe(std::string program, model::Profile& profile, HeapOutcome& out)
      : program_(std::move(program)), profile_(profile), out_(out) {}

  // An allocator linked into the program makes calls the heap library never sees: as root, uprobes on its
  // functions record them instead, and the library leaves out what is allocated inside them (a Rust
  // allocator that forwards to malloc); otherwise a line says so, by name. Called with the recording's
  // signals blocked (the Session's signal reader): the threads started here inherit that.
  Status start(heap::Options options) {
    const std::string exe = command_path(program_);
    own_ = heap::own_allocator(exe);
    if (!own_.static_executable && !own_.functions.empty()) {
      std::vector<std::string> functions = own_.functions;
      functions.insert(functions.end(), own_.frees.begin(), own_.frees.end());
      auto u = HeapUprobes::start(exe, functions);
      if (u) {
        uprobes_ = std::move(*u);
        options.probed_exe = exe;
        options.probed_code = own_.code;
      } else {
        uprobes_error_ = u.error();
      }
    }
    auto h = heap::HeapSource::start(options);
    if (!h) return std::move(h).take_error();
    source_ = std::move(*h);
    return {};
  }

  // Its events go to its own threads, not through the rounds.
  bool next(Round&, RecordSink&) override { return true; }

  // The heap's events into the model, and what it could not see.
  void finish() override {
    if (!source_) return;
    if (uprobes_) {
      // Only the processes recorded (the probes are on the file: anything else running it is left out).
      std::vector<heap::ExternalCall> calls = uprobes_->finish();
      std::erase_if(calls, [&](const heap::ExternalCall& c) {
        for (const model::Process& p : profile_.processes)
          if (p.pid == c.pid) return false;
        return true;
      });
      source_->add_external(calls);
      out_.uprobes_line =
          heap::uprobes_line(program_, uprobes_->attached(), calls.size(), uprobes_->dropped());
    }
    const heap::Summary h = source_->finish(profile_);
    source_.reset();
    const std::string line = !uprobes_   ? heap::own_allocator_line(program_, own_, uprobes_error_)
                             : own_.rust ? heap::rust_allocator_line(program_, uprobes_->attached())
                                         : "";
    if (!line.empty()) out_.problems.push_back({"Allocator --heap cannot see: " + program_, 1, line});
    if (h.lost_chunks > 0)
      out_.incomplete = "fxprof: heap: " + std::to_string(h.lost_chunks) +
                        " event chunks lost (the program closed the pipe)\n";
    // Streams cut short: said with the data quality, and again under the figures they leave incomplete.
    for (const heap::StreamCut& c : h.cuts) {
      std::string name = program_;  // the process's own name when perf saw it (a child)
      for (const model::Process& p : profile_.processes)
        if (p.pid == c.pid && !p.name.empty()) name = p.name;
      out_.problems.push_back({"Heap stream cut: " + name + " (pid " + std::to_string(c.pid) + ")", 1,
                               heap::stream_cut_line(name, c, profile_.meta.start_monotonic_ns), c.pid,
                               c.time_ns});
    }
    if (!h.cuts.empty())
      out_.incomplete += "fxprof: heap: incomplete: the stream of " + std::to_string(h.cuts.size()) +
                         " process(es) was cut (above), their later allocations are not counted\n";
  }

 private:
  std::string program_;
  model::Profile& profile_;
  HeapOutcome& out_;
  heap::OwnAllocator own_;
  std::unique_ptr<HeapUprobes> uprobes_;
  std::string uprobes_error_;  // why uprobes could not record the own allocator ("" when not tried)
  std::unique_ptr<heap::HeapSource> source_;
};

}  // namespace

Result<std::unique_ptr<Source>> heap_source(const heap::Options& options, const std::string& program,
                                            model::Profile& profile, HeapOutcome& out) {
  auto source = std::make_unique<HeapPipe>(program, profile, out);
  if (auto s = source->start(options); !s) return std::move(s).take_error();
  return std::unique_ptr<Source>(std::move(source));
}

}  // namespace fxprof::recorder
