// Tests of symbolizer/dwp.cpp: split DWARF packages (.dwp) give the same names, lines and inline chains as
// the .dwo files they were made of; a package that is missing, lacks the unit or is damaged is one line.
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/sym_programs.h"

using namespace fxprof::test::sym_programs;
using fxprof::test::TempDir;
using fxprof::test::test_program;

namespace {

struct Variant {
  const char* dir;      // under tests/programs' symbolizer/split/
  const char* name;     // the program
  const char* package;  // its package, beside it
  const char* hot;      // sym_inline's function whose every byte is compared with llvm-symbolizer
};
// g++ -gdwarf-4 packaged by binutils' dwp and by llvm-dwp (index version 2), clang++ DWARF 5 by llvm-dwp (5);
// then C programs whose unit is one contiguous range (DWARF 4 range lists relative to the unit's low_pc).
const Variant kVariants[] = {{"gcc4", "sym_split4", "sym_split4.dwp", "_Z11compute_hoti"},
                             {"gcc4", "sym_split4", "sym_split4.llvm.dwp", "_Z11compute_hoti"},
                             {"clang5", "sym_split5", "sym_split5.llvm.dwp", "_Z11compute_hoti"},
                             {"gcc4", "contig4", "contig4.dwp", "hot"},
                             {"clang5", "contig5", "contig5.llvm.dwp", "hot"}};

std::string built(const Variant& v, const std::string& file) {
  return test_program(std::string("symbolizer/split/") + v.dir + "/" + file);
}

// A copy of the program in `d`, with its .dwo beside it or its package as <program>.dwp.
std::string place(const TempDir& d, const Variant& v, bool with_dwo, bool with_package) {
  const std::string bin = d.file(v.name);
  std::filesystem::copy_file(built(v, v.name), bin);
  if (with_dwo) std::filesystem::copy_file(built(v, std::string("dwo/") + v.name + ".dwo"), bin + ".dwo");
  if (with_package) std::filesystem::copy_file(built(v, v.package), bin + ".dwp");
  return bin;
}

// Every byte of every function of the program.
std::vector<uint64_t> all_function_bytes(const std::string& bin) {
  std::vector<uint64_t> out;
  for (const auto& [name, s] : nm_symbols(bin))
    for (uint64_t a = s.addr; a < s.addr + s.size; ++a) out.push_back(a);
  return out;
}

std::vector<sym::SymbolInfo> lookup_all(const std::string& bin, const sym::Options& o,
                                        std::vector<std::string>* missing = nullptr,
                                        const std::vector<uint64_t>& addrs = {}) {
  Prog p = prog(bin);
  sym::Symbolizer s(o);
  s.add_known_lib(known(p, bin));
  auto r = s.lookup("sym_inline", p.breakpad, addrs.empty() ? all_function_bytes(bin) : addrs);
  REQUIRE(r.ok());
  if (missing != nullptr)
    for (sym::MissingFile& m : s.missing_files("sym_inline", p.breakpad)) {
      CHECK(m.kind == sym::MissingFile::Kind::SplitDwarf);
      missing->push_back(std::move(m.text));
    }
  return std::move(r).value();
}

// The package gives the .dwo files' answers at every byte of every function, and llvm-symbolizer's chains.
void check_package(const Variant& v) {
  {
    INFO(v.package);
    TempDir with_dwo, with_package;
    const std::string dwo_bin = place(with_dwo, v, true, false);
    const std::string dwp_bin = place(with_package, v, false, true);
    std::vector<std::string> missing;
    const std::vector<uint64_t> addrs = all_function_bytes(dwp_bin);
    const auto want = lookup_all(dwo_bin, no_system_debug(), &missing, addrs);
    CHECK(missing.empty());
    const auto got = lookup_all(dwp_bin, no_system_debug(), &missing, addrs);
    CHECK(missing.empty());
    REQUIRE(got.size() == want.size());
    size_t inlined = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("address #" << i);
      REQUIRE(got[i].found == want[i].found);
      CHECK(got[i].function == want[i].function);
      CHECK(got[i].function_offset == want[i].function_offset);
      CHECK(got[i].file == want[i].file);
      CHECK(got[i].line == want[i].line);
      REQUIRE(got[i].inlines.size() == want[i].inlines.size());
      for (size_t k = 0; k < want[i].inlines.size(); ++k) {
        CHECK(got[i].inlines[k].function == want[i].inlines[k].function);
        CHECK(got[i].inlines[k].file == want[i].inlines[k].file);
        CHECK(got[i].inlines[k].line == want[i].inlines[k].line);
      }
      inlined += !want[i].inlines.empty();
    }
    CHECK(inlined > 10);  // the comparison covers inline chains, not only outer functions
    // And the chains are llvm-symbolizer's reading of the package, frame by frame (for sym_inline: in the
    // contiguous C programs llvm-symbolizer 14 leaves out an inlined range's first bytes, loop alignment
    // padding, which libdw's reading of the .dwo includes; the package must give what the .dwo gives).
    if (std::string(v.name).rfind("sym_split", 0) != 0) return;
    const NmSym hot = nm_symbols(dwp_bin).at(v.hot);
    std::vector<std::string> cmd = {"llvm-symbolizer", "--obj=" + dwp_bin, "--dwp=" + dwp_bin + ".dwp"};
    for (uint64_t a = hot.addr; a < hot.addr + hot.size; ++a) cmd.push_back(hex(a));
    auto r = fxprof::test::run(cmd);
    REQUIRE(r.status == 0);
    Prog p = prog(dwp_bin);
    sym::Symbolizer s(no_system_debug());
    s.add_known_lib(known(p, dwp_bin));
    std::vector<uint64_t> hot_addrs(cmd.size() - 3);
    for (size_t k = 0; k < hot_addrs.size(); ++k) hot_addrs[k] = hot.addr + k;
    auto ours = s.lookup("sym_inline", p.breakpad, hot_addrs);
    REQUIRE(ours.ok());
    std::istringstream out(r.out);
    for (size_t k = 0; k < hot_addrs.size(); ++k) {
      INFO("address " << hex(hot_addrs[k]));
      std::vector<std::pair<std::string, std::string>> frames;  // function, file:line:column; innermost first
      std::string fn, where;
      while (std::getline(out, fn) && !fn.empty() && std::getline(out, where)) frames.emplace_back(fn, where);
      const sym::SymbolInfo& info = (*ours)[k];
      REQUIRE(frames.size() == info.inlines.size() + 1);
      for (size_t f = 0; f < frames.size(); ++f) {
        const std::string& name = f < info.inlines.size() ? info.inlines[f].function : info.function;
        const std::string file = f < info.inlines.size() ? info.inlines[f].file : info.file;
        const uint32_t line = f < info.inlines.size() ? info.inlines[f].line : info.line;
        CHECK(frames[f].first.rfind(name, 0) == 0);  // ours may lack the parameters of a static function
        CHECK(frames[f].second.rfind(file + ":" + std::to_string(line) + ":", 0) == 0);
      }
    }
    // The chains are the source's (leaf_helper in mid_helper in compute_hot, at the marked lines). clang
    // puts some of leaf_helper's instructions on mid_helper's loop line (llvm-symbolizer agrees).
    if (std::string(v.name) == "sym_split4") check_compute_hot(s, p, true);
  }
}

}  // namespace

