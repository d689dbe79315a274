// Resolving addresses in a loaded library: the symbol table and the DWARF index, each name demangled and
// interned once per library with its JSON literal.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <optional>

#include "base/json_string.h"
#include "symbolizer/cache.h"
#include "symbolizer/demangle.h"
#include "symbolizer/library.h"
#include "symbolizer/symbolizer_impl.h"

namespace fxprof::symbolizer {

size_t Library::memory_bytes() const {
  size_t n = sizeof(Library) + symbols.memory_bytes() + names_bytes;
  // libelf's own copies count too (its files are read, not mapped): the symbol tables the names point
  // into, and once DWARF is used the debug sections libdw reads (an unstripped 25 MB program: ~60 MB that
  // the cache's bound did not see).
  for (const auto& o : objects) n += o->owned_bytes() + o->symbol_sections_bytes();
  if (dwarf) {
    n += dwarf->memory_bytes();
    for (const auto& o : objects) n += o->debug_sections_bytes();
  }
  if (cfi) n += sizeof(*cfi) + cfi->eh_index.capacity() * sizeof(elf::FdeRef);
  return n;
}

namespace {

// Address space left under `ulimit -v` (RLIMIT_AS), or nullopt when there is no limit. libdw does not survive
// running out of memory (a failed allocation ends in an assertion or a read through a missing section), so
// under a limit DWARF is read only with room to spare.
std::optional<uint64_t> address_space_left() {
  rlimit lim{};
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return std::nullopt;
  uint64_t pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "re")) {
    if (std::fscanf(f, "%" SCNu64, &pages) != 1) pages = 0;
    std::fclose(f);
  }
  const uint64_t used = pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return used < lim.rlim_cur ? lim.rlim_cur - used : 0;
}

}  // namespace

DwarfIndex* Library::dwarf_index() {
  if (!dwarf_tried) {
    dwarf_tried = true;
    for (size_t i = 0; i < 2 && !dwarf; ++i) {
      if (dwarf_files[i] == nullptr) continue;
      // Sections decompressed, libdw's tables and our index: libc6-dbg (10 MB of sections) took ~11 MiB
      // beyond the file's mapping; twice the sections' bytes and 8 MiB leave room for files less regular.
      const uint64_t need = 2 * dwarf_files[i]->debug_sections_bytes() + (uint64_t{8} << 20);
      if (auto left = address_space_left(); left && *left < need) {
        missing.push_back(
            {MissingFile::Kind::NotRead, "Debug info of " + dwarf_files[i]->path() +
                                             " not read: the address-space limit (ulimit -v) leaves " +
                                             std::to_string(*left >> 20) + " MiB, it needs about " +
                                             std::to_string(need >> 20) + " MiB"});
        break;
      }
      dwarf = DwarfIndex::open(*dwarf_files[i], dwarf_alts[i], dwp_paths);
    }
  }
  return dwarf.get();
}

const Name* Library::name_of(std::unordered_map<const char*, Name>& cache, const char* raw) {
  auto [it, inserted] = cache.try_emplace(raw);
  if (inserted) {
    it->second.text = demangle(raw);
    append_json_string(it->second.json, it->second.text);
    names_bytes += it->second.text.capacity() + it->second.json.capacity() + 96;
  }
  return &it->second;
}

const Name* Library::file_of(const char* path) {
  if (path == nullptr) return nullptr;
  auto [it, inserted] = files.try_emplace(path);
  if (inserted) {
    it->second.text = path;
    append_json_string(it->second.json, path);
    names_bytes += it->second.text.capacity() + it->second.json.capacity() + 96;
  }
  return &it->second;
}

std::optional<Library::Range> Library::fde_range(uint64_t rel) {
  if (!cfi_tried) {
    cfi_tried = true;
    if (code != nullptr) {
      auto m = std::make_unique<elf::CfiFile>();
      elf::open_cfi_file(*m, code->path());
      // Only the very file whose build ID was checked (not one rebuilt in place since).
      if (m->ok && !m->identity.build_id.empty() && m->identity.build_id == code->build_id())
        cfi = std::move(m);
    }
  }
  elf::Fde fde;
  if (!cfi || elf::find_eh_fde(*cfi, rel + base_svma, fde) != elf::FdeLookup::Found ||
      fde.pc_begin < base_svma)
    return std::nullopt;
  return Range{fde.pc_begin - base_svma, fde.pc_end - base_svma};
}

std::string fde_function_name(std::string_view debug_name, uint64_t start) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "+0x%" PRIx64, start);
  return std::string(debug_name) + buf;
}

bool is_fde_function_name(std::string_view name, std::string_view debug_name) {
  if (debug_name.empty() || !name.starts_with(debug_name)) return false;
  name.remove_prefix(debug_name.size());
  return name.size() > 3 && name.starts_with("+0x") &&
         name.find_first_not_of("0123456789abcdef", 3) == std::string_view::npos;
}

const Name* Library::fde_name(uint64_t start) {
  auto [it, inserted] = fde_names.try_emplace(start);
  if (inserted) {
    it->second.text = fde_function_name(debug_name, start);
    append_json_string(it->second.json, it->second.text);
    names_bytes += it->second.text.capacity() + it->second.json.capacity() + 96;
  }
  return &it->second;
}

