// fxprof counters: `fxprof stat`'s sink of the driver (driver/driver.h): per-process counts from the
// records of its counting events' ring buffers (driver/sources.h's perf buffers, the same source `record`
// reads its samples through).
//
// Each counting event carries inherit_stat, so when a thread exits the kernel writes its own counts into the
// buffer (PERF_RECORD_READ: its pid, and the event's id with each value); the fork, comm and exit records
// name the processes. The sink sums the values per process and event, and names each process after its
// parent until its exec (COMM). These are sums: the order the buffers are read in changes none of them.
// A lost record (the buffer was full) is counted: those counts are missing, the totals are not (stat.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "counters/stat.h"
#include "driver/driver.h"
#include "perf/records.h"

namespace fxprof::counters {

class CountSink final : public driver::RecordSink {
 public:
  // `events`: how many events are counted; `layout`: their records' layout (one read_format, no samples);
  // `event_of_id`: the event of each counter's id (PERF_EVENT_IOC_ID). Ids not in it are not counted.
  CountSink(size_t events, perf::Layout layout, std::map<uint64_t, size_t> event_of_id)
      : events_(events), layout_(std::move(layout)), event_of_id_(std::move(event_of_id)) {}

  // The launched program: the first process, named `name` until it execs something else.
  void on_launched(uint32_t pid, const std::string& name, uint64_t) override { proc(pid).name = name; }
  void on_attached(uint32_t, uint64_t) override {}
  void on_attached_thread(uint32_t, uint32_t, uint64_t) override {}
  void on_wakings(std::span<driver::Waking>) override {}
  void on_records(std::span<const driver::RecordRef> round) override;
  void on_end(uint64_t) override {}

  // What every process reported at its threads' exits, per event (parallel to the events).
  std::vector<uint64_t> reported() const;
  // Adds `values` (parallel to the events) to `pid`'s counts.
  void add(uint32_t pid, std::span<const uint64_t> values);
  // Every process seen, by first appearance (the launched one first).
  std::vector<ProcessCounts> processes() const;
  // Records the kernel could not write (PERF_RECORD_LOST records).
  uint64_t lost() const { return lost_; }

 private:
  struct Proc {
    std::string name;
    std::vector<uint64_t> values;
    size_t order;
  };
  Proc& proc(uint32_t pid);
  void handle(const perf::Record& r);

  size_t events_;
  perf::Layout layout_;
  std::map<uint64_t, size_t> event_of_id_;
  std::map<uint32_t, Proc> procs_;
  uint64_t lost_ = 0;
};

}  // namespace fxprof::counters
