#include "symbolizer/dwarf_index.h"

#include <dwarf.h>
#include <gelf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "symbolizer/dwarf_image.h"

namespace fxprof::symbolizer {
namespace {

const char* die_name(Dwarf_Die* die) {
  Dwarf_Attribute a;
  const char* n = nullptr;
  if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) != nullptr ||
      dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a) != nullptr)
    n = dwarf_formstring(&a);
  if (n == nullptr && dwarf_attr_integrate(die, DW_AT_name, &a) != nullptr) n = dwarf_formstring(&a);
  return n;
}

std::string dwo_id_text(uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, id);
  return buf;
}

}  // namespace

struct DwarfIndex::TreeBuilder {
  const std::vector<const char*>* files = nullptr;
  struct R {
    uint64_t lo, hi;
    int32_t node;
    uint32_t depth;
  };
  std::vector<R> ranges;
  std::vector<uint32_t> depth;

  const char* file_name(Dwarf_Word idx) {
    if (files == nullptr || idx >= files->size()) return nullptr;
    return (*files)[idx];
  }
};

std::unique_ptr<DwarfIndex> DwarfIndex::open(const ElfObject& obj, const ElfObject* alt,
                                             const std::vector<std::string>& dwp_paths) {
  if (!obj.has_section(".debug_info") && !obj.has_section(".zdebug_info")) return nullptr;
  // A dwz'd file whose alt file our locator did not find: libdw looks for it by the file's
  // .gnu_debugaltlink, which the image does not carry.
  std::unique_ptr<DwarfImage> image =
      alt == nullptr && obj.has_section(".gnu_debugaltlink") ? nullptr : DwarfImage::inflate(obj);
  if (!image) return open_from(obj, nullptr, alt, dwp_paths);
  auto idx = open_from(obj, std::move(image), alt, dwp_paths);
  // libdw looks for a split unit's .dwo beside the file it read, and an image in memory is beside nothing:
  // a file with skeleton units is read by libdw itself (so is one libdw could not read from the image).
  if (!idx || idx->skeletons_) idx = open_from(obj, nullptr, alt, dwp_paths);
  return idx;
}

std::unique_ptr<DwarfIndex> DwarfIndex::open_from(const ElfObject& obj, std::unique_ptr<DwarfImage> image,
                                                  const ElfObject* alt,
                                                  const std::vector<std::string>& dwp_paths) {
  // Without an image, libdw inflates the file's sections itself (all of them, with zlib).
  if (!image && !obj.decompress_debug_sections()) return nullptr;  // names from the symbol table only
  std::unique_ptr<DwarfImage> alt_image = alt != nullptr ? DwarfImage::inflate(*alt) : nullptr;
  if (alt != nullptr && !alt_image && !alt->decompress_debug_sections()) alt = nullptr;
  Dwarf* dw = dwarf_begin_elf(image ? image->elf() : obj.elf(), DWARF_C_READ, nullptr);
  if (dw == nullptr) return nullptr;
  std::unique_ptr<DwarfIndex> idx(new DwarfIndex());
  idx->dw_ = dw;
  idx->image_ = std::move(image);
  idx->alt_image_ = std::move(alt_image);
  // dwz moved the DIEs and strings several files share into the alt file; forms referring to it
  // (DW_FORM_GNU_ref_alt, DW_FORM_GNU_strp_alt) resolve once libdw has it.
  if (alt != nullptr && (idx->alt_ = dwarf_begin_elf(idx->alt_image_ ? idx->alt_image_->elf() : alt->elf(),
                                                     DWARF_C_READ, nullptr)) != nullptr)
    dwarf_setalt(dw, idx->alt_);
  idx->find_raw_sections();
  idx->index_units(obj, dwp_paths);
  if (idx->cus_.empty()) return nullptr;
  std::sort(idx->ranges_.begin(), idx->ranges_.end(),
            [](const CuRange& a, const CuRange& b) { return a.lo < b.lo; });
  idx->bytes_ = idx->ranges_.capacity() * sizeof(CuRange) + idx->cus_.capacity() * sizeof(Cu);
  return idx;
}

