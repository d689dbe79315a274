#include "tests/recorder/unwind/capture.h"

#include <elf.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>

#include "recorder/perf.h"
#include "recorder/records.h"

namespace fxprof::unwind_test {

size_t Capture::samples() const {
  return static_cast<size_t>(std::count_if(records.begin(), records.end(),
                                           [](const Record& r) { return r.kind == Record::Sample; }));
}

namespace {

constexpr size_t kDataPages = 1024;  // 4 MiB per CPU: ~120 samples of 32 KiB between two drains

template <class T>
T at(std::span<const uint8_t> rec, size_t off) {
  T v{};
  if (off + sizeof(T) <= rec.size()) std::memcpy(&v, rec.data() + off, sizeof(T));
  return v;
}

// One record in the product's layout (recorder/perf.h make_attr: ip, tid, time, cpu, period, callchain,
// user registers, user stack).
void parse(std::span<const uint8_t> rec, Capture& cap, uint64_t seq_time_fallback) {
  perf_event_header h;
  std::memcpy(&h, rec.data(), sizeof h);
  Record r{};
  // sample_id_all trailer of non-sample records: {pid, tid}, {time}, {cpu, res}.
  uint64_t trailer_time = rec.size() >= 32 ? at<uint64_t>(rec, rec.size() - 16) : seq_time_fallback;
  switch (h.type) {
    case PERF_RECORD_MMAP2: {
      r.kind = Record::Mmap;
      r.pid = at<uint32_t>(rec, 8);
      r.tid = at<uint32_t>(rec, 12);
      r.start = at<uint64_t>(rec, 16);
      r.len = at<uint64_t>(rec, 24);
      r.pgoff = at<uint64_t>(rec, 32);
      uint32_t prot = at<uint32_t>(rec, 64);
      if (!(prot & PROT_EXEC) || rec.size() <= 72) return;
      const char* name = reinterpret_cast<const char*>(rec.data() + 72);
      r.path.assign(name, strnlen(name, rec.size() - 72));
      r.time = trailer_time;
      break;
    }
    case PERF_RECORD_COMM:
      if (!(h.misc & PERF_RECORD_MISC_COMM_EXEC)) return;
      r.kind = Record::Exec;
      r.pid = at<uint32_t>(rec, 8);
      r.tid = at<uint32_t>(rec, 12);
      if (r.pid != r.tid) return;
      r.time = trailer_time;
      break;
    case PERF_RECORD_FORK:
    case PERF_RECORD_EXIT:
      r.kind = h.type == PERF_RECORD_FORK ? Record::Fork : Record::Exit;
      r.pid = at<uint32_t>(rec, 8);
      r.ppid = at<uint32_t>(rec, 12);
      r.tid = at<uint32_t>(rec, 16);
      r.time = at<uint64_t>(rec, 24);
      if (r.pid == r.ppid) return;  // a thread
      break;
    case PERF_RECORD_LOST:
      cap.lost += at<uint64_t>(rec, 16);
      return;
    case PERF_RECORD_SAMPLE: {
      r.kind = Record::Sample;
      size_t off = 8;
      r.regs.ip = at<uint64_t>(rec, off);
      r.pid = at<uint32_t>(rec, off + 8);
      r.tid = at<uint32_t>(rec, off + 12);
      r.time = at<uint64_t>(rec, off + 16);
      off += 40;  // ip, pid/tid, time, cpu, period
      uint64_t nr = at<uint64_t>(rec, off);
      off += 8;
      for (uint64_t i = 0; i < nr && off + 8 <= rec.size(); ++i, off += 8) {
        uint64_t ip = at<uint64_t>(rec, off);
        if (ip < static_cast<uint64_t>(PERF_CONTEXT_MAX)) r.callchain.push_back(ip);
      }
      uint64_t abi = at<uint64_t>(rec, off);
      off += 8;
      if (abi != 0) {
        const size_t n = static_cast<size_t>(__builtin_popcountll(recorder::user_regs_mask()));
        uint64_t vals[64];
        for (size_t i = 0; i < n; ++i) vals[i] = at<uint64_t>(rec, off + 8 * i);
        r.regs = recorder::decode_user_regs(std::span<const uint64_t>(vals, n));
        off += 8 * n;
      }
      uint64_t size = at<uint64_t>(rec, off);
      off += 8;
      if (size != 0 && off + size + 8 <= rec.size()) {
        uint64_t dyn = std::min(at<uint64_t>(rec, off + size), size);
        const auto* p = reinterpret_cast<const std::byte*>(rec.data() + off);
        r.stack.assign(p, p + dyn);
      }
      if (abi == 0) return;  // no user registers (a kernel thread)
      break;
    }
    default:
      return;
  }
  cap.records.push_back(std::move(r));
}

// Every record the kernel wrote since the last call, through the recorder's own ring reading.
void drain(recorder::RingSet& rings, Capture& cap, std::vector<recorder::RecordRef>& refs) {
  refs.clear();
  rings.collect(refs, fxprof::driver::kEverything);
  for (const recorder::RecordRef& r : refs)
    parse({reinterpret_cast<const uint8_t*>(r.h), r.h->size}, cap,
          cap.records.empty() ? 0 : cap.records.back().time);
  rings.release();
}

}  // namespace

Result<Capture> capture_command(const std::vector<std::string>& argv, const CaptureOptions& options) {
  if (argv.empty()) return Err("capture_command: no command");
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) return Err("pipe: " + errno_text(errno));
  UniqueFd go_r(go[0]), go_w(go[1]);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t child = fork();
  if (child < 0) return Err("fork: " + errno_text(errno));
  if (child == 0) {
    char c;
    go_w.reset();
    if (read(go_r.get(), &c, 1) != 1) _exit(126);
    execv(args[0], args.data());
    _exit(127);
  }
  go_r.reset();
  auto fail = [&](std::string msg) -> Result<Capture> {
    kill(child, SIGKILL);
    int st;
    waitpid(child, &st, 0);
    return Err(std::move(msg));
  };

