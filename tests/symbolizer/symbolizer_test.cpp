// Tests of symbolizer/: real ELF files built by tests/programs/symbolizer (an -O2 -g program with known
// inlines, its stripped variants, a rebuilt copy with another build ID, Rust programs), checked against
// binutils' view of the same files (nm, objdump) and against the source's "LINE:" markers.
#include "symbolizer/symbolizer.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "base/fd.h"
#include "model/profile.h"
#include "symbolizer/elf_file.h"
#include "symbolizer/line_program.h"
#include "tests/support/support.h"

namespace sym = fxprof::symbolizer;
using fxprof::test::run;
using fxprof::test::test_program;

namespace {

struct NmSym {
  uint64_t addr = 0;
  uint64_t size = 0;
};

// Defined symbols of a file by mangled name, as binutils' nm sees them.
std::map<std::string, NmSym> nm_symbols(const std::string& path) {
  auto r = run({"nm", "-S", "--defined-only", path});
  REQUIRE(r.status == 0);
  std::map<std::string, NmSym> out;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string a, b, c, d;
    ls >> a >> b >> c >> d;
    if (d.empty()) continue;  // no size
    out[d] = {std::stoull(a, nullptr, 16), std::stoull(b, nullptr, 16)};
  }
  return out;
}

// Address of "name@plt" from objdump's disassembly of .plt.
uint64_t plt_address(const std::string& path, const std::string& name) {
  auto r = run({"objdump", "-d", "-j", ".plt", path});
  REQUIRE(r.status == 0);
  std::string needle = "<" + name + "@plt>:";
  size_t p = r.out.find(needle);
  REQUIRE(p != std::string::npos);
  size_t bol = r.out.rfind('\n', p);
  return std::stoull(r.out.substr(bol + 1, p - bol - 1), nullptr, 16);
}

// The line number of the "// LINE:tag" marker in the test program's source.
uint32_t marker_line(const std::string& tag) {
  std::ifstream in(fxprof::test::source_dir() + "/tests/programs/symbolizer/sym_inline.cpp");
  std::string line;
  uint32_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find("// LINE:" + tag) != std::string::npos) return n;
  }
  FAIL("marker " << tag << " not found");
  return 0;
}

struct Prog {
  std::string path;
  std::string breakpad;
  std::string code_id;
};

Prog prog(const std::string& path) {
  auto o = sym::ElfObject::open(path);
  REQUIRE(o.ok());
  REQUIRE(!(*o)->build_id().empty());
  return {path, fxprof::model::breakpad_id_from_build_id((*o)->build_id()),
          fxprof::model::code_id_from_build_id((*o)->build_id())};
}

sym::KnownLib known(const Prog& p, const std::string& path, const std::string& debug_name = "sym_inline") {
  sym::KnownLib k;
  k.debug_name = debug_name;
  k.name = debug_name;
  k.breakpad_id = p.breakpad;
  k.code_id = p.code_id;
  k.path = path;
  k.arch = "x86_64";
  return k;
}

sym::Options no_system_debug() {
  sym::Options o;
  o.debug_dirs = {};
  o.use_debuginfod = false;
  return o;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Checks the inline chains of compute_hot(int) against the source markers: every byte resolves with an exact
// offset, and some address shows leaf_helper inlined into mid_helper inlined into compute_hot.
void check_compute_hot(sym::Symbolizer& s, const Prog& original, bool expect_lines) {
  auto syms = nm_symbols(original.path);
  const NmSym hot = syms.at("_Z11compute_hoti");
  std::vector<uint64_t> addrs;
  for (uint64_t a = hot.addr; a < hot.addr + hot.size; ++a) addrs.push_back(a);
  auto r = s.lookup("sym_inline", original.breakpad, addrs);
  REQUIRE(r.ok());
  REQUIRE(r->size() == addrs.size());
  bool saw_full_chain = false;
  for (size_t i = 0; i < addrs.size(); ++i) {
    const sym::SymbolInfo& info = (*r)[i];
    INFO("address 0x" << std::hex << addrs[i]);
    REQUIRE(info.found);
    CHECK(info.function == "compute_hot(int)");
    CHECK(info.function_offset == addrs[i] - hot.addr);
    CHECK(info.function_size == hot.size);
    if (!expect_lines) {
      CHECK(info.inlines.empty());
      CHECK(info.file.empty());
      continue;
    }
    CHECK(ends_with(info.file, "tests/programs/symbolizer/sym_inline.cpp"));
    if (info.inlines.size() == 2 && info.inlines[0].function.rfind("leaf_helper", 0) == 0) {
      saw_full_chain = true;
      CHECK(info.inlines[1].function.rfind("mid_helper", 0) == 0);
      CHECK(info.inlines[0].line >= marker_line("leaf_begin"));
      CHECK(info.inlines[0].line <= marker_line("leaf_end"));
      CHECK(ends_with(info.inlines[0].file, "sym_inline.cpp"));
      CHECK(info.inlines[1].line == marker_line("call_leaf"));  // where mid_helper calls leaf_helper
      CHECK(info.line == marker_line("call_mid"));              // where compute_hot calls mid_helper
    }
  }
  if (expect_lines) CHECK(saw_full_chain);
}

}  // namespace

