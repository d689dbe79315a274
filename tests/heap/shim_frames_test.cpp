// The heap shim's frame (recorder/own_frames.h): fxprof's own work in the program (the sampling's stack walk
// and pipe write) is under `fxprof heap shim`; the allocator the shim calls stays the program's.
#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"

namespace fxprof::test {
namespace {

// Every sample's frame locations ("name (in lib)", names baked in), leaf first, over all threads.
std::vector<std::vector<std::string>> sample_paths(const std::string& text) {
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, text);
  std::vector<std::vector<std::string>> out;
  auto add = [&](simdjson::dom::element proc) {
    for (simdjson::dom::element th : simdjson::dom::array(proc["threads"])) {
      simdjson::dom::array stacks = th["stackTable"]["data"], frames = th["frameTable"]["data"],
                           strings = th["stringTable"];
      for (simdjson::dom::element smp : simdjson::dom::array(th["samples"]["data"])) {
        std::vector<std::string>& path = out.emplace_back();
        for (auto st = simdjson::dom::array(smp).at(0); !st.is_null();) {
          auto row = stacks.at(size_t(int64_t(st)));
          path.emplace_back(
              std::string_view(strings.at(size_t(int64_t(frames.at(size_t(int64_t(row.at(1)))).at(0))))));
          st = row.at(0);
        }
      }
    }
  };
  add(doc);
  for (simdjson::dom::element p : simdjson::dom::array(doc["processes"])) add(p);
  return out;
}

bool in_shim(const std::string& frame) { return frame.ends_with("(in libfxprof_heap.so)"); }
bool in_libc(const std::string& frame) { return frame.ends_with("(in libc.so.6)"); }

// `heap_prog churn N` recorded with `heap_mode` and names baked in: its samples' paths; `err` gets fxprof's
// stderr.
std::vector<std::vector<std::string>> churn_paths(const std::string& n, const std::string& heap_mode,
                                                  std::string& err) {
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  auto r = record(out, {test_program("heap_prog"), "churn", n}, {heap_mode, "--symbolicate"});
  err = r.err;
  INFO(r.err);
  REQUIRE(r.status == 0);
  return sample_paths(read_profile_text(out));
}

TEST_CASE("heap full: the shim's own work is under a frame of its own and out of the top functions",
          "[heap]") {
  // A stack walk and a pipe write per allocation: enough of the shim's work to be sampled.
  std::string err;
  const auto paths = churn_paths("60000", "--heap=full", err);
  INFO(err);
  size_t samples = 0, marked = 0, unmarked_unwinder = 0, entry_under_label = 0;
  std::set<std::string> other_under_label;
  for (const std::vector<std::string>& path : paths) {
    ++samples;
    auto label = std::find(path.begin(), path.end(), "fxprof heap shim");
    if (label != path.end()) {
      ++marked;
      // Right under the label (toward the leaf): one of the shim's entry points, an allocator function or
      // what flushes its buffers when a thread or the process ends (under load the flush waits on the
      // full pipe, and wall-clock samples fall there).
      static constexpr std::string_view kEntries[] = {
          "malloc",   "free",   "operator",  "calloc",         "realloc", "posix_memalign", "aligned_alloc",
          "memalign", "valloc", "shim_fini", "on_thread_exit", "_exit",   "_Exit"};
      std::string_view entry = label != path.begin() ? std::string_view(label[-1]) : std::string_view();
      if (entry.starts_with("(anonymous namespace)::")) entry.remove_prefix(23);
      if (std::any_of(std::begin(kEntries), std::end(kEntries),
                      [&](std::string_view e) { return !entry.empty() && entry.starts_with(e); }))
        ++entry_under_label;
      else
        other_under_label.insert(label == path.begin() ? "(none)" : label[-1]);
      continue;
    }
    // libunwind runs only for the shim: none of its frames outside the label.
    for (const std::string& f : path)
      if (f.starts_with("_ULx86_64_") || f.starts_with("unw_") || f.starts_with("_Ux86_64_")) {
        ++unmarked_unwinder;
        break;
      }
  }
  INFO(samples << " samples, " << marked << " under the label (" << entry_under_label
               << " right over a shim entry), " << unmarked_unwinder << " unwinder samples outside it");
  std::string others;
  for (const std::string& f : other_under_label) others += " [" + f + "]";
  INFO("right under the label otherwise:" << others);
  CHECK(marked > 0);
  CHECK(entry_under_label * 10 >= marked * 9);
  CHECK(unmarked_unwinder == 0);
  // The top-functions line is the program's: it says what it left out, and names no shim code.
  const size_t at = err.find("fxprof: top self: ");
  REQUIRE(at != std::string::npos);
  const std::string line = err.substr(at, err.find('\n', at) - at);
  CHECK(line.find("% of samples in fxprof's heap shim left out)") != std::string::npos);
  CHECK(line.find("_ULx86_64_") == std::string::npos);
  CHECK(line.find("fxprof heap shim") == std::string::npos);
}

TEST_CASE("heap sampled: glibc's malloc work under the shim's entry is the program's, not the shim's",
          "[heap]") {
  // Millions of 64-byte blocks, one stack walk per 512 KiB: the time is glibc's malloc and free, called by
  // the shim's entries (issue 38.5: 48 of 93 samples under the label were that).
  std::string err;
  const auto paths = churn_paths("4000000", "--heap", err);
  INFO(err);
  size_t allocator_under_label = 0, allocator_outside = 0, marked = 0;
  for (const std::vector<std::string>& path : paths) {
    const auto label = std::find(path.begin(), path.end(), "fxprof heap shim");
    if (label != path.end()) {
      ++marked;
      // Leaf first: label[-1] is the shim's entry, label[-2] what it called.
      if (label - path.begin() >= 2 && in_libc(label[-2])) ++allocator_under_label;
      continue;
    }
    for (size_t i = 1; i < path.size(); ++i)
      if (in_shim(path[i]) && in_libc(path[i - 1])) {
        ++allocator_outside;
        break;
      }
  }
  INFO(marked << " samples under the label, " << allocator_under_label << " of them in glibc's allocator; "
              << allocator_outside << " allocator samples outside it");
  CHECK(allocator_under_label == 0);
  CHECK(allocator_outside > 0);
}

}  // namespace
}  // namespace fxprof::test