  // The recorder's own event (recorder/perf.h), user space only: DWARF registers and stack copy, no kernel
  // callchain, enabled at the exec.
  recorder::EventConfig events;
  events.dwarf = true;
  events.exclude_kernel = true;
  events.frequency = static_cast<uint64_t>(options.frequency_hz);
  events.stack_size = options.stack_size;
  events.regs_mask = recorder::user_regs_mask();
  events.enable_on_exec = true;
  perf_event_attr attr = recorder::make_attr(events);

  // Inherited events cannot share a per-task buffer: one event and ring per CPU.
  std::vector<UniqueFd> fds;
  recorder::RingSet rings{recorder::record_time};
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  for (long cpu = 0; cpu < ncpu; ++cpu) {
    int err = 0;
    UniqueFd fd = recorder::perf_event_open(attr, child, static_cast<int>(cpu), -1, err);
    if (!fd.valid()) {
      if (err == ENODEV || err == EINVAL) continue;  // offline CPU
      return fail("perf_event_open: " + errno_text(err));
    }
    auto rb = recorder::RingBuffer::map(fd.get(), kDataPages, kDataPages);
    if (!rb) return fail(rb.error());
    rings.add(std::move(*rb), false);
    fds.push_back(std::move(fd));
  }
  if (rings.size() == 0) return fail("perf_event_open: no CPU");