TEST_CASE("symbolizer: -O2 -g program gives names, file:line and inline chains innermost first") {
  Prog p = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  check_compute_hot(s, p, true);
}

TEST_CASE("symbolizer: compressed debug sections and split DWARF (.dwo) give the same inline chains") {
  for (const char* name : {"sym_inline_gz", "sym_inline_split"}) {
    INFO(name);
    Prog p = prog(test_program(name));
    sym::Symbolizer s(no_system_debug());
    s.add_known_lib(known(p, p.path));
    check_compute_hot(s, p, true);
  }
}

TEST_CASE("symbolizer: C++ templates and namespaces are demangled, PLT stubs are named") {
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

TEST_CASE("symbolizer: stripped binary finds its debug file through .gnu_debuglink (CRC checked)") {
  Prog original = prog(test_program("sym_inline"));
  std::string linked = test_program("symbolizer/debuglink/sym_linked");
  {
    sym::Symbolizer s(no_system_debug());
    s.add_known_lib(known(original, linked));
    check_compute_hot(s, original, true);
  }
  // The same stripped binary beside a debug file of the right name but wrong contents: not used.
  fxprof::test::TempDir dir;
  REQUIRE(run({"cp", linked, dir.file("sym_linked")}).status == 0);
  REQUIRE(run({"cp", test_program("sym_inline_rebuilt"), dir.file("sym_inline.debug")}).status == 0);
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(original, dir.file("sym_linked")));
  auto syms = nm_symbols(original.path);
  auto r = s.lookup("sym_inline", original.breakpad, std::vector<uint64_t>{syms.at("_Z11compute_hoti").addr});
  REQUIRE(r.ok());  // the binary itself matches
  CHECK_FALSE((*r)[0].found);
}

TEST_CASE("symbolizer: stripped binary finds its debug file in a build-id directory") {
  Prog original = prog(test_program("sym_inline"));
  std::string stripped = test_program("symbolizer/buildid/sym_stripped");
  auto syms = nm_symbols(original.path);
  {
    sym::Options o = no_system_debug();
    o.debug_dirs = {test_program("symbolizer/buildid/debug")};
    sym::Symbolizer s(o);
    s.add_known_lib(known(original, stripped));
    check_compute_hot(s, original, true);
  }
  // Without that root nothing names compute_hot (the stripped binary has no symbols of its own).
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(original, stripped));
  auto r = s.lookup("sym_inline", original.breakpad, std::vector<uint64_t>{syms.at("_Z11compute_hoti").addr});
  REQUIRE(r.ok());
  CHECK_FALSE((*r)[0].found);
}

TEST_CASE("symbolizer: MiniDebugInfo (.gnu_debugdata) names functions of a stripped binary") {
  Prog original = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(original, test_program("symbolizer/mini/sym_mini")));
  check_compute_hot(s, original, false);
}

TEST_CASE("symbolizer: a rebuilt binary with another build ID is not found, never wrongly named") {
  Prog original = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(original, test_program("sym_inline_rebuilt")));
  auto syms = nm_symbols(original.path);
  uint64_t hot = syms.at("_Z11compute_hoti").addr;
  auto r = s.lookup("sym_inline", original.breakpad, std::vector<uint64_t>{hot});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find("0123456789abcdef0123456789abcdef01234567") != std::string::npos);
}

