// Tests of symbolizer/lookup.cpp: names, file:line and inline chains, checked against binutils and the
// source's "LINE:" markers.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <vector>

#include "elf/elf.h"
#include "symbolizer/library.h"
#include "tests/support/sym_programs.h"

using namespace fxprof::test::sym_programs;
using fxprof::test::run;
using fxprof::test::test_program;

TEST_CASE("lookup: -O2 -g program gives names, file:line and inline chains innermost first") {
  Prog p = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  check_compute_hot(s, p, true);
}

// Options::dwarf off (`fxprof agent`): the same function named from the symbol table, without file, line or
// inlined frames (the DWARF is never read); on, the same address has them.
TEST_CASE("lookup: with Options::dwarf off, names come from the symbol table alone") {
  Prog p = prog(test_program("sym_inline"));
  const NmSym hot = nm_symbols(p.path).at("_Z11compute_hoti");
  const std::vector<uint64_t> addrs = {hot.addr + hot.size / 2};
  sym::Options off = no_system_debug();
  off.dwarf = false;
  sym::Symbolizer without(off), with(no_system_debug());
  without.add_known_lib(known(p, p.path));
  with.add_known_lib(known(p, p.path));
  auto r = without.lookup("sym_inline", p.breakpad, addrs);
  auto d = with.lookup("sym_inline", p.breakpad, addrs);
  REQUIRE(r.ok());
  REQUIRE(d.ok());
  REQUIRE((*r)[0].found);
  CHECK((*r)[0].function.find("compute_hot") != std::string::npos);
  CHECK((*r)[0].file.empty());
  CHECK((*r)[0].inlines.empty());
  CHECK_FALSE((*d)[0].file.empty());  // the program has lines: only the option takes them away
}

TEST_CASE("lookup: a stripped binary's addresses are grouped into functions by their .eh_frame FDEs") {
  Prog original = prog(test_program("sym_inline"));
  std::string stripped = test_program("symbolizer/buildid/sym_stripped");
  auto syms = nm_symbols(original.path);
  const NmSym hot = syms.at("_Z11compute_hoti");
  const NmSym main_fn = syms.at("main");
  REQUIRE(nm_symbols(stripped).empty());  // no .symtab left
  const auto fdes = fde_ranges(stripped);
  auto covered = [&](uint64_t a) {
    for (const FdeRange& f : fdes)
      if (a >= f.begin && a < f.end) return true;
    return false;
  };
  // An address no FDE covers (padding before compute_hot) keeps today's answer: not found.
  uint64_t uncovered = hot.addr;
  while (uncovered > hot.addr - 64 && covered(uncovered)) --uncovered;
  REQUIRE_FALSE(covered(uncovered));

  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(original, stripped));
  std::vector<uint64_t> addrs = {hot.addr, hot.addr + hot.size / 2, hot.addr + hot.size - 1, main_fn.addr + 4,
                                 uncovered};
  auto r = s.lookup("sym_inline", original.breakpad, addrs);
  REQUIRE(r.ok());
  REQUIRE(r->size() == addrs.size());
  for (size_t i = 0; i < 3; ++i) {
    INFO("address " << hex(addrs[i]));
    const sym::SymbolInfo& info = (*r)[i];
    REQUIRE(info.found);
    CHECK(info.function == "sym_inline+" + hex(hot.addr));  // one name for the function: binary+FDE start
    CHECK(info.function_offset == addrs[i] - hot.addr);
    CHECK(info.function_size == hot.size);  // GCC gives each function one FDE
    CHECK(info.file.empty());
    CHECK(info.inlines.empty());
  }
  REQUIRE((*r)[3].found);
  CHECK((*r)[3].function == "sym_inline+" + hex(main_fn.addr));
  CHECK((*r)[3].function_offset == 4);
  CHECK((*r)[3].function_size == main_fn.size);
  CHECK_FALSE((*r)[4].found);
  // Every FDE is a function of its own, and the only one.
  std::vector<uint64_t> starts;
  for (const FdeRange& f : fdes) starts.push_back(f.begin);
  auto all = s.lookup("sym_inline", original.breakpad, starts);
  REQUIRE(all.ok());
  for (size_t i = 0; i < fdes.size(); ++i) {
    INFO("FDE " << hex(fdes[i].begin));
    REQUIRE((*all)[i].found);
    CHECK((*all)[i].function == "sym_inline+" + hex(fdes[i].begin));
    CHECK((*all)[i].function_size == fdes[i].end - fdes[i].begin);
  }
}

