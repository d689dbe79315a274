// The structural lint of a Gecko profile: the rules of ../shared/docs/firefox-profiler-format.md that the
// Firefox Profiler's importer does not check itself (and that hang or blank it when broken).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/support.h"

namespace fxprof::test {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

struct Linter {
  std::vector<std::string> problems;
  void fail(const std::string& where, const std::string& what) { problems.push_back(where + ": " + what); }

  bool get_obj(element e, const char* key, object& out, const std::string& where) {
    if (e[key].get_object().get(out)) {
      fail(where, std::string("missing object '") + key + "'");
      return false;
    }
    return true;
  }
  bool get_arr(element e, const char* key, array& out, const std::string& where) {
    if (e[key].get_array().get(out)) {
      fail(where, std::string("missing array '") + key + "'");
      return false;
    }
    return true;
  }
  // Column index of `col` in a {schema, data} table, or -1.
  static int64_t column(element table, const char* col) {
    int64_t idx = -1;
    if (table["schema"][col].get_int64().get(idx)) return -1;
    return idx;
  }
  static bool is_null_or_number(element e) { return e.is_null() || e.is_number(); }
  static double num(element e) {
    double d = 0;
    if (e.is_int64()) return static_cast<double>(int64_t(e));
    if (e.is_uint64()) return static_cast<double>(uint64_t(e));
    if (e.get_double().get(d)) return std::nan("");
    return d;
  }

  void lint_meta(element meta, const std::string& where, size_t& n_categories) {
    int64_t version = 0;
    if (meta["version"].get_int64().get(version) || version != 36) fail(where, "meta.version is not 36");
    array a;
    if (meta["markerSchema"].get_array().get(a)) fail(where, "meta.markerSchema is not an array");
    if (!meta["preprocessedProfileVersion"].error()) fail(where, "meta has preprocessedProfileVersion");
    double start = 0;
    if (meta["startTime"].get_double().get(start)) fail(where, "meta.startTime is not a number");
    array cats;
    if (meta["categories"].get_array().get(cats)) {
      fail(where, "meta.categories missing");
      return;
    }
    n_categories = cats.size();
    bool grey = false;
    for (element c : cats) {
      std::string_view color;
      if (!c["color"].get_string().get(color) && color == "grey") grey = true;
      array sub;
      if (c["subcategories"].get_array().get(sub) || sub.size() == 0)
        fail(where, "category without subcategories");
    }
    if (!grey) fail(where, "no grey category");
  }

  void lint_libs(element proc, const std::string& where) {
    array libs;
    if (!get_arr(proc, "libs", libs, where)) return;
    double prev_end = -1, prev_start = -1;
    for (element l : libs) {
      double start = num(l["start"]), end = num(l["end"]);
      if (!(end > start)) fail(where, "lib with end <= start");
      if (start < prev_start) fail(where, "libs not sorted by start");
      if (start < prev_end) fail(where, "libs overlap");
      if (end > 9007199254740992.0) fail(where, "lib address above 2^53");
      prev_start = start;
      prev_end = end;
      double offset = 0;
      if (l["offset"].get_double().get(offset) && !l["offset"].is_int64() && !l["offset"].is_uint64())
        fail(where, "lib offset not a number");
      std::string_view id, name;
      if (l["breakpadId"].get_string().get(id)) fail(where, "lib without breakpadId");
      if (!id.empty()) {
        bool hex = id.size() == 33;
        for (char c : id) hex = hex && ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'));
        if (!hex) fail(where, "breakpadId is not 33 uppercase hex chars: " + std::string(id));
      }
      if (l["debugName"].get_string().get(name)) fail(where, "lib without debugName");
      if (l["name"].get_string().get(name)) fail(where, "lib without name");
    }
  }

