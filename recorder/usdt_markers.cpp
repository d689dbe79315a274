// USDT requests and their hits as markers (usdt_markers.h).
#include "recorder/usdt_markers.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "model/markers.h"
#include "recorder/markers.h"

namespace fxprof::recorder {

namespace {

bool valid_name(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

Result<UsdtField> parse_field(std::string_view item) {
  UsdtField f;
  const size_t colon = item.rfind(':');
  if (colon != std::string_view::npos) {
    f.key = std::string(item.substr(0, colon));
    item = item.substr(colon + 1);
    // The payload's own keys: "type" is its schema's name.
    if (f.key.empty() || f.key == model::kMarkerCategoryKey || f.key == model::kProgramMarkerKey ||
        f.key == "type")
      return Err("'" + f.key + "' cannot be a field's key");
  }
  using K = UsdtField::Kind;
  if (item == "%d")
    f.kind = K::Signed;
  else if (item == "%u")
    f.kind = K::Unsigned;
  else if (item == "%x")
    f.kind = K::Hex;
  else if (item == "%s")
    f.kind = K::String;
  else if (item == "-")
    f.kind = K::Skip;
  else
    return Err("'" + std::string(item) + "' is not %d, %u, %x, %s or -");
  return f;
}

}  // namespace

Result<UsdtRequest> parse_usdt_request(std::string_view text) {
  const std::string whole(text);
  const size_t eq = text.find('=');
  std::string_view probe = text.substr(0, eq);
  const size_t colon = probe.find(':');
  UsdtRequest r;
  if (colon != std::string_view::npos) {
    r.provider = std::string(probe.substr(0, colon));
    r.name = std::string(probe.substr(colon + 1));
  }
  if (!valid_name(r.provider) || !valid_name(r.name))
    return Err("--usdt " + whole +
               ": PROVIDER:NAME[=FORMAT] expected (as `fxprof probes BINARY` lists them)");
  if (eq == std::string_view::npos) return r;
  r.formatted = true;
  std::string_view format = text.substr(eq + 1);
  size_t strings = 0;
  while (true) {
    const size_t comma = format.find(',');
    auto f = parse_field(format.substr(0, comma));
    if (!f) return Err("--usdt " + whole + ": FORMAT item " + f.error());
    strings += f->kind == UsdtField::Kind::String;
    r.format.push_back(std::move(*f));
    if (comma == std::string_view::npos) break;
    format = format.substr(comma + 1);
  }
  if (r.format.size() > kUsdtMaxArgs)
    return Err("--usdt " + whole + ": a probe has at most " + std::to_string(kUsdtMaxArgs) + " arguments");
  if (strings > kUsdtMaxStrings)
    return Err("--usdt " + whole + ": at most " + std::to_string(kUsdtMaxStrings) + " %s arguments a probe");
  return r;
}

uint32_t usdt_string_mask(const UsdtRequest& r) {
  uint32_t mask = 0;
  for (size_t i = 0; i < r.format.size(); ++i)
    if (r.format[i].kind == UsdtField::Kind::String) mask |= 1u << i;
  return mask;
}

std::optional<UsdtPairName> usdt_pair_name(std::string_view name) {
  static const struct {
    std::string_view begin, end;
  } kPairs[] = {{"__entry", "__return"}, {"start", "done"}};
  for (const auto& p : kPairs)
    for (const UsdtRole role : {UsdtRole::Begin, UsdtRole::End}) {
      const std::string_view suffix = role == UsdtRole::Begin ? p.begin : p.end;
      const std::string_view other = role == UsdtRole::Begin ? p.end : p.begin;
      if (name.size() <= suffix.size() || !name.ends_with(suffix)) continue;
      std::string base(name.substr(0, name.size() - suffix.size()));
      std::string partner = base + std::string(other);
      while (!base.empty() && base.back() == '_') base.pop_back();  // request__start: "request"
      if (base.empty()) continue;
      return UsdtPairName{role, std::move(partner), std::move(base)};
    }
  return std::nullopt;
}

namespace {

// The fields of a hit by its probe's format; `name` gets the `name` argument, when there is one.
void add_fields(model::Profile& p, const UsdtProbeUse& use, const UsdtHits& h, const UsdtHits::Hit& hit,
                std::vector<model::MarkerField>& fields, std::string& name) {
  const UsdtRequest& r = use.request;
  const size_t n = r.formatted ? std::min<size_t>(r.format.size(), hit.count) : hit.count;
  for (size_t i = 0; i < n; ++i) {
    const UsdtField f = r.formatted ? r.format[i] : UsdtField{};
    if (f.kind == UsdtField::Kind::Skip) continue;
    const int64_t v = h.args[hit.first + i];
    std::string text;
    if (f.kind == UsdtField::Kind::String) {
      text = static_cast<size_t>(v) < h.strings.size() ? h.strings[static_cast<size_t>(v)] : "";
    } else if (f.kind == UsdtField::Kind::Hex) {
      char buf[24];
      std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
      text = buf;
    }
    const bool is_string = f.kind == UsdtField::Kind::String || f.kind == UsdtField::Kind::Hex;
    if (f.key == "name") {
      name = is_string ? text : std::to_string(v);
      continue;
    }
    std::string key = f.key.empty() ? "arg" + std::to_string(i + 1) : f.key;
    if (f.key.empty() && use.role == UsdtRole::End) key = "end_" + key;
    model::MarkerField out;
    out.key = p.strings.intern(key);
    out.is_string = is_string;
    if (is_string)
      out.string = p.strings.intern(text);
    else
      out.number = f.kind == UsdtField::Kind::Unsigned ? static_cast<double>(static_cast<uint64_t>(v))
                                                       : static_cast<double>(v);
    fields.push_back(out);
  }
}

model::Marker program_marker(model::Profile& p, const UsdtProbeUse& use, std::string_view name) {
  model::Marker m;
  m.program = true;
  m.category = model::Category::User;
  m.name = p.strings.intern(name);
  model::MarkerField cat;
  cat.key = p.strings.intern(model::kMarkerCategoryKey);
  cat.is_string = true;
  cat.string = p.strings.intern(use.request.provider);
  m.fields.push_back(cat);
  return m;
}

}  // namespace

UsdtMarkerStats add_usdt_markers(model::Profile& p, const std::vector<UsdtProbeUse>& probes, UsdtHits& h) {
  UsdtMarkerStats st;
  st.per_probe.resize(probes.size());
  std::stable_sort(h.hits.begin(), h.hits.end(),
                   [](const UsdtHits::Hit& a, const UsdtHits::Hit& b) { return a.time < b.time; });
  // pid: whether recorded; pid and tid: the thread (the last of a reused pid).
  std::unordered_map<uint32_t, bool> procs;
  std::unordered_map<uint64_t, model::Thread*> threads;
  for (model::Process& proc : p.processes) {
    procs[proc.pid] = true;
    for (model::Thread& t : proc.threads) threads[uint64_t{proc.pid} << 32 | t.tid] = &t;
  }
  // Per thread and pair: the begins still open, innermost last.
  std::map<std::pair<model::Thread*, std::string>, std::vector<model::Marker>> open;
  for (const UsdtHits::Hit& hit : h.hits) {
    if (!procs.count(hit.pid) || hit.probe >= probes.size()) continue;  // another process running the binary
    ++st.hits;
    ++st.per_probe[hit.probe];
    const auto found = threads.find(uint64_t{hit.pid} << 32 | hit.tid);
    model::Thread* thread = found == threads.end() ? nullptr : found->second;
    if (!thread) {
      ++st.no_thread;
      continue;
    }
    const UsdtProbeUse& use = probes[hit.probe];
    std::vector<model::MarkerField> fields;
    std::string name;
    add_fields(p, use, h, hit, fields, name);
    auto emit = [&](model::Marker m) {
      if (st.markers >= kMaxProgramMarkers) {
        ++st.over_limit;
        return;
      }
      ++st.markers;
      thread->markers.push_back(std::move(m));
    };
    if (use.role == UsdtRole::Instant) {
      model::Marker m =
          program_marker(p, use, name.empty() ? use.request.provider + ":" + use.request.name : name);
      m.phase = model::MarkerPhase::Instant;
      m.start_ns = hit.time;
      m.fields.insert(m.fields.end(), fields.begin(), fields.end());
      emit(std::move(m));
      continue;
    }
    std::vector<model::Marker>& stack = open[{thread, use.pair}];
    if (use.role == UsdtRole::Begin) {
      model::Marker m = program_marker(p, use, name.empty() ? use.pair : name);
      m.phase = model::MarkerPhase::Interval;
      m.start_ns = hit.time;
      m.fields.insert(m.fields.end(), fields.begin(), fields.end());
      stack.push_back(std::move(m));
      continue;
    }
    if (stack.empty()) {
      ++st.unmatched;
      continue;
    }
    model::Marker m = std::move(stack.back());
    stack.pop_back();
    m.end_ns = hit.time;
    m.fields.insert(m.fields.end(), fields.begin(), fields.end());
    emit(std::move(m));
  }
  for (const auto& [key, stack] : open) st.unmatched += stack.size();
  if (st.markers > 0) model::add_program_marker_schemas(p);
  return st;
}

}  // namespace fxprof::recorder
