#include "symbolizer/symbolizer.h"

#include <capstone/capstone.h>
#include <elf.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <list>
#include <mutex>
#include <unordered_map>

#include "elf/elf.h"
#include "model/profile.h"
#include "symbolizer/demangle.h"
#include "symbolizer/dwarf_index.h"
#include "symbolizer/elf_file.h"
#include "symbolizer/json_out.h"

namespace fxprof::symbolizer {
namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::string base_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<uint8_t> parse_hex_bytes(std::string_view hex) {
  std::vector<uint8_t> out;
  if (hex.size() % 2 != 0) return {};
  for (size_t i = 0; i < hex.size(); i += 2) {
    int v = 0;
    for (int k = 0; k < 2; ++k) {
      char c = hex[i + static_cast<size_t>(k)];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) return {};
      v = v * 16 + d;
    }
    out.push_back(static_cast<uint8_t>(v));
  }
  return out;
}

std::string build_id_hex(const std::vector<uint8_t>& id) { return model::code_id_from_build_id(id); }

// Lexically normalized absolute path ("" when not absolute): removes ".", "..", and repeated slashes.
std::string normalize_path(std::string_view p) {
  if (p.empty() || p[0] != '/') return {};
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < p.size()) {
    while (i < p.size() && p[i] == '/') ++i;
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    std::string_view part = p.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = j;
  }
  std::string out;
  for (auto part : parts) {
    out += '/';
    out += part;
  }
  return out.empty() ? "/" : out;
}

// Parses "0x1234" (or decimal digits); false on anything else or overflow.
bool parse_address(std::string_view s, uint64_t& v) {
  v = 0;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    int d = c >= '0' && c <= '9'                 ? c - '0'
            : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10
            : base == 16 && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
    if (d < 0) return false;
    if (v > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) return false;
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  return true;
}

ApiResponse error_response(int status, std::string_view message) {
  ApiResponse r;
  r.http_status = status;
  r.body = "{\"error\":";
  json::str(r.body, message);
  r.body += '}';
  return r;
}

// A demangled name and its JSON string literal, made once per name.
struct Name {
  std::string text;
  std::string json;
};

// A file path as a JSON string literal, made once per path.
struct FileName {
  const char* path = nullptr;
  std::string json;
};

// One inlined frame of a resolved address.
struct InlineHit {
  const Name* function;  // nullptr = unknown
  const FileName* file;  // nullptr = unknown
  uint32_t line;
};

// One resolved address; pointers into the library's caches (stable while the library lives).
struct Hit {
  bool found = false;
  const Name* function = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;
  const FileName* file = nullptr;
  uint32_t line = 0;
  uint32_t inline_begin = 0;  // into the caller's InlineHit vector
  uint32_t inline_count = 0;
};

// A library's opened files and indexes. Everything but the immutable parts is guarded by `mu`.
struct Library {
  std::mutex mu;
  std::string debug_name;
  uint64_t base_svma = 0;
  std::vector<std::unique_ptr<ElfObject>> objects;  // kept open: names point into their string tables
  ElfObject* code = nullptr;                        // the binary itself (for /asm/v1); may be null
  SymbolTable symbols;
  std::unique_ptr<DwarfIndex> dwarf;
  std::string source;  // which files were used, for messages
  // Demangled names and JSON-escaped strings, made lazily (node-based maps: pointers stay valid).
  std::unordered_map<const char*, Name> sym_names;  // by symbol name pointer
  std::unordered_map<const char*, Name> dwarf_names;
  std::unordered_map<const char*, FileName> files;
  size_t names_bytes = 0;
  std::vector<RawFrame> scratch;

  size_t memory_bytes() const {
    size_t n = sizeof(Library) + symbols.memory_bytes() + names_bytes;
    for (const auto& o : objects) n += o->owned_bytes();
    if (dwarf) n += dwarf->memory_bytes();
    return n;
  }

  const Name* name_of(std::unordered_map<const char*, Name>& cache, const char* raw) {
    auto [it, inserted] = cache.try_emplace(raw);
    if (inserted) {
      it->second.text = demangle(raw);
      json::str(it->second.json, it->second.text);
      names_bytes += it->second.text.capacity() + it->second.json.capacity() + 96;
    }
    return &it->second;
  }

