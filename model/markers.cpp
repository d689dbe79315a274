// Program markers: schemas, intervals, the samples inside them (model/markers.h).
#include "model/markers.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>

namespace fxprof::model {

namespace {

bool is_interval(const Marker& m) { return m.phase == MarkerPhase::Interval && m.end_ns >= m.start_ns; }

std::string field_label(std::string_view key) {
  std::string label(key);
  if (!label.empty() && label[0] >= 'a' && label[0] <= 'z')
    label[0] = static_cast<char>(label[0] - 'a' + 'A');
  return label;
}

}  // namespace

void add_program_marker_schemas(Profile& p) {
  // The recorder's own schema names, which a program marker's must not take.
  std::map<std::string, bool, std::less<>> recorder_names;
  for (const MarkerSchema& s : p.meta.marker_schemas) recorder_names[s.name] = true;
  struct Kind {
    std::vector<std::pair<std::string, std::string>> fields;  // key, format: in first-seen order
    StringId type = kNoString;
  };
  std::map<StringId, Kind> kinds;  // by marker name
  for (Process& proc : p.processes)
    for (Thread& t : proc.threads)
      for (Marker& m : t.markers) {
        if (!m.program || m.name == kNoString) continue;
        Kind& k = kinds[m.name];
        for (const MarkerField& f : m.fields) {
          std::string key(p.strings.get(f.key));
          const bool decimal = !f.is_string && f.number != std::floor(f.number);
          const std::string format = f.is_string ? "string" : decimal ? "decimal" : "integer";
          auto it =
              std::find_if(k.fields.begin(), k.fields.end(), [&](const auto& x) { return x.first == key; });
          if (it == k.fields.end())
            k.fields.emplace_back(std::move(key), format);
          else if (it->second == "integer" && format == "decimal")
            it->second = format;
        }
        if (k.type == kNoString) {
          std::string type(p.strings.get(m.name));
          if (m.type != kNoString)
            type = p.strings.get(m.type);  // read back: keep its schema's name
          else if (recorder_names.count(type))
            type += " (program)";
          k.type = p.strings.intern(type);
        }
        m.type = k.type;
      }
  for (auto& [name, k] : kinds) {
    MarkerSchema s;
    s.name = p.strings.get(k.type);
    s.display = {"marker-chart", "marker-table", "timeline-overview"};
    std::string label = "{marker.name}";
    for (const auto& [key, format] : k.fields) {
      s.fields.push_back({key, field_label(key), format});
      if (key != kMarkerCategoryKey && s.fields.size() <= 3)
        label += " " + key + "={marker.data." + key + "}";
    }
    s.table_label = label;
    s.tooltip_label = "{marker.name}";
    auto same = [&](const MarkerSchema& x) { return x.name == s.name; };
    std::erase_if(p.meta.marker_schemas, same);
    p.meta.marker_schemas.push_back(std::move(s));
  }
}

std::vector<MarkerInterval> program_intervals(const Thread& t, StringId name) {
  std::vector<MarkerInterval> out;
  for (const Marker& m : t.markers)
    if (m.program && is_interval(m) && (name == kNoString || m.name == name))
      out.push_back({m.start_ns, m.end_ns, m.name});
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  return out;
}

std::vector<StringId> innermost_marker_of_samples(const Thread& t) {
  std::vector<StringId> out(t.samples.size(), kNoString);
  const std::vector<MarkerInterval> spans = program_intervals(t);
  if (spans.empty()) return out;
  std::vector<size_t> order(t.samples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return t.samples[a].time_ns < t.samples[b].time_ns; });
  std::vector<const MarkerInterval*> open;  // started, in start order
  size_t next = 0;
  for (size_t i : order) {
    const uint64_t time = t.samples[i].time_ns;
    while (next < spans.size() && spans[next].start_ns <= time) open.push_back(&spans[next++]);
    std::erase_if(open, [&](const MarkerInterval* s) { return s->end_ns < time; });
    if (!open.empty()) out[i] = open.back()->name;
  }
  return out;
}

std::vector<bool> samples_inside(const Thread& t, StringId name) {
  const std::vector<MarkerInterval> spans = program_intervals(t, name);
  std::vector<bool> inside(t.samples.size(), false);
  if (spans.empty()) return inside;
  // The latest end of the intervals starting at or before each one: a sample is inside when the last
  // interval starting at or before it reaches it (nested and overlapping intervals count once).
  std::vector<uint64_t> reach(spans.size());
  for (size_t i = 0; i < spans.size(); ++i) reach[i] = std::max(spans[i].end_ns, i ? reach[i - 1] : 0);
  for (size_t i = 0; i < t.samples.size(); ++i) {
    const uint64_t time = t.samples[i].time_ns;
    auto it = std::upper_bound(spans.begin(), spans.end(), time,
                               [](uint64_t x, const MarkerInterval& m) { return x < m.start_ns; });
    inside[i] = it != spans.begin() && reach[static_cast<size_t>(it - spans.begin()) - 1] >= time;
  }
  return inside;
}

size_t keep_samples_in_marker(Profile& p, std::string_view name) {
  const StringId id = p.strings.intern(name);
  size_t intervals = 0;
  for (Process& proc : p.processes)
    for (Thread& t : proc.threads) {
      intervals += program_intervals(t, id).size();
      const std::vector<bool> inside = samples_inside(t, id);
      size_t kept = 0;
      for (size_t i = 0; i < t.samples.size(); ++i)
        if (inside[i]) t.samples[kept++] = t.samples[i];
      t.samples.resize(kept);
    }
  return intervals;
}

}  // namespace fxprof::model
