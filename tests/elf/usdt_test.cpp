// elf/usdt.h: the USDT probes of a program of ours built with <sys/sdt.h> and of Debian's python3 (built
// with --with-dtrace), checked against readelf's reading of the same notes; notes that lie are an error,
// never a crash; and `fxprof probes`, the command that lists them.
#include "elf/usdt.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/fd.h"
#include "tests/support/support.h"

using namespace fxprof;
using fxprof::test::run;
using fxprof::test::test_program;

namespace {

// readelf -n's probes: "provider:name" -> "Location: 0x..., ... Arguments: ...".
std::map<std::string, std::pair<uint64_t, std::string>> readelf_probes(const std::string& path) {
  auto r = run({"readelf", "-nW", path});
  REQUIRE(r.status == 0);
  std::map<std::string, std::pair<uint64_t, std::string>> out;
  std::istringstream lines(r.out);
  std::string provider, name;
  for (std::string l; std::getline(lines, l);) {
    // "Provider:" follows the note's type on its line (after a tab); the rest start their own lines.
    const size_t s =
        l.find("Provider: ") != std::string::npos ? l.find("Provider: ") : l.find_first_not_of(' ');
    if (s == std::string::npos) continue;
    std::string_view t = std::string_view(l).substr(s);
    if (t.starts_with("Provider: ")) provider = t.substr(10);
    if (t.starts_with("Name: ")) name = t.substr(6);
    if (t.starts_with("Location: "))
      out[provider + ":" + name].first = std::stoull(std::string(t.substr(10)), nullptr, 16);
    if (t.starts_with("Arguments:")) {
      std::string_view a = t.substr(10);
      if (a.starts_with(' ')) a.remove_prefix(1);
      out[provider + ":" + name].second = a;
    }
  }
  return out;
}

void check_against_readelf(const std::string& path, const std::vector<elf::UsdtProbe>& probes) {
  auto want = readelf_probes(path);
  REQUIRE(probes.size() == want.size());
  for (const elf::UsdtProbe& p : probes) {
    INFO(p.provider << ":" << p.name);
    auto it = want.find(p.provider + ":" + p.name);
    REQUIRE(it != want.end());
    CHECK(p.address == it->second.first);
    CHECK(p.arguments == it->second.second);
  }
}

}  // namespace

TEST_CASE("usdt: our program's probes, their arguments and its semaphore, as readelf reads them", "[elf]") {
  const std::string prog = test_program("usdt_requests");
  auto probes = elf::read_usdt_probes(prog);
  REQUIRE(probes.ok());
  check_against_readelf(prog, *probes);
  std::map<std::string, const elf::UsdtProbe*> by_name;
  for (const elf::UsdtProbe& p : *probes) by_name[p.provider + ":" + p.name] = &p;
  REQUIRE(by_name.size() == 3);
  const elf::UsdtProbe& start = *by_name.at("fxtest:request__start");
  REQUIRE(start.args.size() == 2);
  CHECK(start.args[0].size == 4);  // int id
  CHECK(start.args[0].is_signed);
  CHECK(start.args[1].size == 8);  // const char* name
  CHECK_FALSE(start.args[1].is_signed);
  CHECK(start.semaphore == 0);
  const elf::UsdtProbe& tick = *by_name.at("fxtest:tick");
  REQUIRE(tick.args.size() == 1);
  CHECK(tick.args[0].size == 2);
  CHECK(tick.args[0].is_signed);
  // The semaphore is the program's variable: nm names it at that address.
  auto nm = run({"nm", prog});
  REQUIRE(nm.status == 0);
  char addr[32];
  std::snprintf(addr, sizeof addr, "%016llx", static_cast<unsigned long long>(tick.semaphore));
  CHECK(nm.out.find(std::string(addr) + " D fxtest_tick_semaphore") != std::string::npos);
}