  const FileName* file_of(const char* path) {
    if (path == nullptr) return nullptr;
    auto [it, inserted] = files.try_emplace(path);
    if (inserted) {
      it->second.path = path;
      json::str(it->second.json, path);
      names_bytes += it->second.json.capacity() + 64;
    }
    return &it->second;
  }

  // Resolves one lib-relative address (caller holds mu); inlines are appended to `inl`.
  void resolve(uint64_t rel, Hit& r, std::vector<InlineHit>& inl) {
    r = Hit{};
    const SymbolTable::Symbol* sym = symbols.find(rel);
    uint64_t func_low = 0;
    bool have_dwarf = false;
    if (dwarf) have_dwarf = dwarf->lookup(rel + base_svma, scratch, func_low) && !scratch.empty();
    const RawFrame* outer = have_dwarf ? &scratch.back() : nullptr;
    // The DWARF name of the outermost function, unless the symbol's is the same but more qualified (a static
    // function's DW_AT_name "f" vs its symbol "f(int)"; a "[clone .cold]" part).
    const Name* dn = outer != nullptr && outer->name != nullptr ? name_of(dwarf_names, outer->name) : nullptr;
    const Name* sn = sym != nullptr ? name_of(sym_names, sym->name) : nullptr;
    r.function = dn;
    if (sn != nullptr &&
        (dn == nullptr || (sn->text.size() > dn->text.size() && sn->text.starts_with(dn->text))))
      r.function = sn;
    if (r.function == nullptr) return;
    if (sym != nullptr && (sym->size > 0 || func_low == 0)) {
      r.offset = rel - sym->start;
      r.size = sym->size;
    } else if (func_low != 0 && func_low - base_svma <= rel) {
      r.offset = rel - (func_low - base_svma);
    } else if (sym != nullptr) {
      r.offset = rel - sym->start;
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

  // Resolves many addresses in address order (successive binary searches then touch nearby memory: far fewer
  // cache misses than in request order), each distinct address once. hits[i] answers addrs[i].
  void resolve_all(std::span<const uint64_t> addrs, std::vector<Hit>& hits, std::vector<InlineHit>& inl) {
    hits.assign(addrs.size(), Hit{});
    std::vector<uint32_t> order(addrs.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return addrs[a] < addrs[b]; });
    for (size_t k = 0; k < order.size(); ++k) {
      uint32_t i = order[k];
      if (k > 0 && addrs[order[k - 1]] == addrs[i]) {
        hits[i] = hits[order[k - 1]];
        continue;
      }
      resolve(addrs[i], hits[i], inl);
    }
  }
};

// One cache entry: loaded once (concurrent askers wait on load_mu), evicted least-recently-used.
struct Slot {
  std::string key;  // immutable
  std::mutex load_mu;
  bool done = false;
  std::shared_ptr<Library> lib;
  std::string error;
  size_t bytes = 0;
  uint64_t last_use = 0;
};

}  // namespace

struct Symbolizer::Impl {
  Options options;
  std::mutex mu;                                    // guards everything below
  std::unordered_map<std::string, KnownLib> known;  // key: debugName/BREAKPADID
  std::unordered_map<std::string, std::shared_ptr<Slot>> slots;
  size_t total_bytes = 0;
  uint64_t tick = 0;

  Result<std::shared_ptr<Library>> get(std::string_view debug_name, std::string_view breakpad_id,
                                       std::shared_ptr<Slot>* slot_out = nullptr);
  void account(const std::shared_ptr<Slot>& slot, Library* lib);  // lib null: a failed load
  Result<std::shared_ptr<Library>> load(const KnownLib& k);
};