TEST_CASE("symbolizer: Rust v0 and legacy symbols are demangled") {
  std::string v0 = test_program("symbolizer/rust_v0");
  std::string legacy = test_program("symbolizer/rust_legacy");
  INFO("the Rust programs are built when CMake finds rustc (`make test-deps` installs it)");
  REQUIRE(fxprof::symbolizer::ElfObject::open(v0).ok());
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

TEST_CASE("symbolizer: concurrent requests share one load per library and agree, with or without eviction") {
  Prog p = prog(test_program("sym_inline"));
  Prog other = prog(test_program("sym_inline_rebuilt"));
  auto syms = nm_symbols(p.path);
  const NmSym hot = syms.at("_Z11compute_hoti");
  std::vector<uint64_t> addrs;
  for (uint64_t a = 0; a < hot.size; ++a) addrs.push_back(hot.addr + a);
  // Everything a lookup answers, as one string to compare.
  auto ask = [&](sym::Symbolizer& s, const std::string& name, const Prog& pr) {
    auto r = s.lookup(name, pr.breakpad, addrs);
    REQUIRE(r.ok());
    std::ostringstream out;
    for (const auto& i : *r) {
      out << i.found << ' ' << i.function << '+' << i.function_offset << '/' << i.function_size << ' '
          << i.file << ':' << i.line << " [";
      for (const auto& in : i.inlines) out << in.function << ' ' << in.file << ':' << in.line << ';';
      out << "]\n";
    }
    return out.str();
  };
  for (size_t limit : {size_t{1} << 30, size_t{1}}) {  // the second: every use evicts the other library
    sym::Options o = no_system_debug();
    o.cache_limit_bytes = limit;
    sym::Symbolizer s(o);
    s.add_known_lib(known(p, p.path));
    s.add_known_lib(known(other, other.path, "rebuilt"));
    std::vector<std::string> out(8);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < out.size(); ++t)
      threads.emplace_back([&, t] {
        for (int k = 0; k < 5; ++k) out[t] = t % 2 == 0 ? ask(s, "sym_inline", p) : ask(s, "rebuilt", other);
      });
    for (auto& t : threads) t.join();
    for (size_t t = 0; t < out.size(); ++t) CHECK(out[t] == out[t % 2]);
    CHECK(out[0].find(" compute_hot(int)+") != std::string::npos);
    CHECK(out[1].find(" compute_hot(int)+") != std::string::npos);
    CHECK(out[0].find("[leaf_helper") != std::string::npos);
  }
}

TEST_CASE("symbolizer: a JIT perf map (/tmp/perf-PID.map) names JIT code") {
  fxprof::test::TempDir dir;
  std::string path = dir.file("perf-4242.map");
  {
    std::ofstream out(path);
    out << "7f0000001000 40 jitted_function_a\n7f0000001040 20 LazyCompile:foo bar.js:3\nbad line\n";
  }
  sym::Symbolizer s(no_system_debug());
  sym::KnownLib k;
  k.debug_name = "perf-4242.map";
  k.breakpad_id = "00000000000000000000000000000000";
  k.path = path;
  s.add_known_lib(k);
  auto r = s.lookup(k.debug_name, k.breakpad_id,
                    std::vector<uint64_t>{0x7f0000001000, 0x7f0000001050, 0x7f0000001060, 0x7f0000000fff});
  REQUIRE(r.ok());
  CHECK((*r)[0].function == "jitted_function_a");
  CHECK((*r)[1].function == "LazyCompile:foo bar.js:3");
  CHECK((*r)[1].function_offset == 0x10);
  CHECK((*r)[1].function_size == 0x20);
  CHECK_FALSE((*r)[2].found);
  CHECK_FALSE((*r)[3].found);
}

TEST_CASE("symbolizer: debuginfod (DEBUGINFOD_URLS) supplies the debug file of a stripped binary") {
  Prog original = prog(test_program("sym_inline"));
  fxprof::test::TempDir dir;
  std::string served = dir.file("srv/buildid/" + original.code_id);
  REQUIRE(run({"mkdir", "-p", served, dir.file("cache")}).status == 0);
  REQUIRE(run({"cp", test_program("symbolizer/debuglink/sym_inline.debug"), served + "/debuginfo"}).status ==
          0);
  // libdebuginfod fetches with curl, so a file:// server needs no network.
  setenv("DEBUGINFOD_URLS", ("file://" + dir.file("srv")).c_str(), 1);
  setenv("DEBUGINFOD_CACHE_PATH", dir.file("cache").c_str(), 1);
  {
    sym::Symbolizer s(no_system_debug());  // debuginfod off: nothing
    s.add_known_lib(known(original, test_program("symbolizer/buildid/sym_stripped")));
    auto r = s.lookup("sym_inline", original.breakpad,
                      std::vector<uint64_t>{nm_symbols(original.path).at("_Z11compute_hoti").addr});
    REQUIRE(r.ok());
    CHECK_FALSE((*r)[0].found);
  }
  sym::Options o = no_system_debug();
  o.use_debuginfod = true;
  sym::Symbolizer s(o);
  s.add_known_lib(known(original, test_program("symbolizer/buildid/sym_stripped")));
  check_compute_hot(s, original, true);
  unsetenv("DEBUGINFOD_URLS");
  unsetenv("DEBUGINFOD_CACHE_PATH");
}