void Library::resolve(uint64_t rel, Resolution::Address& r, std::vector<Resolution::Frame>& inl) {
  r = Resolution::Address{};
  const SymbolTable::Symbol* sym = symbols.find(rel);
  uint64_t func_low = 0;
  bool have_dwarf = false;
  // DWARF where the symbol table places a function, or everywhere when there is no symbol table (an
  // address between functions is padding or a stub: a baked profile's unresolved return addresses).
  DwarfIndex* dw = sym != nullptr || symbols.empty() ? dwarf_index() : dwarf.get();
  if (dw) have_dwarf = dw->lookup(rel + base_svma, scratch, func_low) && !scratch.empty();
  const RawFrame* outer = have_dwarf ? &scratch.back() : nullptr;
  // The DWARF name of the outermost function, unless the symbol's is the same but more qualified (a static
  // function's DW_AT_name "f" vs its symbol "f(int)"; a "[clone .cold]" part).
  const Name* dn = outer != nullptr && outer->name != nullptr ? name_of(dwarf_names, outer->name) : nullptr;
  const Name* sn = sym != nullptr ? name_of(sym_names, sym->name) : nullptr;
  r.function = dn;
  if (sn != nullptr &&
      (dn == nullptr || (sn->text.size() > dn->text.size() && sn->text.starts_with(dn->text))))
    r.function = sn;
  if (r.function == nullptr) {
    // No symbol and no DWARF function (a stripped binary): the .eh_frame FDE covering the address is its
    // function, named "binary+0x<start>" as perf and the sinks name an unresolved address, so all addresses
    // of one function share one name everywhere (leaf or caller, report or front end), a summary line says
    // which binary it is, and a baked "NAME (in lib)" is never mistaken for an unresolved "0x<rel> (in lib)";
    // /asm/v1 can show it whole.
    if (auto f = fde_range(rel)) {
      r.function = fde_name(f->start);
      r.function_offset = rel - f->start;
      r.function_size = f->end - f->start;
      r.found = true;
    }
    return;
  }
  if (sym != nullptr && (sym->size > 0 || func_low == 0)) {
    r.function_offset = rel - sym->start;
    r.function_size = sym->size;
  } else if (func_low != 0 && func_low - base_svma <= rel) {
    r.function_offset = rel - (func_low - base_svma);
  } else if (sym != nullptr) {
    r.function_offset = rel - sym->start;
  } else {
    return;
  }
  r.found = true;
  if (outer != nullptr) {
    r.file = file_of(outer->file);
    r.line = outer->line;
    r.inline_begin = static_cast<uint32_t>(inl.size());
    r.inline_count = static_cast<uint32_t>(scratch.size() - 1);
    for (size_t i = 0; i + 1 < scratch.size(); ++i) {
      const RawFrame& f = scratch[i];
      inl.push_back({f.name != nullptr ? name_of(dwarf_names, f.name) : nullptr, file_of(f.file), f.line});
    }
  }
}

void Library::resolve_all(std::span<const uint64_t> addrs, Resolution& out) {
  out.addresses.assign(addrs.size(), Resolution::Address{});
  std::vector<uint32_t> order(addrs.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return addrs[a] < addrs[b]; });
  for (size_t k = 0; k < order.size(); ++k) {
    uint32_t i = order[k];
    if (k > 0 && addrs[order[k - 1]] == addrs[i]) {
      out.addresses[i] = out.addresses[order[k - 1]];
      continue;
    }
    resolve(addrs[i], out.addresses[i], out.inlines);
  }
}

Result<Resolution> Symbolizer::resolve(std::string_view debug_name, std::string_view breakpad_id,
                                       std::span<const uint64_t> addresses) {
  auto handle = impl_->cache.get(debug_name, breakpad_id);
  if (!handle) return std::move(handle).take_error();
  Resolution out;
  {
    std::lock_guard<std::mutex> lock(handle->lib->mu);
    handle->lib->resolve_all(addresses, out);
  }
  impl_->cache.account(*handle);
  out.library = handle->lib;
  return out;
}

Status Symbolizer::preload(std::string_view debug_name, std::string_view breakpad_id) {
  auto handle = impl_->cache.get(debug_name, breakpad_id);
  if (!handle) return Err(handle.error());
  {
    std::lock_guard<std::mutex> lock(handle->lib->mu);
    handle->lib->dwarf_index();
  }
  impl_->cache.account(*handle);
  return {};
}

std::vector<MissingFile> Symbolizer::missing_files(std::string_view debug_name,
                                                   std::string_view breakpad_id) {
  auto handle = impl_->cache.get(debug_name, breakpad_id);
  if (!handle) return {};
  std::lock_guard<std::mutex> lock(handle->lib->mu);
  std::vector<MissingFile> out = handle->lib->missing;
  // The DWARF index's lines grow as units of a package are read.
  if (const DwarfIndex* dw = handle->lib->dwarf.get())
    for (const std::string& line : dw->missing_split_units())
      out.push_back({MissingFile::Kind::SplitDwarf, line});
  return out;
}

Result<std::vector<SymbolInfo>> Symbolizer::lookup(std::string_view debug_name, std::string_view breakpad_id,
                                                   std::span<const uint64_t> addresses) {
  auto r = resolve(debug_name, breakpad_id, addresses);
  if (!r) return std::move(r).take_error();
  std::vector<SymbolInfo> out(addresses.size());
  for (size_t i = 0; i < addresses.size(); ++i) {
    const Resolution::Address& h = r->addresses[i];
    if (!h.found) continue;
    SymbolInfo& s = out[i];
    s.found = true;
    s.function = h.function->text;
    s.function_offset = h.function_offset;
    s.function_size = h.function_size;
    if (h.file) s.file = h.file->text;
    s.line = h.line;
    for (uint32_t k = 0; k < h.inline_count; ++k) {
      const Resolution::Frame& in = r->inlines[h.inline_begin + k];
      s.inlines.push_back(
          {in.function ? in.function->text : std::string(), in.file ? in.file->text : "", in.line});
    }
  }
  return out;
}

}  // namespace fxprof::symbolizer
