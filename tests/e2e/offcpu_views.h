// The off-CPU side of a recorded profile as the e2e tests read it: each thread's samples (frames, CPU delta)
// and its OffCpu and Wakeup markers with their fields (offcpu_test.cpp, holders_test.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tests/support/support.h"

namespace fxprof::test {

// One sample of a thread: its frames' locations leaf first, its threadCPUDelta (-1: null).
struct SampleView {
  std::vector<std::string> frames;
  int64_t cpu_delta = -1;
  bool has(std::string_view fn) const {
    for (const auto& f : frames)
      if (f.find(fn) != std::string::npos) return true;
    return false;
  }
  std::string leaf() const { return frames.empty() ? std::string() : frames.front(); }
};

struct MarkerView {
  std::string name, reason, lock, waker;  // waker: "NAME TID" of the thread that woke the wait (eBPF)
  std::string holder;                     // Lock wait: the function that released the lock (eBPF, named)
  std::string waiter;                     // Lock wait: the function that waited (outside lock code)
  std::string wakee;                      // Wakeup: "NAME TID" of the thread it woke
  double start = 0, end = 0;
  std::vector<std::string> cause;  // the payload's stack, leaf first
};

struct ThreadView {
  std::string name;
  int64_t tid = 0;
  std::vector<SampleView> samples;
  std::vector<MarkerView> markers;  // OffCpu markers
  std::vector<MarkerView> wakeups;  // Wakeup markers (eBPF: this thread woke another from a futex)
  std::vector<MarkerView> program;  // the program's own markers (include/fxprof/markers.h): name and times
};

inline std::vector<std::string> stack_frames(simdjson::dom::element t, simdjson::dom::element stack_index) {
  std::vector<std::string> out;
  if (stack_index.is_null()) return out;
  simdjson::dom::array stacks = t["stackTable"]["data"], frames = t["frameTable"]["data"],
                       strings = t["stringTable"];
  for (auto s = stack_index; !s.is_null();) {
    auto row = stacks.at(size_t(int64_t(s)));
    auto frame = frames.at(size_t(int64_t(row.at(1))));
    out.emplace_back(std::string_view(strings.at(size_t(int64_t(frame.at(0))))));
    s = row.at(0);
  }
  return out;
}

// Every thread of every process of a (symbolicated) profile.
inline std::vector<ThreadView> threads_of(const std::string& text) {
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, text);
  std::vector<ThreadView> out;
  auto add = [&](simdjson::dom::element proc) {
    for (simdjson::dom::element t : simdjson::dom::array(proc["threads"])) {
      ThreadView v;
      v.name = std::string(std::string_view(t["name"]));
      v.tid = int64_t(t["tid"]);
      for (simdjson::dom::element smp : simdjson::dom::array(t["samples"]["data"])) {
        SampleView s;
        s.frames = stack_frames(t, smp.at(0));
        if (!smp.at(3).is_null()) s.cpu_delta = int64_t(smp.at(3));
        v.samples.push_back(std::move(s));
      }
      simdjson::dom::array strings = t["stringTable"];
      for (simdjson::dom::element m : simdjson::dom::array(t["markers"]["data"])) {
        auto data = m.at(5);
        MarkerView mv;
        mv.name = std::string(std::string_view(strings.at(size_t(int64_t(m.at(0))))));
        mv.start = double(m.at(1));
        if (!m.at(2).is_null()) mv.end = double(m.at(2));
        std::string_view type;
        if (data.is_null() || data["type"].get(type) || (type != "OffCpu" && type != "Wakeup")) {
          v.program.push_back(std::move(mv));
          continue;
        }
        auto text = [&](const char* key) {
          std::string_view v;
          return data[key].get(v) ? std::string() : std::string(v);
        };
        mv.reason = text("reason");
        mv.lock = text("lock");
        mv.waker = text("waker");
        mv.holder = text("holder");
        mv.waiter = text("waiter");
        mv.wakee = text("wakee");
        simdjson::dom::element stack;
        if (!data["stack"].get(stack)) mv.cause = stack_frames(t, stack["samples"]["data"].at(0).at(0));
        (type == "OffCpu" ? v.markers : v.wakeups).push_back(std::move(mv));
      }
      out.push_back(std::move(v));
    }
  };
  add(doc);
  for (simdjson::dom::element p : simdjson::dom::array(doc["processes"])) add(p);
  return out;
}

}  // namespace fxprof::test