TEST_CASE("symbolizer: truncated, empty and non-ELF files are clean errors") {
  Prog original = prog(test_program("sym_inline"));
  fxprof::test::TempDir dir;
  auto original_bytes = fxprof::read_file(original.path);
  REQUIRE(original_bytes.ok());
  const std::vector<std::pair<std::string, std::string>> files = {
      {"empty", ""},
      {"text", "hello, not an ELF file\n"},
      {"header_only", original_bytes->substr(0, 64)},
      {"truncated", original_bytes->substr(0, original_bytes->size() / 3)},
  };
  for (const auto& [name, bytes] : files) {
    INFO(name);
    {
      std::ofstream out(dir.file(name), std::ios::binary);
      out << bytes;
    }
    sym::Symbolizer s(no_system_debug());
    s.add_known_lib(known(original, dir.file(name)));
    auto r = s.lookup("sym_inline", original.breakpad, std::vector<uint64_t>{0x1000});
    if (r.ok()) {
      CHECK_FALSE((*r)[0].found);  // a truncated file may keep its build ID note: no names from it
    } else {
      CHECK(!r.error().empty());
    }
  }
  // A directory and a path that does not exist.
  for (const std::string& path : {dir.path(), dir.file("missing")}) {
    sym::Symbolizer s(no_system_debug());
    s.add_known_lib(known(original, path));
    CHECK_FALSE(s.lookup("sym_inline", original.breakpad, std::vector<uint64_t>{0x1000}).ok());
  }
}

