// Loading a library: finding its files (the binary by recorded path or --symbol-dir, its debug file through
// elf/'s locator), checking their build IDs, and indexing symbols and DWARF; JIT perf maps too.
#include <sys/stat.h>

#include <algorithm>
#include <tuple>

#include "base/fd.h"
#include "base/hex.h"
#include "base/path.h"
#include "elf/elf.h"
#include "model/profile.h"
#include "symbolizer/library.h"

namespace fxprof::symbolizer {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

namespace {

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A JIT's perf map (/tmp/perf-PID.map: "START SIZE name" lines, hex). It has no build ID to check; its
// addresses are absolute, so the profile's lib entry for it must have offset == start (relative == absolute).
bool is_perf_map(const std::string& path) {
  std::string base(base_name(path));
  return base.size() > 9 && base.rfind("perf-", 0) == 0 && base.substr(base.size() - 4) == ".map";
}

Result<std::shared_ptr<Library>> load_perf_map(const KnownLib& k) {
  auto text = read_file(k.path);
  if (!text) return std::move(text).take_error();
  auto lib = std::make_shared<Library>();
  lib->debug_name = k.debug_name;
  lib->source = k.path;
  std::string_view t = *text;
  while (!t.empty()) {
    size_t nl = t.find('\n');
    std::string_view line = t.substr(0, nl);
    t = nl == std::string_view::npos ? std::string_view() : t.substr(nl + 1);
    size_t s1 = line.find(' ');
    size_t s2 = s1 == std::string_view::npos ? s1 : line.find(' ', s1 + 1);
    if (s2 == std::string_view::npos) continue;
    uint64_t start, size;
    if (!parse_hex(line.substr(0, s1), start) || !parse_hex(line.substr(s1 + 1, s2 - s1 - 1), size)) continue;
    std::string_view name = line.substr(s2 + 1);
    if (!name.empty() && name.back() == '\r') name.remove_suffix(1);
    lib->symbols.add(start, size, std::string(name));
  }
  lib->symbols.finish();
  return lib;
}

// Opens candidate files and keeps one only when its build ID is the one wanted; why the others were not
// taken goes to `notes`.
struct Opener {
  const std::string& want;
  std::vector<std::string> notes;

