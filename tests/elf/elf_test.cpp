// Tests of elf/: the identity of real binaries linked the ways users link them (lld, rust-lld, GNU ld with
// and without -z separate-code), the address mapping checked against the kernel's own mapping of a running
// program, and the debug-file locator on real debug files (build-ID trees, debuglink CRC, symbol folders).
#include "elf/elf.h"

#include <elf.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/fd.h"
#include "model/profile.h"
#include "symbolizer/symbolizer.h"
#include "tests/support/support.h"

using namespace fxprof;
using fxprof::test::run;
using fxprof::test::test_program;

extern char** environ;

namespace {

// A link_probe in "addr" mode: it prints elf_probe_hot's runtime address and lives until we close its stdin.
class Probe {
 public:
  explicit Probe(const std::string& path) {
    int in[2], out[2];
    REQUIRE(pipe2(in, O_CLOEXEC) == 0);
    REQUIRE(pipe2(out, O_CLOEXEC) == 0);
    stdin_ = UniqueFd(in[1]);
    UniqueFd child_in(in[0]), child_out(out[1]);
    stdout_ = UniqueFd(out[0]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, child_in.get(), 0);
    posix_spawn_file_actions_adddup2(&fa, child_out.get(), 1);
    std::string mode = "addr";
    char* argv[] = {const_cast<char*>(path.c_str()), mode.data(), nullptr};
    int rc = posix_spawn(&pid_, path.c_str(), &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE(rc == 0);
  }
  ~Probe() {
    stdin_ = UniqueFd();  // EOF: the probe exits
    int st;
    if (pid_ > 0) waitpid(pid_, &st, 0);
  }
  // The address it printed (blocks until the line is there).
  uint64_t address() {
    std::string line;
    char c;
    while (::read(stdout_.get(), &c, 1) == 1 && c != '\n') line += c;
    return std::strtoull(line.c_str(), nullptr, 16);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  UniqueFd stdin_, stdout_;
};

struct ProcMapping {
  uint64_t start = 0, end = 0, pgoff = 0;
  uint32_t prot = 0;
  std::string path;
};

ProcMapping mapping_of(pid_t pid, uint64_t addr) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long start, end, off;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &off, &path_at) < 4)
      continue;
    if (addr < start || addr >= end) continue;
    ProcMapping m{start, end, off, 0, line.substr(static_cast<size_t>(path_at))};
    m.prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
             (perms[2] == 'x' ? PROT_EXEC : 0);
    return m;
  }
  return {};
}

std::string probe_path(const std::string& name) {
  std::string p = test_program(name);
  INFO(p << " is missing"
         << (name.find("rust") != std::string::npos ? ": install rustc (make test-deps)" : ""));
  REQUIRE(access(p.c_str(), X_OK) == 0);
  return p;
}

}  // namespace

TEST_CASE("elf: each linker's layout maps the running program's addresses back to its own functions") {
  // lld and rust-lld share a file page between the read-only and the executable segment (the mapping's
  // file offset lies in both); GNU ld gives both layouts with and without -z separate-code.
  auto name =
      GENERATE(as<std::string>{}, "link_lld", "link_rust_lld", "link_bfd_sepcode", "link_bfd_nosepcode");
  INFO(name);
  std::string path = probe_path(name);
  Probe probe(path);
  uint64_t addr = probe.address();
  REQUIRE(addr != 0);
  ProcMapping m = mapping_of(probe.pid(), addr);
  REQUIRE(m.path == path);
  CHECK((m.prot & PROT_EXEC) != 0);
  auto id = elf::read_file(path);
  REQUIRE(id.has_value());
  REQUIRE(id->build_id.size() >= 8);
  CHECK(id->machine == EM_X86_64);

  // The SVMA of the mapping's first byte is that of a PF_X segment, and elf_probe_hot's own address comes
  // back as its symbol's address.
  auto svma = id->mapping_svma(m.pgoff, m.prot);
  REQUIRE(svma.has_value());
  bool in_exec_segment = false;
  for (const elf::Segment& s : id->loads)
    if ((s.flags & PF_X) && *svma + (addr - m.start) >= s.vaddr &&
        *svma + (addr - m.start) < s.vaddr + s.memsz)
      in_exec_segment = true;
  CHECK(in_exec_segment);

  uint64_t rel = addr - m.start + id->lib_offset(m.pgoff, m.prot);
  symbolizer::Options o;
  o.debug_dirs = {};
  o.use_debuginfod = false;
  symbolizer::Symbolizer sym(o);
  std::string breakpad = elf::breakpad_id(id->build_id);
  std::string base = path.substr(path.rfind('/') + 1);
  sym.add_known_lib({base, breakpad, base, path, path, elf::hex(id->build_id), "x86_64"});
  auto r = sym.lookup(base, breakpad, std::vector<uint64_t>{rel});
  REQUIRE(r.ok());
  REQUIRE(r->size() == 1);
  CHECK((*r)[0].function == "elf_probe_hot");
  CHECK((*r)[0].function_offset == 0);
}

