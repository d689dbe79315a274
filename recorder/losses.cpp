#include "recorder/losses.h"

namespace fxprof::recorder {

void LossTracker::on_lost(const LostRecord& l) {
  c_.counts.lost += l.lost;
  model::Profile& profile = c_.profile;
  if (!schema_) {
    schema_ = true;
    model::MarkerSchema s;
    s.name = "LostRecords";
    s.display = {"marker-chart", "marker-table", "timeline-overview"};
    s.chart_label = s.tooltip_label = s.table_label = "{marker.data.count} records lost";
    s.fields.push_back({"count", "Lost records", "integer"});
    profile.meta.marker_schemas.push_back(std::move(s));
  }
  if (type_ == model::kNoString) {
    name_ = profile.strings.intern("Lost records");
    type_ = profile.strings.intern("LostRecords");
    count_key_ = profile.strings.intern("count");
  }
  // On the thread that lost them, else on the first thread of the recording.
  model::Thread* th = l.tid != 0 ? c_.thread_of(l.tid) : nullptr;
  if (!th && !profile.processes.empty() && !profile.processes[0].threads.empty())
    th = &profile.processes[0].threads[0];
  if (!th) return;
  model::Marker m;
  m.name = name_;
  m.start_ns = l.time;
  m.phase = model::MarkerPhase::Instant;
  m.type = type_;
  m.fields.push_back({count_key_, false, static_cast<double>(l.lost), model::kNoString});
  th->markers.push_back(std::move(m));
}

}  // namespace fxprof::recorder