  Capture cap;
  cap.pid = static_cast<uint32_t>(child);
  if (write(go_w.get(), "g", 1) != 1) return fail("pipe write: " + errno_text(errno));
  go_w.reset();
  std::vector<recorder::RecordRef> refs;
  std::vector<pollfd> pfds;
  for (const UniqueFd& fd : fds) pfds.push_back({fd.get(), POLLIN, 0});
  for (;;) {
    poll(pfds.data(), pfds.size(), 5);
    drain(rings, cap, refs);
    int st = 0;
    pid_t w = waitpid(child, &st, WNOHANG);
    if (w == child) {
      drain(rings, cap, refs);
      cap.exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
  }
  std::stable_sort(cap.records.begin(), cap.records.end(),
                   [](const Record& a, const Record& b) { return a.time < b.time; });
  return cap;
}

Result<Capture> read_perf_data(const std::string& path) {
  auto f = map_file(path);
  if (!f.ok()) return std::move(f).take_error();
  auto bytes = f.value().bytes();
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size();
  auto u64 = [&](size_t off) {
    uint64_t v = 0;
    if (off + 8 <= n) std::memcpy(&v, b + off, 8);
    return v;
  };
  // perf_file_header: magic, size, attr_size, attrs{offset,size}, data{offset,size}, ...
  if (n < 104 || std::memcmp(b, "PERFILE2", 8) != 0) return Err(path + ": not a perf.data file");
  uint64_t attr_size = u64(16), attrs_off = u64(24), data_off = u64(40), data_size = u64(48);
  if (attr_size < 16 + 64 || attrs_off + attr_size > n || data_off + data_size > n)
    return Err(path + ": bad header");
  perf_event_attr attr{};
  std::memcpy(&attr, b + attrs_off, std::min<size_t>(sizeof attr, attr_size - 16));
  const uint64_t st = attr.sample_type;
  const uint64_t supported = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                             PERF_SAMPLE_ADDR | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU |
                             PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER |
                             PERF_SAMPLE_STACK_USER | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT;
  if ((st & ~supported) != 0 || !(st & PERF_SAMPLE_TIME) || !(st & PERF_SAMPLE_REGS_USER))
    return Err(path + ": unexpected sample_type");
  const uint64_t mask = attr.sample_regs_user;
  auto reg_index = [&](int bit) { return __builtin_popcountll(mask & ((uint64_t{1} << bit) - 1)); };
  const uint64_t our_mask = recorder::user_regs_mask();
  // Offset of `time` from the start of the sample_id_all trailer of non-sample records.
  size_t trailer = 0, time_in_trailer = 0;
  for (uint64_t bit : {PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ID, PERF_SAMPLE_STREAM_ID,
                       PERF_SAMPLE_CPU, PERF_SAMPLE_IDENTIFIER}) {
    if (!(st & bit)) continue;
    if (bit == PERF_SAMPLE_TIME) time_in_trailer = trailer;
    trailer += 8;
  }
  Capture cap;
  std::vector<uint8_t> rec;
  for (uint64_t pos = data_off; pos + 8 <= data_off + data_size;) {
    perf_event_header h;
    std::memcpy(&h, b + pos, sizeof h);
    if (h.size < sizeof h || pos + h.size > data_off + data_size) break;
    rec.assign(b + pos, b + pos + h.size);
    pos += h.size;
    if (h.type != PERF_RECORD_SAMPLE) {
      if (h.type >= PERF_RECORD_MAX) continue;  // perf's own records (finished round, ...)
      size_t before = cap.records.size();
      parse(rec, cap, 0);
      if (cap.records.size() > before && h.type != PERF_RECORD_FORK && h.type != PERF_RECORD_EXIT &&
          attr.sample_id_all && rec.size() >= trailer)
        cap.records.back().time = at<uint64_t>(rec, rec.size() - trailer + time_in_trailer);
      continue;
    }
    Record r{};
    r.kind = Record::Sample;
    size_t off = 8;
    if (st & PERF_SAMPLE_IDENTIFIER) off += 8;
    if (st & PERF_SAMPLE_IP) r.regs.ip = at<uint64_t>(rec, off), off += 8;
    if (st & PERF_SAMPLE_TID) r.pid = at<uint32_t>(rec, off), r.tid = at<uint32_t>(rec, off + 4), off += 8;
    if (st & PERF_SAMPLE_TIME) r.time = at<uint64_t>(rec, off), off += 8;
    for (uint64_t bit :
         {PERF_SAMPLE_ADDR, PERF_SAMPLE_ID, PERF_SAMPLE_STREAM_ID, PERF_SAMPLE_CPU, PERF_SAMPLE_PERIOD})
      if (st & bit) off += 8;
    if (st & PERF_SAMPLE_CALLCHAIN) off += 8 + 8 * at<uint64_t>(rec, off);
    uint64_t abi = at<uint64_t>(rec, off);
    off += 8;
    if (abi != 0) {
      uint64_t vals[64] = {};
      size_t k = 0;
      for (int bit = 0; bit < 64; ++bit)
        if (our_mask & (uint64_t{1} << bit))
          vals[k++] = at<uint64_t>(rec, off + 8 * static_cast<size_t>(reg_index(bit)));
      r.regs = recorder::decode_user_regs(std::span<const uint64_t>(vals, k));
      off += 8 * static_cast<size_t>(__builtin_popcountll(mask));
    }
    if (st & PERF_SAMPLE_STACK_USER) {
      uint64_t size = at<uint64_t>(rec, off);
      off += 8;
      if (size != 0 && off + size + 8 <= rec.size()) {
        uint64_t dyn = std::min(at<uint64_t>(rec, off + size), size);
        const auto* p = reinterpret_cast<const std::byte*>(rec.data() + off);
        r.stack.assign(p, p + dyn);
      }
    }
    if (abi != 0) cap.records.push_back(std::move(r));
  }
  std::stable_sort(cap.records.begin(), cap.records.end(),
                   [](const Record& a, const Record& c) { return a.time < c.time; });
  return cap;
}

// ---------------------------------------------------------------------------------------------------------
struct Symbolizer::Elf {
  MappedFile file;
  std::span<const uint8_t> img;
  struct Load {
    uint64_t off, vaddr, filesz;
  };
  std::vector<Load> loads;
  struct Sym {
    uint64_t addr, size;
    std::string name;
  };
  std::vector<Sym> syms;  // sorted by addr

