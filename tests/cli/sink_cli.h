// Shared by the export, report and diff command tests: recording the known program (tests/programs/exports)
// into a self-contained profile, and reading a Gecko profile's call paths back for comparison.
#pragma once

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "tests/support/support.h"

namespace fxprof::test {

// Records `exp_work FACTOR` into `path` with symbols baked in (or raw addresses, which the sink commands then
// symbolicate on the model with inline depths); fails the test if recording fails.
// `freq`: -F (default 1000 a second; the gate's tests sample more, so that its sampling error is small).
inline void record_exp_work(const std::string& path, const std::string& factor = "1", bool baked = true,
                            const std::string& freq = "1000") {
  // --cpu-only: the sinks' shares are compared with CPU work (a loaded machine would add [preempted] time).
  auto r =
      run({fxprof_bin(), "record", "--cpu-only", "--save-only", baked ? "--symbolicate" : "--no-symbolicate",
           "-F", freq, "-o", path, "--", test_program("exp_work"), factor});
  INFO(r.err);
  REQUIRE(r.status == 0);
}

// "func (in lib)" -> "func": what the sinks call a frame.
inline std::string strip_lib(std::string_view location) {
  size_t at = location.rfind(" (in ");
  return std::string(at == std::string::npos ? location : location.substr(0, at));
}

// Unresolved addresses are spelled differently by the Gecko writer ("0x7f..", "0xbe1 (in [vdso])") and the
// sinks ("[vdso]+0xbe1"): both become "?" for comparisons.
inline std::string normalize_frame(std::string_view name) {
  if (name.starts_with("0x")) return "?";
  size_t plus = name.rfind("+0x");
  if (plus != std::string_view::npos &&
      name.find_first_not_of("0123456789abcdef", plus + 3) == std::string_view::npos)
    return "?";
  return std::string(name);
}

// The Gecko profile's own call paths, root first, joined by ';', with their sample counts: the folded form
// computed independently of the exporter, straight from the JSON (top-level and child-process threads).
inline std::map<std::string, uint64_t> gecko_call_paths(const std::string& file, uint64_t* total = nullptr) {
  simdjson::dom::parser parser;
  std::string text = read_profile_text(file);
  auto doc = parse_json(parser, text);
  std::map<std::string, uint64_t> out;
  uint64_t sum = 0;
  auto add_threads = [&](simdjson::dom::array threads) {
    for (auto th : threads) {
      std::vector<std::string> strings;
      for (auto s : th["stringTable"].get_array()) strings.emplace_back(std::string_view(s));
      std::vector<std::string> frame_names;
      for (auto f : th["frameTable"]["data"].get_array())
        frame_names.push_back(normalize_frame(strip_lib(strings[uint64_t(f.at(0))])));
      std::vector<std::string> stack_paths;
      for (auto s : th["stackTable"]["data"].get_array()) {
        auto prefix = s.at(0);
        std::string name = frame_names[uint64_t(s.at(1))];
        stack_paths.push_back(prefix.is_null() ? name : stack_paths[uint64_t(prefix)] + ";" + name);
      }
      for (auto sample : th["samples"]["data"].get_array()) {
        if (sample.at(0).is_null()) continue;
        ++out[stack_paths[uint64_t(sample.at(0))]];
        ++sum;
      }
    }
  };
  add_threads(doc["threads"].get_array());
  for (auto proc : doc["processes"].get_array()) add_threads(proc["threads"].get_array());
  if (total) *total = sum;
  return out;
}

}  // namespace fxprof::test
