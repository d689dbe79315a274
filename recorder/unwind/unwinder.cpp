// The stack walk (design in unwinder.h): process mappings, the rule cache and unwind().
#include "recorder/unwind/unwinder.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/fd.h"
#include "recorder/unwind/module.h"

namespace fxprof::recorder {

using unw::Module;
using unw::Rule;

namespace {

// struct ucontext: uc_flags, uc_link, uc_stack (24 bytes), then mcontext gregs (REG_R8=0 .. REG_R15=7,
// REG_RBP=10, REG_RBX=11, REG_RSP=15, REG_RIP=16).
constexpr uint64_t kUcGregs = 40;
constexpr uint64_t kUcReg[unw::kRegCount] = {
    kUcGregs + 11 * 8, kUcGregs + 10 * 8, kUcGregs + 15 * 8, kUcGregs + 4 * 8,   // bx, bp, sp, r12
    kUcGregs + 5 * 8,  kUcGregs + 6 * 8,  kUcGregs + 7 * 8,  kUcGregs + 16 * 8,  // r13, r14, r15, ip
};

// The result of one pass of the walk (see unwind()).
enum class Pass { Done, NeedFull };

constexpr uint64_t kScanWords = 512;                       // the return-address scan reads up to 4 KiB
constexpr uint64_t kMaxFrameDistance = uint64_t{8} << 20;  // a frame pointer this far above SP: garbage

struct MapEntry {
  uint64_t start, end;
  uint64_t bias;  // avma - svma
  Module* module;
};

struct Process {
  std::vector<MapEntry> maps;  // sorted by start, non-overlapping
  const MapEntry* find(uint64_t addr) const {
    auto it = std::upper_bound(maps.begin(), maps.end(), addr,
                               [](uint64_t a, const MapEntry& e) { return a < e.start; });
    if (it == maps.begin()) return nullptr;
    --it;
    return addr < it->end ? &*it : nullptr;
  }
};

// x86-64 call instructions end where a return address points: E8 rel32, or FF /2 (call r/m64) of 2 to 7
// bytes (register, [reg], disp8, SIB, disp32, rip-relative; with or without a REX prefix). Loose on
// purpose: it only has to reject most data that happens to point into code.
bool follows_call(const uint8_t* before, size_t n) {
  if (n >= 5 && before[n - 5] == 0xE8) return true;
  for (size_t k : {2, 3, 4, 6, 7})
    if (n >= k && before[n - k] == 0xFF && ((before[n - k + 1] >> 3) & 7) == 2) return true;
  return false;
}

}  // namespace

bool is_anonymous_code(std::string_view path) {
  return path == kAnonymousCode || (!path.empty() && path[0] != '/' && path != "[vdso]");
}

struct Unwinder::Impl {
  // 4096 sets of two (key, rule) slots, each set one cache line. The key packs the looked-up svma (48 bits),
  // the module id (15 bits) and whether the address is exact (bit 63).
  static constexpr size_t kSetBits = 12;
  struct Slot {
    uint64_t key = ~uint64_t{0};
    Rule rule;
  };
  struct alignas(64) Set {
    Slot s[2];
  };
  static_assert(sizeof(Set) == 64);

  Rule uncached;
  unw::StopCounts anon_stops;  // stacks that stopped in code outside any file mapping
  std::map<std::string, unw::StopCounts> evicted_stops;  // of modules evicted (evict_unmapped), by path
  Binaries binaries;  // shared with the profile builder (Unwinder::binaries)
  std::unordered_map<std::string, std::unique_ptr<Module>> modules;  // key: path + binary
  std::unordered_map<uint32_t, Process> procs;
  std::vector<Set> cache = std::vector<Set>(size_t{1} << kSetBits);
  UnwindStats stats;
  uint32_t next_module_id = 1;
  std::vector<uint32_t> free_module_ids;  // of evicted modules, their rules gone from the cache
  elf::LocatorOptions locator;