// The direct .debug_line decoder against libdw's dwarf_getsrclines, row by row, on every unit of several
// files: DWARF 5 (gcc), compressed sections, DWARF 4 (rustc), and this test binary itself (large C++).
TEST_CASE("symbolizer: the line-program decoder agrees with libdw on every row") {
  std::vector<std::string> paths = {test_program("sym_inline"), test_program("sym_inline_gz"),
                                    "/proc/self/exe"};
  if (sym::ElfObject::open(test_program("symbolizer/rust_v0")).ok())
    paths.push_back(test_program("symbolizer/rust_v0"));
  for (const auto& path : paths) {
    INFO(path);
    auto obj = sym::ElfObject::open(path);
    REQUIRE(obj.ok());
    Dwarf* dw = dwarf_begin_elf((*obj)->elf(), DWARF_C_READ, nullptr);
    REQUIRE(dw != nullptr);
    sym::LineSections sec;
    Elf* elf = dwarf_getelf(dw);
    size_t shstrndx;
    REQUIRE(elf_getshdrstrndx(elf, &shstrndx) == 0);
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      REQUIRE(gelf_getshdr(scn, &sh) != nullptr);
      std::string name = elf_strptr(elf, shstrndx, sh.sh_name);
      std::span<const uint8_t>* target = name == ".debug_line"       ? &sec.line
                                         : name == ".debug_str"      ? &sec.str
                                         : name == ".debug_line_str" ? &sec.line_str
                                                                     : nullptr;
      if (target == nullptr) continue;
      if (sh.sh_flags & SHF_COMPRESSED) REQUIRE(elf_compress(scn, 0, 0) >= 0);
      Elf_Data* d = elf_getdata(scn, nullptr);
      *target = {static_cast<const uint8_t*>(d->d_buf), d->d_size};
    }
    REQUIRE(!sec.line.empty());
    using Row = std::tuple<uint64_t, bool, uint32_t, std::string>;
    size_t units = 0, total = 0, compared = 0;
    Dwarf_CU* cu = nullptr;
    Dwarf_Half version;
    uint8_t unit_type;
    Dwarf_Die cudie, subdie;
    while (dwarf_get_units(dw, cu, &cu, &version, &unit_type, &cudie, &subdie) == 0) {
      Dwarf_Attribute a;
      Dwarf_Word off;
      if (dwarf_attr(&cudie, DW_AT_stmt_list, &a) == nullptr || dwarf_formudata(&a, &off) != 0) continue;
      const char* comp_dir = dwarf_attr(&cudie, DW_AT_comp_dir, &a) ? dwarf_formstring(&a) : nullptr;
      std::deque<std::string> store;
      std::vector<const char*> files;
      std::vector<sym::DecodedRow> rows;
      REQUIRE(sym::decode_line_program(sec, off, comp_dir, store, files, rows));
      std::vector<Row> mine, theirs;
      for (const auto& r : rows)
        mine.emplace_back(r.addr, r.end, r.line, r.file < files.size() && files[r.file] ? files[r.file] : "");
      Dwarf_Lines* lines;
      size_t n;
      REQUIRE(dwarf_getsrclines(&cudie, &lines, &n) == 0);
      for (size_t i = 0; i < n; ++i) {
        Dwarf_Line* l = dwarf_onesrcline(lines, i);
        Dwarf_Addr addr;
        int line;
        bool end;
        dwarf_lineaddr(l, &addr);
        dwarf_lineno(l, &line);
        dwarf_lineendsequence(l, &end);
        const char* f = dwarf_linesrc(l, nullptr, nullptr);
        theirs.emplace_back(addr, end, static_cast<uint32_t>(line),
                            f ? sym::absolute_source_path(f, comp_dir) : "");
      }
      // Compare what matters: the (file, line) every address resolves to, with rows sorted the way DwarfIndex
      // sorts them. Sequence end addresses are left out: rows there cover no byte (the decoder marks them
      // ended, libdw sometimes keeps one) and the next unit answers for that address.
      auto order = [](const Row& x, const Row& y) {
        if (std::get<0>(x) != std::get<0>(y)) return std::get<0>(x) < std::get<0>(y);
        return std::get<1>(x) > std::get<1>(y);
      };
      std::stable_sort(mine.begin(), mine.end(), order);
      std::stable_sort(theirs.begin(), theirs.end(), order);
      std::set<uint64_t> ends;
      for (const auto* v : {&mine, &theirs})
        for (const Row& r : *v)
          if (std::get<1>(r)) ends.insert(std::get<0>(r));
      auto governing = [](const std::vector<Row>& v, uint64_t addr) -> const Row* {
        auto it = std::upper_bound(v.begin(), v.end(), addr,
                                   [](uint64_t a, const Row& r) { return a < std::get<0>(r); });
        return it == v.begin() ? nullptr : &*(it - 1);
      };
      auto at = [&](const std::vector<Row>& v, uint64_t addr) -> std::pair<uint32_t, std::string> {
        const Row* r = governing(v, addr);
        if (r == nullptr || std::get<1>(*r)) return {0, ""};
        return {std::get<2>(*r), std::get<3>(*r)};
      };
      for (const auto* v : {&mine, &theirs}) {
        for (const Row& r : *v) {
          for (uint64_t addr : {std::get<0>(r), std::get<0>(r) + 1}) {
            if (ends.count(addr)) continue;
            const Row* g1 = governing(mine, addr);
            const Row* g2 = governing(theirs, addr);
            if ((g1 && ends.count(std::get<0>(*g1))) || (g2 && ends.count(std::get<0>(*g2)))) continue;
            INFO("unit " << units << " address 0x" << std::hex << addr);
            REQUIRE(at(mine, addr) == at(theirs, addr));
            ++compared;
          }
        }
      }
      // And the same number of rows: nothing dropped or invented.
      REQUIRE(mine.size() == theirs.size());
      ++units;
      total += mine.size();
    }
    CHECK(units > 0);
    CHECK(total > 0);
    CHECK(compared > total / 2);
    dwarf_end(dw);
  }
}

// Issue 10 item 6: a DWARF 4 line table whose include directory is relative to DW_AT_comp_dir (how cargo
// builds src/main.rs, and how gcc records a source named by a relative path) must give the absolute path,
// which /source/v1 then serves.
TEST_CASE("symbolizer: DWARF 4 paths relative to the compilation directory come back absolute") {
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