  bool matches(const ElfObject& o) const {
    return !o.build_id().empty() && upper(elf::breakpad_id(o.build_id())) == want;
  }
  std::unique_ptr<ElfObject> open(const std::string& path) {
    if (path.empty() || !is_file(path)) return nullptr;
    auto o = ElfObject::open(path);
    if (!o) {
      notes.push_back(o.error());
      return nullptr;
    }
    if (!matches(**o)) {
      notes.push_back(path + " has build ID " +
                      ((*o)->build_id().empty() ? std::string("(none)") : elf::hex((*o)->build_id())) +
                      ", not " + want);
      return nullptr;
    }
    return std::move(o).value();
  }
};

// 1. The binary: the recorded path, then the symbol directories, then perf's build-ID caches (perf record
// copied it there).
std::unique_ptr<ElfObject> find_binary(const KnownLib& k, const Options& options,
                                       const elf::LocatorOptions& lo, bool plain_name, Opener& opener) {
  std::vector<std::string> bin_candidates = {k.path, k.debug_path};
  for (const auto& d : options.symbol_dirs) {
    if (!plain_name) break;
    bin_candidates.push_back(d + "/" + k.debug_name);
    if (!k.name.empty()) bin_candidates.push_back(d + "/" + k.name);
    if (!k.path.empty()) bin_candidates.push_back(d + "/" + std::string(base_name(k.path)));
  }
  for (std::string& p : elf::perf_cache_files(lo.perf_caches, k.code_id, k.path))
    if (!p.ends_with("/debug")) bin_candidates.push_back(std::move(p));  // `elf`, or an older perf's file
  std::unique_ptr<ElfObject> binary;
  if (k.path == "[vdso]" || k.debug_name == "[vdso]") {
    // The vDSO has no file: ours is the kernel's image, in our memory; the build ID says it is the same.
    const std::span<const std::byte> image = elf::own_vdso_image();
    if (image.empty()) return nullptr;
    auto o = ElfObject::from_memory(std::string(reinterpret_cast<const char*>(image.data()), image.size()),
                                    "[vdso]");
    if (o && opener.matches(**o)) return std::move(o).value();
    return nullptr;
  }
  for (const auto& c : bin_candidates) {
    if ((binary = opener.open(c))) break;
  }
  return binary;
}

// 2. A separate debug file, by build ID then by debuglink; one named by the binary but not found is said in
// lib.missing.
std::unique_ptr<ElfObject> find_debug(const KnownLib& k, const Options& options,
                                      const elf::LocatorOptions& lo, bool plain_name, const ElfObject* binary,
                                      Opener& opener, Library& lib) {
  std::vector<uint8_t> build_id;
  if (binary) {
    build_id = binary->build_id();
  } else if (!k.code_id.empty()) {
    build_id = parse_hex_bytes(k.code_id);
    if (build_id.empty() || upper(elf::breakpad_id(build_id)) != opener.want) build_id.clear();
  }
  std::unique_ptr<ElfObject> debug;
  auto useful_debug = [](const ElfObject& o) {
    return o.has_section(".debug_info") || o.has_section(".symtab");
  };
  auto try_debug = [&](const std::string& path) {
    if (debug || (binary && path == binary->path())) return;
    auto o = opener.open(path);
    if (o && useful_debug(*o)) debug = std::move(o);
  };
  {
    // The shared locator (elf/elf.h): build-ID trees, debuglink (CRC checked), --symbol-dir, debuginfod.
    elf::DebugQuery q;
    q.build_id = build_id;
    if (binary) {
      q.binary_path = binary->path();
      if (auto link = binary->debuglink()) std::tie(q.debuglink, q.debuglink_crc) = *link;
    }
    if (plain_name) q.debug_name = k.debug_name;
    elf::locate_debug_file(
        q, lo,
        [&](const std::string& path) {
          try_debug(path);
          return debug != nullptr;
        },
        &opener.notes);
  }
  if (!debug && binary) {
    // Named by the binary but not found: the user should know which file to install, and where it goes.
    if (auto link = binary->debuglink()) {
      const std::string dir = binary->path().substr(0, binary->path().rfind('/'));
      std::string where = dir + "/, " + dir + "/.debug/";
      for (const auto& d : lo.debug_dirs) where += ", " + d + dir + "/";
      if (!build_id.empty()) {
        const std::string id = elf::hex(build_id);
        for (const auto& d : lo.debug_dirs)
          where += ", " + d + "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
      }
      if (!lo.symbol_dirs.empty()) where += " and the --symbol-dir folders";
      lib.missing.push_back({MissingFile::Kind::DebugLink, "Debug file not found: " + link->first +
                                                               " (.gnu_debuglink of " + binary->path() +
                                                               "), looked for in " + where});
    }
  }
  if (!debug && build_id.empty() && plain_name) {
    // No build ID to locate by (the binary is gone and the profile has no codeId): the breakpad ID still
    // checks a <symbol dir>/<debugName>.debug.
    for (const auto& d : options.symbol_dirs) try_debug(d + "/" + k.debug_name + ".debug");
  }
  return debug;
}

// 3. Symbols and DWARF: the debug file's, then the binary's (which goes into lib.objects).
void index_symbols(Library& lib, std::unique_ptr<ElfObject> binary, const ElfObject* debug) {
  lib.base_svma = binary ? binary->base_svma() : debug->base_svma();
  if (debug) {
    lib.symbols.add_elf_symbols(*debug, lib.base_svma);
    lib.dwarf_files[0] = debug;
    lib.source = debug->path();
  }
  if (binary) {
    lib.symbols.add_elf_symbols(*binary, lib.base_svma);
    lib.symbols.add_plt_symbols(*binary, lib.base_svma);
    lib.symbols.add_init_fini_symbols(*binary, lib.base_svma);
    lib.dwarf_files[debug ? 1 : 0] = binary.get();
    if (!debug && binary->has_section(".gnu_debugdata")) {
      auto image = binary->mini_debug_info();
      if (image) {
        auto mini = ElfObject::from_memory(std::move(image).value(), binary->path() + "[.gnu_debugdata]");
        if (mini) {
          lib.symbols.add_elf_symbols(**mini, lib.base_svma);
          lib.objects.push_back(std::move(mini).value());
        }
      }
    }
    if (lib.source.empty()) lib.source = binary->path();
    lib.code = binary.get();
    lib.objects.push_back(std::move(binary));
  }
}

// Split DWARF packages: <binary>.dwp (llvm-symbolizer's rule), beside the debug file (gdb's), and in the
// --symbol-dir folders by the binary's name. debuginfod serves no packages.
void add_dwp_paths(Library& lib, const KnownLib& k, const Options& options, const ElfObject* debug,
                   bool plain_name) {
  auto add_dwp = [&](const std::string& p) {
    if (std::find(lib.dwp_paths.begin(), lib.dwp_paths.end(), p) == lib.dwp_paths.end())
      lib.dwp_paths.push_back(p);
  };
  if (lib.code != nullptr) add_dwp(lib.code->path() + ".dwp");
  if (debug) {
    const std::string& d = debug->path();
    add_dwp(d.ends_with(".debug") ? d.substr(0, d.size() - 6) + ".dwp" : d + ".dwp");
  }
  if (plain_name) {
    const std::string name = lib.code != nullptr ? std::string(base_name(lib.code->path()))
                             : k.name.empty()    ? k.debug_name
                                                 : k.name;
    for (const auto& d : options.symbol_dirs) add_dwp(d + "/" + name + ".dwp");
  }
}

// dwz'd DWARF (Debian's -dbgsym packages): the alt file holds shared DIEs and strings, among them the
// names of inlined functions. Found here by the shared locator; opened by libdw only with the DWARF.
void add_dwz_alts(Library& lib, const elf::LocatorOptions& lo) {
  for (size_t i = 0; i < 2; ++i) {
    const ElfObject* f = lib.dwarf_files[i];
    // Only a file with DWARF needs its alt file (Debian's stripped binaries keep the link, not the DWARF).
    auto link = f != nullptr && (f->has_section(".debug_info") || f->has_section(".zdebug_info"))
                    ? f->debugaltlink()
                    : std::nullopt;
    if (!link || link->second.empty()) continue;
    elf::DebugQuery q;
    q.binary_path = f->path();
    q.build_id = link->second;
    q.altlink = link->first;
    std::unique_ptr<ElfObject> alt;
    elf::locate_debug_file(q, lo, [&](const std::string& path) {
      auto o = ElfObject::open(path);
      if (o) alt = std::move(o).value();
      return alt != nullptr;
    });
    if (!alt) {
      const std::string id = elf::hex(link->second);
      lib.missing.push_back(
          {MissingFile::Kind::DwzAlt, "dwz alt file not found: " + link->first + " (.gnu_debugaltlink of " +
                                          f->path() + ", build ID " + id +
                                          "), looked for at its recorded path, beside it" +
                                          (lo.symbol_dirs.empty() ? "" : ", in the --symbol-dir folders") +
                                          " and in the build-ID directories"});
      continue;
    }
    lib.dwarf_alts[i] = alt.get();
    lib.objects.push_back(std::move(alt));
  }
}

}  // namespace

// Finds the binary and its debug file, indexes their symbols, and notes where split and dwz'd DWARF are.
Result<std::shared_ptr<Library>> load_library(const KnownLib& k, const Options& options) {
  const std::string want = upper(k.breakpad_id);
  if (k.debug_name.empty() || want.empty()) return Err("empty debugName or breakpadId");
  if (is_perf_map(k.path)) return load_perf_map(k);
  Opener opener{want, {}};
  auto lib = std::make_shared<Library>();
  lib->debug_name = k.debug_name;
  // A request may name any debugName: never let one walk out of a symbol directory.
  const bool plain_name =
      k.debug_name.find('/') == std::string::npos && k.debug_name != "." && k.debug_name != "..";
  // Where debug files are looked for: the debug file here, each DWARF file's dwz alt file below.
  const elf::LocatorOptions lo{options.symbol_dirs, options.debug_dirs, options.use_debuginfod};
  std::unique_ptr<ElfObject> binary = find_binary(k, options, lo, plain_name, opener);
  std::unique_ptr<ElfObject> debug = find_debug(k, options, lo, plain_name, binary.get(), opener, *lib);
  if (!binary && !debug) {
    std::string msg = "no file with build ID " + want + " found for " + k.debug_name;
    for (const auto& n : opener.notes) msg += "; " + n;
    return Err(msg);
  }
  index_symbols(*lib, std::move(binary), debug.get());
  lib->dwarf_tried = !options.dwarf;  // Options::dwarf off: dwarf_index() never opens it
  add_dwp_paths(*lib, k, options, debug.get(), plain_name);
  if (debug) lib->objects.push_back(std::move(debug));
  add_dwz_alts(*lib, lo);
  lib->symbols.finish();
  return lib;
}

}  // namespace fxprof::symbolizer
