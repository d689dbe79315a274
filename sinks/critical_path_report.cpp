// `report --critical-path` (sinks/critical_path_report.h).
#include "sinks/critical_path_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "base/terminal.h"

namespace fxprof::sinks {

namespace {

std::string thread_label(const model::Profile& p, uint32_t tid) {
  for (const model::Process& proc : p.processes)
    for (const model::Thread& t : proc.threads)
      if (t.tid == tid) return t.name + " (tid " + std::to_string(tid) + ")";
  return "tid " + std::to_string(tid);
}

// The thread asked about and the interval, the same in both reports.
template <class Report>
void set_head(Report& r, const model::Profile& p, const std::vector<model::CriticalPath>& paths,
              std::string interval) {
  r.interval = std::move(interval);
  if (paths.empty()) return;
  r.pid = paths[0].pid;
  r.tid = paths[0].tid;
  r.thread = thread_label(p, r.tid);
}

double ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }
double share(uint64_t ns, uint64_t total) {
  return total ? 100.0 * static_cast<double>(ns) / static_cast<double>(total) : 0;
}

// The function a segment's time goes to: a CPU sample's leaf function, else its kind.
std::string segment_function(const model::Profile& p, const model::PathSegment& s) {
  if (s.kind == model::PathKind::Cpu && s.stack != model::kNoStack)
    return model::frame_name(p, p.stacks.frame(s.stack));
  return std::string(model::path_kind_label(s.kind));
}

}  // namespace

CriticalPathReport make_critical_path_report(const model::Profile& p,
                                             const std::vector<model::CriticalPath>& paths,
                                             std::string interval, size_t limit) {
  CriticalPathReport r;
  set_head(r, p, paths, std::move(interval));
  std::map<std::string, uint64_t> parts;
  std::map<std::pair<std::string, uint32_t>, std::pair<uint64_t, uint64_t>> functions;  // -> (self, total)
  std::vector<std::string> seen;
  auto add_cpu = [&](const model::PathSegment& s, uint64_t d) {
    functions[{segment_function(p, s), s.tid}].first += d;
    seen.clear();
    if (s.kind != model::PathKind::Cpu) {
      functions[{segment_function(p, s), s.tid}].second += d;
      return;
    }
    for (model::StackId st = s.stack; st != model::kNoStack; st = p.stacks.prefix(st)) {
      std::string fn = model::frame_name(p, p.stacks.frame(st));
      if (std::find(seen.begin(), seen.end(), fn) != seen.end()) continue;  // recursion counts once
      functions[{fn, s.tid}].second += d;
      seen.push_back(std::move(fn));
    }
  };
  std::unordered_map<uint32_t, std::string> labels;
  auto label = [&](uint32_t tid) -> const std::string& {
    auto [it, fresh] = labels.try_emplace(tid);
    if (fresh) it->second = thread_label(p, tid);
    return it->second;
  };
  for (const model::CriticalPath& path : paths) {
    r.total_ns += path.end_ns - path.start_ns;
    const std::vector<model::PathSegment>& segs = path.segments;
    for (size_t i = 0; i < segs.size();) {
      // One chain: the segments of one wait of the thread followed through its wakers (hops > 0).
      if (segs[i].hops == 0) {
        const model::PathSegment& s = segs[i++];
        const uint64_t d = s.end_ns - s.start_ns;
        const bool cpu = s.kind == model::PathKind::Cpu || s.kind == model::PathKind::Running;
        parts[cpu ? "own CPU" : std::string(model::path_kind_label(s.kind))] += d;
        if (cpu) add_cpu(s, d);
        continue;
      }
      CriticalPathReport::Chain c;
      c.start_ns = segs[i].start_ns;
      struct Spent {
        uint64_t ns = 0;
        model::StackId stack = model::kNoStack;
        bool cpu = false;
      };
      std::map<std::pair<std::string, uint32_t>, Spent> in_chain;
      std::vector<uint32_t> by_hop;
      for (; i < segs.size() && segs[i].hops > 0; ++i) {
        const model::PathSegment& s = segs[i];
        const uint64_t d = s.end_ns - s.start_ns;
        c.ns += d;
        const bool cpu = s.kind == model::PathKind::Cpu || s.kind == model::PathKind::Running;
        parts[cpu ? "other threads' CPU" : std::string(model::path_kind_label(s.kind))] += d;
        const std::string fn = segment_function(p, s);
        if (cpu) add_cpu(s, d);
        auto& e = in_chain[{fn, s.tid}];
        e.ns += d;
        e.stack = s.stack;
        e.cpu = cpu;
        if (by_hop.size() < s.hops) by_hop.resize(s.hops, 0);
        if (by_hop[s.hops - 1] == 0) by_hop[s.hops - 1] = s.tid;
      }
      r.chains.push_back(std::move(c));
      CriticalPathReport::Chain& chain = r.chains.back();
      chain.threads.push_back(label(path.tid));
      for (uint32_t tid : by_hop)
        if (tid) chain.threads.push_back(label(tid));
      // Where the time went: the function that ran longest, else the longest wait (run-queue delay grows
      // with the machine's load, the work does not).
      auto top = std::max_element(in_chain.begin(), in_chain.end(), [](const auto& a, const auto& b) {
        return std::make_pair(a.second.cpu, a.second.ns) < std::make_pair(b.second.cpu, b.second.ns);
      });
      if (top != in_chain.end()) {
        chain.function = top->first.first + " in " + label(top->first.second);
        for (model::StackId st = top->second.stack; st != model::kNoStack && chain.stack.size() < 8;
             st = p.stacks.prefix(st))
          chain.stack.push_back(model::frame_name(p, p.stacks.frame(st)));
      }
    }
  }
  for (const auto& [kind, ns] : parts) r.parts.push_back({kind, ns});
  std::stable_sort(r.parts.begin(), r.parts.end(), [](const auto& a, const auto& b) { return a.ns > b.ns; });
  for (const auto& [key, ns] : functions)
    r.functions.push_back(
        {key.first, label(key.second), key.second, key.second == r.tid, ns.first, ns.second});
  std::stable_sort(r.functions.begin(), r.functions.end(),
                   [](const auto& a, const auto& b) { return a.total_ns > b.total_ns; });
  if (r.functions.size() > limit) r.functions.resize(limit);
  std::stable_sort(r.chains.begin(), r.chains.end(),
                   [](const auto& a, const auto& b) { return a.ns > b.ns; });
  if (r.chains.size() > limit) r.chains.resize(limit);
  return r;
}

