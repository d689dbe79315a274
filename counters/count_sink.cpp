// `fxprof stat`'s counting sink (count_sink.h).
#include "counters/count_sink.h"

#include <algorithm>
#include <variant>

namespace fxprof::counters {

CountSink::Proc& CountSink::proc(uint32_t pid) {
  auto [it, fresh] = procs_.try_emplace(pid);
  if (fresh) {
    it->second.values.assign(events_, 0);
    it->second.order = procs_.size();
  }
  return it->second;
}

void CountSink::on_records(std::span<const driver::RecordRef> round) {
  for (const driver::RecordRef& r : round) handle(r.typed ? *r.typed : perf::decode(r.h, layout_));
}

void CountSink::handle(const perf::Record& r) {
  if (const auto* rd = std::get_if<perf::ReadRecord>(&r)) {
    for (size_t i = 0; i < rd->count(); ++i) {
      auto it = event_of_id_.find(rd->id_at(i));
      if (it != event_of_id_.end()) proc(rd->pid).values[it->second] += rd->value_at(i);
    }
  } else if (const auto* f = std::get_if<perf::ForkRecord>(&r)) {
    // A new process is named after its parent until its exec (COMM). Its threads' counts may have come
    // first, from another CPU's buffer.
    if (f->pid == f->tid && f->pid != f->ppid) {
      const std::string parent = proc(f->ppid).name;
      Proc& p = proc(f->pid);
      if (p.name.empty()) p.name = parent;
    }
  } else if (const auto* c = std::get_if<perf::CommRecord>(&r)) {
    if (c->pid == c->tid || c->exec) proc(c->pid).name = std::string(c->comm);
  } else if (std::holds_alternative<perf::LostRecord>(r)) {
    ++lost_;
  }
}

std::vector<uint64_t> CountSink::reported() const {
  std::vector<uint64_t> sum(events_, 0);
  for (const auto& [pid, p] : procs_)
    for (size_t e = 0; e < events_; ++e) sum[e] += p.values[e];
  return sum;
}

void CountSink::add(uint32_t pid, std::span<const uint64_t> values) {
  std::vector<uint64_t>& v = proc(pid).values;
  for (size_t e = 0; e < std::min(v.size(), values.size()); ++e) v[e] += values[e];
}

std::vector<ProcessCounts> CountSink::processes() const {
  std::vector<std::pair<size_t, ProcessCounts>> v;
  for (const auto& [pid, p] : procs_) v.push_back({p.order, ProcessCounts{pid, p.name, p.values}});
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ProcessCounts> out;
  for (auto& [o, pc] : v) out.push_back(std::move(pc));
  return out;
}

}  // namespace fxprof::counters