Result<std::shared_ptr<Library>> Symbolizer::Impl::get(std::string_view debug_name,
                                                       std::string_view breakpad_id,
                                                       std::shared_ptr<Slot>* slot_out) {
  std::string key = std::string(debug_name) + "/" + upper(breakpad_id);
  std::shared_ptr<Slot> slot;
  KnownLib k;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto& s = slots[key];
    if (!s) {
      s = std::make_shared<Slot>();
      s->key = key;
    }
    slot = s;
    slot->last_use = ++tick;
    if (auto it = known.find(key); it != known.end()) {
      k = it->second;
    } else {
      k.debug_name = std::string(debug_name);
      k.breakpad_id = std::string(breakpad_id);
    }
  }
  {
    std::lock_guard<std::mutex> lock(slot->load_mu);
    if (!slot->done) {
      auto r = load(k);
      if (r) {
        slot->lib = std::move(r).value();
      } else {
        slot->error = r.error();
      }
      slot->done = true;
    }
  }
  if (slot_out) *slot_out = slot;
  if (!slot->lib) {
    account(slot, nullptr);  // failures are cached too, and must not grow the cache without bound
    return Err(slot->error);
  }
  return slot->lib;
}

void Symbolizer::Impl::account(const std::shared_ptr<Slot>& slot, Library* lib) {
  size_t bytes = sizeof(Slot) + 128 + slot->error.size();
  if (lib != nullptr) {
    std::lock_guard<std::mutex> lock(lib->mu);
    bytes = lib->memory_bytes();
  }
  std::lock_guard<std::mutex> lock(mu);
  // The slot may have been evicted meanwhile: only account for slots still in the map.
  if (auto it = slots.find(slot->key); it == slots.end() || it->second != slot) return;
  total_bytes = total_bytes - slot->bytes + bytes;
  slot->bytes = bytes;
  while (total_bytes > options.cache_limit_bytes) {
    auto victim = slots.end();
    for (auto i = slots.begin(); i != slots.end(); ++i) {
      if (i->second == slot || i->second->bytes == 0) continue;
      if (victim == slots.end() || i->second->last_use < victim->second->last_use) victim = i;
    }
    if (victim == slots.end()) break;
    total_bytes -= victim->second->bytes;
    slots.erase(victim);
  }
}

// A JIT's perf map (/tmp/perf-PID.map: "START SIZE name" lines, hex). It has no build ID to check; its
// addresses are absolute, so the profile's lib entry for it must have offset == start (relative == absolute).
static bool is_perf_map(const std::string& path) {
  std::string base = base_of(path);
  return base.size() > 9 && base.rfind("perf-", 0) == 0 && base.substr(base.size() - 4) == ".map";
}

static Result<std::shared_ptr<Library>> load_perf_map(const KnownLib& k) {
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
    auto hex_field = [](std::string_view f, uint64_t& v) {
      return parse_address(f.rfind("0x", 0) == 0 ? std::string(f) : "0x" + std::string(f), v);
    };
    if (!hex_field(line.substr(0, s1), start) || !hex_field(line.substr(s1 + 1, s2 - s1 - 1), size)) continue;
    std::string_view name = line.substr(s2 + 1);
    if (!name.empty() && name.back() == '\r') name.remove_suffix(1);
    lib->symbols.add(start, size, std::string(name));
  }
  lib->symbols.finish();
  return lib;
}

