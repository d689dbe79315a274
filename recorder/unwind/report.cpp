// The post-recording line about incomplete stacks (design in report.h).
#include "recorder/unwind/report.h"

#include <algorithm>
#include <cstdio>

#include "base/path.h"

namespace fxprof::recorder {

namespace {
constexpr uint64_t kMinSamples = 20;
constexpr size_t kMaxBinaries = 3;

std::string binary_name(const std::string& path) {
  if (path.empty()) return "code outside any file (JIT, anonymous memory)";
  return std::string(base_name(path));
}
}  // namespace

std::string incomplete_stacks_warning(std::span<const ThreadStacks> threads,
                                      std::span<const UnwindStop> stops, uint32_t stack_size) {
  const ThreadStacks* worst = nullptr;
  size_t over = 0;
  for (const ThreadStacks& t : threads) {
    if (t.samples < kMinSamples || t.incomplete * 20 <= t.samples) continue;  // <= 5 %
    ++over;
    if (!worst || t.incomplete * worst->samples > worst->incomplete * t.samples) worst = &t;
  }
  if (!worst) return "";
  char share[32];
  std::snprintf(share, sizeof share, "%.0f%%",
                100.0 * static_cast<double>(worst->incomplete) / static_cast<double>(worst->samples));
  std::string line = std::string(share) + " of the stacks of thread " + std::to_string(worst->tid) + " (" +
                     worst->name + ")";
  if (over > 1) line += " and " + std::to_string(over - 1) + " other thread" + (over > 2 ? "s" : "");
  line += " are incomplete";
  uint64_t truncated = 0, failed = 0;
  std::string where, corrupt;
  for (size_t i = 0; i < stops.size(); ++i) {
    truncated += stops[i].truncated;
    failed += stops[i].failed - stops[i].corrupt;
    if (stops[i].corrupt > 0) corrupt += (corrupt.empty() ? "" : ", ") + binary_name(stops[i].path);
    if (i >= kMaxBinaries) continue;
    where += (where.empty() ? "" : ", ") + binary_name(stops[i].path) + " (" +
             std::to_string(stops[i].truncated + stops[i].failed) +
             (stops[i].corrupt > 0 ? ", corrupt .eh_frame" : "") + ")";
  }
  if (!where.empty()) line += "; unwinding stopped in " + where;
  std::string remedy;
  if (!corrupt.empty())
    remedy = "the unwind tables (.eh_frame) of " + corrupt +
             " could not be parsed: the file is damaged, rebuild or reinstall it";
  if (failed > 0)
    remedy += std::string(remedy.empty() ? "" : "; ") +
              "build with unwind tables (missing .eh_frame: -fasynchronous-unwind-tables) or record with "
              "--call-graph fp if the code keeps frame pointers";
  if (truncated > 0)
    remedy += std::string(remedy.empty() ? "" : "; ") + "raise --stack-size (now " +
              std::to_string(stack_size) + " bytes, at most 65528) for deeper stacks";
  if (!remedy.empty()) line += ". Likely remedy: " + remedy;
  return line;
}

}  // namespace fxprof::recorder