// The raw sections for the line-program decoder (libdw has decompressed them in place when compressed).
void DwarfIndex::find_raw_sections() {
  Elf* elf = dwarf_getelf(dw_);
  size_t shstrndx;
  if (elf == nullptr || elf_getshdrstrndx(elf, &shstrndx) != 0) return;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type == SHT_NOBITS) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name == nullptr) continue;
    std::span<const uint8_t>* target = nullptr;
    if (std::strcmp(name, ".debug_line") == 0) target = &sections_.line;
    if (std::strcmp(name, ".debug_str") == 0) target = &sections_.str;
    if (std::strcmp(name, ".debug_line_str") == 0) target = &sections_.line_str;
    if (std::strcmp(name, ".debug_addr") == 0) target = &addr_;
    if (std::strcmp(name, ".debug_ranges") == 0) target = &ranges_sec_;
    if (target == nullptr) continue;
    if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0) continue;
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (d != nullptr && d->d_buf != nullptr) *target = {static_cast<const uint8_t*>(d->d_buf), d->d_size};
  }
}

// Every compile unit with addresses, and its ranges; a split unit's data is found in its .dwo (libdw) or
// the package, else said missing once per .dwo name.
void DwarfIndex::index_units(const ElfObject& obj, const std::vector<std::string>& dwp_paths) {
  std::string dir = obj.path().substr(0, obj.path().rfind('/') + 1);
  if (dir.empty()) dir = "./";
  Dwarf_CU* cu = nullptr;
  Dwarf_Half version;
  uint8_t unit_type;
  Dwarf_Die cudie, subdie;
  // The package, opened at the first unit libdw found no .dwo for: what is wrong with it, or where none was.
  std::string no_package;
  bool package_tried = false;
  while (dwarf_get_units(dw_, cu, &cu, &version, &unit_type, &cudie, &subdie) == 0) {
    if (unit_type == DW_UT_type || unit_type == DW_UT_split_type) continue;
    if (unit_type == DW_UT_skeleton) skeletons_ = true;
    Cu c;
    c.die = cudie;
    c.sub = cudie;
    c.version = version;
    if (unit_type == DW_UT_skeleton && dwarf_tag(&subdie) == DW_TAG_compile_unit) c.sub = subdie;
    const bool unlinked = unit_type == DW_UT_skeleton && dwarf_tag(&subdie) != DW_TAG_compile_unit;
    uint64_t dwo_id = 0;
    if (unlinked && !package_tried) {
      package_tried = true;
      no_package = open_package(dwp_paths);
    }
    if (unlinked && dwp_ &&
        dwarf_cu_info(cu, nullptr, nullptr, nullptr, nullptr, &dwo_id, nullptr, nullptr) == 0 &&
        dwp_->has(dwo_id)) {
      c.dwo_id = dwo_id;  // read from the package on the first lookup into the unit
    } else if (unlinked) {
      note_missing_dwo(obj, dir, cudie, dwo_id, no_package);
    }
    uint32_t id = static_cast<uint32_t>(cus_.size());
    Dwarf_Addr base, start, end;
    ptrdiff_t off = 0;
    bool any = false;
    while ((off = dwarf_ranges(&cudie, off, &base, &start, &end)) > 0) {
      if (end > start) {
        ranges_.push_back({start, end, id});
        any = true;
      }
    }
    if (any) cus_.push_back(std::move(c));
  }
}

// The first package of `dwp_paths` that exists, into dwp_: "" when opened, else what is wrong with it or
// where none was.
std::string DwarfIndex::open_package(const std::vector<std::string>& dwp_paths) {
  std::string no_package;
  for (const std::string& path : dwp_paths) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;
    auto pkg = DwpPackage::open(path);
    if (pkg) dwp_ = std::move(pkg).value();
    if (!pkg) no_package = pkg.error();
    break;
  }
  if (!dwp_ && no_package.empty()) {
    no_package = dwp_paths.empty() ? "none looked for" : "none at ";
    for (const std::string& path : dwp_paths) no_package += (&path == &dwp_paths[0] ? "" : ", ") + path;
  }
  return no_package;
}