TEST_CASE("elf: a read-only mapping of an lld binary maps to the read-only segment, not the code") {
  auto id = elf::read_file(probe_path("link_lld"));
  REQUIRE(id.has_value());
  REQUIRE(id->loads.size() >= 2);
  const elf::Segment& ro = id->loads[0];
  const elf::Segment& rx = id->loads[1];
  REQUIRE((rx.flags & PF_X) != 0);
  REQUIRE((ro.offset & ~uint64_t{0xfff}) == (rx.offset & ~uint64_t{0xfff}));  // the shared page
  uint64_t pgoff = rx.offset & ~uint64_t{0xfff};
  CHECK(id->mapping_svma(pgoff, PROT_READ) == ro.vaddr + pgoff - ro.offset);
  CHECK(id->mapping_svma(pgoff, PROT_READ | PROT_EXEC) == rx.vaddr + pgoff - rx.offset);
  CHECK(id->mapping_svma(pgoff, PROT_READ | PROT_EXEC) != id->mapping_svma(pgoff, PROT_READ));
  CHECK_FALSE(id->mapping_svma(uint64_t{1} << 40, PROT_READ).has_value());
  CHECK(id->lib_offset(uint64_t{1} << 40, PROT_READ) == uint64_t{1} << 40);
}

TEST_CASE("elf: build ID and debuglink are read from the file, and the vDSO is ours") {
  std::string linked = test_program("symbolizer/debuglink/sym_linked");
  auto id = elf::read_file(linked);
  REQUIRE(id.has_value());
  CHECK(id->debuglink == "sym_inline.debug");
  auto crc = elf::file_crc32(test_program("symbolizer/debuglink/sym_inline.debug"));
  REQUIRE(crc.has_value());
  CHECK(id->debuglink_crc == *crc);
  auto orig = elf::read_file(test_program("sym_inline"));
  REQUIRE(orig.has_value());
  CHECK(orig->build_id == id->build_id);  // stripping keeps the build ID
  CHECK(orig->debuglink.empty());
  auto rebuilt = elf::read_file(test_program("sym_inline_rebuilt"));
  REQUIRE(rebuilt.has_value());
  CHECK(elf::hex(rebuilt->build_id) == "0123456789abcdef0123456789abcdef01234567");

  REQUIRE(elf::own_vdso().has_value());
  CHECK(!elf::own_vdso()->loads.empty());
  CHECK(!elf::own_vdso()->build_id.empty());

  CHECK_FALSE(elf::read_file("/proc/self/status").has_value());
  CHECK_FALSE(elf::read_file("/nonexistent").has_value());
}