Result<std::shared_ptr<Library>> Symbolizer::Impl::load(const KnownLib& k) {
  const std::string want = upper(k.breakpad_id);
  if (k.debug_name.empty() || want.empty()) return Err("empty debugName or breakpadId");
  if (is_perf_map(k.path)) return load_perf_map(k);
  std::vector<std::string> notes;
  auto matches = [&](const ElfObject& o) {
    return !o.build_id().empty() && upper(model::breakpad_id_from_build_id(o.build_id())) == want;
  };
  auto try_open = [&](const std::string& path) -> std::unique_ptr<ElfObject> {
    if (path.empty() || !is_file(path)) return nullptr;
    auto o = ElfObject::open(path);
    if (!o) {
      notes.push_back(o.error());
      return nullptr;
    }
    if (!matches(**o)) {
      notes.push_back(path + " has build ID " +
                      ((*o)->build_id().empty() ? std::string("(none)") : build_id_hex((*o)->build_id())) +
                      ", not " + want);
      return nullptr;
    }
    return std::move(o).value();
  };

  auto lib = std::make_shared<Library>();
  lib->debug_name = k.debug_name;

  // 1. The binary: the recorded path, then the symbol directories.
  std::vector<std::string> bin_candidates = {k.path, k.debug_path};
  // A request may name any debugName: never let one walk out of a symbol directory.
  const bool plain_name =
      k.debug_name.find('/') == std::string::npos && k.debug_name != "." && k.debug_name != "..";
  for (const auto& d : options.symbol_dirs) {
    if (!plain_name) break;
    bin_candidates.push_back(d + "/" + k.debug_name);
    if (!k.name.empty()) bin_candidates.push_back(d + "/" + k.name);
    if (!k.path.empty()) bin_candidates.push_back(d + "/" + base_of(k.path));
  }
  std::unique_ptr<ElfObject> binary;
  for (const auto& c : bin_candidates) {
    if ((binary = try_open(c))) break;
  }

  // 2. A separate debug file, by build ID then by debuglink.
  std::vector<uint8_t> build_id;
  if (binary) {
    build_id = binary->build_id();
  } else if (!k.code_id.empty()) {
    build_id = parse_hex_bytes(k.code_id);
    if (build_id.empty() || upper(model::breakpad_id_from_build_id(build_id)) != want) build_id.clear();
  }
  std::unique_ptr<ElfObject> debug;
  auto useful_debug = [](const ElfObject& o) {
    return o.has_section(".debug_info") || o.has_section(".symtab");
  };
  auto try_debug = [&](const std::string& path) {
    if (debug || (binary && path == binary->path())) return;
    auto o = try_open(path);
    if (o && useful_debug(*o)) debug = std::move(o);
  };
  if (!debug) {
    // The shared locator (elf/elf.h): build-ID trees, debuglink (CRC checked), --symbol-dir, debuginfod.
    elf::DebugQuery q;
    q.build_id = build_id;
    if (binary) {
      q.binary_path = binary->path();
      if (auto link = binary->debuglink()) std::tie(q.debuglink, q.debuglink_crc) = *link;
    }
    if (plain_name) q.debug_name = k.debug_name;
    elf::LocatorOptions lo{options.symbol_dirs, options.debug_dirs, options.use_debuginfod};
    elf::locate_debug_file(
        q, lo,
        [&](const std::string& path) {
          try_debug(path);
          return debug != nullptr;
        },
        &notes);
  }
  if (!debug && build_id.empty() && plain_name) {
    // No build ID to locate by (the binary is gone and the profile has no codeId): the breakpad ID still
    // checks a <symbol dir>/<debugName>.debug.
    for (const auto& d : options.symbol_dirs) try_debug(d + "/" + k.debug_name + ".debug");
  }
  if (!binary && !debug) {
    std::string msg = "no file with build ID " + want + " found for " + k.debug_name;
    for (const auto& n : notes) msg += "; " + n;
    return Err(msg);
  }

  // 3. Symbols and DWARF.
  lib->base_svma = binary ? binary->base_svma() : debug->base_svma();
  if (debug) {
    lib->symbols.add_elf_symbols(*debug, lib->base_svma);
    lib->dwarf = DwarfIndex::open(*debug);
    lib->source = debug->path();
  }
  if (binary) {
    lib->symbols.add_elf_symbols(*binary, lib->base_svma);
    lib->symbols.add_plt_symbols(*binary, lib->base_svma);
    if (!lib->dwarf) lib->dwarf = DwarfIndex::open(*binary);
    if (!debug && binary->has_section(".gnu_debugdata")) {
      auto image = binary->mini_debug_info();
      if (image) {
        auto mini = ElfObject::from_memory(std::move(image).value(), binary->path() + "[.gnu_debugdata]");
        if (mini) {
          lib->symbols.add_elf_symbols(**mini, lib->base_svma);
          lib->objects.push_back(std::move(mini).value());
        }
      }
    }
    if (lib->source.empty()) lib->source = binary->path();
    lib->code = binary.get();
    lib->objects.push_back(std::move(binary));
  }
  if (debug) lib->objects.push_back(std::move(debug));
  lib->symbols.finish();
  return lib;
}

Symbolizer::Symbolizer(Options options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}
Symbolizer::~Symbolizer() = default;

void Symbolizer::add_known_lib(KnownLib lib) {
  if (lib.debug_name.empty() || lib.breakpad_id.empty()) return;
  std::string key = lib.debug_name + "/" + upper(lib.breakpad_id);
  std::lock_guard<std::mutex> lock(impl_->mu);
  // A library (re)registered after a lookup of the same key must be looked for again with the new paths.
  if (auto it = impl_->slots.find(key); it != impl_->slots.end()) {
    impl_->total_bytes -= it->second->bytes;
    impl_->slots.erase(it);
  }
  impl_->known[key] = std::move(lib);
}