// A split unit's functions and inlines are in a .dwo that is not there: says which, once per file name.
void DwarfIndex::note_missing_dwo(const ElfObject& obj, const std::string& dir, Dwarf_Die& cudie,
                                  uint64_t dwo_id, const std::string& no_package) {
  Dwarf_Attribute a;
  const char* dwo = nullptr;
  const char* comp_dir = nullptr;
  if (dwarf_attr(&cudie, DW_AT_dwo_name, &a) != nullptr ||
      dwarf_attr(&cudie, DW_AT_GNU_dwo_name, &a) != nullptr)
    dwo = dwarf_formstring(&a);
  if (dwarf_attr(&cudie, DW_AT_comp_dir, &a) != nullptr) comp_dir = dwarf_formstring(&a);
  if (dwo == nullptr) return;
  std::string where = dwo[0] == '/' ? std::string(dwo) : dir + dwo;
  if (dwo[0] != '/' && comp_dir != nullptr && std::string(comp_dir) + "/" + dwo != where)
    where += std::string(" and ") + comp_dir + "/" + dwo;
  std::string line = "Split DWARF file not found: " + std::string(dwo) + " (of " + obj.path() +
                     "), looked for at " + where + "; package: ";
  if (dwp_)
    line += dwp_->path() + " has no unit with DWO id " + dwo_id_text(dwo_id);
  else
    line += no_package;
  if (std::find(missing_.begin(), missing_.end(), line) == missing_.end())
    missing_.push_back(std::move(line));
}

DwarfIndex::~DwarfIndex() {
  cus_.clear();
  if (dw_ != nullptr) dwarf_end(dw_);
  if (alt_ != nullptr) dwarf_end(alt_);
}

DwarfIndex::Cu* DwarfIndex::find_cu(uint64_t svma) {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), svma,
                             [](uint64_t v, const CuRange& r) { return v < r.lo; });
  // Ranges of different units do not overlap in sane files; look back a little in case they do.
  for (int k = 0; k < 4 && it != ranges_.begin(); ++k) {
    --it;
    if (svma < it->hi) return &cus_[it->cu];
  }
  return nullptr;
}

void DwarfIndex::read_packaged_unit(Cu& cu) {
  DwpPackage::Skeleton sk;
  sk.dwo_id = cu.dwo_id;
  cu.dwo_id = 0;
  // The skeleton's bases into its file's .debug_addr (and, DWARF 4, .debug_ranges): libdw would take them
  // from the skeleton when linking a .dwo; the package's unit reads the sections from there instead.
  auto from_base = [&](std::span<const uint8_t> sec, std::initializer_list<int> attrs) {
    Dwarf_Attribute a;
    Dwarf_Word base = 0;
    for (int at : attrs)
      if (dwarf_attr(&cu.die, static_cast<unsigned>(at), &a) != nullptr && dwarf_formudata(&a, &base) == 0)
        break;
    return base < sec.size() ? sec.subspan(base) : std::span<const uint8_t>();
  };
  sk.addr = from_base(addr_, {DW_AT_addr_base, DW_AT_GNU_addr_base});
  if (cu.version < 5) sk.ranges = from_base(ranges_sec_, {DW_AT_GNU_ranges_base});
  Dwarf_Addr low_pc = 0;
  if (dwarf_lowpc(&cu.die, &low_pc) == 0) sk.low_pc = low_pc;
  auto unit = dwp_->unit(sk);
  if (!unit) {
    if (std::find(missing_.begin(), missing_.end(), unit.error()) == missing_.end())
      missing_.push_back("Split DWARF unit not read: " + unit.error());
    return;
  }
  cu.split = std::move(unit).value();
  cu.sub = cu.split->die();
  bytes_ += cu.split->bytes();
}