TEST_CASE("elf: the locator checks build IDs and debuglink CRCs and searches the symbol folders") {
  std::string linked = test_program("symbolizer/debuglink/sym_linked");
  std::string debug = test_program("symbolizer/debuglink/sym_inline.debug");
  auto id = elf::read_file(linked);
  REQUIRE(id.has_value());
  elf::LocatorOptions none;
  none.debug_dirs = {};
  none.use_debuginfod = false;
  none.perf_caches = {};
  elf::DebugQuery q{linked, id->build_id, id->debuglink, id->debuglink_crc, "sym_linked"};
  auto take = [](const std::string&) { return true; };

  // Beside the binary, CRC and build ID good.
  auto found = elf::locate_debug_file(q, none, take);
  REQUIRE(found.has_value());
  CHECK(*found == debug);

  // The caller may refuse a file: nothing else matches.
  CHECK_FALSE(elf::locate_debug_file(q, none, [](const std::string&) { return false; }).has_value());

  // A copy of the binary beside a debug file with the same build ID but another CRC: refused, with a note.
  test::TempDir dir;
  REQUIRE(run({"cp", linked, dir.file("sym_linked")}).status == 0);
  REQUIRE(run({"cp", debug, dir.file("sym_inline.debug")}).status == 0);
  REQUIRE(run({"sh", "-c", "printf x >> " + dir.file("sym_inline.debug")}).status == 0);
  q.binary_path = dir.file("sym_linked");
  std::vector<std::string> notes;
  CHECK_FALSE(elf::locate_debug_file(q, none, take, &notes).has_value());
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("CRC mismatch") != std::string::npos);

  // The right CRC but another build ID (a rebuilt program's debug file): refused.
  REQUIRE(run({"cp", test_program("sym_inline_rebuilt"), dir.file("sym_inline.debug")}).status == 0);
  auto rebuilt_crc = elf::file_crc32(dir.file("sym_inline.debug"));
  REQUIRE(rebuilt_crc.has_value());
  q.debuglink_crc = *rebuilt_crc;
  notes.clear();
  CHECK_FALSE(elf::locate_debug_file(q, none, take, &notes).has_value());
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("has build ID 0123456789abcdef") != std::string::npos);

  // A build-ID tree inside a --symbol-dir folder.
  test::TempDir syms;
  std::string hex = elf::hex(id->build_id);
  std::string tree = syms.path() + "/.build-id/" + hex.substr(0, 2);
  REQUIRE(run({"mkdir", "-p", tree}).status == 0);
  REQUIRE(run({"cp", debug, tree + "/" + hex.substr(2) + ".debug"}).status == 0);
  elf::LocatorOptions with_dir = none;
  with_dir.symbol_dirs = {syms.path()};
  found = elf::locate_debug_file(q, with_dir, take);
  REQUIRE(found.has_value());
  CHECK(*found == tree + "/" + hex.substr(2) + ".debug");

  // <symbol dir>/<debug name>.debug.
  test::TempDir named;
  REQUIRE(run({"cp", debug, named.file("sym_linked.debug")}).status == 0);
  elf::LocatorOptions with_named = none;
  with_named.symbol_dirs = {named.path()};
  found = elf::locate_debug_file(q, with_named, take);
  REQUIRE(found.has_value());
  CHECK(*found == named.file("sym_linked.debug"));
}

