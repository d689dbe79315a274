// Tests of exporter/gecko_reader.h: write -> read -> write gives the same file (plain and gzip, raw and
// symbolicated frames, markers, native allocations, child processes, a reused pid), the model read back holds
// what was written, and hostile files get one-line errors without hanging or inflating without bound.
#include "exporter/gecko_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <random>

#include "exporter/gecko.h"
#include "tests/support/support.h"

using namespace fxprof;

namespace {

constexpr uint64_t kT0 = 1'000'000'000'000;

model::Profile sample_profile() {
  model::Profile p;
  p.meta.product = "unit";
  p.meta.start_unix_ms = 1.7e12;
  p.meta.start_monotonic_ns = kT0;
  p.meta.end_monotonic_ns = kT0 + 50'000'000;
  p.meta.oscpu = "Linux 6.1.0";
  p.meta.presymbolicated = true;
  p.meta.marker_schemas.push_back(
      {"Lost", {"marker-chart", "marker-table"}, "lost", "tip", "", {{"count", "Count", "integer"}}});
  model::Process& proc = p.processes.emplace_back();
  proc.pid = 100;
  proc.name = "app";
  proc.start_ns = kT0;
  proc.end_ns = kT0 + 45'000'000;
  proc.libs.push_back({0x555555555000, 0x555555556000, 0x1000, "app", "/tmp/app", "app", "/tmp/app",
                       "0123456789ABCDEF0123456789ABCDEF0", "efcdab8967452301"});
  proc.libs.push_back({0x7f0000001000, 0x7f0000009000, 0x1000, "libc.so.6", "/lib/libc.so.6", "libc.so.6",
                       "/lib/libc.so.6", "5C0A0D51EA1980DF43F203B4525BE9BE0", "510d0a5c"});
  model::BinaryId app = p.intern_binary(proc.libs[0]), libc = p.intern_binary(proc.libs[1]);
  model::Frame named;
  named.binary = app;
  named.address = 0x1231;
  named.name = p.strings.intern("main");
  named.file = p.strings.intern("/src/app.c");
  named.line = 12;
  model::Frame inl = named;
  inl.name = p.strings.intern("helper");
  inl.file = p.strings.intern("/src/util.h");
  inl.line = 3;
  inl.inline_depth = 1;
  model::Frame unresolved;
  unresolved.binary = libc;
  unresolved.address = 0x2345;
  model::FrameId f_main = p.frames.intern(named), f_inl = p.frames.intern(inl),
                 f_un = p.frames.intern(unresolved);
  model::FrameId raw = p.native_frame(0x7f0000001234);
  model::FrameId kfn = p.kernel_frame(0xffffffff81000010);
  p.frames.mutable_frame(kfn).name = p.strings.intern("ksys_write");
  model::FrameId label = p.label_frame("(stack truncated)");
  std::vector<model::FrameId> s1{f_main, f_inl, f_un}, s2{f_main, raw, kfn}, s3{label, raw};
  model::StackId a = p.stacks.intern_path(s1), b = p.stacks.intern_path(s2), c = p.stacks.intern_path(s3);

  model::Thread& t = proc.threads.emplace_back();
  t.tid = 100;
  t.name = "app";
  t.is_main = true;
  t.start_ns = kT0;
  t.samples = {
      {kT0 + 1'000'000, a, -1}, {kT0 + 2'000'000, b, 900'000}, {kT0 + 2'500'000, model::kNoStack, 0}};
  model::Marker m;
  m.name = p.strings.intern("Lost records");
  m.start_ns = kT0 + 1'500'000;
  m.end_ns = kT0 + 2'500'000;
  m.phase = model::MarkerPhase::Interval;
  m.type = p.strings.intern("Lost");
  m.fields.push_back({p.strings.intern("count"), false, 3, model::kNoString});
  m.fields.push_back({p.strings.intern("why"), true, 0, p.strings.intern("ring \"full\"")});
  t.markers.push_back(m);
  model::Marker end = m;
  end.phase = model::MarkerPhase::IntervalEnd;
  end.type = model::kNoString;
  end.fields.clear();
  t.markers.push_back(end);
  // A block allocated by this thread and freed by the worker (frees are on the allocating thread).
  t.allocations = {{kT0 + 1'234'000, a, 4096, 0x5555deadbee0, 100},
                   {kT0 + 3'001'000, a, -4096, 0x5555deadbee0, 101}};
  model::Thread& w = proc.threads.emplace_back();
  w.tid = 101;
  w.name = "worker";
  w.start_ns = kT0 + 500'000;
  w.end_ns = kT0 + 40'000'000;
  w.samples = {{kT0 + 4'000'000, c, 1000}};

  // exec gives the same pid a second process entry ("100.1").
  const model::Lib libc_map = proc.libs[1];
  for (int i = 0; i < 2; ++i) {
    model::Process& child = p.processes.emplace_back();
    child.pid = i == 0 ? 200 : 100;
    child.name = i == 0 ? "child" : "exec'd";
    child.start_ns = kT0 + 10'000'000 + static_cast<uint64_t>(i) * 1'000'000;
    child.libs = {libc_map};
    model::Thread& ct = child.threads.emplace_back();
    ct.tid = child.pid;
    ct.name = child.name;
    ct.is_main = true;
    ct.start_ns = child.start_ns;
    ct.samples = {{child.start_ns + 1'000'000, c, 1000}};
  }
  return p;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string load_error(const std::string& path) {
  auto r = exporter::read_gecko_profile(path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find('\n') == std::string::npos);
  CHECK(r.error().rfind(path + ": ", 0) == 0);
  return r.error();
}

}  // namespace

TEST_CASE("write -> read -> write gives the same profile, plain and gzip", "[exporter]") {
  test::TempDir dir;
  for (std::string name : {"p.json", "p.json.gz"}) {
    INFO(name);
    const std::string first = dir.file("1" + name), second = dir.file("2" + name);
    REQUIRE(exporter::write_gecko_profile(sample_profile(), first));
    exporter::ReadInfo info;
    auto back = exporter::read_gecko_profile(first, &info);
    REQUIRE(back.ok());
    CHECK(info.gzip == (name.back() == 'z'));
    CHECK_FALSE(info.processed);
    REQUIRE(exporter::write_gecko_profile(*back, second));
    CHECK(test::read_profile_text(first) == test::read_profile_text(second));
  }
}

TEST_CASE("the model read back holds names, files, lines, inline depth and binaries as fields",
          "[exporter]") {
  test::TempDir dir;
  const std::string path = dir.file("p.json");
  REQUIRE(exporter::write_gecko_profile(sample_profile(), path));
  auto r = exporter::read_gecko_profile(path);
  REQUIRE(r.ok());
  const model::Profile& p = *r;
  REQUIRE(p.processes.size() == 3);
  CHECK(p.processes[0].pid == 100);
  CHECK(p.processes[2].pid == 100);  // "100.1" is pid 100
  CHECK(p.processes[1].start_ns == kT0 + 10'000'000);
  CHECK(p.meta.presymbolicated);
  CHECK(p.meta.end_monotonic_ns == kT0 + 50'000'000);
  const model::Thread& t = p.processes[0].threads[0];
  CHECK(t.is_main);
  CHECK(t.name == "app");
  REQUIRE(t.samples.size() == 3);
  CHECK(t.samples[0].time_ns == kT0 + 1'000'000);
  CHECK(t.samples[1].cpu_delta_ns == 900'000);
  CHECK(t.samples[2].stack == model::kNoStack);
  std::vector<const model::Frame*> path_frames;
  for (model::StackId s = t.samples[0].stack; s != model::kNoStack; s = p.stacks.prefix(s))
    path_frames.insert(path_frames.begin(), &p.frames.get(p.stacks.frame(s)));
  REQUIRE(path_frames.size() == 3);
  CHECK(p.strings.get(path_frames[0]->name) == "main");
  CHECK(p.strings.get(path_frames[0]->file) == "/src/app.c");
  CHECK(path_frames[0]->line == 12);
  CHECK(path_frames[0]->address == 0x1231);
  CHECK(p.binaries[path_frames[0]->binary].breakpad_id == "0123456789ABCDEF0123456789ABCDEF0");
  CHECK(path_frames[1]->inline_depth == 1);
  CHECK(path_frames[2]->name == model::kNoString);
  CHECK(path_frames[2]->address == 0x2345);
  CHECK(p.binaries[path_frames[2]->binary].name == "libc.so.6");
  REQUIRE(t.markers.size() == 2);
  CHECK(p.strings.get(t.markers[0].name) == "Lost records");
  CHECK(t.markers[0].end_ns == kT0 + 2'500'000);
  REQUIRE(t.markers[0].fields.size() == 2);
  CHECK(p.strings.get(t.markers[0].fields[1].string) == "ring \"full\"");
  CHECK(t.markers[1].phase == model::MarkerPhase::IntervalEnd);
  CHECK(t.markers[1].start_ns == kT0 + 1'500'000);  // an end marker's time is its start_ns
  // Native allocation markers come back as the thread's allocations, not as markers.
  REQUIRE(t.allocations.size() == 2);
  CHECK(t.allocations[0].time_ns == kT0 + 1'234'000);
  CHECK(t.allocations[0].stack == t.samples[0].stack);
  CHECK(t.allocations[0].bytes == 4096);
  CHECK(t.allocations[0].address == 0x5555deadbee0);
  CHECK(t.allocations[0].tid == 100);
  CHECK(t.allocations[1].bytes == -4096);
  CHECK(t.allocations[1].tid == 101);
}

TEST_CASE("hostile or broken files get one-line errors", "[exporter]") {
  test::TempDir dir;
  const std::string good = dir.file("good.json");
  REQUIRE(exporter::write_gecko_profile(sample_profile(), good));
  const std::string text = slurp(good);

  const std::string empty = dir.file("empty.json");
  spit(empty, "");
  CHECK_THAT(load_error(empty), Catch::Contains("empty file"));

  const std::string truncated = dir.file("truncated.json");
  spit(truncated, std::string_view(text).substr(0, text.size() / 2));
  CHECK_THAT(load_error(truncated), Catch::Contains("truncated JSON"));

  const std::string random = dir.file("random.bin");
  std::mt19937 rng(7);
  std::string noise(1 << 16, '\0');
  for (char& ch : noise) ch = static_cast<char>(rng() & 0xff);
  noise[0] = 'Q';
  spit(random, noise);
  CHECK_THAT(load_error(random), Catch::Contains("not a profile"));

  const std::string other = dir.file("other.json");
  spit(other, R"({"hello": [1, 2, 3]})");
  CHECK_THAT(load_error(other), Catch::Contains("not a Firefox Profiler profile"));

  const std::string huge = dir.file("huge.json");
  std::string with_huge = text;
  size_t at = with_huge.find("\"interval\":");
  REQUIRE(at != std::string::npos);
  with_huge.insert(at + 11, "1e400,\"x\":");
  spit(huge, with_huge);
  CHECK_THAT(load_error(huge), Catch::Contains("beyond the range of a double"));

  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(load_error(fifo), Catch::Contains("not a regular file"));  // and it returned: no hang

  CHECK_THAT(load_error(dir.path()), Catch::Contains("is a directory"));

  // A gzip bomb: 256 MiB of zeros compress to ~256 KiB (1000x); refused past the ratio, naming the limit.
  const std::string bomb = dir.file("bomb.json.gz");
  {
    gzFile gz = gzopen(bomb.c_str(), "wb9");
    REQUIRE(gz);
    std::string zeros(1 << 20, ' ');
    zeros[0] = '{';
    for (int i = 0; i < 256; ++i) {
      REQUIRE(gzwrite(gz, zeros.data(), static_cast<unsigned>(zeros.size())) ==
              static_cast<int>(zeros.size()));
      zeros[0] = ' ';
    }
    gzclose(gz);
  }
  CHECK_THAT(load_error(bomb), Catch::Contains("inflates beyond 200x"));
}

TEST_CASE("gzip's size trailer is a hint only: several members read whole, a wrong size is an error",
          "[exporter]") {
  test::TempDir dir;
  const std::string good = dir.file("good.json");
  REQUIRE(exporter::write_gecko_profile(sample_profile(), good));
  const std::string text = slurp(good);
  auto gzip = [](std::string_view data) {
    std::string out(compressBound(static_cast<uLong>(data.size())) + 64, '\0');
    z_stream z{};
    REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
  };
  // Two members (cat a.gz b.gz): the trailer gives the second one's size only; the buffer grows.
  const std::string two = dir.file("two.json.gz");
  const size_t half = text.size() / 2;
  spit(two, gzip(std::string_view(text).substr(0, half)) + gzip(std::string_view(text).substr(half)));
  auto read = exporter::read_profile_bytes(two);
  REQUIRE(read.ok());
  CHECK(read->view() == text);
  CHECK(exporter::read_gecko_profile(two).ok());
  // A trailer that lies about the size (far larger, or smaller): zlib's length check refuses it.
  for (uint32_t lie : {0xFFFFFFF0u, 1u}) {
    std::string z = gzip(text);
    for (int i = 0; i < 4; ++i) z[z.size() - 4 + i] = static_cast<char>((lie >> (8 * i)) & 0xff);
    const std::string liar = dir.file("liar.json.gz");
    spit(liar, z);
    CHECK_THAT(load_error(liar), Catch::Contains("corrupt gzip data"));
  }
}

TEST_CASE("a processed-format profile is recognised, not read", "[exporter]") {
  test::TempDir dir;
  const std::string path = dir.file("processed.json");
  spit(path, R"({"meta":{"preprocessedProfileVersion":66,"version":24},"libs":[],"threads":[]})");
  exporter::ReadInfo info;
  auto r = exporter::read_gecko_profile(path, &info);
  REQUIRE(r.ok());
  CHECK(info.processed);
}