TEST_CASE("lookup: compressed debug sections and split DWARF (.dwo) give the same inline chains") {
  for (const char* name : {"sym_inline_gz", "sym_inline_split"}) {
    INFO(name);
    Prog p = prog(test_program(name));
    sym::Symbolizer s(no_system_debug());
    s.add_known_lib(known(p, p.path));
    check_compute_hot(s, p, true);
  }
}

TEST_CASE("lookup: DWARF run through dwz finds its .gnu_debugaltlink file, by path or by build ID") {
  // Debian's -dbgsym packages are dwz'd: DIEs that several files share (here nearly all: the two programs are
  // built from one source) move to an alt file named by .gnu_debugaltlink (a path and the alt's build ID),
  // and the inline chains' names are only in it.
  const std::string dwz = "dwz";
  for (bool by_build_id : {false, true}) {
    INFO((by_build_id ? "by build ID" : "by path"));
    fxprof::test::TempDir d;
    std::filesystem::copy_file(test_program("sym_inline"), d.file("a"));
    std::filesystem::copy_file(test_program("sym_inline_rebuilt"), d.file("b"));
    // A recorded path that exists, or Debian's layout whose path does not exist here (/usr/lib/debug/.dwz),
    // with the alt file under a debug directory's .build-id tree.
    std::string recorded =
        by_build_id ? "/usr/lib/debug/.dwz/fxprof-test/common.debug" : d.file("common.debug");
    auto r = run({dwz, "-m", d.file("common.debug"), "-M", recorded, d.file("a"), d.file("b")});
    REQUIRE(r.status == 0);
    REQUIRE(run({"readelf", "-S", d.file("a")}).out.find(".gnu_debugaltlink") != std::string::npos);
    sym::Options o = no_system_debug();
    if (by_build_id) {
      auto alt = fxprof::elf::read_file(d.file("common.debug"));
      REQUIRE(alt);
      std::string id = fxprof::elf::hex(alt->build_id);
      REQUIRE(id.size() > 2);
      std::filesystem::create_directories(d.file("debug/.build-id/" + id.substr(0, 2)));
      std::filesystem::rename(d.file("common.debug"),
                              d.file("debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug"));
      o.debug_dirs = {d.file("debug")};
    }
    Prog p = prog(d.file("a"));
    sym::Symbolizer s(o);
    s.add_known_lib(known(p, p.path));
    check_compute_hot(s, p, true);
  }
}