Result<std::vector<SymbolInfo>> Symbolizer::lookup(std::string_view debug_name, std::string_view breakpad_id,
                                                   std::span<const uint64_t> addresses) {
  std::shared_ptr<Slot> slot;
  auto lib = impl_->get(debug_name, breakpad_id, &slot);
  if (!lib) return std::move(lib).take_error();
  std::vector<SymbolInfo> out(addresses.size());
  std::vector<Hit> hits;
  std::vector<InlineHit> inl;
  {
    Library& l = **lib;
    std::lock_guard<std::mutex> lock(l.mu);
    l.resolve_all(addresses, hits, inl);
  }
  for (size_t i = 0; i < addresses.size(); ++i) {
    const Hit& h = hits[i];
    if (!h.found) continue;
    SymbolInfo& s = out[i];
    s.found = true;
    s.function = h.function->text;
    s.function_offset = h.offset;
    s.function_size = h.size;
    if (h.file) s.file = h.file->path;
    s.line = h.line;
    for (uint32_t k = 0; k < h.inline_count; ++k) {
      const InlineHit& in = inl[h.inline_begin + k];
      s.inlines.push_back(
          {in.function ? in.function->text : std::string(), in.file ? in.file->path : "", in.line});
    }
  }
  impl_->account(slot, lib->get());
  return out;
}

// ---- /symbolicate/v5

namespace {

struct Job {
  std::vector<std::pair<std::string_view, std::string_view>> modules;
  std::vector<std::vector<std::pair<int64_t, uint64_t>>> stacks;
};

// Validates one job; an error message (for the 400 answer) or "".
std::string parse_job(simdjson::dom::element el, Job& job) {
  simdjson::dom::object obj;
  if (el.get_object().get(obj)) return "a job is not an object";
  simdjson::dom::array mm, stacks;
  if (obj["memoryMap"].get_array().get(mm)) return "job.memoryMap is missing or not an array";
  if (obj["stacks"].get_array().get(stacks)) return "job.stacks is missing or not an array";
  for (auto entry : mm) {
    simdjson::dom::array pair;
    if (entry.get_array().get(pair) || pair.size() != 2)
      return "memoryMap entries must be [debugName, breakpadId]";
    std::string_view name, id;
    if (pair.at(0).get_string().get(name) || pair.at(1).get_string().get(id))
      return "memoryMap entries must be two strings";
    job.modules.emplace_back(name, id);
  }
  for (auto st : stacks) {
    simdjson::dom::array frames;
    if (st.get_array().get(frames)) return "a stack is not an array";
    auto& out = job.stacks.emplace_back();
    out.reserve(frames.size());
    for (auto f : frames) {
      simdjson::dom::array pair;
      if (f.get_array().get(pair) || pair.size() != 2) return "frames must be [moduleIndex, address]";
      int64_t mod;
      uint64_t addr;
      if (pair.at(0).get_int64().get(mod)) return "a frame's module index is not an integer";
      if (pair.at(1).get_uint64().get(addr)) return "a frame's address is not a non-negative integer";
      if (mod < -1 || mod >= static_cast<int64_t>(job.modules.size()))
        return "a frame's module index is out of range";
      out.emplace_back(mod, addr);
    }
  }
  return {};
}

void write_frame(std::string& out, size_t index, const std::string& module_json, uint64_t addr, const Hit* r,
                 const std::vector<InlineHit>* inl) {
  out += "{\"frame\":";
  json::uint(out, index);
  out += ",\"module_offset\":";
  json::hex(out, addr);
  out += ",\"module\":";
  out += module_json;
  if (r != nullptr && r->found) {
    out += ",\"function\":";
    out += r->function->json;
    out += ",\"function_offset\":";
    json::hex(out, r->offset);
    if (r->size != 0) {
      out += ",\"function_size\":";
      json::hex(out, r->size);
    }
    if (r->file != nullptr) {
      out += ",\"file\":";
      out += r->file->json;
    }
    if (r->line != 0) {
      out += ",\"line\":";
      json::uint(out, r->line);
    }
    if (r->inline_count != 0) {
      out += ",\"inlines\":[";
      for (uint32_t k = 0; k < r->inline_count; ++k) {
        const InlineHit& in = (*inl)[r->inline_begin + k];
        if (k) out += ',';
        out += '{';
        bool any = false;
        if (in.function != nullptr) {
          out += "\"function\":";
          out += in.function->json;
          any = true;
        }
        if (in.file != nullptr) {
          if (any) out += ',';
          out += "\"file\":";
          out += in.file->json;
          any = true;
        }
        if (in.line != 0) {
          if (any) out += ',';
          out += "\"line\":";
          json::uint(out, in.line);
        }
        out += '}';
      }
      out += ']';
    }
  }
  out += '}';
}

}  // namespace

