// The driver (driver.h): each round, every source's part, merged by time, fed to the sink, released.
#include "driver/driver.h"

#include <algorithm>

namespace fxprof::driver {

size_t Driver::round(uint64_t until) {
  round_.until = until;
  round_.wakings.clear();
  round_.records.clear();
  round_.fed = false;
  cuts_.clear();
  std::vector<Source*> asked;
  for (size_t i = 0; i < sources_.size(); ++i) {
    if (ended_[i]) continue;
    cuts_.push_back(round_.records.size());
    asked.push_back(sources_[i]);
    if (!sources_[i]->next(round_, sink_)) ended_[i] = true;
  }
  // Each source's part is in time order: merged, stable (at one time, the earlier source's records first).
  // One source of records (every case but a test's): nothing to do.
  const auto begin = round_.records.begin();
  for (size_t c = 1; c < cuts_.size(); ++c) {
    const size_t end = c + 1 < cuts_.size() ? cuts_[c + 1] : round_.records.size();
    std::inplace_merge(begin, begin + static_cast<std::ptrdiff_t>(cuts_[c]),
                       begin + static_cast<std::ptrdiff_t>(end),
                       [](const RecordRef& a, const RecordRef& b) { return a.time < b.time; });
  }
  if (!round_.wakings.empty()) sink_.on_wakings(round_.wakings);
  // The builder resolves what the records point into before they are released.
  if (round_.fed || !round_.records.empty()) sink_.on_records(round_.records);
  for (Source* s : asked) s->release();
  return round_.records.size();
}

void Driver::run() {
  while (std::find(ended_.begin(), ended_.end(), false) != ended_.end()) round();
}

}  // namespace fxprof::driver
