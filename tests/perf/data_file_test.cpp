// perf/data_file.h: perf.data files in file and pipe mode (synthetic bytes): attributes and ids, header
// features, records in time order (out-of-order ones kept, synthesized ones stamped), and hostile files
// refused with one line.
#include "perf/data_file.h"

#include <zstd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/perf/perf_bytes.h"

using namespace fxprof::perf;
using fxprof::test::Bytes;
using fxprof::test::FileSpec;

namespace {

constexpr uint64_t kType = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID |
                           PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN;

std::string sample(uint64_t id, uint32_t tid, uint64_t time) {
  Bytes b;
  b.u64(0x401000).u32x2(tid, tid).u64(time).u64(id).u32x2(0, 0).u64(1000).u64(1).u64(0x401000);
  return b.record(PERF_RECORD_SAMPLE);
}

std::string comm(uint64_t id, uint32_t tid, const std::string& name, uint64_t time) {
  Bytes b;
  b.u32x2(tid, tid).str(name).u32x2(tid, tid).u64(time).u64(id).u32x2(0, 0);
  return b.record(PERF_RECORD_COMM);
}

FileSpec two_events() {
  FileSpec f;
  f.attrs = {fxprof::test::attr(kType, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK),
             fxprof::test::attr(kType, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS)};
  f.ids = {{11, 12}, {21}};
  // Written by CPU, not by time: 300 comes before 200; the synthesized COMM has no time.
  f.records = {comm(11, 5, "app", 0), sample(11, 5, 100), sample(12, 5, 300), sample(21, 5, 200),
               sample(11, 5, 400)};
  Bytes host, cmd, cpus, desc, build;
  host.header_string("buildhost");
  cmd.u32(2).header_string("perf").header_string("record");
  cpus.u32x2(8, 4);
  desc.u32(2).u32(sizeof(perf_event_attr));
  for (const auto& [name, id] : {std::pair<std::string, uint64_t>{"cpu-clock:u", 11}, {"page-faults", 21}}) {
    desc.put(&f.attrs[0], sizeof(perf_event_attr)).u32(1).header_string(name).u64(id);
  }
  Bytes e;
  e.u32(2);  // pid
  for (int i = 0; i < 5; ++i) e.u32(0xaabbccdd);
  e.u32(0).str("/usr/bin/app", 64);
  build.s = e.record(0, PERF_RECORD_MISC_USER);
  f.features = {{2, build.s}, {3, host.s}, {7, cpus.s}, {11, cmd.s}, {12, desc.s}};
  return f;
}

fxprof::Result<DataFile> parse(const std::string& bytes) {
  return DataFile::parse(std::as_bytes(std::span(bytes.data(), bytes.size())), "t.data");
}

}  // namespace

TEST_CASE("perf.data: file mode, its events, features and records in time order", "[perf]") {
  auto f = parse(fxprof::test::perf_file(two_events()));
  REQUIRE(f.ok());
  CHECK_FALSE(f->pipe);
  REQUIRE(f->events.size() == 2);
  CHECK(f->events[0].name == "cpu-clock:u");
  CHECK(f->events[1].name == "page-faults");
  CHECK(f->features.hostname == "buildhost");
  CHECK((f->features.cpus_available == 8 && f->features.cpus_online == 4));
  CHECK(f->features.cmdline == std::vector<std::string>{"perf", "record"});
  REQUIRE(f->features.build_ids.size() == 1);
  CHECK(f->features.build_ids[0].path == "/usr/bin/app");
  CHECK(f->features.build_ids[0].build_id.size() == 20);
  // Every record kept, sorted; the COMM stamped with the first time; the late one counted.
  REQUIRE(f->records.size() == 5);
  CHECK(f->records[0].h->type == PERF_RECORD_COMM);
  std::vector<uint64_t> times;
  for (const RecordAt& r : f->records) times.push_back(r.time);
  CHECK(times == std::vector<uint64_t>{100, 100, 200, 300, 400});
  CHECK(f->out_of_order == 1);
  CHECK(std::get<CommRecord>(decode(f->records[0].h, f->layout)).time == 100);
  CHECK(f->layout.event_of(f->records[2].h) == 1);  // id 21: page-faults
  CHECK(std::get<SampleRecord>(decode(f->records[3].h, f->layout)).event == 0);
}