  void lint_thread(element t, const std::string& where, size_t n_categories) {
    std::string_view name;
    if (t["name"].get_string().get(name)) fail(where, "thread without name");
    // pid: a number (older fxprof wrote "1234.1" for a later process that reused a pid).
    if ((!t["pid"].is_number() && !t["pid"].is_string()) || !t["tid"].is_number())
      fail(where, "pid/tid type");
    if (!t["registerTime"].is_number()) fail(where, "registerTime not a number");
    element unreg;
    if (t["unregisterTime"].get(unreg) || !is_null_or_number(unreg)) fail(where, "unregisterTime missing");
    array strings;
    if (!get_arr(t, "stringTable", strings, where)) return;
    for (element s : strings)
      if (!s.is_string()) fail(where, "non-string in stringTable");
    const size_t n_strings = strings.size();

    element frames, stacks, samples, markers;
    array frame_rows, stack_rows, sample_rows, marker_rows;
    if (t["frameTable"].get(frames) || frames["data"].get_array().get(frame_rows))
      return fail(where, "frameTable missing");
    if (t["stackTable"].get(stacks) || stacks["data"].get_array().get(stack_rows))
      return fail(where, "stackTable missing");
    if (t["samples"].get(samples) || samples["data"].get_array().get(sample_rows))
      return fail(where, "samples missing");
    if (t["markers"].get(markers) || markers["data"].get_array().get(marker_rows))
      return fail(where, "markers missing");

    int64_t loc = column(frames, "location"), cat = column(frames, "category");
    if (loc < 0) fail(where, "frameTable has no location column");
    for (element row : frame_rows) {
      int64_t s = -1;
      if (row.at(size_t(loc)).get_int64().get(s) || s < 0 || size_t(s) >= n_strings)
        fail(where, "frame location is not a string index");
      if (cat >= 0) {
        element c = row.at(size_t(cat));
        if (!c.is_null() && (!c.is_int64() || int64_t(c) < 0 || size_t(int64_t(c)) >= n_categories))
          fail(where, "frame category out of range");
      }
    }
    int64_t prefix = column(stacks, "prefix"), frame = column(stacks, "frame");
    if (prefix < 0 || frame < 0) fail(where, "stackTable schema lacks prefix/frame");
    size_t i = 0;
    for (element row : stack_rows) {
      element p = row.at(size_t(prefix));
      if (!p.is_null()) {
        int64_t pi = -1;
        if (p.get_int64().get(pi) || pi < 0 || size_t(pi) >= i)
          fail(where, "stack prefix not before its stack");
      }
      int64_t fi = -1;
      if (row.at(size_t(frame)).get_int64().get(fi) || fi < 0 || size_t(fi) >= frame_rows.size())
        fail(where, "stack frame out of range");
      ++i;
      if (problems.size() > 50) return;
    }
    int64_t st = column(samples, "stack"), tm = column(samples, "time"),
            cpu = column(samples, "threadCPUDelta");
    if (column(samples, "eventDelay") < 0 && column(samples, "responsiveness") < 0)
      fail(where, "samples lack eventDelay/responsiveness");
    if (st < 0 || tm < 0) return fail(where, "samples schema lacks stack/time");
    double prev = -1e300;
    for (element row : sample_rows) {
      element s = row.at(size_t(st));
      if (!s.is_null()) {
        int64_t si = -1;
        if (s.get_int64().get(si) || si < 0 || size_t(si) >= stack_rows.size())
          fail(where, "sample stack out of range");
      }
      double time = num(row.at(size_t(tm)));
      if (time < prev) fail(where, "sample times not sorted");
      prev = time;
      if (cpu >= 0) {
        element c = row.at(size_t(cpu));
        if (!c.is_null() && num(c) < 0) fail(where, "negative threadCPUDelta");
      }
      if (problems.size() > 50) return;
    }
    for (element row : marker_rows) {
      int64_t ni = -1;
      if (row.at(0).get_int64().get(ni) || ni < 0 || size_t(ni) >= n_strings)
        fail(where, "marker name index");
      if (row.at(1).is_null() && row.at(2).is_null()) fail(where, "marker with no times");
    }
  }

  void lint_process(element proc, const std::string& where, bool top) {
    element meta;
    if (proc["meta"].get(meta)) return fail(where, "no meta");
    size_t n_categories = 0;
    lint_meta(meta, where, n_categories);
    lint_libs(proc, where);
    array threads;
    if (!get_arr(proc, "threads", threads, where)) return;
    size_t i = 0;
    for (element t : threads) lint_thread(t, where + ".threads[" + std::to_string(i++) + "]", n_categories);
    array procs;
    if (top) {
      if (!get_arr(proc, "processes", procs, where)) return;
      size_t k = 0;
      for (element p : procs) lint_process(p, "processes[" + std::to_string(k++) + "]", false);
    } else if (!proc["processes"].get_array().get(procs) && procs.size() != 0) {
      fail(where, "nested processes (the importer reads one level only)");
    }
  }
};

}  // namespace

std::vector<std::string> lint_gecko_profile(const std::string& json_text) {
  Linter l;
  simdjson::dom::parser parser;
  element doc;
  if (auto err = parser.parse(json_text).get(doc)) {
    l.fail("profile", std::string("invalid JSON: ") + simdjson::error_message(err));
    return l.problems;
  }
  if (!doc.is_object()) {
    l.fail("profile", "not an object");
    return l.problems;
  }
  l.lint_process(doc, "top", true);
  return l.problems;
}

}  // namespace fxprof::test