TEST_CASE("usdt: Debian's python3 (--with-dtrace) has function__entry/return, read as readelf does",
          "[elf]") {
  auto probes = elf::read_usdt_probes("/usr/bin/python3");
  REQUIRE(probes.ok());
  check_against_readelf("/usr/bin/python3", *probes);
  bool entry = false, ret = false;
  for (const elf::UsdtProbe& p : *probes) {
    entry |= p.provider == "python" && p.name == "function__entry" && p.args.size() == 3 && p.semaphore != 0;
    ret |= p.provider == "python" && p.name == "function__return" && p.args.size() == 3;
  }
  CHECK(entry);
  CHECK(ret);
  auto none = elf::read_usdt_probes("/bin/true");
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("usdt: argument specs, and notes that lie about their sizes are errors", "[elf]") {
  auto args = elf::parse_usdt_arguments("-4@%edi 8@16(%rsp)  1@$42");
  REQUIRE(args.ok());
  REQUIRE(args->size() == 3);
  CHECK((*args)[0].is_signed);
  CHECK((*args)[0].size == 4);
  CHECK((*args)[0].location == "%edi");
  CHECK((*args)[1].location == "16(%rsp)");
  CHECK((*args)[2].size == 1);
  CHECK((*args)[2].location == "$42");
  CHECK(elf::parse_usdt_arguments("3@%eax").error() == "argument '3@%eax' is not SIZE@LOCATION");
  CHECK(elf::parse_usdt_arguments("%eax").error() == "argument '%eax' is not SIZE@LOCATION");
  CHECK(elf::parse_usdt_arguments("8@").error() == "argument '8@' has no location");
  CHECK(elf::parse_usdt_arguments("")->empty());

  // The program's first probe note, its description size raised past the section: an error, not a read
  // past the end; a provider without its terminating NUL likewise.
  auto file = read_file(test_program("usdt_requests"));
  REQUIRE(file.ok());
  std::string image = file.value();
  const size_t at = image.find(std::string("stapsdt\0", 8));
  REQUIRE(at != std::string::npos);
  const size_t nhdr = at - 12;  // namesz, descsz, type, then the name
  std::string lying = image;
  const uint32_t huge = 0x7ffffff0;
  std::memcpy(lying.data() + nhdr + 4, &huge, 4);
  auto r = elf::parse_usdt_probes(std::as_bytes(std::span(lying)));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == ".note.stapsdt: a note runs past its section");
  uint32_t descsz = 0;
  std::memcpy(&descsz, image.data() + nhdr + 4, 4);
  std::string unterminated = image;
  std::memset(unterminated.data() + at + 8 + 24, 'x', descsz - 24);
  r = elf::parse_usdt_probes(std::as_bytes(std::span(unterminated)));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == ".note.stapsdt: a probe's provider, name or arguments is not terminated");
  std::string not_elf = "#!/bin/sh\necho\n";
  CHECK(elf::parse_usdt_probes(std::as_bytes(std::span(not_elf))).error() ==
        "a script, not an ELF file (name the program that runs it)");
}

TEST_CASE("fxprof probes lists a binary's probes, says when it has none, and refuses what is not ELF",
          "[elf][cli]") {
  auto r = run({test::fxprof_bin(), "probes", test_program("usdt_requests")});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.starts_with("3 USDT probes in " + test_program("usdt_requests") + ":\n"));
  CHECK(r.out.find("  fxtest:request__start  (2 arguments: -4@") != std::string::npos);
  CHECK(r.out.find("  fxtest:tick  (1 argument: -2@") != std::string::npos);
  CHECK(r.out.find("; semaphore)\n") != std::string::npos);
  auto json = run({test::fxprof_bin(), "probes", "--json", test_program("usdt_requests")});
  REQUIRE(json.status == 0);
  simdjson::dom::parser parser;
  auto doc = test::parse_json(parser, json.out);
  CHECK(simdjson::dom::array(doc["probes"]).size() == 3);
  auto none = run({test::fxprof_bin(), "probes", "/bin/true"});
  CHECK(none.status == 0);
  CHECK(none.out == "/bin/true has no USDT probes (no .note.stapsdt section)\n");
  auto bad = run({test::fxprof_bin(), "probes", "/etc/passwd"});
  CHECK(bad.status == 1);
  CHECK(bad.err == "fxprof: /etc/passwd: not an ELF file\n");
  auto fifo = run({test::fxprof_bin(), "probes", "/dev/null"});
  CHECK(fifo.status == 1);
  CHECK(fifo.err == "fxprof: /dev/null is not a regular file\n");
}