TEST_CASE("perf.data: pipe mode (perf record -o -), attributes and ids from HEADER_ATTR", "[perf]") {
  FileSpec spec = two_events();
  auto f = parse(fxprof::test::perf_pipe(spec));
  REQUIRE(f.ok());
  CHECK(f->pipe);
  REQUIRE(f->events.size() == 2);
  CHECK(f->events[1].name == "page-faults");  // from its type and config: no EVENT_DESC in a pipe
  CHECK(f->records.size() == 5);
  CHECK(f->layout.event_of(f->records[2].h) == 1);
}

TEST_CASE("perf.data: truncated, lying and hostile files are one-line errors", "[perf]") {
  const std::string good = fxprof::test::perf_file(two_events());
  auto error_of = [](const std::string& bytes) {
    auto f = parse(bytes);
    REQUIRE_FALSE(f.ok());
    CHECK(f.error().find('\n') == std::string::npos);
    return f.error();
  };
  CHECK_THAT(error_of(""), Catch::Contains("not a perf.data file"));
  CHECK_THAT(error_of("PERFFILE"), Catch::Contains("not a perf.data file"));
  CHECK_THAT(error_of(good.substr(0, 50)), Catch::Contains("truncated"));
  // Cut anywhere: an error or fewer records, never a crash.
  for (size_t n = 0; n < good.size(); n += 7) (void)parse(good.substr(0, n));
  auto patched = [&](size_t at, uint64_t v) {
    std::string b = good;
    std::memcpy(b.data() + at, &v, 8);
    return b;
  };
  CHECK_THAT(error_of(patched(32, uint64_t{1} << 40)), Catch::Contains("attributes section"));  // its size
  CHECK_THAT(error_of(patched(32, 100)), Catch::Contains("attributes section"));  // not a whole attr
  CHECK_THAT(error_of(patched(16, 8)), Catch::Contains("attribute size"));
  CHECK_THAT(error_of(patched(48, uint64_t{1} << 50)), Catch::Contains("data section"));
  // A record whose size runs past the data, and one of size 0.
  const uint64_t data_at = [&] {
    uint64_t v;
    std::memcpy(&v, good.data() + 40, 8);
    return v;
  }();
  std::string zero = good;
  std::memset(zero.data() + data_at + 6, 0, 2);
  CHECK_THAT(error_of(zero), Catch::Contains("impossible size"));
  std::string big = good;
  const uint16_t huge = 0xfff8;
  std::memcpy(big.data() + data_at + 6, &huge, 2);
  CHECK_THAT(error_of(big), Catch::Contains("impossible size"));
  // Compressed records (perf record -z): bytes that are no zstd frame, and a frame that inflates past
  // 64 MB (zeros: 2 KB of zstd), are errors, not allocations.
  FileSpec z = two_events();
  Bytes payload;
  payload.u64(0);
  z.records.push_back(payload.record(81));
  CHECK_THAT(error_of(fxprof::test::perf_file(z)), Catch::Contains("corrupt compressed record"));
  const std::string zeros((size_t{64} << 20) + 4096, '\0');
  std::string frame(ZSTD_compressBound(zeros.size()), '\0');
  frame.resize(ZSTD_compress(frame.data(), frame.size(), zeros.data(), zeros.size(), 1));
  frame.resize((frame.size() + 7) / 8 * 8, '\0');
  FileSpec bomb = two_events();
  Bytes bomb_record;
  bomb_record.u64(frame.size());
  bomb_record.put(frame.data(), frame.size());
  bomb.records.push_back(bomb_record.record(83));
  CHECK_THAT(error_of(fxprof::test::perf_file(bomb)), Catch::Contains("inflates to more than 64 MB"));
}