ApiResponse Symbolizer::symbolicate_v5(std::string_view request_json) {
  if (request_json.empty()) return error_response(400, "empty request");
  simdjson::dom::parser parser;
  simdjson::padded_string padded(request_json);
  simdjson::dom::element root;
  if (auto err = parser.parse(padded).get(root)) {
    return error_response(400, std::string("request is not valid JSON: ") + simdjson::error_message(err));
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) return error_response(400, "request is not a JSON object");
  std::vector<Job> jobs;
  simdjson::dom::array jobs_el;
  if (!obj["jobs"].get_array().get(jobs_el)) {
    for (auto j : jobs_el) {
      std::string e = parse_job(j, jobs.emplace_back());
      if (!e.empty()) return error_response(400, e);
    }
  } else if (obj["memoryMap"].error() == simdjson::SUCCESS) {
    std::string e = parse_job(root, jobs.emplace_back());
    if (!e.empty()) return error_response(400, e);
  } else {
    return error_response(400, "request has no \"jobs\" array");
  }
  size_t total = 0;
  for (const auto& j : jobs)
    for (const auto& s : j.stacks) total += s.size();
  if (total > (size_t{1} << 22)) return error_response(400, "too many addresses in one request");

  ApiResponse resp;
  std::string& out = resp.body;
  out += "{\"results\":[";
  for (size_t ji = 0; ji < jobs.size(); ++ji) {
    const Job& job = jobs[ji];
    if (ji) out += ',';
    // Open every module of the job first (loads happen outside any library lock).
    std::vector<std::shared_ptr<Library>> libs(job.modules.size());
    std::vector<std::shared_ptr<Slot>> slots(job.modules.size());
    std::vector<std::string> errors(job.modules.size());
    for (size_t m = 0; m < job.modules.size(); ++m) {
      auto lib = impl_->get(job.modules[m].first, job.modules[m].second, &slots[m]);
      if (lib) {
        libs[m] = std::move(lib).value();
      } else {
        errors[m] = lib.error();
      }
    }
    // Resolve each module's addresses together, in address order, under its lock; then write in request
    // order.
    struct PerModule {
      std::vector<uint64_t> addrs;
      std::vector<Hit> hits;
      std::vector<InlineHit> inl;
      std::string name_json;
      size_t next = 0;
    };
    std::vector<PerModule> pm(job.modules.size());
    for (size_t m = 0; m < job.modules.size(); ++m) json::str(pm[m].name_json, job.modules[m].first);
    for (const auto& stack : job.stacks)
      for (auto [mod, addr] : stack)
        if (mod >= 0) pm[static_cast<size_t>(mod)].addrs.push_back(addr);
    for (size_t m = 0; m < job.modules.size(); ++m) {
      if (!libs[m] || pm[m].addrs.empty()) continue;
      std::lock_guard<std::mutex> lock(libs[m]->mu);
      libs[m]->resolve_all(pm[m].addrs, pm[m].hits, pm[m].inl);
    }
    // Reserve the answer's size up front: growing an 8 MB string by doubling copies it twice over.
    size_t estimate = out.size() + 256;
    for (const PerModule& p : pm) {
      estimate += p.addrs.size() * (64 + p.name_json.size());
      for (const Hit& h : p.hits) {
        if (!h.found) continue;
        estimate += 96 + h.function->json.size() + (h.file ? h.file->json.size() : 0);
        for (uint32_t k = 0; k < h.inline_count; ++k) {
          const InlineHit& in = p.inl[h.inline_begin + k];
          estimate +=
              48 + (in.function ? in.function->json.size() : 0) + (in.file ? in.file->json.size() : 0);
        }
      }
    }
    out.reserve(estimate);
    out += "{\"stacks\":[";
    for (size_t si = 0; si < job.stacks.size(); ++si) {
      if (si) out += ',';
      out += '[';
      const auto& stack = job.stacks[si];
      for (size_t fi = 0; fi < stack.size(); ++fi) {
        if (fi) out += ',';
        auto [mod, addr] = stack[fi];
        if (mod < 0) {
          out += "{\"frame\":";
          json::uint(out, fi);
          out += ",\"module_offset\":";
          json::hex(out, addr);
          out += '}';
          continue;
        }
        PerModule& p = pm[static_cast<size_t>(mod)];
        const Hit* hit = libs[static_cast<size_t>(mod)] ? &p.hits[p.next] : nullptr;
        ++p.next;
        write_frame(out, fi, p.name_json, addr, hit, &p.inl);
      }
      out += ']';
    }
    out += "],\"found_modules\":{";
    for (size_t m = 0; m < job.modules.size(); ++m) {
      if (m) out += ',';
      json::str(out, std::string(job.modules[m].first) + "/" + std::string(job.modules[m].second));
      out += libs[m] ? ":true" : ":false";
    }
    out += '}';
    bool any_error = false;
    for (size_t m = 0; m < job.modules.size(); ++m) {
      if (libs[m]) continue;
      out += any_error ? "," : ",\"module_errors\":{";
      any_error = true;
      json::str(out, std::string(job.modules[m].first) + "/" + std::string(job.modules[m].second));
      out += ":[{\"name\":\"NotFound\",\"message\":";
      json::str(out, errors[m]);
      out += "}]";
    }
    if (any_error) out += '}';
    out += '}';
    for (size_t m = 0; m < job.modules.size(); ++m)
      if (libs[m]) impl_->account(slots[m], libs[m].get());
  }
  out += "]}";
  return resp;
}