const char* DwarfIndex::absolute(const char* f, const char* comp_dir) {
  if (f == nullptr) return nullptr;
  std::string p = absolute_source_path(f, comp_dir);
  return p == f ? f : file_names_.emplace_back(std::move(p)).c_str();
}

DwarfIndex::CuData& DwarfIndex::load(Cu& cu) {
  if (cu.data) return *cu.data;
  if (cu.dwo_id != 0) read_packaged_unit(cu);
  auto data = std::make_unique<CuData>();
  std::vector<const char*> files;  // file index -> path, for the decoder's rows and DW_AT_call_file
  size_t nlines = 0;
  Dwarf_Attribute attr;
  const char* comp_dir = nullptr;
  if (dwarf_attr(&cu.die, DW_AT_comp_dir, &attr) != nullptr) comp_dir = dwarf_formstring(&attr);
  const bool decoded = load_lines(cu, comp_dir, *data, files, nlines);
  TreeBuilder b;
  load_tree(cu, comp_dir, decoded, *data, files, b);
  flatten(b, data->segs);
  bytes_ += data->lines.capacity() * sizeof(LineRow) + data->nodes.capacity() * sizeof(Node) +
            data->segs.capacity() * sizeof(Seg) + sizeof(CuData) + files.size() * 64 +
            nlines * 24;  // abbreviations and DIE caches of libdw, roughly
  cu.data = std::move(data);
  return *cu.data;
}

// The line table, flattened and sorted (end-of-sequence rows first at equal addresses): decoded directly
// when possible, else through libdw.
bool DwarfIndex::load_lines(Cu& cu, const char* comp_dir, CuData& data, std::vector<const char*>& files,
                            size_t& nlines) {
  bool decoded = false;
  Dwarf_Attribute attr;
  Dwarf_Word stmt_list;
  if (!sections_.line.empty() && dwarf_attr(&cu.die, DW_AT_stmt_list, &attr) != nullptr &&
      dwarf_formudata(&attr, &stmt_list) == 0) {
    std::vector<DecodedRow> rows;
    size_t store_before = file_names_.size();
    decoded = decode_line_program(sections_, stmt_list, comp_dir, file_names_, files, rows);
    if (decoded) {
      // Each sequence is already in address order: order the sequences by start address and concatenate
      // (the sort below then only checks; it sorts for real only for odd producers).
      std::vector<std::pair<size_t, size_t>> seqs;  // [begin, end) in rows
      for (size_t i = 0, begin = 0; i < rows.size(); ++i)
        if (rows[i].end || i + 1 == rows.size()) {
          seqs.emplace_back(begin, i + 1);
          begin = i + 1;
        }
      std::sort(seqs.begin(), seqs.end(),
                [&](const auto& a, const auto& b) { return rows[a.first].addr < rows[b.first].addr; });
      data.lines.reserve(rows.size());
      for (auto [begin, end] : seqs)
        for (size_t i = begin; i < end; ++i) {
          const DecodedRow& row = rows[i];
          data.lines.push_back(
              {row.addr, row.file < files.size() ? files[row.file] : nullptr, row.line, row.end ? 1u : 0u});
        }
      nlines = rows.size();
    } else {
      while (file_names_.size() > store_before) file_names_.pop_back();
      files.clear();
    }
  }
  Dwarf_Lines* lines = nullptr;
  if (!decoded && dwarf_getsrclines(&cu.die, &lines, &nlines) == 0) {
    data.lines.reserve(nlines);
    for (size_t i = 0; i < nlines; ++i) {
      Dwarf_Line* l = dwarf_onesrcline(lines, i);
      if (l == nullptr) continue;
      Dwarf_Addr addr;
      int lineno = 0;
      bool end = false;
      if (dwarf_lineaddr(l, &addr) != 0) continue;
      dwarf_lineno(l, &lineno);
      dwarf_lineendsequence(l, &end);
      const char* file = absolute(dwarf_linesrc(l, nullptr, nullptr), comp_dir);
      data.lines.push_back({addr, file, static_cast<uint32_t>(std::max(lineno, 0)), end ? 1u : 0u});
    }
    nlines *= 2;  // libdw keeps its own copy
  }
  auto before = [](const LineRow& a, const LineRow& b) {
    if (a.addr != b.addr) return a.addr < b.addr;
    return a.end > b.end;
  };
  if (!std::is_sorted(data.lines.begin(), data.lines.end(), before))
    std::stable_sort(data.lines.begin(), data.lines.end(), before);
  return decoded;
}