TEST_CASE(
    "dwp: binutils' dwp package of g++ -gdwarf-4 -gsplit-dwarf gives the .dwo's inline chains and lines") {
  check_package(kVariants[0]);
}

TEST_CASE("dwp: llvm-dwp's package of g++ -gdwarf-4 -gsplit-dwarf gives the .dwo's inline chains and lines") {
  check_package(kVariants[1]);
}

TEST_CASE(
    "dwp: llvm-dwp's package of clang++ -gsplit-dwarf (DWARF 5) gives the .dwo's inline chains and lines") {
  check_package(kVariants[2]);
}

TEST_CASE(
    "dwp: a DWARF 4 unit of one contiguous range: its range lists are relative to the skeleton's low_pc") {
  check_package(kVariants[3]);
}

TEST_CASE("dwp: a DWARF 5 unit of one contiguous range (clang) gives the .dwo's inline chains and lines") {
  check_package(kVariants[4]);
}

TEST_CASE("dwp: a package is found in a --symbol-dir folder by the binary's name") {
  const Variant& v = kVariants[0];
  TempDir d, symbols;
  const std::string bin = place(d, v, false, false);
  std::filesystem::copy_file(built(v, v.package), symbols.file(std::string(v.name) + ".dwp"));
  sym::Options o = no_system_debug();
  o.symbol_dirs = {symbols.path()};
  std::vector<std::string> missing;
  const auto got = lookup_all(bin, o, &missing);
  CHECK(missing.empty());
  size_t inlined = 0;
  for (const auto& info : got) inlined += !info.inlines.empty();
  CHECK(inlined > 20);
}

