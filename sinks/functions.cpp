#include "sinks/functions.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "model/symbols.h"

namespace fxprof::sinks {

OffCpuFrames::OffCpuFrames(const model::Profile& profile) : profile_(profile) {
  kinds_.resize(profile.frames.size(), OnCpu);
  for (size_t i = 0; i < kinds_.size(); ++i) {
    const model::Frame& f = profile.frames.get(static_cast<model::FrameId>(i));
    if (f.kind != model::FrameKind::Label || f.category != model::Category::Idle) continue;
    const bool preempted = f.name != model::kNoString && profile.strings.get(f.name) == "[preempted]";
    kinds_[i] = preempted ? Preempted : Blocked;
  }
}

std::string_view OffCpuFrames::reason(model::StackId stack) const {
  if (kind(stack) == OnCpu) return {};
  const model::Frame& f = profile_.frames.get(profile_.stacks.frame(stack));
  std::string_view name = f.name != model::kNoString ? profile_.strings.get(f.name) : "[blocked]";
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  return name;
}

std::string WallTime::format() const {
  std::string out;
  char buf[32];
  for (const auto& [reason, n] : off_cpu) {
    std::snprintf(buf, sizeof buf, " %.1f%%",
                  samples ? 100.0 * static_cast<double>(n) / static_cast<double>(samples) : 0.0);
    out += (out.empty() ? "" : ", ") + reason + buf;
  }
  return out.empty() ? out : out + " of wall time";
}

WallTime wall_time(const model::Profile& profile, const OffCpuFrames& off,
                   const std::function<bool(size_t, size_t)>& select) {
  WallTime w;
  std::unordered_map<std::string_view, uint64_t> reasons;
  for (size_t pi = 0; pi < profile.processes.size(); ++pi)
    for (size_t ti = 0; ti < profile.processes[pi].threads.size(); ++ti) {
      if (select && !select(pi, ti)) continue;
      for (const model::Sample& s : profile.processes[pi].threads[ti].samples) {
        if (s.stack == model::kNoStack) continue;
        ++w.samples;
        if (off.kind(s.stack) == OffCpuFrames::OnCpu)
          ++w.on_cpu;
        else
          ++reasons[off.reason(s.stack)];
      }
    }
  for (const auto& [reason, n] : reasons) w.off_cpu.emplace_back(std::string(reason), n);
  std::sort(w.off_cpu.begin(), w.off_cpu.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  return w;
}

FunctionTable::FunctionTable(const model::Profile& profile, size_t only_process) : profile_(profile) {
  process_libs_.resize(profile.processes.size());
  for (size_t i = 0; i < profile.processes.size(); ++i) {
    if (only_process != SIZE_MAX && i != only_process) continue;
    ProcessLibs& pl = process_libs_[i];
    pl.sorted = model::disjoint_libs(profile.processes[i]);  // as the Gecko writer lists them
    for (const model::Lib* l : pl.sorted) pl.lib_index.push_back(lib_id(l->name, l->path, l->code_id));
  }
}

int32_t FunctionTable::lib_id(const std::string& name, const std::string& path, const std::string& code_id) {
  auto [it, inserted] = lib_ids_.try_emplace(path + '\0' + code_id, static_cast<int32_t>(libs_.size()));
  if (inserted) libs_.push_back({name, path, code_id});
  return it->second;
}

const model::Lib* FunctionTable::lib_at(size_t process, uint64_t address) const {
  if (process >= process_libs_.size()) return nullptr;
  const auto& v = process_libs_[process].sorted;
  auto it = std::upper_bound(v.begin(), v.end(), address, [](uint64_t a, auto* l) { return a < l->start; });
  if (it == v.begin()) return nullptr;
  --it;
  return address < (*it)->end ? *it : nullptr;
}

FunctionId FunctionTable::intern(Function f) {
  std::string key;
  key.reserve(f.name.size() + f.file.size() + 2);
  key += static_cast<char>('0' + static_cast<int>(f.kind));
  key += f.name;
  key += '\0';
  key += f.file;
  auto [it, inserted] = index_.try_emplace(std::move(key), static_cast<FunctionId>(functions_.size()));
  if (inserted) {
    if (f.system_name.empty()) f.system_name = f.name;
    functions_.push_back(std::move(f));
  }
  return it->second;
}

FunctionId FunctionTable::label(std::string_view name) {
  Function f;
  f.name = std::string(name);
  f.kind = FunctionKind::Label;
  return intern(std::move(f));
}

void FunctionTable::resolve(size_t process, model::FrameId id, std::vector<FrameLine>& out) {
  const model::Frame& fr = profile_.frames.get(id);
  Function f;
  char buf[64];
  switch (fr.kind) {
    case model::FrameKind::Kernel:
      f.kind = FunctionKind::Kernel;
      if (fr.name != model::kNoString) {
        f.name = std::string(profile_.strings.get(fr.name));
      } else {
        std::snprintf(buf, sizeof buf, "[kernel] 0x%" PRIx64, fr.address);
        f.name = buf;
      }
      break;
    case model::FrameKind::Label:
      f.kind = FunctionKind::Label;
      f.name = fr.name != model::kNoString ? std::string(profile_.strings.get(fr.name)) : "(unknown)";
      break;
    case model::FrameKind::Native: {
      f.kind = FunctionKind::User;
      if (fr.binary != model::kNoBinary) {
        // Symbolicated on the model (or left unresolved in a known binary): the address is binary-relative.
        const model::Binary& b = profile_.binaries[fr.binary];
        f.lib = lib_id(b.name, b.path, b.code_id);
        if (fr.name != model::kNoString) {
          f.name = std::string(profile_.strings.get(fr.name));
          if (fr.file != model::kNoString) f.file = std::string(profile_.strings.get(fr.file));
        } else {
          std::snprintf(buf, sizeof buf, "+0x%" PRIx64, fr.address);
          f.name = b.name + buf;
        }
        out.push_back({intern(std::move(f)), fr.line, fr.inline_depth > 0});
        return;
      }
      const model::Lib* l = lib_at(process, fr.address);
      if (fr.name != model::kNoString) {
        f.name = std::string(profile_.strings.get(fr.name));
      } else if (l) {
        std::snprintf(buf, sizeof buf, "+0x%" PRIx64, fr.address - (l->start - l->offset));
        f.name = l->name + buf;
      } else {
        std::snprintf(buf, sizeof buf, "0x%" PRIx64, fr.address);
        f.name = buf;
      }
      if (l) {
        const auto& pl = process_libs_[process];
        auto pos = std::find(pl.sorted.begin(), pl.sorted.end(), l) - pl.sorted.begin();
        f.lib = pl.lib_index[static_cast<size_t>(pos)];
      }
      break;
    }
  }
  out.push_back({intern(std::move(f)), 0, false});
}

std::span<const FrameLine> FunctionTable::lines(size_t process, model::FrameId f) {
  // Only unsymbolicated native frames depend on the process (their library names them).
  const model::Frame& fr = profile_.frames.get(f);
  const bool per_process =
      fr.kind == model::FrameKind::Native && fr.name == model::kNoString && fr.binary == model::kNoBinary;
  const uint64_t key = (per_process ? (static_cast<uint64_t>(process) + 1) << 32 : 0) | f;
  auto it = chains_.find(key);
  if (it == chains_.end()) {
    scratch_.clear();
    resolve(process, f, scratch_);
    auto start = static_cast<uint32_t>(lines_.size());
    lines_.insert(lines_.end(), scratch_.begin(), scratch_.end());
    it = chains_.emplace(key, std::make_pair(start, static_cast<uint32_t>(scratch_.size()))).first;
  }
  return {lines_.data() + it->second.first, it->second.second};
}

}  // namespace fxprof::sinks