  // One module per binary of the table (binaries.h: a rebuilt file is a new binary) and name it is mapped by.
  Module* module_for(std::string_view path, std::string_view open_path, const Binary* binary) {
    const Binary& b = binary ? *binary : binaries.get(std::string(open_path.empty() ? path : open_path));
    std::string key(path);
    key += '\0' + std::to_string(reinterpret_cast<uintptr_t>(&b));
    auto& slot = modules[key];
    if (slot) return slot.get();
    slot = std::make_unique<Module>();
    Module& m = *slot;
    if (free_module_ids.empty()) {
      m.id = next_module_id++;
    } else {
      m.id = free_module_ids.back();
      free_module_ids.pop_back();
    }
    m.locator = &locator;
    open_module(m, b);
    m.path = std::string(path);
    ++stats.modules;
    if (!m.ok) ++stats.modules_failed;
    return &m;
  }

  // Two-way set-associative: the most recently used entry of a set sits first. (Direct-mapped, a Python
  // recording with ~3,000 hot addresses re-evaluated ~7 % of its rules on every pass through conflicts.)
  // The rule stays valid until the next call (it lives in the cache, or in `uncached`).
  const Rule& rule_for(Module& m, uint64_t look, uint64_t ip_svma) {
    if (look >= (uint64_t{1} << 48) || m.id >= 0x7fff) {  // not representable in a key: not cached
      ++stats.cache_misses;
      uncached = compute_rule(m, look, ip_svma, stats);
      return uncached;
    }
    uint64_t key = look | (uint64_t{m.id} << 48) | (look == ip_svma ? 0 : uint64_t{1} << 63);
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    Slot* set = cache[h >> (64 - kSetBits)].s;
    if (set[0].key == key) {
      ++stats.cache_hits;
      return set[0].rule;
    }
    if (set[1].key == key) {
      ++stats.cache_hits;
      std::swap(set[0], set[1]);
      return set[0].rule;
    }
    ++stats.cache_misses;
    set[1] = set[0];
    set[0] = Slot{key, compute_rule(m, look, ip_svma, stats)};
    return set[0].rule;
  }
};

Unwinder::Unwinder(elf::LocatorOptions locator) : impl_(std::make_unique<Impl>()) {
  impl_->locator = std::move(locator);
}
Unwinder::~Unwinder() = default;

const UnwindStats& Unwinder::stats() const { return impl_->stats; }
Binaries& Unwinder::binaries() { return impl_->binaries; }

std::vector<UnwindStop> Unwinder::stops() const {
  std::map<std::string, unw::StopCounts> by_path = impl_->evicted_stops;
  for (const auto& [key, m] : impl_->modules) {
    unw::StopCounts& c = by_path[m->path];
    c.truncated += m->stops.truncated;
    c.failed += m->stops.failed;
    c.corrupt += m->stops.corrupt;
  }
  std::vector<UnwindStop> out;
  for (const auto& [path, c] : by_path)
    if (c.truncated + c.failed > 0) out.push_back({path, c.truncated, c.failed, c.corrupt});
  if (impl_->anon_stops.truncated + impl_->anon_stops.failed > 0)
    out.push_back({"", impl_->anon_stops.truncated, impl_->anon_stops.failed});
  std::sort(out.begin(), out.end(), [](const UnwindStop& a, const UnwindStop& b) {
    return a.truncated + a.failed != b.truncated + b.failed ? a.truncated + a.failed > b.truncated + b.failed
                                                            : a.path < b.path;
  });
  return out;
}

size_t Unwinder::evict_unmapped(const std::function<bool(const Binary&)>& keep) {
  Impl& im = *impl_;
  std::unordered_set<const Module*> mapped;
  for (const auto& [pid, proc] : im.procs)
    for (const MapEntry& e : proc.maps)
      if (e.module) mapped.insert(e.module);
  std::unordered_set<const Binary*> read;  // by the modules that stay
  std::unordered_set<uint32_t> gone;       // the ids of those that go
  std::erase_if(im.modules, [&](const auto& entry) {
    const Module& m = *entry.second;
    if (mapped.count(&m)) {
      read.insert(m.binary);
      return false;
    }
    if (m.stops.truncated + m.stops.failed > 0) {  // for the post-recording line (stops())
      unw::StopCounts& c = im.evicted_stops[m.path];
      c.truncated += m.stops.truncated;
      c.failed += m.stops.failed;
      c.corrupt += m.stops.corrupt;
    }
    gone.insert(m.id);
    return true;
  });
  if (!gone.empty()) {
    // A rule cached for a gone module's id would be taken for the next module given that id.
    for (Impl::Set& set : im.cache)
      for (Impl::Slot& slot : set.s)
        if (gone.count(static_cast<uint32_t>(slot.key >> 48) & 0x7fff)) slot = Impl::Slot{};
    for (uint32_t id : gone)
      if (id < 0x7fff) im.free_module_ids.push_back(id);
  }
  return im.binaries.evict([&](const Binary& b) { return read.count(&b) > 0 || keep(b); });
}

void Unwinder::on_mmap(uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, std::string_view path,
                       uint32_t prot, std::string_view open_path, const Binary* binary) {
  if (len == 0 || path.empty()) return;
  uint64_t end = start + len;
  Process& proc = impl_->procs[pid];
  // A new mapping replaces whatever it overlaps (mmap over, or a re-map after munmap).
  std::vector<MapEntry> kept;
  kept.reserve(proc.maps.size() + 2);
  for (const MapEntry& e : proc.maps) {
    if (e.end <= start || e.start >= end) {
      kept.push_back(e);
      continue;
    }
    if (e.start < start) kept.push_back({e.start, start, e.bias, e.module});
    if (e.end > end) kept.push_back({end, e.end, e.bias, e.module});
  }
  if (is_anonymous_code(path)) {
    kept.push_back({start, end, 0, nullptr});  // JIT code: known code, no file, no CFI
  } else {
    Module* m = impl_->module_for(path, open_path, binary);
    // avma - svma, with the segment the kernel mapped here (elf::Identity::mapping_svma: lld layouts share
    // a file page between the read-only and the code segment).
    auto svma = m->identity.mapping_svma(pgoff, prot);
    uint64_t bias = svma ? start - *svma : start - pgoff;
    kept.push_back({start, end, bias, m});
  }
  std::sort(kept.begin(), kept.end(), [](const MapEntry& a, const MapEntry& b) { return a.start < b.start; });
  proc.maps = std::move(kept);
}

void Unwinder::on_fork(uint32_t parent_pid, uint32_t child_pid) {
  if (parent_pid == child_pid) return;
  auto it = impl_->procs.find(parent_pid);
  if (it != impl_->procs.end())
    impl_->procs[child_pid] = it->second;
  else
    impl_->procs.erase(child_pid);
}

void Unwinder::on_exec(uint32_t pid) { impl_->procs.erase(pid); }
void Unwinder::on_exit(uint32_t pid) { impl_->procs.erase(pid); }

std::vector<MapsEntry> executable_mappings(std::string_view maps) {
  std::vector<MapsEntry> out;
  std::string line;
  while (!maps.empty()) {
    const size_t nl = maps.find('\n');
    line.assign(maps.substr(0, nl));
    maps = nl == std::string_view::npos ? std::string_view{} : maps.substr(nl + 1);
    // start-end perms offset major:minor inode path
    unsigned long long start, end, off, ino = 0;
    unsigned maj = 0, min = 0;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj, &min,
                    &ino, &path_at) < 7)
      continue;
    if (perms[2] != 'x' || path_at <= 0) continue;
    MapsEntry e{start, end, off, 0, makedev(maj, min), ino, {}};
    e.prot = PROT_EXEC | (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0);
    e.path = static_cast<size_t>(path_at) < line.size() ? line.substr(static_cast<size_t>(path_at))
                                                        : std::string(kAnonymousCode);  // JIT code
    if (e.path.ends_with(" (deleted)")) e.path.resize(e.path.size() - 10);
    out.push_back(std::move(e));
  }
  return out;
}