// The function tree: a node per function and inlined call that has ranges, its ranges in b.
void DwarfIndex::load_tree(Cu& cu, const char* comp_dir, bool decoded, CuData& data,
                           std::vector<const char*>& files, TreeBuilder& b) {
  // DW_AT_call_file indexes the unit's file table: the decoder's, or libdw's (split units, fallback).
  if (!decoded || cu.sub.addr != cu.die.addr) {
    files.clear();
    Dwarf_Files* df = nullptr;
    size_t nf = 0;
    // A split unit without a file table of its own (clang's) uses its skeleton's: libdw does so for a .dwo it
    // linked, not for a package's unit read on its own.
    if ((dwarf_getsrcfiles(&cu.sub, &df, &nf) == 0 && nf > 0) ||
        (cu.split && dwarf_getsrcfiles(&cu.die, &df, &nf) == 0))
      for (size_t i = 0; i < nf; ++i)
        files.push_back(absolute(dwarf_filesrc(df, i, nullptr, nullptr), comp_dir));
  }
  b.files = &files;
  auto add_node = [&](Dwarf_Die* die, int32_t parent) -> int32_t {
    uint64_t low = UINT64_MAX;
    size_t first = b.ranges.size();
    int32_t id = static_cast<int32_t>(data.nodes.size());
    uint32_t depth = parent < 0 ? 0 : b.depth[static_cast<size_t>(parent)] + 1;
    Dwarf_Addr base, start, end;
    ptrdiff_t off = 0;
    while ((off = dwarf_ranges(die, off, &base, &start, &end)) > 0) {
      if (end <= start) continue;
      b.ranges.push_back({start, end, id, depth});
      low = std::min<uint64_t>(low, start);
    }
    if (b.ranges.size() == first) return -1;
    Node n{die_name(die), nullptr, 0, parent, low};
    if (parent >= 0) {
      Dwarf_Attribute a;
      Dwarf_Word w;
      if (dwarf_attr(die, DW_AT_call_file, &a) != nullptr && dwarf_formudata(&a, &w) == 0)
        n.call_file = b.file_name(w);
      if (dwarf_attr(die, DW_AT_call_line, &a) != nullptr && dwarf_formudata(&a, &w) == 0)
        n.call_line = static_cast<uint32_t>(w);
    }
    data.nodes.push_back(n);
    b.depth.push_back(depth);
    return id;
  };
  // Iterative-recursive walk with an explicit depth bound (hostile files cannot blow the stack).
  auto walk = [&](auto& self, Dwarf_Die* parent_die, int32_t parent, int level) -> void {
    if (level > 64) return;
    Dwarf_Die child;
    if (dwarf_child(parent_die, &child) != 0) return;
    do {
      switch (dwarf_tag(&child)) {
        case DW_TAG_subprogram: {
          // Nested subprograms are functions of their own, not inlines of their parent.
          int32_t id = add_node(&child, -1);
          if (id >= 0) self(self, &child, id, level + 1);
          break;
        }
        case DW_TAG_inlined_subroutine:
          if (parent >= 0) {
            int32_t id = add_node(&child, parent);
            self(self, &child, id >= 0 ? id : parent, level + 1);
          }
          break;
        case DW_TAG_lexical_block:
        case DW_TAG_try_block:
        case DW_TAG_catch_block:
          if (parent >= 0) self(self, &child, parent, level + 1);
          break;
        case DW_TAG_namespace:
        case DW_TAG_module:
          self(self, &child, parent, level + 1);
          break;
        default:
          break;
      }
    } while (dwarf_siblingof(&child, &child) == 0);
  };
  walk(walk, &cu.sub, -1, 0);
}

