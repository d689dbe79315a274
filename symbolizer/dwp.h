// Internal to symbolizer/: split DWARF packages (.dwp: a program's .dwo files in one file, made by binutils'
// dwp or llvm-dwp), which libdw 0.188 does not read (0.191 does).
//
// A package holds each .dwo section once; each unit's part of it is a contribution listed in
// .debug_cu_index, a hash table from the skeleton unit's DWO id to (offset, size) per section (DWARF 5
// §7.3.5, and GNU's version 2 of it for DWARF 4 -gsplit-dwarf). For the unit at hand, unit() builds an
// in-memory .dwo of that unit's contributions, which libdw then reads like a .dwo of its own. Two things
// libdw takes from the skeleton when it links a .dwo itself are put in the image instead: the skeleton file's
// .debug_addr from the unit's addr_base (and, for DWARF 4, its .debug_ranges from DW_AT_GNU_ranges_base, made
// absolute: their base is the skeleton's DW_AT_low_pc, which a unit read on its own does not have).
// Range lists relative to the unit's base address are made absolute the same way (DWARF 5 ones as start and
// length). Its .debug_str.dwo holds only the strings the unit's string offsets name (the package's is shared
// by all units and can be tens of MB), the offsets rewritten to match.
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>

#include "base/result.h"
#include "symbolizer/elf_file.h"

namespace fxprof::symbolizer {

// One split unit read from a package, as libdw sees it; owns the image and libdw's handle on it.
class SplitUnit {
 public:
  ~SplitUnit();
  SplitUnit(const SplitUnit&) = delete;
  SplitUnit& operator=(const SplitUnit&) = delete;
  Dwarf_Die die() const { return die_; }  // the split compile unit's DIE
  size_t bytes() const { return bytes_; }

 private:
  friend class DwpPackage;
  SplitUnit() = default;
  std::unique_ptr<ElfObject> image_;
  Dwarf* dw_ = nullptr;
  Dwarf_Die die_{};
  size_t bytes_ = 0;
};

class DwpPackage {
 public:
  // An error names what is wrong: not ELF, no .debug_cu_index, an index that does not fit its section.
  static Result<std::unique_ptr<DwpPackage>> open(const std::string& path);
  const std::string& path() const { return obj_->path(); }
  bool has(uint64_t dwo_id) const { return rows_.count(dwo_id) != 0; }

  // What a split unit refers to in its skeleton's file.
  struct Skeleton {
    uint64_t dwo_id = 0;
    std::span<const uint8_t> addr;    // the file's .debug_addr from the unit's addr_base
    std::span<const uint8_t> ranges;  // DWARF 4: the file's .debug_ranges from its DW_AT_GNU_ranges_base
    uint64_t low_pc = 0;              // the skeleton's DW_AT_low_pc: the base of the unit's range lists
  };
  // The unit with the skeleton's DWO id; an error when it is not in the package or libdw cannot read it.
  Result<std::unique_ptr<SplitUnit>> unit(const Skeleton& skeleton) const;

 private:
  DwpPackage() = default;
  // The sections a unit is made of, by their DW_SECT_* number in the index.
  enum Sect { kInfo, kAbbrev, kLine, kStrOffsets, kRnglists, kCount };
  struct Row {
    uint32_t off[kCount] = {};
    uint32_t size[kCount] = {};
  };
  std::unique_ptr<ElfObject> obj_;
  std::span<const uint8_t> sections_[kCount];
  std::span<const uint8_t> str_;  // .debug_str.dwo, shared by all units
  std::unordered_map<uint64_t, Row> rows_;
};

}  // namespace fxprof::symbolizer