Status Unwinder::load_proc_maps(uint32_t pid) {
  auto text = read_file("/proc/" + std::to_string(pid) + "/maps");
  if (!text.ok()) return std::move(text).take_error();
  for (const MapsEntry& e : executable_mappings(text.value()))
    if (e.path[0] == '/' || e.path == "[vdso]")
      on_mmap(pid, e.start, e.end - e.start, e.offset, e.path, e.prot);
  return {};
}

std::optional<uint64_t> Unwinder::tail_called(uint32_t pid, uint64_t ra, uint64_t callee) {
  auto pit = impl_->procs.find(pid);
  const MapEntry* e = pit == impl_->procs.end() ? nullptr : pit->second.find(ra);
  if (!e || !e->module || !e->module->ok) return std::nullopt;
  Module& m = *e->module;
  const uint64_t ra_svma = ra - e->bias;
  const uint8_t* call = m.bytes_at(ra_svma - 5, 5);
  if (!call || call[0] != 0xE8) return std::nullopt;
  int32_t rel = 0;
  std::memcpy(&rel, call + 1, 4);
  const uint64_t target = ra_svma + static_cast<uint64_t>(static_cast<int64_t>(rel));
  elf::Fde fde;
  if (elf::find_eh_fde(m, target, fde) != elf::FdeLookup::Found && !elf::find_debug_fde(m, target, fde))
    return std::nullopt;
  if (fde.pc_begin != target) return std::nullopt;  // not a function's entry: no call of ours
  // A PLT stub (`jmp *GOT`, after an endbr64, maybe bnd-prefixed) jumps to a function elsewhere by design.
  if (const uint8_t* code = m.bytes_at(target, 7)) {
    const size_t k = code[0] == 0xF3 && code[1] == 0x0F && code[2] == 0x1E && code[3] == 0xFA ? 4 : 0;
    const size_t j = code[k] == 0xF2 ? k + 1 : k;
    if (j + 1 < 7 && code[j] == 0xFF && code[j + 1] == 0x25) return std::nullopt;
  }
  const uint64_t entry = target + e->bias;
  if (callee >= entry && callee - entry < fde.pc_end - fde.pc_begin) return std::nullopt;  // a plain call
  return entry;
}