// Flattens nested ranges into disjoint segments naming the deepest node (parents sort before children).
void DwarfIndex::flatten(TreeBuilder& b, std::vector<Seg>& segs) {
  std::sort(b.ranges.begin(), b.ranges.end(), [](const TreeBuilder::R& x, const TreeBuilder::R& y) {
    if (x.lo != y.lo) return x.lo < y.lo;
    if (x.depth != y.depth) return x.depth < y.depth;
    return x.hi > y.hi;
  });
  auto emit = [&](uint64_t pos, int32_t node) {
    if (!segs.empty() && segs.back().lo == pos) {
      segs.back().node = node;
      if (segs.size() >= 2 && segs[segs.size() - 2].node == node) segs.pop_back();
    } else if (segs.empty() || segs.back().node != node) {
      segs.push_back({pos, node});
    }
  };
  std::vector<TreeBuilder::R> stack;
  auto flush = [&](uint64_t pos) {
    while (!stack.empty() && stack.back().hi <= pos) {
      uint64_t end = stack.back().hi;
      stack.pop_back();
      while (!stack.empty() && stack.back().hi <= end) stack.pop_back();  // improperly nested leftovers
      emit(end, stack.empty() ? -1 : stack.back().node);
    }
  };
  for (const auto& r : b.ranges) {
    flush(r.lo);
    stack.push_back(r);
    emit(r.lo, r.node);
  }
  flush(UINT64_MAX);
  segs.shrink_to_fit();
}

bool DwarfIndex::lookup(uint64_t svma, std::vector<RawFrame>& frames, uint64_t& func_low) {
  frames.clear();
  func_low = 0;
  Cu* cu = find_cu(svma);
  if (cu == nullptr) return false;
  CuData& d = load(*cu);
  const char* file = nullptr;
  uint32_t line = 0;
  auto lit = std::upper_bound(d.lines.begin(), d.lines.end(), svma,
                              [](uint64_t v, const LineRow& r) { return v < r.addr; });
  if (lit != d.lines.begin() && !(lit - 1)->end) {
    file = (lit - 1)->file;
    line = (lit - 1)->line;
  }
  auto sit =
      std::upper_bound(d.segs.begin(), d.segs.end(), svma, [](uint64_t v, const Seg& s) { return v < s.lo; });
  int32_t node = sit == d.segs.begin() ? -1 : (sit - 1)->node;
  if (node < 0) {
    if (file == nullptr) return false;
    frames.push_back({nullptr, file, line});
    return true;
  }
  while (node >= 0) {
    const Node& n = d.nodes[static_cast<size_t>(node)];
    frames.push_back({n.name, file, line});
    file = n.call_file;
    line = n.call_line;
    if (n.parent < 0) func_low = n.low;
    node = n.parent;
  }
  return true;
}

void DwarfIndex::referenced_files(uint64_t svma, std::vector<std::string>& out) {
  auto add_unit = [&](Cu& cu) {
    std::unordered_set<std::string> seen(out.begin(), out.end());
    Dwarf_Attribute attr;
    const char* comp_dir = nullptr;
    if (dwarf_attr(&cu.die, DW_AT_comp_dir, &attr) != nullptr) comp_dir = dwarf_formstring(&attr);
    for (Dwarf_Die* die : {&cu.die, &cu.sub}) {
      Dwarf_Files* files = nullptr;
      size_t n = 0;
      if (dwarf_getsrcfiles(die, &files, &n) != 0) continue;
      for (size_t i = 0; i < n; ++i) {
        const char* f = dwarf_filesrc(files, i, nullptr, nullptr);
        if (f == nullptr) continue;
        std::string path = absolute_source_path(f, comp_dir);
        if (seen.insert(path).second) out.push_back(std::move(path));
      }
    }
  };
  if (Cu* cu = find_cu(svma)) {
    add_unit(*cu);
    return;
  }
  for (Cu& cu : cus_) add_unit(cu);
}

}  // namespace fxprof::symbolizer
