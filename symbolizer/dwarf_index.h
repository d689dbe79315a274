// Internal to symbolizer/: an address index over a file's DWARF, read through elfutils libdw.
//
// Built in two steps so that a request touching a few functions of a huge binary reads only their compile
// units:
//  - once per file: the address ranges of every compile unit (the unit DIE only, via dwarf_get_units and
//    dwarf_ranges; .debug_aranges is not trusted to exist), sorted for binary search;
//  - once per compile unit, on the first address that falls in it: its line table decoded into a flat sorted
//    array (by line_program.h, ~10x faster than libdw's dwarf_getsrclines; libdw remains the fallback), and
//    its function tree (subprograms, inlined subroutines, through namespaces and lexical blocks) flattened
//    into disjoint address segments, each naming the deepest function or inline covering it.
// A lookup is then two binary searches and a walk up the inline chain: no allocation, no DIE decoding.
// Not thread-safe (neither is libdw): the caller holds the library's lock.
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "symbolizer/dwarf_image.h"
#include "symbolizer/dwp.h"
#include "symbolizer/elf_file.h"
#include "symbolizer/line_program.h"

namespace fxprof::symbolizer {

struct RawFrame {
  const char* name = nullptr;  // linkage name (to demangle) or plain name; nullptr = unknown
  const char* file = nullptr;  // nullptr = unknown
  uint32_t line = 0;
};

class DwarfIndex {
 public:
  // nullptr when the file has no usable DWARF. `alt` is the file's .gnu_debugaltlink file (dwz), found by
  // the caller's locator; without it libdw looks for the recorded path itself. `dwp_paths`: where a split
  // DWARF package may be, in order; the first that exists is read for the units whose .dwo libdw did not
  // find.
  static std::unique_ptr<DwarfIndex> open(const ElfObject& obj, const ElfObject* alt = nullptr,
                                          const std::vector<std::string>& dwp_paths = {});
  ~DwarfIndex();
  DwarfIndex(const DwarfIndex&) = delete;
  DwarfIndex& operator=(const DwarfIndex&) = delete;

  // Frames at `svma`, innermost first; the last one is the outermost (real) function, whose file/line is the
  // call site of the outermost inline. Returns false when no compile unit covers the address. `func_low` gets
  // the lowest address of the outer function's range containing svma (0 if unknown).
  bool lookup(uint64_t svma, std::vector<RawFrame>& frames, uint64_t& func_low);

  // Source files the debug info refers to: the compile unit at `svma` (or every unit when none covers it).
  void referenced_files(uint64_t svma, std::vector<std::string>& out);

  size_t memory_bytes() const { return bytes_; }

  // Split DWARF units found neither as a .dwo by libdw (its rule: beside the file, then in the unit's
  // DW_AT_comp_dir) nor in a package, one line each naming the .dwo and where it and the package were looked
  // for; and units of a package that could not be read (known once their first address is looked up).
  const std::vector<std::string>& missing_split_units() const { return missing_; }

 private:
  struct LineRow {
    uint64_t addr;
    const char* file;
    uint32_t line;
    uint32_t end;  // 1 = end of sequence
  };
  struct Node {
    const char* name;
    const char* call_file;
    uint32_t call_line;
    int32_t parent;
    uint64_t low;  // lowest address of the node's ranges
  };
  struct Seg {
    uint64_t lo;
    int32_t node;  // -1 = no function
  };
  struct CuData {
    std::vector<LineRow> lines;
    std::vector<Node> nodes;
    std::vector<Seg> segs;
  };
  struct Cu {
    Dwarf_Die die;  // unit DIE (skeleton for split units)
    Dwarf_Die sub;  // split unit DIE, or same as die
    std::unique_ptr<CuData> data;
    uint16_t version = 0;
    uint64_t dwo_id = 0;  // != 0: the split unit is in dwp_, read on the first lookup into the unit
    std::unique_ptr<SplitUnit> split;
  };
  struct CuRange {
    uint64_t lo, hi;
    uint32_t cu;
  };

  struct TreeBuilder;  // a unit's function ranges while it loads (dwarf_index.cpp)

  DwarfIndex() = default;
  // open() on `image` (the file's sections inflated by us) or, when null, on the file through libdw.
  static std::unique_ptr<DwarfIndex> open_from(const ElfObject& obj, std::unique_ptr<DwarfImage> image,
                                               const ElfObject* alt,
                                               const std::vector<std::string>& dwp_paths);
  // open's passes: the sections the line-program decoder reads, then the units and their ranges.
  void find_raw_sections();
  void index_units(const ElfObject& obj, const std::vector<std::string>& dwp_paths);
  std::string open_package(const std::vector<std::string>& dwp_paths);
  void note_missing_dwo(const ElfObject& obj, const std::string& dir, Dwarf_Die& cudie, uint64_t dwo_id,
                        const std::string& no_package);
  // A unit's data on its first lookup, in passes: the line table, the function tree, its ranges flattened.
  CuData& load(Cu& cu);
  // The line table, sorted; `files` gets the decoder's file table. False: read through libdw (nlines: rows
  // held, for the memory estimate).
  bool load_lines(Cu& cu, const char* comp_dir, CuData& data, std::vector<const char*>& files,
                  size_t& nlines);
  void load_tree(Cu& cu, const char* comp_dir, bool decoded, CuData& data, std::vector<const char*>& files,
                 TreeBuilder& b);
  static void flatten(TreeBuilder& b, std::vector<Seg>& segs);
  // libdw's paths (fallbacks) made absolute the same way as the decoder's, kept in file_names_.
  const char* absolute(const char* f, const char* comp_dir);
  void read_packaged_unit(Cu& cu);
  Cu* find_cu(uint64_t svma);

  // What dw_ and alt_ read when we inflated the sections (dwarf_image.h); ended after them.
  std::unique_ptr<DwarfImage> image_, alt_image_;
  bool skeletons_ = false;  // a unit is a skeleton (split DWARF)
  Dwarf* dw_ = nullptr;
  Dwarf* alt_ = nullptr;                        // set with dwarf_setalt: libdw's dwarf_end does not end it
  LineSections sections_;                       // for the direct line-program decoder (empty: use libdw)
  std::span<const uint8_t> addr_, ranges_sec_;  // .debug_addr, .debug_ranges: packaged units refer to them
  std::unique_ptr<DwpPackage> dwp_;
  std::deque<std::string> file_names_;  // paths joined by the decoder (LineRow::file points here)
  std::vector<Cu> cus_;
  std::vector<CuRange> ranges_;
  size_t bytes_ = 0;
  std::vector<std::string> missing_;
};

}  // namespace fxprof::symbolizer
