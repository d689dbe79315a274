// A profile larger than the memory allowed (issue 23): a one-line error and exit 1, never an abort. In the
// optimised build only (OPTIMIZED): ASan reserves terabytes of shadow address space (no RLIMIT_AS fits it)
// and ends the process itself when an allocation fails, before any new_handler.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/support.h"

using namespace fxprof::test;

TEST_CASE("a profile that needs more memory than allowed is a one-line error and exit 1, not an abort") {
  TempDir dir;
  // One thread of 1M samples: the model alone needs 24 MB, more than the 40 MiB address space allows once
  // fxprof and its libraries are mapped (it fails up to 44 MiB). A small profile reports under the same
  // limit: at 32 MiB it did not always, when its few samples happened to fall in ld.so and dash too.
  const std::string big = dir.file("big.json"), small = dir.file("small.json");
  {
    std::ofstream out(big);
    out << R"({"meta":{"version":36,"startTime":1700000000000,"interval":1},"libs":[],"threads":[{"name":"big",)"
           R"("pid":1,"tid":1,"processName":"big","samples":{"schema":{"stack":0,"time":1},"data":[)";
    for (int i = 0; i < 1'000'000; ++i) out << (i ? ",[0," : "[0,") << i << ']';
    out << R"(]},"stackTable":{"schema":{"prefix":0,"frame":1},"data":[[null,0]]},"frameTable":{"schema":)"
           R"({"location":0},"data":[[0]]},"stringTable":["main"]}],"processes":[]})";
  }
  {
    // ~30 ms of CPU in a shell: a few samples in sh, ld.so and libc.
    auto r = run({fxprof_bin(), "record", "--no-symbolicate", "-q", "-o", small, "--save-only", "--", "sh",
                  "-c", "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done"});
    INFO(r.err);
    REQUIRE(r.status == 0);
  }
  auto limited = [](const std::string& profile) {
    return run({"sh", "-c", "ulimit -v 40960 && exec \"$@\"", "sh", fxprof_bin(), "report", profile});
  };
  auto ok = limited(small);
  INFO(ok.err);
  CHECK(ok.status == 0);
  // libc's debug info does not fit in what is left: names from its symbol table, and a line that says why.
  CHECK(ok.err.find(" not read: the address-space limit (ulimit -v) leaves ") != std::string::npos);
  auto r = limited(big);
  INFO(r.err);
  CHECK(r.status == 1);  // was 134: std::bad_alloc reached std::terminate
  CHECK(r.err == "fxprof: out of memory\n");
  // Symbolicating the small one (libc's compressed debug info) under tighter and looser limits: it works or
  // says out of memory, never dies of a signal (at 36 MB libdw skipped a section it could not decompress
  // and read through it: a crash in dwarf_attr).
  for (int mib = 28; mib <= 70; mib += 2) {
    auto t = run({"sh", "-c", "ulimit -v " + std::to_string(mib * 1024) + " && exec \"$@\"", "sh",
                  fxprof_bin(), "report", small});
    INFO(mib << " MiB: status " << t.status << ", " << t.err);
    CHECK((t.status == 0 || t.status == 1));
    if (t.status == 1) CHECK(t.err.find("memory") != std::string::npos);
  }
}

TEST_CASE("a processed-format profile is refused before its tables are read, within 64 MiB") {
  // samply's layout (column tables: {"length", "prefix": [...]}) with "meta" last, where the format says
  // which it is: a 300 MB stackTable, gzip'd to ~15 MB (a 3% sprinkle of other numbers keeps it under the
  // gzip-bomb ratio). The reader copied the table whole as one piece before meta told it to stop: 1.5 GB and
  // 19 s to refuse it; the table's first key tells it first.
  TempDir dir;
  const std::string path = dir.file("processed.json.gz");
  {
    std::ofstream out(path, std::ios::binary);
    z_stream z{};
    REQUIRE(deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    std::vector<unsigned char> buf(1 << 20);
    auto put = [&](const std::string& text, int flush) {
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
      z.avail_in = static_cast<uInt>(text.size());
      do {
        z.next_out = buf.data();
        z.avail_out = static_cast<uInt>(buf.size());
        deflate(&z, flush);
        out.write(reinterpret_cast<const char*>(buf.data()), std::streamsize(buf.size() - z.avail_out));
      } while (z.avail_out == 0);
    };
    std::string chunk;
    uint64_t lcg = 1;
    for (int i = 0; i < 100000; ++i) {
      lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
      chunk += (lcg >> 33) % 100 < 3 ? "," + std::to_string((lcg >> 40) % 100) : std::string(",1");
    }
    put(R"({"libs":[],"threads":[{"name":"t","stackTable":{"length":1,"prefix":[0)", Z_NO_FLUSH);
    for (int i = 0; i < 1500; ++i) put(chunk, Z_NO_FLUSH);  // 300 MB
    put(R"(],"frame":[0]},"samples":{"length":0,"stack":[]}}],)"
        R"("meta":{"version":27,"preprocessedProfileVersion":47,"interval":1,"startTime":0}})",
        Z_FINISH);
    deflateEnd(&z);
  }
  auto r = run({"sh", "-c", "ulimit -v 65536 && exec \"$@\"", "sh", fxprof_bin(), "report", path});
  CHECK(r.status == 1);
  CHECK(r.err ==
        "fxprof: " + path + ": a processed-format profile (as samply writes); fxprof reads Gecko profiles\n");
}