  static std::span<const uint8_t> span_of(const MappedFile& f) {
    auto b = f.bytes();
    return {reinterpret_cast<const uint8_t*>(b.data()), b.size()};
  }
  // Reads symbols of `type` (SHT_SYMTAB/SHT_DYNSYM) from an image; returns the build ID too.
  static bool read_syms(std::span<const uint8_t> img, uint32_t type, std::vector<Sym>& out,
                        std::string* build_id, std::vector<Load>* loads) {
    if (img.size() < sizeof(Elf64_Ehdr)) return false;
    Elf64_Ehdr eh;
    std::memcpy(&eh, img.data(), sizeof eh);
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return false;
    if (loads) {
      for (size_t i = 0; i < eh.e_phnum; ++i) {
        Elf64_Phdr ph;
        if (eh.e_phoff + (i + 1) * sizeof ph > img.size()) break;
        std::memcpy(&ph, img.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
        if (ph.p_type == PT_LOAD) loads->push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz});
      }
    }
    if (eh.e_shoff == 0 || eh.e_shoff + eh.e_shnum * sizeof(Elf64_Shdr) > img.size()) return false;
    auto sh = [&](size_t i) {
      Elf64_Shdr s;
      std::memcpy(&s, img.data() + eh.e_shoff + i * sizeof s, sizeof s);
      return s;
    };
    bool found = false;
    for (size_t i = 0; i < eh.e_shnum; ++i) {
      Elf64_Shdr s = sh(i);
      if (build_id && s.sh_type == SHT_NOTE && s.sh_offset + s.sh_size <= img.size() && s.sh_size > 16) {
        uint32_t namesz, descsz, ntype;
        std::memcpy(&namesz, img.data() + s.sh_offset, 4);
        std::memcpy(&descsz, img.data() + s.sh_offset + 4, 4);
        std::memcpy(&ntype, img.data() + s.sh_offset + 8, 4);
        if (ntype == NT_GNU_BUILD_ID && namesz == 4 && 12 + 4 + descsz <= s.sh_size) {
          const uint8_t* d = img.data() + s.sh_offset + 16;
          static const char* hex = "0123456789abcdef";
          for (uint32_t k = 0; k < descsz; ++k) {
            *build_id += hex[d[k] >> 4];
            *build_id += hex[d[k] & 15];
          }
        }
      }
      if (s.sh_type != type || s.sh_link >= eh.e_shnum) continue;
      Elf64_Shdr strs = sh(s.sh_link);
      if (s.sh_offset + s.sh_size > img.size() || strs.sh_offset + strs.sh_size > img.size()) continue;
      const char* names = reinterpret_cast<const char*>(img.data() + strs.sh_offset);
      for (size_t k = 0; k + 1 <= s.sh_size / sizeof(Elf64_Sym); ++k) {
        Elf64_Sym sym;
        std::memcpy(&sym, img.data() + s.sh_offset + k * sizeof sym, sizeof sym);
        // Functions, and untyped labels in code (ld.so's _start).
        bool code_label = ELF64_ST_TYPE(sym.st_info) == STT_NOTYPE && sym.st_shndx != SHN_UNDEF &&
                          sym.st_shndx < eh.e_shnum && (sh(sym.st_shndx).sh_flags & SHF_EXECINSTR);
        if ((ELF64_ST_TYPE(sym.st_info) != STT_FUNC && !code_label) || sym.st_value == 0 ||
            sym.st_name >= strs.sh_size)
          continue;
        std::string name(names + sym.st_name, strnlen(names + sym.st_name, strs.sh_size - sym.st_name));
        if (name.starts_with("__GI_")) name.erase(0, 5);  // glibc's internal aliases
        out.push_back({sym.st_value, sym.st_size, std::move(name)});
        found = true;
      }
    }
    return found;
  }

  explicit Elf(const std::string& path) {
    if (path == "[vdso]") {
      auto base = getauxval(AT_SYSINFO_EHDR);
      if (!base) return;
      const auto* p = reinterpret_cast<const uint8_t*>(base);
      Elf64_Ehdr eh;
      std::memcpy(&eh, p, sizeof eh);
      img = {p, eh.e_shoff + size_t{eh.e_shnum} * eh.e_shentsize};
    } else {
      auto f = map_file(path);
      if (!f.ok()) return;
      file = std::move(f.value());
      img = span_of(file);
    }
    std::string build_id;
    if (!read_syms(img, SHT_SYMTAB, syms, &build_id, &loads)) {
      bool ok = false;
      if (build_id.size() > 2) {
        auto dbg = map_file("/usr/lib/debug/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) +
                            ".debug");
        if (dbg.ok()) ok = read_syms(span_of(dbg.value()), SHT_SYMTAB, syms, nullptr, nullptr);
      }
      if (!ok) read_syms(img, SHT_DYNSYM, syms, nullptr, nullptr);
    }
    std::sort(syms.begin(), syms.end(), [](const Sym& a, const Sym& b) { return a.addr < b.addr; });
  }

