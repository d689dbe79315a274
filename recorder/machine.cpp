#include "recorder/machine.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <charconv>
#include <set>
#include <utility>

namespace fxprof::recorder {
namespace {

// The value of a "key<tabs>: value" line of /proc/cpuinfo or "Key: value" of /proc/meminfo.
std::string_view value_of(std::string_view line) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return {};
  std::string_view v = line.substr(colon + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  return v;
}

std::string_view key_of(std::string_view line) {
  std::string_view k = line.substr(0, line.find(':'));
  while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.remove_suffix(1);
  return k;
}

uint64_t number(std::string_view v) {
  uint64_t n = 0;
  std::from_chars(v.data(), v.data() + v.size(), n);
  return n;
}

template <typename F>
void each_line(std::string_view text, F f) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    f(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
  }
}

}  // namespace

void describe_machine(std::string_view cpuinfo, std::string_view meminfo, model::Meta& meta) {
  model::Meta::Machine& m = meta.machine;
  // Logical CPUs are "processor" entries; physical cores the distinct (physical id, core id) pairs (absent
  // on some architectures and VMs: then unknown, not guessed).
  std::set<std::pair<uint64_t, uint64_t>> cores;
  uint64_t package = 0;
  uint32_t logical = 0;
  each_line(cpuinfo, [&](std::string_view line) {
    const std::string_view k = key_of(line);
    if (k == "processor") ++logical;
    if (k == "physical id") package = number(value_of(line));
    if (k == "core id") cores.emplace(package, number(value_of(line)));
    if (m.cpu_name.empty() && (k == "model name" || k == "Model" || k == "cpu model"))
      m.cpu_name = std::string(value_of(line));
  });
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  m.logical_cpus = online > 0 ? static_cast<uint32_t>(online) : logical;
  m.physical_cpus = static_cast<uint32_t>(cores.size());
  each_line(meminfo, [&](std::string_view line) {
    if (key_of(line) == "MemTotal") m.main_memory = number(value_of(line)) * 1024;  // "kB"
  });
  struct utsname un;
  if (uname(&un) == 0)
    meta.oscpu =
        std::string(un.sysname) + " " + un.release + " " + un.machine;  // "Linux 6.1.0-18-amd64 x86_64"
}

}  // namespace fxprof::recorder
