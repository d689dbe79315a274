// fxprof gecko, the Gecko reader: a thread, member by member, and its local tables interned into the
// model once it has been read.
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "gecko/gecko.h"
#include "gecko/gecko_reader_internal.h"

namespace fxprof::gecko::internal {

// ---- threads ----

// A thread, member by member: its samples table in batches of rows (the largest part of a profile),
// every other member as a piece of its own.
bool Reader::thread() {
  if (js_.peek() != '{') return skip();
  model::Thread t;
  ThreadTables tt;
  std::string process_name;
  bool synthetic = false;  // made from the recorded threads (gecko.h, kSyntheticKey): no samples of the model
  bool ok = members([&](std::string_view k) {
    if ((k == "stackTable" || k == "frameTable" || k == "markers") && columns_table()) {
      info_.processed = true;  // members() stops here: the caller refuses or serves the file as it is
      return true;
    }
    if (k == "samples") return samples(t, tt);
    if (k == "markers") return markers(t, tt);
    if (k == "stackTable") return stacks(tt);
    if (k == kSyntheticKey)
      return element([&](od::value f) {
        if (f.get_bool().get(synthetic)) synthetic = false;
        return true;
      });
    if (k != "name" && k != "processName" && k != "pid" && k != "tid" && k != "registerTime" &&
        k != "unregisterTime" && k != "frameTable" && k != "stringTable")
      return skip();
    return element([&](od::value f) { return thread_field(k, f, t, tt, process_name); });
  });
  if (!ok) return false;
  if (info_.processed) return true;  // a processed-format table: the rest is not read
  model::Process& proc = p_.processes[cur_];
  // A process that exec'd later: its main thread is "NAME (before exec)" (gecko.h, kBeforeExec).
  t.is_main = t.name == "GeckoMain" ||
              (!process_name.empty() && t.name.size() == process_name.size() + kBeforeExec.size() &&
               t.name.starts_with(process_name) && t.name.ends_with(kBeforeExec));
  if (t.is_main) t.name = process_name;
  // "NAME (tid N)": a thread named like its process (gecko.h, kTidSuffix), written with its tid.
  const std::string suffix = std::string(kTidSuffix) + std::to_string(t.tid) + ")";
  if (!t.is_main && t.name.size() > suffix.size() && t.name.ends_with(suffix))
    t.name.resize(t.name.size() - suffix.size());
  if (proc.name.empty()) proc.name = process_name;
  if (!finish_thread(proc, t, tt)) return false;
  if (!synthetic)
    proc.threads.push_back(std::move(t));
  else if (info_.keep_tracks)
    info_.tracks.emplace_back(cur_, std::move(t));
  return true;
}

bool Reader::columns_table() {
  if (js_.peek() != '{' || !js_.prefetch(256)) return false;
  std::string_view s = js_.buffered().substr(1);
  while (!s.empty() && (s[0] == ' ' || s[0] == '\n' || s[0] == '\r' || s[0] == '\t')) s.remove_prefix(1);
  if (s.empty() || s[0] != '"') return false;  // '}' (empty) or an error the reader will say
  const size_t close = s.find('"', 1);
  if (close == std::string_view::npos) return false;  // a key longer than 256 bytes: neither of these
  const std::string_view key = s.substr(1, close - 1);
  return key != "schema" && key != "data";
}

bool Reader::thread_field(std::string_view k, od::value f, model::Thread& t, ThreadTables& tt,
                          std::string& process_name) {
  model::Process& proc = p_.processes[cur_];
  if (k == "name") return string(f, t.name);
  if (k == "processName") return string(f, process_name);
  if (k == "pid") {
    od::json_type ty;
    if (auto e = f.type().get(ty)) return set(e);
    if (ty == od::json_type::string) {  // "1234.1": a later process with a reused pid (older fxprof)
      std::string s;
      if (!string(f, s)) return false;
      uint32_t pid = 0;
      std::from_chars(s.data(), s.data() + s.size(), pid);
      proc.pid = pid;
      return true;
    }
    uint64_t pid = 0;
    if (!u64(f, pid)) return false;
    proc.pid = static_cast<uint32_t>(pid);
    return true;
  }
  if (k == "tid") {
    uint64_t tid = 0;
    if (!u64(f, tid)) return false;
    t.tid = static_cast<uint32_t>(tid);
    return true;
  }
  if (k == "registerTime") {
    double ms = 0;
    if (!number(f, ms, 0)) return false;
    t.start_ns = rel(ms);
    return true;
  }
  if (k == "unregisterTime") {
    double ms = 0;
    if (!number(f, ms)) return false;
    if (!std::isnan(ms)) t.end_ns = rel(ms);
    return true;
  }
  if (k == "frameTable") return read_frames(f, tt);
  if (k == "stringTable") {
    return elements(f, [&](od::value s) {
      tt.strings.emplace_back();
      return string(s, tt.strings.back());
    });
  }
  return true;
}

bool Reader::finish_thread(const model::Process& proc, model::Thread& t, ThreadTables& tt) {
  std::vector<model::FrameId> frames;
  frames.reserve(tt.frames.size());
  for (const LocalFrame& lf : tt.frames) {
    if (lf.location < 0 || static_cast<size_t>(lf.location) >= tt.strings.size())
      return bad("a frame's location is not a string index");
    frames.push_back(make_frame(proc, tt, lf));
  }
  std::vector<model::StackId> stacks;
  stacks.reserve(tt.stacks.size());
  // The model's table grows by at most this thread's stacks: a thread that may grow it by half or more
  // reserves them once, rather than doubling (a --heap=full profile's million stacks: the copy while
  // doubling was the reader's peak); small threads let it double (no reallocation per thread).
  if (tt.stacks.size() >= p_.stacks.size() / 2) p_.stacks.reserve(p_.stacks.size() + tt.stacks.size());
  for (size_t i = 0; i < tt.stacks.size(); ++i) {
    auto [prefix, frame] = tt.stacks[i];
    // A forward prefix hangs the front end; refuse it rather than carry it on.
    if (prefix >= static_cast<int64_t>(i)) return bad("the stack table is not in topological order");
    if (frame < 0 || static_cast<size_t>(frame) >= frames.size())
      return bad("a stack's frame index is out of range");
    stacks.push_back(p_.stacks.intern(prefix < 0 ? model::kNoStack : stacks[static_cast<size_t>(prefix)],
                                      frames[static_cast<size_t>(frame)]));
  }
  for (model::Sample& s : t.samples) {
    if (s.stack == model::kNoStack) continue;
    if (s.stack >= stacks.size()) return bad("a sample's stack index is out of range");
    s.stack = stacks[s.stack];
  }
  for (size_t i = 0; i < t.markers.size(); ++i) {
    model::StackId& ms = t.markers[i].stack;
    if (ms != model::kNoStack) ms = ms < stacks.size() ? stacks[ms] : model::kNoStack;
    int64_t n = tt.marker_names[i];
    if (n >= 0 && static_cast<size_t>(n) < tt.strings.size())
      t.markers[i].name = p_.strings.intern(tt.strings[static_cast<size_t>(n)]);
  }
  for (model::Allocation& a : t.allocations)
    if (a.stack != model::kNoStack) a.stack = a.stack < stacks.size() ? stacks[a.stack] : model::kNoStack;
  return true;
}

}  // namespace fxprof::gecko::internal