TEST_CASE("lookup: separate debug files dwz'd after their debuglinks were made keep their inline chains") {
  // Issue 22: `objcopy --only-keep-debug` + `--add-gnu-debuglink`, then `dwz -m common.debug a.debug
  // b.debug` (two programs sharing inlined code): dwz rewrites the debug files, so the debuglinks' CRCs no
  // longer match, and the inlined functions' abstract origins (DW_FORM_GNU_ref_alt) and names
  // (DW_FORM_GNU_strp_alt) are in common.debug. libdw (eu-addr2line -i) takes the debug file by its build
  // ID and names the inlined functions; so must we.
  fxprof::test::TempDir d;
  for (const char* name : {"a", "b"}) {
    std::filesystem::copy_file(test_program(name == std::string("a") ? "sym_inline" : "sym_inline_rebuilt"),
                               d.file(name));
    const std::string bin = d.file(name), dbg = d.file(std::string(name) + ".debug");
    REQUIRE(run({"objcopy", "--only-keep-debug", bin, dbg}).status == 0);
    REQUIRE(run({"objcopy", "--strip-debug", "--add-gnu-debuglink=" + dbg, bin}).status == 0);
  }
  auto r = run({"dwz", "-m", d.file("common.debug"), "-M", d.file("common.debug"), d.file("a.debug"),
                d.file("b.debug")});
  INFO(r.err);
  REQUIRE(r.status == 0);
  REQUIRE(run({"readelf", "-S", d.file("a.debug")}).out.find(".gnu_debugaltlink") != std::string::npos);
  Prog p = prog(d.file("a"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  Prog with_symbols = p;
  with_symbols.path = d.file("a.debug");  // nm reads the symbols there (the binary keeps them too)
  check_compute_hot(s, with_symbols, true);
  // The same chain as libdw's at an address where leaf_helper is inlined.
  const NmSym hot = nm_symbols(with_symbols.path).at("_Z11compute_hoti");
  for (uint64_t a = hot.addr; a < hot.addr + hot.size; ++a) {
    auto ours = s.lookup("sym_inline", p.breakpad, std::vector<uint64_t>{a});
    REQUIRE(ours.ok());
    if ((*ours)[0].inlines.size() != 2) continue;
    auto eu = run({"eu-addr2line", "-i", "-f", "-C", "-e", d.file("a"), hex(a)});
    REQUIRE(eu.status == 0);
    INFO(eu.out);
    CHECK(eu.out.find((*ours)[0].inlines[0].function.substr(0, 11)) != std::string::npos);  // leaf_helper
    CHECK(eu.out.find((*ours)[0].inlines[1].function.substr(0, 10)) != std::string::npos);  // mid_helper
    break;
  }
}

TEST_CASE(
    "lookup: DWARF is indexed on the first address inside a function, never for addresses outside all") {
  // A baked profile asks again for the return addresses that found nothing (typically a function's first
  // byte minus one, in padding): that must not inflate and index a whole debug file.
  Prog p = prog(test_program("sym_inline_gz"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  auto library = [](const sym::Resolution& r) { return static_cast<const sym::Library*>(r.library.get()); };
  const std::vector<uint64_t> outside = {0, 1};  // the ELF header: before every symbol
  auto r = s.resolve("sym_inline", p.breakpad, outside);
  REQUIRE(r.ok());
  CHECK_FALSE(r->addresses[0].found);
  CHECK_FALSE(r->addresses[1].found);
  CHECK(library(*r)->dwarf == nullptr);
  CHECK_FALSE(library(*r)->dwarf_tried);
  // The first address in a function opens it, and gets its file, line and inline chain as ever.
  check_compute_hot(s, p, true);
  r = s.resolve("sym_inline", p.breakpad, outside);
  REQUIRE(r.ok());
  CHECK(library(*r)->dwarf != nullptr);
  CHECK_FALSE(r->addresses[0].found);
}

TEST_CASE("lookup: C++ templates and namespaces are demangled, PLT stubs are named") {
  Prog p = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  auto syms = nm_symbols(p.path);
  const NmSym twice = syms.at("_ZNK5outer5inner3BoxIiE5twiceEi");
  const NmSym combine = syms.at("_ZN5outer7combineIlNS_5inner3BoxIiEEEET_S4_RKT0_");
  uint64_t printf_plt = plt_address(p.path, "printf");
  std::vector<uint64_t> addrs = {twice.addr, combine.addr + combine.size - 1, printf_plt + 3};
  auto r = s.lookup("sym_inline", p.breakpad, addrs);
  REQUIRE(r.ok());
  CHECK((*r)[0].function == "outer::inner::Box<int>::twice(int) const");
  CHECK((*r)[0].function_offset == 0);
  CHECK((*r)[1].function ==
        "long outer::combine<long, outer::inner::Box<int> >(long, outer::inner::Box<int> const&)");
  CHECK((*r)[1].function_offset == combine.size - 1);
  CHECK((*r)[2].function == "printf@plt");
  CHECK((*r)[2].function_offset == 3);
}

TEST_CASE("lookup: aliases at one address get the name perf shows, not the first one in .symtab") {
  Prog p = prog(test_program("sym_alias"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path, "sym_alias"));
  auto syms = nm_symbols(p.path);
  const NmSym impl = syms.at("impl_local");
  const NmSym other = syms.at("other_local");
  // The aliases really share their addresses (the program is built so that they do).
  REQUIRE(syms.at("api_global").addr == impl.addr);
  REQUIRE(syms.at("__api_internal").addr == impl.addr);
  REQUIRE(syms.at("api_weak").addr == impl.addr);
  REQUIRE(syms.at("other_weak").addr == other.addr);
  std::vector<uint64_t> addrs = {impl.addr, impl.addr + impl.size - 1, other.addr};
  auto r = s.lookup("sym_alias", p.breakpad, addrs);
  REQUIRE(r.ok());
  // Global over local, weak and the underscored global; the whole function keeps the name.
  CHECK((*r)[0].function == "api_global");
  CHECK((*r)[1].function == "api_global");
  CHECK((*r)[1].function_offset == impl.size - 1);
  // Local over weak.
  CHECK((*r)[2].function == "other_local");
}

TEST_CASE("lookup: Rust v0 and legacy symbols are demangled") {
  std::string v0 = test_program("symbolizer/rust_v0");
  std::string legacy = test_program("symbolizer/rust_legacy");
  INFO("the Rust programs are built when CMake finds rustc (`make test-deps` installs it)");
  REQUIRE(fxprof::elf::read_file(v0));
  struct Case {
    std::string path;
    std::string hot, hot_want, spin_want;
  };
  for (const Case& c : {Case{v0, "rust_hot_function", "sym_rust::engine::rust_hot_function",
                             "<sym_rust::engine::Gear<u32>>::spin"},
                        Case{legacy, "rust_hot_function", "sym_rust::engine::rust_hot_function",
                             "sym_rust::engine::Gear<T>::spin"}}) {
    INFO(c.path);
    Prog p = prog(c.path);
    auto syms = nm_symbols(c.path);
    uint64_t hot = 0, spin = 0;
    for (const auto& [name, v] : syms) {
      if (name.find("17rust_hot_function") != std::string::npos) hot = v.addr;
      if (name.find("4spin") != std::string::npos && name.find("Gear") != std::string::npos) spin = v.addr;
    }
    REQUIRE(hot != 0);
    REQUIRE(spin != 0);
    sym::Symbolizer s(no_system_debug());
    s.add_known_lib(known(p, c.path, "rust"));
    auto r = s.lookup("rust", p.breakpad, std::vector<uint64_t>{hot + 1, spin});
    REQUIRE(r.ok());
    CHECK((*r)[0].function == c.hot_want);
    CHECK((*r)[0].function_offset == 1);
    CHECK(ends_with((*r)[0].file, "sym_rust.rs"));
    CHECK((*r)[1].function == c.spin_want);
  }
}

// Issue 10 item 6: a DWARF 4 line table whose include directory is relative to DW_AT_comp_dir (how cargo
// builds src/main.rs, and how gcc records a source named by a relative path) must give the absolute path,
// which /source/v1 then serves.
TEST_CASE("lookup: DWARF 4 paths relative to the compilation directory come back absolute") {
  fxprof::test::TempDir dir;
  REQUIRE(::mkdir(dir.file("src").c_str(), 0755) == 0);
  {
    std::ofstream src(dir.file("src/rel_main.c"));
    src << "int rel_function(int x) { return x * 3 + 1; }\nint main(int argc, char** argv) { (void)argv; "
           "return rel_function(argc); }\n";
  }
  fxprof::test::CmdOptions in_dir;
  in_dir.cwd = dir.path();
  auto cc =
      run({"gcc", "-g", "-gdwarf-4", "-O0", "-Wl,--build-id", "src/rel_main.c", "-o", "rel_main"}, in_dir);
  REQUIRE(cc.status == 0);

  Prog p = prog(dir.file("rel_main"));
  uint64_t fn = nm_symbols(p.path).at("rel_function").addr;
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path, "rel_main"));
  auto info = s.lookup("rel_main", p.breakpad, std::vector<uint64_t>{fn});
  REQUIRE(info.ok());
  REQUIRE((*info)[0].found);
  // Without joining with comp_dir the symbolizer answered "src/rel_main.c".
  std::string want = std::filesystem::canonical(dir.path()).string() + "/src/rel_main.c";
  CHECK((*info)[0].file == want);
  auto served = s.source("rel_main", p.breakpad, fn, want);
  REQUIRE(served.ok());
  CHECK(served.value().find("rel_function") != std::string::npos);
}