std::string format_critical_path_report(const CriticalPathReport& r) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf, "Critical path of %s, pid %u, over %s: %.1f ms\n",
                terminal_safe(r.thread).c_str(), r.pid, terminal_safe(r.interval).c_str(), ms(r.total_ns));
  out += buf;
  for (const auto& part : r.parts) {
    std::snprintf(buf, sizeof buf, "  %-34s %10.1f ms %6.1f%%\n", part.kind.c_str(), ms(part.ns),
                  share(part.ns, r.total_ns));
    out += buf;
  }
  if (!r.functions.empty()) out += "\nFunctions on the path (CPU):\n   total     self\n";
  for (const auto& f : r.functions) {
    std::snprintf(buf, sizeof buf, "  %6.1f%%  %6.1f%% %10.1f ms  %s  [%s]\n", share(f.total_ns, r.total_ns),
                  share(f.self_ns, r.total_ns), ms(f.total_ns),
                  terminal_safe(f.function.substr(0, 100)).c_str(), terminal_safe(f.thread).c_str());
    out += buf;
  }
  if (!r.chains.empty()) out += "\nLongest chains (a wait, the threads that woke it, where the time went):\n";
  for (const auto& c : r.chains) {
    std::string threads;
    for (const std::string& t : c.threads) threads += (threads.empty() ? "" : " <- ") + t;
    std::snprintf(buf, sizeof buf, "  %10.1f ms  %s: %s\n", ms(c.ns), terminal_safe(threads).c_str(),
                  terminal_safe(c.function.substr(0, 120)).c_str());
    out += buf;
    for (const std::string& f : c.stack) out += "                  " + terminal_safe(f.substr(0, 120)) + "\n";
  }
  return out;
}

void write_critical_path_report_json(const CriticalPathReport& r, JsonWriter& w) {
  w.begin_object().key("criticalPath").begin_object();
  w.key("thread").value(r.thread).key("pid").value(r.pid).key("tid").value(r.tid);
  w.key("interval").value(r.interval).key("totalMs").value(ms(r.total_ns));
  w.key("parts").begin_array();
  for (const auto& part : r.parts)
    w.begin_object()
        .key("kind")
        .value(part.kind)
        .key("ms")
        .value(ms(part.ns))
        .key("share")
        .value(share(part.ns, r.total_ns) / 100)
        .end_object();
  w.end_array().key("functions").begin_array();
  for (const auto& f : r.functions)
    w.begin_object()
        .key("function")
        .value(f.function)
        .key("thread")
        .value(f.thread)
        .key("tid")
        .value(f.tid)
        .key("own")
        .value(f.own)
        .key("totalMs")
        .value(ms(f.total_ns))
        .key("total")
        .value(share(f.total_ns, r.total_ns) / 100)
        .key("selfMs")
        .value(ms(f.self_ns))
        .key("self")
        .value(share(f.self_ns, r.total_ns) / 100)
        .end_object();
  w.end_array().key("chains").begin_array();
  for (const auto& c : r.chains) {
    w.begin_object().key("ms").value(ms(c.ns)).key("threads").begin_array();
    for (const std::string& t : c.threads) w.value(t);
    w.end_array().key("function").value(c.function).key("stack").begin_array();
    for (const std::string& f : c.stack) w.value(f);
    w.end_array().end_object();
  }
  w.end_array().end_object().end_object();
}

