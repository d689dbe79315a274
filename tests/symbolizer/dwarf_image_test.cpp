// Tests of symbolizer/dwarf_image.cpp: a -gz program's DWARF inflated by libdeflate into the image libdw
// reads is what libelf inflates, without the sections no lookup reads, and every address answers as in the
// same program built without -gz.
#include "symbolizer/dwarf_image.h"

#include <gelf.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "symbolizer/elf_file.h"
#include "tests/support/sym_programs.h"

using namespace fxprof::test::sym_programs;
using fxprof::test::test_program;

namespace {

// Name -> bytes of the .debug_* sections of `elf` (inflated in place when compressed).
std::vector<std::pair<std::string, std::string>> debug_sections(Elf* elf) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t shstrndx = 0;
  REQUIRE(elf_getshdrstrndx(elf, &shstrndx) == 0);
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    REQUIRE(gelf_getshdr(scn, &sh) != nullptr);
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name == nullptr || std::strncmp(name, ".debug_", 7) != 0) continue;
    if (sh.sh_flags & SHF_COMPRESSED) REQUIRE(elf_compress(scn, 0, 0) >= 0);
    Elf_Data* d = elf_getdata(scn, nullptr);
    REQUIRE(d != nullptr);
    out.emplace_back(name, std::string(static_cast<const char*>(d->d_buf), d->d_size));
  }
  return out;
}

}  // namespace

TEST_CASE("dwarf image: a -gz file's sections are libelf's inflated bytes, without the unneeded ones") {
  auto gz = sym::ElfObject::open(test_program("sym_inline_gz"));
  REQUIRE(gz.ok());
  auto image = sym::DwarfImage::inflate(**gz);
  REQUIRE(image != nullptr);
  auto reference = sym::ElfObject::open(test_program("sym_inline_gz"));
  REQUIRE(reference.ok());
  const auto want = debug_sections((*reference)->elf());
  const auto got = debug_sections(image->elf());
  size_t compared = 0, left_out = 0;
  for (const auto& section : want) {
    const std::string& name = section.first;
    INFO(name);
    auto it = std::find_if(got.begin(), got.end(), [&](const auto& g) { return g.first == name; });
    if (!sym::dwarf_section_needed(name.c_str())) {
      CHECK(it == got.end());
      ++left_out;
      continue;
    }
    REQUIRE(it != got.end());
    CHECK(it->second == section.second);
    ++compared;
  }
  CHECK(got.size() == compared);
  CHECK(compared >= 5);  // info, abbrev, line, str, line_str at least
  CHECK(left_out >= 1);  // gcc -O2 -g: .debug_aranges, .debug_loclists
  // A file without compressed sections is left to libdw.
  auto plain = sym::ElfObject::open(test_program("sym_inline"));
  REQUIRE(plain.ok());
  CHECK(sym::DwarfImage::inflate(**plain) == nullptr);
}

TEST_CASE("dwarf image: every address of a -gz program answers as the program built without -gz") {
  // The two differ only in their debug sections' compression: the same code at the same addresses.
  Prog plain = prog(test_program("sym_inline"));
  Prog gz = prog(test_program("sym_inline_gz"));
  std::vector<uint64_t> addrs;
  for (const auto& [name, s] : nm_symbols(plain.path))
    for (uint64_t a = s.addr; a < s.addr + s.size; ++a) addrs.push_back(a);
  REQUIRE(addrs.size() > 100);
  sym::Symbolizer a(no_system_debug()), b(no_system_debug());
  a.add_known_lib(known(plain, plain.path));
  b.add_known_lib(known(gz, gz.path));
  auto ra = a.lookup("sym_inline", plain.breakpad, addrs);
  auto rb = b.lookup("sym_inline", gz.breakpad, addrs);
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  size_t with_lines = 0, with_inlines = 0;
  for (size_t i = 0; i < addrs.size(); ++i) {
    const sym::SymbolInfo &x = (*ra)[i], &y = (*rb)[i];
    INFO(hex(addrs[i]));
    REQUIRE(x.found == y.found);
    CHECK(x.function == y.function);
    CHECK(x.function_offset == y.function_offset);
    CHECK(x.file == y.file);
    CHECK(x.line == y.line);
    REQUIRE(x.inlines.size() == y.inlines.size());
    for (size_t k = 0; k < x.inlines.size(); ++k) {
      CHECK(x.inlines[k].function == y.inlines[k].function);
      CHECK(x.inlines[k].file == y.inlines[k].file);
      CHECK(x.inlines[k].line == y.inlines[k].line);
    }
    with_lines += x.line != 0;
    with_inlines += !x.inlines.empty();
  }
  CHECK(with_lines > addrs.size() / 2);
  CHECK(with_inlines > 0);
}

TEST_CASE("dwarf image: compressed dwz'd DWARF (Debian's -dbgsym files) keeps its inline chains") {
  // dwz moves the inlined functions' names into the alt file; both files then compressed, as Debian ships
  // them: the file and its alt file are each read through an image (or by libdw when one is not taken).
  fxprof::test::TempDir d;
  std::filesystem::copy_file(test_program("sym_inline"), d.file("a"));
  std::filesystem::copy_file(test_program("sym_inline_rebuilt"), d.file("b"));
  auto r = fxprof::test::run(
      {"dwz", "-m", d.file("common.debug"), "-M", d.file("common.debug"), d.file("a"), d.file("b")});
  INFO(r.err);
  REQUIRE(r.status == 0);
  for (const char* f : {"a", "common.debug"})
    REQUIRE(fxprof::test::run({"objcopy", "--compress-debug-sections=zlib", d.file(f)}).status == 0);
  auto a = sym::ElfObject::open(d.file("a"));
  REQUIRE(a.ok());
  REQUIRE((*a)->debugaltlink());
  REQUIRE(sym::DwarfImage::inflate(**a) != nullptr);  // compressed: read through an image
  Prog p = prog(d.file("a"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  check_compute_hot(s, p, true);
}