// Long because it is one walk: a switch over the rule kinds inside the frame loop, instantiated twice (the
// fast and the full pass); the cases share the registers, the stack copy's reads and the end's accounting,
// and this is the recording's hot path, kept in one function the compiler sees whole.
UnwindResult Unwinder::unwind(uint32_t pid, const UserRegs& regs, std::span<const std::byte> stack,
                              std::span<uint64_t> out) {
  Impl& im = *impl_;
  UnwindStats& stats = im.stats;
  ++stats.stacks;
  UnwindResult res;
  Module* at_module = nullptr;              // the binary of the frame being stepped (null: no file mapping)
  bool used_fp = false, used_scan = false;  // this stack needed the heuristics (code without CFI)
  auto finish = [&](UnwindEnd end) {
    res.end = end;
    res.heuristic = used_fp || used_scan;
    stats.fp_stacks += used_fp;
    stats.scanned_stacks += used_scan;
    if (end != UnwindEnd::Complete) {
      auto& counts = at_module ? at_module->stops : im.anon_stops;
      ++(end == UnwindEnd::Truncated ? counts.truncated : counts.failed);
    }
    stats.frames += res.count;
    switch (end) {
      case UnwindEnd::Complete:
        ++stats.complete;
        break;
      case UnwindEnd::Truncated:
        ++stats.truncated;
        break;
      case UnwindEnd::Failed:
        ++stats.failed;
        break;
    }
    return res;
  };
  if (out.empty()) return finish(UnwindEnd::Truncated);
  auto done = [&](UnwindEnd end) {
    finish(end);
    return Pass::Done;
  };
  const uint64_t stack_lo = regs.sp;
  const uint64_t stack_size = stack.size();
  // Reads 8 bytes of the stack copy; false when outside it.
  auto read = [&](uint64_t addr, uint64_t& v) {
    uint64_t off = addr - stack_lo;
    if (addr < stack_lo || off > stack_size || stack_size - off < 8) return false;
    std::memcpy(&v, stack.data() + off, 8);
    return true;
  };
  // Below the copy is garbage; past its end we cannot tell (Truncated).
  auto read_fail = [&](uint64_t addr) { return addr < stack_lo ? UnwindEnd::Failed : UnwindEnd::Truncated; };

  auto pit = im.procs.find(pid);
  const Process* proc = pit == im.procs.end() ? nullptr : &pit->second;
  using unw::kBp, unw::kIp, unw::kSp, unw::kSaved;
  // Two passes: the fast one tracks SP, BP and IP only (what nearly every stack needs: one or two reads a
  // frame); a frame whose CFA or BP comes from another register sends the stack to the full pass, which
  // restores every callee-saved register (up to six more reads a frame, 1.5-2x the time on python3).
  // Known code: an address inside an executable mapping of the process (file or anonymous).
  auto is_code = [&](uint64_t a) { return proc && proc->find(a) != nullptr; };
  // The return-address scan: the first word of the copy from `from` upward (at most kScanWords) that
  // points into known code, and for code in a readable file right after a call instruction. JIT code
  // cannot be read from here, so any address into it counts. A word found at A gives IP = [A], SP = A + 8.
  auto scan = [&](uint64_t from, uint64_t& ip_out, uint64_t& sp_out) {
    for (uint64_t a = (from + 7) & ~uint64_t{7}, n = 0; n < kScanWords; a += 8, ++n) {
      uint64_t v = 0;
      if (!read(a, v)) return false;
      const MapEntry* e = proc ? proc->find(v) : nullptr;
      if (!e) continue;
      if (e->module && e->module->ok) {
        const uint64_t svma = v - e->bias;
        const uint8_t* code = nullptr;
        size_t n_before = 7;
        for (; n_before >= 2 && !(code = e->module->bytes_at(svma - n_before, n_before)); --n_before) {
        }
        if (!code || !follows_call(code, n_before)) continue;
      }
      ip_out = v;
      sp_out = a + 8;
      return true;
    }
    return false;
  };
  auto walk = [&]<bool full>(std::bool_constant<full>) -> Pass {
    res.count = 0;
    used_fp = used_scan = false;
    uint64_t r[unw::kRegCount] = {regs.bx, regs.bp, regs.sp, regs.r12, regs.r13, regs.r14, regs.r15, regs.ip};
    bool exact = true;  // ip is not a return address (first frame, or interrupted by a signal)
    out[res.count++] = r[kIp];
    for (;;) {
      if (res.count >= out.size()) return done(UnwindEnd::Truncated);
      const uint64_t ip = r[kIp], sp = r[kSp];
      const MapEntry* me = proc ? proc->find(ip) : nullptr;
      at_module = me ? me->module : nullptr;
      static constexpr Rule kFramePointer{Rule::FramePointer};
      const Rule& rule =
          me && me->module && me->module->ok
              ? im.rule_for(*me->module, exact ? ip - me->bias : ip - me->bias - 1, ip - me->bias)
              : kFramePointer;
      // Registers are updated in place (the common case: no copy); a rule taking a register from another
      // register reads the callee's values from a copy.
      uint64_t new_ip = 0, new_sp = 0;
      switch (rule.kind) {
        case Rule::End:
          return done(UnwindEnd::Complete);
        case Rule::Corrupt:
          ++me->module->stops.corrupt;  // named in the post-recording line and the profile's meta
          return done(UnwindEnd::Failed);
        case Rule::SigReturn: {
          // The kernel saved every register in the ucontext on the stack.
          for (size_t i = 0; i < unw::kRegCount; ++i)
            if ((full || i == kBp || i == kSp || i == kIp) && !read(sp + kUcReg[i], r[i]))
              return done(read_fail(sp + kUcReg[i]));
          ++stats.signal_frames;
          if (r[kIp] == 0) return done(UnwindEnd::Complete);
          out[res.count++] = r[kIp];
          exact = true;
          continue;
        }
        case Rule::Cfa: {
          if (!full && rule.cfa_reg != kSp && rule.cfa_reg != kBp) return Pass::NeedFull;
          const uint64_t cfa = r[rule.cfa_reg] + static_cast<uint64_t>(static_cast<int64_t>(rule.cfa_off));
          const uint64_t ra_at = cfa + static_cast<uint64_t>(static_cast<int64_t>(rule.ra_off));
          if (!read(ra_at, new_ip)) return done(read_fail(ra_at));
          if constexpr (!full) {
            switch (rule.how_of(1)) {  // kSaved[1] is BP
              case Rule::Same:
                break;
              case Rule::AtCfa: {
                const uint64_t at = cfa + static_cast<uint64_t>(static_cast<int64_t>(rule.off[1]));
                if (at >= sp && !read(at, r[kBp])) return done(read_fail(at));
                break;
              }
              case Rule::ValCfa:
                r[kBp] = cfa + static_cast<uint64_t>(static_cast<int64_t>(rule.off[1]));
                break;
              case Rule::FromReg:
                return Pass::NeedFull;
            }
          } else if (rule.how != 0) {
            uint64_t callee[unw::kRegCount];
            if (rule.how & (rule.how >> 1) & 0x555) std::memcpy(callee, r, sizeof r);  // a FromReg rule
            for (unsigned h = rule.how; h != 0;) {
              const unsigned i = static_cast<unsigned>(__builtin_ctz(h)) / 2;
              h &= ~(3u << (2 * i));
              const uint64_t off = static_cast<uint64_t>(static_cast<int64_t>(rule.off[i]));
              switch (rule.how_of(i)) {
                case Rule::Same:
                  break;
                case Rule::AtCfa:
                  // A slot below SP was already popped in an epilogue (GCC does not emit DW_CFA_restore
                  // there): the register then holds the caller's value already.
                  if (cfa + off >= sp && !read(cfa + off, r[kSaved[i]])) return done(read_fail(cfa + off));
                  break;
                case Rule::ValCfa:
                  r[kSaved[i]] = cfa + off;
                  break;
                case Rule::FromReg:
                  r[kSaved[i]] = callee[off & 7];
                  break;
              }
            }
          }
          new_sp = cfa;
          break;
        }
        case Rule::RaInRegister:
          // The return address is in a register no sample has (glibc's vfork keeps it in RDI across the
          // system call, in the parent that waits and the child that starts there): the first return
          // address from SP up is taken: after vfork's `push %rdi` the right one; before it the caller's own
          // return address, which skips the caller's frame. Heuristic, like JIT code's.
          if (!scan(sp, new_ip, new_sp)) return done(UnwindEnd::Failed);
          ++stats.scanned_frames;
          used_scan = true;
          break;
        case Rule::FramePointer:
        case Rule::Invalid: {
          // Code without usable CFI. The frame-pointer rule (CFA = BP+16, return address at BP+8, the
          // caller's BP at BP), taken when BP is an aligned address above SP and the return address is
          // known code. A BP beyond the copy but within a stack's reach means the copy was too short.
          const uint64_t bp = r[kBp];
          const bool plausible = bp >= sp && bp % 8 == 0 && bp - sp < kMaxFrameDistance;
          uint64_t ra = 0, caller_bp = 0;
          const bool readable = plausible && read(bp + 8, ra) && read(bp, caller_bp);
          if (readable && ra == 0) return done(UnwindEnd::Complete);  // the chain's end
          if (readable && is_code(ra)) {
            new_ip = ra;
            r[kBp] = caller_bp;
            new_sp = bp + 16;
            ++stats.fp_frames;
            used_fp = true;
            break;
          }
          if (plausible && bp + 16 > stack_lo + stack_size) return done(UnwindEnd::Truncated);
          // Code outside any file (JIT code, trampolines) has no CFI anywhere: scan for the return address.
          // Code in a file is not scanned: its walk fails and the report names the binary and the remedy.
          if (!at_module && scan(sp, new_ip, new_sp)) {
            ++stats.scanned_frames;
            used_scan = true;
            break;
          }
          return done(bp == 0 ? UnwindEnd::Complete : UnwindEnd::Failed);
        }
      }
      if (new_ip == 0) return done(UnwindEnd::Complete);
      if (new_sp <= sp) return done(UnwindEnd::Failed);  // no progress: a loop or garbage
      out[res.count++] = new_ip;
      r[kIp] = new_ip;
      r[kSp] = new_sp;
      exact = false;
    }
  };
  if (walk(std::false_type{}) == Pass::NeedFull) walk(std::true_type{});
  return res;
}

}  // namespace fxprof::recorder