namespace {

// The row a wait's end goes to: the waking thread and its stack's functions, or a kind of end.
std::pair<std::string, std::vector<std::string>> blame_key(const model::Profile& p, const model::WaitEnd& e,
                                                           const std::string& thread) {
  std::vector<std::string> stack;
  switch (e.waker) {
    case model::Waker::Thread:
      for (model::StackId st = e.stack; st != model::kNoStack && stack.size() < 12; st = p.stacks.prefix(st))
        stack.push_back(model::frame_name(p, p.stacks.frame(st)));
      return {thread, std::move(stack)};
    case model::Waker::Timer:
      return {e.reason == model::WaitReason::Sleep ? "[sleep]" : "[timer]", stack};
    case model::Waker::Interrupt:
      return {e.reason == model::WaitReason::Io ? "[disk/network I/O]" : "[interrupt]", stack};
    case model::Waker::Untraced:
      return {"[woken by a process not recorded]", stack};
    case model::Waker::None:
      break;
  }
  return {e.reason == model::WaitReason::Sleep ? "[sleep]" : "[no waker recorded]", stack};
}

}  // namespace

WaitBlame make_wait_blame(const model::Profile& p, const std::vector<model::CriticalPath>& paths,
                          std::string interval, bool include_irq, size_t limit) {
  WaitBlame r;
  set_head(r, p, paths, std::move(interval));
  std::map<std::pair<std::string, std::vector<std::string>>, WaitBlame::Waker> rows;
  std::unordered_map<uint32_t, std::string> labels;
  for (const model::CriticalPath& path : paths) {
    r.total_ns += path.end_ns - path.start_ns;
    for (const model::WaitEnd& e : path.wait_ends) {
      r.waiting_ns += e.ns;
      const bool irq = e.waker == model::Waker::Timer || e.waker == model::Waker::Interrupt;
      if (irq && !include_irq) {
        r.left_out_ns += e.ns;
        continue;
      }
      auto [label, fresh] = labels.try_emplace(e.tid);
      if (fresh) label->second = thread_label(p, e.tid);
      auto key = blame_key(p, e, label->second);
      WaitBlame::Waker& row = rows[key];
      if (row.waker.empty()) {
        row.waker = key.first;
        row.tid = e.waker == model::Waker::Thread ? e.tid : 0;
        row.stack = key.second;
      }
      row.ns += e.ns;
      ++row.waits;
    }
  }
  for (auto& [key, row] : rows) r.wakers.push_back(std::move(row));
  std::sort(r.wakers.begin(), r.wakers.end(),
            [](const WaitBlame::Waker& a, const WaitBlame::Waker& b) { return a.ns > b.ns; });
  if (r.wakers.size() > limit) r.wakers.resize(limit);
  return r;
}

std::string format_wait_blame(const WaitBlame& r) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "Wait blame for %s, pid %u, over %s: %.1f ms of waiting on the path (of %.1f ms)\n",
                terminal_safe(r.thread).c_str(), r.pid, terminal_safe(r.interval).c_str(), ms(r.waiting_ns),
                ms(r.total_ns));
  std::string out = buf;
  if (r.left_out_ns) {
    std::snprintf(buf, sizeof buf, "  (%.1f ms ended by a timer or an interrupt left out: --include-irq)\n",
                  ms(r.left_out_ns));
    out += buf;
  }
  if (r.wakers.empty()) return out + "  no wait on the path\n";
  out += "Who ended the waits (share of the interval; the waker's stack at the wake, leaf first):\n";
  for (const auto& wk : r.wakers) {
    std::snprintf(buf, sizeof buf, "  %10.1f ms %6.1f%%  %zu wait%s  %s\n", ms(wk.ns),
                  share(wk.ns, r.total_ns), wk.waits, wk.waits == 1 ? "" : "s",
                  terminal_safe(wk.waker).c_str());
    out += buf;
    for (const std::string& f : wk.stack)
      out += "                  " + terminal_safe(f.substr(0, 120)) + "\n";
  }
  return out;
}

void write_wait_blame_json(const WaitBlame& r, JsonWriter& w) {
  w.begin_object().key("waitBlame").begin_object();
  w.key("thread").value(r.thread).key("pid").value(r.pid).key("tid").value(r.tid);
  w.key("interval").value(r.interval).key("totalMs").value(ms(r.total_ns));
  w.key("waitingMs").value(ms(r.waiting_ns)).key("leftOutMs").value(ms(r.left_out_ns));
  w.key("wakers").begin_array();
  for (const auto& wk : r.wakers) {
    w.begin_object().key("waker").value(wk.waker).key("tid").value(wk.tid);
    w.key("ms").value(ms(wk.ns)).key("share").value(share(wk.ns, r.total_ns) / 100);
    w.key("waits").value(uint64_t{wk.waits}).key("stack").begin_array();
    for (const std::string& f : wk.stack) w.value(f);
    w.end_array().end_object();
  }
  w.end_array().end_object().end_object();
}

}  // namespace fxprof::sinks
