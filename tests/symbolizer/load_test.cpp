// Tests of symbolizer/load.cpp: finding a library's files (debuglink, build-ID trees, MiniDebugInfo,
// debuginfod, perf maps) and never using a file with another build ID.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <vector>

#include "base/fd.h"
#include "tests/support/sym_programs.h"

using namespace fxprof::test::sym_programs;
using fxprof::test::run;
using fxprof::test::test_program;

TEST_CASE("load: stripped binary finds its debug file through .gnu_debuglink (CRC checked)") {
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
  // Named only by its .eh_frame FDE (lookup_test.cpp), never by the wrong file.
  REQUIRE((*r)[0].found);
  CHECK((*r)[0].function == "sym_inline+" + hex(syms.at("_Z11compute_hoti").addr));
  CHECK((*r)[0].file.empty());
}

TEST_CASE("load: stripped binary finds its debug file in a build-id directory") {
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
  // Without that root nothing names compute_hot (the stripped binary has no symbols of its own): only its
  // .eh_frame FDE makes it a function, "0x<start>".
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(original, stripped));
  auto r = s.lookup("sym_inline", original.breakpad, std::vector<uint64_t>{syms.at("_Z11compute_hoti").addr});
  REQUIRE(r.ok());
  REQUIRE((*r)[0].found);
  CHECK((*r)[0].function == "sym_inline+" + hex(syms.at("_Z11compute_hoti").addr));
  CHECK((*r)[0].file.empty());
}

TEST_CASE("load: MiniDebugInfo (.gnu_debugdata) names functions of a stripped binary") {
  Prog original = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(original, test_program("symbolizer/mini/sym_mini")));
  check_compute_hot(s, original, false);
}

TEST_CASE("load: a rebuilt binary with another build ID is not found, never wrongly named") {
  Prog original = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(original, test_program("sym_inline_rebuilt")));
  auto syms = nm_symbols(original.path);
  uint64_t hot = syms.at("_Z11compute_hoti").addr;
  auto r = s.lookup("sym_inline", original.breakpad, std::vector<uint64_t>{hot});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find("0123456789abcdef0123456789abcdef01234567") != std::string::npos);
}

TEST_CASE("load: a JIT perf map (/tmp/perf-PID.map) names JIT code") {
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

TEST_CASE("load: debuginfod (DEBUGINFOD_URLS) supplies the debug file of a stripped binary") {
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
    sym::Symbolizer s(no_system_debug());  // debuginfod off: only the .eh_frame FDE, "sym_inline+0x<start>"
    s.add_known_lib(known(original, test_program("symbolizer/buildid/sym_stripped")));
    const uint64_t hot = nm_symbols(original.path).at("_Z11compute_hoti").addr;
    auto r = s.lookup("sym_inline", original.breakpad, std::vector<uint64_t>{hot});
    REQUIRE(r.ok());
    REQUIRE((*r)[0].found);
    CHECK((*r)[0].function == "sym_inline+" + hex(hot));
  }
  sym::Options o = no_system_debug();
  o.use_debuginfod = true;
  sym::Symbolizer s(o);
  s.add_known_lib(known(original, test_program("symbolizer/buildid/sym_stripped")));
  check_compute_hot(s, original, true);
  unsetenv("DEBUGINFOD_URLS");
  unsetenv("DEBUGINFOD_CACHE_PATH");
}

TEST_CASE("load: truncated, empty and non-ELF files are clean errors") {
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

namespace {
// A small program built here with `flags` (in `dir`, whose .o and .dwo files are written there too).
std::string build_small(const fxprof::test::TempDir& dir, const std::vector<std::string>& flags) {
  {
    std::ofstream src(dir.file("small.c"));
    src << "static inline int sq(int x) { return x * x; }\n"
           "__attribute__((noinline)) int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += sq(i); "
           "return s; }\n"
           "int main(int argc, char** argv) { (void)argv; return work(argc * 1000) & 1; }\n";
  }
  std::vector<std::string> cmd = {"gcc", "-O2", "-g"};
  cmd.insert(cmd.end(), flags.begin(), flags.end());
  cmd.insert(cmd.end(), {"small.c", "-o", "small"});
  fxprof::test::CmdOptions o;
  o.cwd = dir.path();
  auto r = fxprof::test::run(cmd, o);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return dir.file("small");
}
}  // namespace

TEST_CASE("load: debug files the binary names and that are missing are handed out, one line each") {
  using fxprof::test::run;
  fxprof::test::TempDir dir;
  SECTION("a split DWARF .dwo") {
    const std::string bin = build_small(dir, {"-gsplit-dwarf"});
    REQUIRE(std::filesystem::exists(dir.file("small.dwo")));
    std::filesystem::remove(dir.file("small.dwo"));
    Prog p = prog(bin);
    sym::Symbolizer s(no_system_debug());
    s.add_known_lib(known(p, bin, "small"));
    const NmSym work = nm_symbols(bin).at("work");
    auto r = s.lookup("small", p.breakpad, std::vector<uint64_t>{work.addr + 4});
    REQUIRE(r.ok());
    CHECK((*r)[0].function == "work");  // from the symbol table
    CHECK(s.missing_files("small", p.breakpad) ==
          std::vector<sym::MissingFile>{
              {sym::MissingFile::Kind::SplitDwarf, "Split DWARF file not found: small.dwo (of " + bin +
                                                       "), looked for at " + dir.path() +
                                                       "/small.dwo; package: none at " + bin + ".dwp"}});
  }
  SECTION("a .gnu_debuglink file") {
    const std::string bin = build_small(dir, {});
    REQUIRE(run({"objcopy", "--only-keep-debug", bin, bin + ".debug"}).status == 0);
    REQUIRE(run({"objcopy", "--strip-all", "--add-gnu-debuglink=" + bin + ".debug", bin}).status == 0);
    std::filesystem::remove(bin + ".debug");
    Prog p = prog(bin);
    sym::Symbolizer s(no_system_debug());
    s.add_known_lib(known(p, bin, "small"));
    auto r = s.lookup("small", p.breakpad, std::vector<uint64_t>{0x1000});
    REQUIRE(r.ok());
    CHECK(s.missing_files("small", p.breakpad) ==
          std::vector<sym::MissingFile>{
              {sym::MissingFile::Kind::DebugLink, "Debug file not found: small.debug (.gnu_debuglink of " +
                                                      bin + "), looked for in " + dir.path() + "/, " +
                                                      dir.path() + "/.debug/"}});
  }
  SECTION("a dwz alt file") {
    const std::string bin = build_small(dir, {});
    std::filesystem::copy_file(bin, dir.file("other"));
    REQUIRE(run({"dwz", "-m", dir.file("common.debug"), bin, dir.file("other")}).status == 0);
    std::filesystem::remove(dir.file("common.debug"));
    Prog p = prog(bin);
    sym::Symbolizer s(no_system_debug());
    s.add_known_lib(known(p, bin, "small"));
    auto r = s.lookup("small", p.breakpad, std::vector<uint64_t>{0x1000});
    REQUIRE(r.ok());
    auto missing = s.missing_files("small", p.breakpad);
    REQUIRE(missing.size() == 1);
    CHECK(missing[0].kind == sym::MissingFile::Kind::DwzAlt);
    CHECK(missing[0].text.rfind("dwz alt file not found: " + dir.file("common.debug") +
                                    " (.gnu_debugaltlink of " + bin + ", build ID ",
                                0) == 0);
    CHECK(missing[0].text.ends_with(
        "), looked for at its recorded path, beside it and in the build-ID directories"));
  }
}