TEST_CASE("dwp: no package, one without the unit, or a damaged one is one line naming where it looked") {
  const Variant& v = kVariants[0];
  TempDir d;
  const std::string bin = place(d, v, false, false);
  const std::string dwo = "sym_split4.dwo (of " + bin + "), looked for at " + bin + ".dwo and " +
                          std::filesystem::path(built(v, v.name)).parent_path().string() + "/sym_split4.dwo";
  auto only_line = [&](const std::string& package) {
    std::vector<std::string> missing;
    const auto got = lookup_all(bin, no_system_debug(), &missing);
    for (const auto& info : got) CHECK(info.inlines.empty());
    CHECK(missing ==
          std::vector<std::string>{"Split DWARF file not found: " + dwo + "; package: " + package});
  };
  SECTION("none") { only_line("none at " + bin + ".dwp"); }
  SECTION("another program's") {
    std::filesystem::copy_file(built(kVariants[2], kVariants[2].package), bin + ".dwp");
    auto r = fxprof::test::run({"readelf", "--debug-dump=info", bin});
    REQUIRE(r.status == 0);
    const size_t at = r.out.find("DW_AT_GNU_dwo_id");
    REQUIRE(at != std::string::npos);
    const size_t hex = r.out.find("0x", at);
    std::string id = r.out.substr(hex + 2, r.out.find_first_not_of("0123456789abcdef", hex + 2) - hex - 2);
    id.insert(0, 16 - id.size(), '0');
    only_line(bin + ".dwp has no unit with DWO id 0x" + id);
  }
  SECTION("garbage") {
    std::ofstream(bin + ".dwp") << "not an ELF file at all";
    only_line(bin + ".dwp is not an ELF file");
  }
  SECTION("a unit that lies outside the package's sections") {
    // The package opens and has the unit; its contributions are made too large. Said when the unit is
    // first needed: one line, and the addresses keep their functions from the symbol table.
    std::filesystem::copy_file(built(v, v.package), bin + ".dwp");
    auto r = fxprof::test::run({"readelf", "-SW", bin + ".dwp"});
    REQUIRE(r.status == 0);
    std::istringstream sections(r.out);
    std::string line;
    uint64_t at = 0;
    while (std::getline(sections, line))
      if (line.find(".debug_cu_index") != std::string::npos) {
        std::istringstream fields(line.substr(line.find(".debug_cu_index")));
        std::string name, type, addr, off;
        fields >> name >> type >> addr >> off;
        at = std::stoull(off, nullptr, 16);
      }
    REQUIRE(at != 0);
    std::fstream f(bin + ".dwp", std::ios::in | std::ios::out | std::ios::binary);
    uint32_t header[4];
    f.seekg(static_cast<std::streamoff>(at));
    f.read(reinterpret_cast<char*>(header), sizeof header);
    const uint32_t ncols = header[1], nunits = header[2], nslots = header[3];
    REQUIRE(nunits == 1);
    // The size table follows the slots (ids and rows), the columns' section ids and the offset table.
    const uint64_t sizes = at + 16 + nslots * 12 + ncols * 4 + nunits * ncols * 4;
    const uint32_t huge = 0x7fffffff;
    for (uint32_t c = 0; c < ncols; ++c) {
      f.seekp(static_cast<std::streamoff>(sizes + c * 4));
      f.write(reinterpret_cast<const char*>(&huge), 4);
    }
    f.close();
    std::vector<std::string> missing;
    const auto got = lookup_all(bin, no_system_debug(), &missing);
    REQUIRE(missing.size() == 1);
    CHECK(missing[0].rfind("Split DWARF unit not read: " + bin + ".dwp: the unit with DWO id 0x", 0) == 0);
    CHECK(missing[0].ends_with(" lies outside the package's sections"));
    size_t named = 0;
    for (const auto& info : got) {
      CHECK(info.inlines.empty());
      named += info.function == "compute_hot(int)";
    }
    CHECK(named == nm_symbols(bin).at("_Z11compute_hoti").size);
  }
  SECTION("truncated") {
    const std::string package = built(v, v.package);
    std::filesystem::copy_file(package, bin + ".dwp");
    std::filesystem::resize_file(bin + ".dwp", std::filesystem::file_size(package) / 2);
    std::vector<std::string> missing;
    lookup_all(bin, no_system_debug(), &missing);
    REQUIRE(missing.size() == 1);
    CHECK(missing[0].rfind("Split DWARF file not found: " + dwo + "; package: " + bin + ".dwp", 0) == 0);
  }
}