TEST_CASE("elf: perf's build-ID cache is searched, its links followed only inside it") {
  const std::string linked = test_program("symbolizer/debuglink/sym_linked");
  auto id = elf::read_file(linked);
  REQUIRE(id.has_value());
  const std::string hex = elf::hex(id->build_id);
  // perf's layout: ROOT/.build-id/xx/yyyy -> ../../PATH/<build ID>, a folder holding `elf`.
  test::TempDir cache;
  const std::string dir = cache.path() + "/gone/bin/sym_linked/" + hex;
  const std::string links = cache.path() + "/.build-id/" + hex.substr(0, 2);
  const std::string link = links + "/" + hex.substr(2);
  REQUIRE(run({"mkdir", "-p", dir, links}).status == 0);
  REQUIRE(run({"cp", linked, dir + "/elf"}).status == 0);
  REQUIRE(::symlink(("../../gone/bin/sym_linked/" + hex).c_str(), link.c_str()) == 0);
  char* real = ::realpath((dir + "/elf").c_str(), nullptr);
  REQUIRE(real != nullptr);
  const std::string copy = real;
  std::free(real);

  elf::LocatorOptions o;
  o.debug_dirs = {};
  o.use_debuginfod = false;
  o.perf_caches = {cache.path()};
  elf::DebugQuery q;  // the binary is gone: only its build ID is known
  q.build_id = id->build_id;
  auto take = [](const std::string&) { return true; };
  auto found = elf::locate_debug_file(q, o, take);
  REQUIRE(found.has_value());
  CHECK(*found == copy);
  CHECK(elf::perf_cache_files(o.perf_caches, hex, "") == std::vector<std::string>{copy});
  // By the recorded path too, when the build-ID link is missing.
  REQUIRE(::rename(link.c_str(), (link + ".moved").c_str()) == 0);
  CHECK_FALSE(elf::locate_debug_file(q, o, take).has_value());
  q.binary_path = "/gone/bin/sym_linked";
  CHECK(elf::locate_debug_file(q, o, take) == copy);
  q.binary_path.clear();
  REQUIRE(::rename((link + ".moved").c_str(), link.c_str()) == 0);

  // The defaults are perf's: $PERF_BUILDID_DIR, then $HOME/.debug.
  const char* old_home = std::getenv("HOME");
  const std::string home = old_home ? old_home : "";
  ::setenv("PERF_BUILDID_DIR", "/x/cache", 1);
  ::setenv("HOME", "/x/home", 1);
  CHECK(elf::default_perf_caches() == std::vector<std::string>{"/x/cache", "/x/home/.debug"});
  ::unsetenv("PERF_BUILDID_DIR");
  ::setenv("HOME", home.c_str(), 1);

  // A link that leads out of the cache (to a copy with the same build ID elsewhere): not followed.
  test::TempDir elsewhere;
  REQUIRE(run({"cp", linked, elsewhere.file("elf")}).status == 0);
  REQUIRE(::unlink(link.c_str()) == 0);
  REQUIRE(::symlink(elsewhere.path().c_str(), link.c_str()) == 0);
  CHECK_FALSE(elf::locate_debug_file(q, o, take).has_value());
  // Nor is a cache others may write to, nor anything but a regular file.
  REQUIRE(::unlink(link.c_str()) == 0);
  REQUIRE(::symlink(("../../gone/bin/sym_linked/" + hex).c_str(), link.c_str()) == 0);
  REQUIRE(elf::locate_debug_file(q, o, take).has_value());
  REQUIRE(::chmod(cache.path().c_str(), 0777) == 0);
  CHECK_FALSE(elf::locate_debug_file(q, o, take).has_value());
  REQUIRE(::chmod(cache.path().c_str(), 0700) == 0);
  REQUIRE(::chmod((dir + "/elf").c_str(), 0666) == 0);  // a copy others may write to
  CHECK_FALSE(elf::locate_debug_file(q, o, take).has_value());
  REQUIRE(::chmod((dir + "/elf").c_str(), 0755) == 0);
  REQUIRE(elf::locate_debug_file(q, o, take).has_value());
  REQUIRE(::unlink((dir + "/elf").c_str()) == 0);
  REQUIRE(::mkfifo((dir + "/elf").c_str(), 0600) == 0);
  CHECK_FALSE(elf::locate_debug_file(q, o, take).has_value());
}

TEST_CASE("breakpad and code ids from a GNU build id") {
  // The example from samply's snapshot test (reference-samply.md 2.12).
  std::vector<uint8_t> id{0x51, 0x0d, 0x0a, 0x5c, 0x19, 0xea, 0xdf, 0x80, 0x43, 0xf2,
                          0x03, 0xb4, 0x52, 0x5b, 0xe9, 0xbe, 0x3d, 0xcb, 0x95, 0x54};
  CHECK(fxprof::elf::hex(id) == "510d0a5c19eadf8043f203b4525be9be3dcb9554");
  CHECK(fxprof::elf::breakpad_id(id) == "5C0A0D51EA1980DF43F203B4525BE9BE0");
  // Short build ids are zero-padded.
  std::vector<uint8_t> short_id{0x01, 0x02};
  CHECK(fxprof::elf::breakpad_id(short_id) ==
        "00000201000000000000000000000000"
        "0");
}