// ---- /source/v1

ApiResponse Symbolizer::source_v1(std::string_view request_json) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(request_json);
  simdjson::dom::element root;
  if (request_json.empty() || parser.parse(padded).get(root))
    return error_response(400, "request is not valid JSON");
  std::string_view debug_name, debug_id, offset_s, file;
  if (root["debugName"].get_string().get(debug_name) || root["debugId"].get_string().get(debug_id) ||
      root["moduleOffset"].get_string().get(offset_s) || root["file"].get_string().get(file))
    return error_response(400, "request needs the strings debugName, debugId, moduleOffset and file");
  uint64_t offset;
  if (!parse_address(offset_s, offset)) return error_response(400, "moduleOffset is not a hex address");
  std::string wanted = normalize_path(file);
  if (wanted.empty()) return error_response(403, "refusing a relative source path");

  std::shared_ptr<Slot> slot;
  auto lib = impl_->get(debug_name, debug_id, &slot);
  if (!lib) return error_response(404, lib.error());
  std::string path;
  {
    Library& l = **lib;
    std::lock_guard<std::mutex> lock(l.mu);
    if (!l.dwarf) return error_response(404, "no debug info for " + std::string(debug_name));
    std::vector<std::string> files;
    l.dwarf->referenced_files(offset + l.base_svma, files);
    for (const auto& f : files) {
      if (f == file || normalize_path(f) == wanted) {
        path = normalize_path(f);
        break;
      }
    }
  }
  impl_->account(slot, lib->get());
  if (path.empty())
    return error_response(
        403, "the debug info of " + std::string(debug_name) + " does not refer to " + std::string(file));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return error_response(404, "source file not found: " + path);
  if (st.st_size > (64 << 20)) return error_response(413, "source file too large: " + path);
  auto text = read_file(path);
  if (!text) return error_response(404, text.error());
  ApiResponse r;
  r.body = "{\"symbolsLastModified\":null,\"sourceLastModified\":null,\"file\":";
  json::str(r.body, file);
  r.body += ",\"source\":";
  json::str(r.body, *text);
  r.body += '}';
  return r;
}