  std::string lookup(uint64_t svma) const {
    auto it =
        std::upper_bound(syms.begin(), syms.end(), svma, [](uint64_t a, const Sym& s) { return a < s.addr; });
    // The closest sized symbol covering svma, else the closest symbol below (zero-size asm labels).
    for (auto j = it; j != syms.begin();) {
      --j;
      if (svma < j->addr + j->size) return j->name;
      if (svma - j->addr > (1 << 16)) break;
    }
    if (it != syms.begin() && svma - std::prev(it)->addr < 64) return std::prev(it)->name;
    return "?";
  }
};

Result<std::pair<uint64_t, uint64_t>> section_range(const std::string& path, std::string_view name) {
  auto f = map_file(path);
  if (!f.ok()) return std::move(f).take_error();
  auto bytes = f.value().bytes();
  std::span<const uint8_t> img(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  Elf64_Ehdr eh;
  if (img.size() < sizeof eh) return Err(path + ": not ELF");
  std::memcpy(&eh, img.data(), sizeof eh);
  if (eh.e_shoff + eh.e_shnum * sizeof(Elf64_Shdr) > img.size() || eh.e_shstrndx >= eh.e_shnum)
    return Err(path + ": bad section headers");
  auto sh = [&](size_t i) {
    Elf64_Shdr s;
    std::memcpy(&s, img.data() + eh.e_shoff + i * sizeof s, sizeof s);
    return s;
  };
  Elf64_Shdr strs = sh(eh.e_shstrndx);
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr s = sh(i);
    if (strs.sh_offset + s.sh_name >= img.size()) continue;
    const char* n = reinterpret_cast<const char*>(img.data() + strs.sh_offset + s.sh_name);
    if (name == std::string_view(n, strnlen(n, img.size() - strs.sh_offset - s.sh_name)))
      return std::pair<uint64_t, uint64_t>{s.sh_addr, s.sh_addr + s.sh_size};
  }
  return Err(path + ": no section " + std::string(name));
}

Symbolizer::Symbolizer(const Capture& cap) {
  for (const Record& r : cap.records) {
    if (r.kind == Record::Exec) maps_[r.pid].clear();
    if (r.kind == Record::Fork) maps_[r.pid] = maps_[r.ppid];
    if (r.kind != Record::Mmap) continue;
    auto& e = elfs_[r.path];
    if (!e) e = std::make_unique<Elf>(r.path);
    maps_[r.pid].push_back({r.start, r.start + r.len, r.pgoff, e.get()});
  }
}
Symbolizer::~Symbolizer() = default;

Result<std::pair<uint64_t, uint64_t>> Symbolizer::symbol_range(const std::string& path,
                                                               std::string_view name) {
  Elf e(path);
  for (const Elf::Sym& s : e.syms)
    if (s.name == name && s.size > 0) return std::pair<uint64_t, uint64_t>{s.addr, s.addr + s.size};
  return Err(path + ": no function " + std::string(name));
}

const Symbolizer::Map* Symbolizer::find(uint32_t pid, uint64_t addr) const {
  auto it = maps_.find(pid);
  if (it == maps_.end()) return nullptr;
  const Map* best = nullptr;
  for (const Map& m : it->second)  // later mappings win
    if (addr >= m.start && addr < m.end) best = &m;
  return best;
}

std::string Symbolizer::module(uint32_t pid, uint64_t addr) const {
  const Map* m = find(pid, addr);
  if (!m) return "";
  for (const auto& [path, e] : elfs_)
    if (e.get() == m->elf) return path;
  return "";
}

std::string Symbolizer::name(uint32_t pid, uint64_t addr, bool ret) const {
  const Map* m = find(pid, addr);
  if (!m) return "?";
  uint64_t off = addr - m->start + m->pgoff;
  for (const Elf::Load& l : m->elf->loads) {
    if (off >= (l.off & ~uint64_t{0xfff}) && off < l.off + l.filesz) {
      uint64_t svma = off - l.off + l.vaddr;
      return m->elf->lookup(ret ? svma - 1 : svma);
    }
  }
  return "?";
}

}  // namespace fxprof::unwind_test