// ---- /asm/v1

ApiResponse Symbolizer::asm_v1(std::string_view request_json) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(request_json);
  simdjson::dom::element root;
  if (request_json.empty() || parser.parse(padded).get(root))
    return error_response(400, "request is not valid JSON");
  std::string_view debug_name, debug_id, start_s, size_s;
  if (root["debugName"].get_string().get(debug_name) || root["debugId"].get_string().get(debug_id) ||
      root["startAddress"].get_string().get(start_s) || root["size"].get_string().get(size_s))
    return error_response(400, "request needs the strings debugName, debugId, startAddress and size");
  bool until_end = false;
  if (auto v = root["continueUntilFunctionEnd"]; v.error() == simdjson::SUCCESS) {
    if (v.get_bool().get(until_end)) return error_response(400, "continueUntilFunctionEnd is not a boolean");
  }
  uint64_t start, size;
  if (!parse_address(start_s, start) || !parse_address(size_s, size))
    return error_response(400, "startAddress and size must be hex numbers");
  constexpr uint64_t kMaxBytes = 1 << 20;
  if (size > kMaxBytes) return error_response(400, "size too large (at most 1 MiB)");

  std::shared_ptr<Slot> slot;
  auto lib = impl_->get(debug_name, debug_id, &slot);
  if (!lib) return error_response(404, lib.error());
  Library& l = **lib;
  std::vector<uint8_t> bytes;
  uint16_t machine;
  {
    std::lock_guard<std::mutex> lock(l.mu);
    if (l.code == nullptr)
      return error_response(404, "the binary of " + std::string(debug_name) + " was not found");
    if (until_end) {
      if (const auto* s = l.symbols.find(start))
        size = std::max(size, std::min(l.symbols.end_of(s) - start, kMaxBytes));
    }
    auto span = l.code->code_bytes(start + l.base_svma, size);
    bytes.assign(span.begin(), span.end());
    machine = l.code->machine();
  }
  impl_->account(slot, &l);
  if (bytes.empty()) return error_response(404, "no code at that address");
  cs_arch arch;
  cs_mode mode;
  const char* arch_name;
  const char* syntax = "Intel";
  switch (machine) {
    case EM_X86_64:
      arch = CS_ARCH_X86;
      mode = CS_MODE_64;
      arch_name = "x86_64";
      break;
    case EM_386:
      arch = CS_ARCH_X86;
      mode = CS_MODE_32;
      arch_name = "x86";
      break;
    case EM_AARCH64:
      arch = CS_ARCH_ARM64;
      mode = CS_MODE_ARM;
      arch_name = "aarch64";
      syntax = "ARM";
      break;
    default:
      return error_response(422, "unsupported architecture for disassembly");
  }
  csh handle;
  if (cs_open(arch, mode, &handle) != CS_ERR_OK) return error_response(500, "cannot start capstone");
  if (arch == CS_ARCH_X86) cs_option(handle, CS_OPT_SYNTAX, CS_OPT_SYNTAX_INTEL);
  ApiResponse r;
  std::string& out = r.body;
  out = "{\"startAddress\":";
  json::hex(out, start);
  out += ",\"size\":";
  json::hex(out, bytes.size());
  out += ",\"arch\":\"";
  out += arch_name;
  out += "\",\"syntax\":[\"";
  out += syntax;
  out += "\"],\"instructions\":[";
  cs_insn* insn = cs_malloc(handle);
  const uint8_t* code = bytes.data();
  size_t left = bytes.size();
  uint64_t addr = start;
  bool first = true;
  while (left > 0) {
    if (!first) out += ',';
    first = false;
    out += '[';
    json::uint(out, addr - start);
    out += ',';
    uint64_t before = addr;
    if (cs_disasm_iter(handle, &code, &left, &addr, insn)) {
      std::string text = insn->mnemonic;
      if (insn->op_str[0] != '\0') {
        text += ' ';
        text += insn->op_str;
      }
      json::str(out, text);
    } else {
      json::str(out, "(bad)");
      ++code;
      --left;
      addr = before + 1;
    }
    out += ']';
  }
  cs_free(insn, 1);
  cs_close(&handle);
  out += "]}";
  return r;
}

}  // namespace fxprof::symbolizer
