// Tests of gecko/gecko_reader.h: write -> read -> write gives the same file (plain and gzip, raw and
// symbolicated frames, markers, native allocations, child processes, a reused pid), the model read back holds
// what was written, and hostile files get one-line errors without hanging or inflating without bound.
#include "gecko/gecko_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <random>

#include "gecko/gecko.h"
#include "tests/support/support.h"

using namespace fxprof;
using fxprof::test::gzip_text;

namespace {

constexpr uint64_t kT0 = 1'000'000'000'000;

model::Profile sample_profile() {
  model::Profile p;
  p.meta.product = "unit";
  p.meta.start_unix_ms = 1.7e12;
  p.meta.start_monotonic_ns = kT0;
  p.meta.end_monotonic_ns = kT0 + 50'000'000;
  p.meta.oscpu = "Linux 6.1.0";
  p.meta.machine = {"Test CPU @ 3.00GHz", 4, 8, 16ull << 30, "./app --flag"};
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
                   {kT0 + 3'001'000, a, -4096, 0x5555deadbee0, 101},
                   {kT0 + 3'002'000, a, 3000, 7, 100, 3, true}};  // 3 blocks in one row, held at the peak
  p.meta.heap =
      model::Meta::HeapStats{false, 0, 12, 0, 7096, kT0 + 3'002'000, {{64, 2, 100}, {4096, 4, 7096}}};
  model::Thread& w = proc.threads.emplace_back();
  w.tid = 101;
  w.name = "worker";
  w.start_ns = kT0 + 500'000;
  w.end_ns = kT0 + 40'000'000;
  w.samples = {{kT0 + 4'000'000, c, 1000}};
  // Counter tracks as the recorder writes them: memory (deltas, negative too) and "Threads waiting".
  model::Counter& rss = proc.counters.emplace_back();
  rss.name = "RSS";
  rss.category = "Memory";
  rss.description = "resident set size";
  rss.samples = {{kT0, 1 << 20, 1}, {kT0 + 1'000'000, 4096, 2}, {kT0 + 2'000'000, -8192, 1}};
  model::Counter& waiting = proc.counters.emplace_back();
  waiting.name = "Threads waiting";
  waiting.category = "Threads";
  waiting.description = "threads that waited on a lock";
  waiting.samples = {{kT0 + 1'000'000, 0, 0}, {kT0 + 2'000'000, 3, 3}, {kT0 + 3'000'000, 0, 0}};

  // exec gives the same pid a second process entry (both written as pid 100).
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
    if (i == 0) child.counters.push_back({"Heap", "Memory", "", {{child.start_ns + 500'000, 64, 1}}});
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
  auto r = gecko::read_gecko_profile(path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find('\n') == std::string::npos);
  CHECK(r.error().rfind(path + ": ", 0) == 0);
  return r.error();
}

}  // namespace

TEST_CASE("write -> read -> write gives the same profile, plain and gzip", "[gecko]") {
  test::TempDir dir;
  for (std::string name : {"p.json", "p.json.gz"}) {
    INFO(name);
    const std::string first = dir.file("1" + name), second = dir.file("2" + name);
    REQUIRE(gecko::write_gecko_profile(sample_profile(), first));
    gecko::ReadInfo info;
    auto back = gecko::read_gecko_profile(first, &info);
    REQUIRE(back.ok());
    CHECK(info.gzip == (name.back() == 'z'));
    CHECK_FALSE(info.processed);
    REQUIRE(gecko::write_gecko_profile(*back, second));
    CHECK(test::read_profile_text(first) == test::read_profile_text(second));
    // The machine (meta CPUName, physicalCPUs, logicalCPUs, mainMemory, arguments) is read back.
    CHECK(back->meta.machine.cpu_name == "Test CPU @ 3.00GHz");
    CHECK(back->meta.machine.physical_cpus == 4);
    CHECK(back->meta.machine.logical_cpus == 8);
    CHECK(back->meta.machine.main_memory == 16ull << 30);
    CHECK(back->meta.machine.command_line == "./app --flag");
  }
}

TEST_CASE("the model read back holds names, files, lines, inline depth and binaries as fields", "[gecko]") {
  test::TempDir dir;
  const std::string path = dir.file("p.json");
  REQUIRE(gecko::write_gecko_profile(sample_profile(), path));
  auto r = gecko::read_gecko_profile(path);
  REQUIRE(r.ok());
  const model::Profile& p = *r;
  REQUIRE(p.processes.size() == 3);
  CHECK(p.processes[0].pid == 100);
  CHECK(p.processes[2].pid == 100);             // the exec'd program keeps its pid
  CHECK(p.processes[0].threads.at(0).is_main);  // "app (before exec)" is the first entry's main thread
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
  REQUIRE(t.allocations.size() == 3);
  CHECK(t.allocations[0].count == 1);
  CHECK(!t.allocations[0].at_peak);
  CHECK(t.allocations[2].count == 3);
  CHECK(t.allocations[2].at_peak);
  CHECK(t.allocations[2].bytes == 3000);
  // The heap's figures that the rows cannot give back (meta.fxprofHeap).
  REQUIRE(p.meta.heap.has_value());
  CHECK(!p.meta.heap->sampled);
  CHECK(p.meta.heap->temporary == 12);
  CHECK(p.meta.heap->peak_bytes == 7096);
  CHECK(p.meta.heap->peak_time_ns == kT0 + 3'002'000);
  REQUIRE(p.meta.heap->sizes.size() == 2);
  CHECK(p.meta.heap->sizes[1].max_size == 4096);
  CHECK(p.meta.heap->sizes[1].count == 4);
  CHECK(p.meta.heap->sizes[1].bytes == 7096);
  CHECK(t.allocations[0].time_ns == kT0 + 1'234'000);
  CHECK(t.allocations[0].stack == t.samples[0].stack);
  CHECK(t.allocations[0].bytes == 4096);
  CHECK(t.allocations[0].address == 0x5555deadbee0);
  CHECK(t.allocations[0].tid == 100);
  CHECK(t.allocations[1].bytes == -4096);
  CHECK(t.allocations[1].tid == 101);
  // Counters, with absolute times.
  REQUIRE(p.processes[0].counters.size() == 2);
  const model::Counter& rss = p.processes[0].counters[0];
  CHECK(rss.name == "RSS");
  CHECK(rss.category == "Memory");
  CHECK(rss.description == "resident set size");
  REQUIRE(rss.samples.size() == 3);
  CHECK(rss.samples[1].time_ns == kT0 + 1'000'000);
  CHECK(rss.samples[0].delta == 1 << 20);
  CHECK(rss.samples[2].delta == -8192);
  CHECK(rss.samples[1].count == 2);
  CHECK(p.processes[0].counters[1].name == "Threads waiting");
  CHECK(p.processes[0].counters[1].samples[1].delta == 3);
  REQUIRE(p.processes[1].counters.size() == 1);
  CHECK(p.processes[1].counters[0].samples[0].time_ns == kT0 + 10'500'000);
  CHECK(p.processes[2].counters.empty());
}

TEST_CASE("data-quality entries read back with their kind: lost records are counted, others are not",
          "[gecko]") {
  test::TempDir dir;
  model::Profile prof = sample_profile();
  prof.meta.data_quality.push_back({"Deleted while running, not readable: /tmp/x", 3});
  prof.meta.data_quality.push_back(
      {std::string(model::Meta::kLostRecordsLabel), 31, model::Meta::ProblemKind::LostRecords});
  const std::string path = dir.file("p.json");
  REQUIRE(gecko::write_gecko_profile(prof, path));
  auto r = gecko::read_gecko_profile(path);
  REQUIRE(r.ok());
  REQUIRE(r->meta.data_quality.size() == 2);
  CHECK(r->meta.data_quality[0].kind == model::Meta::ProblemKind::Other);
  CHECK(r->meta.data_quality[1].kind == model::Meta::ProblemKind::LostRecords);
  CHECK(r->meta.lost_records() == 31);
}

TEST_CASE("hostile or broken files get one-line errors", "[gecko]") {
  test::TempDir dir;
  const std::string good = dir.file("good.json");
  REQUIRE(gecko::write_gecko_profile(sample_profile(), good));
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
          "[gecko]") {
  test::TempDir dir;
  const std::string good = dir.file("good.json");
  REQUIRE(gecko::write_gecko_profile(sample_profile(), good));
  const std::string text = slurp(good);

  // Two members (cat a.gz b.gz): the trailer gives the second one's size only; the buffer grows.
  const std::string two = dir.file("two.json.gz");
  const size_t half = text.size() / 2;
  spit(two,
       gzip_text(std::string_view(text).substr(0, half)) + gzip_text(std::string_view(text).substr(half)));
  auto read = gecko::read_profile_bytes(two);
  REQUIRE(read.ok());
  CHECK(*read == text);
  CHECK(gecko::read_gecko_profile(two).ok());
  // A trailer that lies about the size (far larger, or smaller): zlib's length check refuses it.
  for (uint32_t lie : {0xFFFFFFF0u, 1u}) {
    std::string z = gzip_text(text);
    for (int i = 0; i < 4; ++i) z[z.size() - 4 + i] = static_cast<char>((lie >> (8 * i)) & 0xff);
    const std::string liar = dir.file("liar.json.gz");
    spit(liar, z);
    CHECK_THAT(load_error(liar), Catch::Contains("corrupt gzip data"));
  }
}

TEST_CASE("a processed-format profile is recognised, not read", "[gecko]") {
  test::TempDir dir;
  const std::string path = dir.file("processed.json");
  spit(path, R"({"meta":{"preprocessedProfileVersion":66,"version":24},"libs":[],"threads":[]})");
  gecko::ReadInfo info;
  auto r = gecko::read_gecko_profile(path, &info);
  REQUIRE(r.ok());
  CHECK(info.processed);
}

namespace {

// What a structural scanner must not take for structure: braces, brackets, quotes, backslashes and escapes,
// in a thread name, a lib path, a marker's key and value, a process name and a counter's description.
model::Profile tricky_profile() {
  model::Profile p = sample_profile();
  const std::string nasty = "a{b}[c]\"d\\\"e\\\\f\\ g}\"]{\n\t\xC3\xA9\\u0041";
  p.processes[0].threads[1].name = "w" + nasty;
  p.processes[0].libs[0].path = "/tmp/{app}\"" + nasty;
  p.processes[0].threads[0].markers[0].fields.push_back(
      {p.strings.intern("k" + nasty), true, 0, p.strings.intern("}" + nasty + "\\")});
  p.processes[1].name = "]" + nasty;
  p.processes[0].counters[0].description = nasty;
  return p;
}

// A profile of `n` more samples on the worker thread: several MiB of text, more than one read chunk.
model::Profile long_profile(size_t n) {
  model::Profile p = sample_profile();
  model::Thread& main = p.processes[0].threads[0];
  model::Thread& w = p.processes[0].threads[1];
  const model::StackId stacks[] = {main.samples[0].stack, main.samples[1].stack, w.samples[0].stack};
  for (size_t i = 0; i < n; ++i)
    w.samples.push_back({kT0 + 5'000'000 + i * 1000, stacks[i % 3], static_cast<int32_t>(i % 1000) * 1000});
  return p;
}

std::string gzip_members(std::string_view text, std::initializer_list<size_t> cuts) {
  std::string out;
  size_t from = 0;
  std::vector<size_t> ends(cuts);
  ends.push_back(text.size());
  for (size_t to : ends) {
    out += gzip_text(text.substr(from, to - from));
    from = to;
  }
  return out;
}

}  // namespace

TEST_CASE("text read in chunks of any size gives the same profile (borders in strings, escapes, numbers)",
          "[gecko]") {
  test::TempDir dir;
  const std::string path = dir.file("p.json");
  REQUIRE(gecko::write_gecko_profile(tricky_profile(), path));
  const std::string text = slurp(path);
  for (size_t chunk : {size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{7}, size_t{64}, size_t{4095},
                       gecko::kReadChunkBytes}) {
    INFO("chunk " << chunk);
    auto r = gecko::read_gecko(text, "chunks", nullptr, chunk);
    REQUIRE(r.ok());
    CHECK(r->processes[0].threads[1].name == tricky_profile().processes[0].threads[1].name);
    const std::string again = dir.file("again.json");
    REQUIRE(gecko::write_gecko_profile(*r, again));
    CHECK(test::read_profile_text(again) == text);
  }
}

TEST_CASE("a profile cut anywhere is truncated JSON, whatever the chunk borders", "[gecko]") {
  test::TempDir dir;
  const std::string path = dir.file("p.json");
  REQUIRE(gecko::write_gecko_profile(tricky_profile(), path));
  const std::string text = slurp(path);
  const size_t last = text.rfind('}');
  REQUIRE(last != std::string::npos);
  // Every third byte, the phase moving by one each time (so each byte's kind of position is cut somewhere in
  // the file's repeated structures), in chunks of 1 to 7 bytes: each cut reads the whole prefix again, and
  // every byte was 34 s under ASan.
  size_t wrong = 0, cuts = 0;
  for (size_t k = 0, len = 1; len <= last; ++k, len = 3 * k + 1 + k % 3) {
    ++cuts;
    auto r = gecko::read_gecko(std::string_view(text).substr(0, len), "cut", nullptr, 1 + k % 7);
    if (r.ok() || r.error() != "cut: truncated JSON") {
      if (++wrong <= 3) FAIL_CHECK("cut at " << len << ": " << (r.ok() ? "read" : r.error()));
    }
  }
  CHECK(wrong == 0);
  CHECK(cuts > last / 3 - 1);
}

TEST_CASE("a profile larger than the read chunks: plain, gzip, several gzip members, truncated", "[gecko]") {
  test::TempDir dir;
  const std::string plain = dir.file("long.json"), gz = dir.file("long.json.gz");
  REQUIRE(gecko::write_gecko_profile(long_profile(200'000), plain));
  REQUIRE(gecko::write_gecko_profile(long_profile(200'000), gz));
  const std::string text = slurp(plain);
  REQUIRE(text.size() > 3 * gecko::kReadChunkBytes);
  const std::string again = dir.file("again.json");
  for (const std::string& in : {plain, gz}) {
    INFO(in);
    auto r = gecko::read_gecko_profile(in);
    REQUIRE(r.ok());
    CHECK(r->processes[0].threads[1].samples.size() == 200'001);
    REQUIRE(gecko::write_gecko_profile(*r, again));
    CHECK(test::read_profile_text(again) == text);
  }
  // Members that end inside a string, inside a number and at a chunk border.
  const size_t in_string = text.find("\"stringTable\"") + 3, in_number = text.find(",5.001,") + 3;
  REQUIRE(in_number < gecko::kReadChunkBytes * 2);
  const std::string members = dir.file("members.json.gz");
  spit(members, gzip_members(text, {in_string / 2, in_string, in_number, gecko::kReadChunkBytes * 2}));
  {
    auto r = gecko::read_gecko_profile(members);
    INFO((r.ok() ? std::string() : r.error()));
    REQUIRE(r.ok());
    REQUIRE(gecko::write_gecko_profile(*r, again));
    CHECK(test::read_profile_text(again) == text);
  }
  // Truncated in the middle of the long thread: the plain file is truncated JSON, the gzip one truncated
  // gzip data.
  const std::string cut = dir.file("cut.json"), cut_gz = dir.file("cut.json.gz");
  spit(cut, std::string_view(text).substr(0, text.size() * 2 / 3));
  CHECK(load_error(cut) == cut + ": truncated JSON");
  const std::string zipped = slurp(gz);
  spit(cut_gz, std::string_view(zipped).substr(0, zipped.size() * 2 / 3));
  CHECK(load_error(cut_gz) == cut_gz + ": truncated gzip data");
}

TEST_CASE("bad structure in the outline or after it is an error", "[gecko]") {
  test::TempDir dir;
  const std::string good = dir.file("good.json");
  REQUIRE(gecko::write_gecko_profile(sample_profile(), good));
  const std::string text = slurp(good);
  auto error_of = [](std::string_view json) {
    auto r = gecko::read_gecko(json, "t");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().find('\n') == std::string::npos);
    return r.error();
  };
  CHECK_THAT(error_of(text + " {}"), Catch::Contains("not valid JSON (more after the profile"));
  CHECK_THAT(error_of(R"({"meta":{} "libs":[]})"), Catch::Contains("not valid JSON (unexpected '\"'"));
  CHECK_THAT(error_of(R"({"meta":{}, "threads":[{"a":[}]]})"), Catch::Contains("closes nothing open"));
  CHECK_THAT(error_of(std::string(R"({"x":)") + std::string(5000, '[') + std::string(5000, ']') + "}"),
             Catch::Contains("nested too deeply"));
  CHECK(error_of("  ") == "t: empty file");
  CHECK_THAT(error_of("[1]"), Catch::Contains("not a JSON object"));
  CHECK_THAT(error_of(R"({"meta":{"interval":1e999},"threads":[]})"), Catch::Contains("beyond the range"));
  // Gzip data after the profile's end that is not gzip: refused, not ignored.
  const std::string gz = dir.file("g.json.gz");
  spit(gz, gzip_members(text, {}) + "garbage");
  CHECK_THAT(load_error(gz), Catch::Contains("corrupt gzip data"));
}

TEST_CASE("times beyond 2^64 ns saturate instead of overflowing (a fuzzer's find)", "[gecko]") {
  // shutdownTime 1.9e13 ms is 1.9e19 ns after the start: beyond uint64 (UBSan: float-cast-overflow).
  std::string text =
      R"({"meta":{"startTime":1e300,"shutdownTime":19333333333335,"profilingEndTime":1e300,)"
      R"("startTimeAsClockMonotonicNanosecondsSinceBoot":1000},"libs":[],"counters":[{"name":"c",)"
      R"("samples":{"schema":{"time":0,"count":1},"data":[[1e300,1]]}}],"threads":[],)"
      R"("processes":[{"meta":{"startTime":-1e300},"threads":[{"name":"t","registerTime":1e300,)"
      R"("samples":{"schema":{"stack":0,"time":1},"data":[[null,1e300]]},"stackTable":{"schema":)"
      R"({"prefix":0,"frame":1},"data":[]},"frameTable":{"schema":{"location":0},"data":[]},)"
      R"("stringTable":[]}]}]})";
  auto r = gecko::read_gecko(text, "t");
  REQUIRE(r.ok());
  CHECK(*r->processes[0].end_ns == UINT64_MAX);
  CHECK(r->processes[1].start_ns == 0);
}

TEST_CASE("one string or number beyond kMaxJsonStringBytes is refused as it is read, in any chunking",
          "[gecko]") {
  // A 1 GiB name used to be held whole, then parsed (3 GB), and accepted; a 20 MB gzip peaked at 4 GB.
  test::TempDir dir;
  const std::string good = dir.file("good.json");
  REQUIRE(gecko::write_gecko_profile(sample_profile(), good));
  const std::string text = slurp(good);
  const size_t at = text.find("\"worker\"");
  REQUIRE(at != std::string::npos);
  auto with = [&](const std::string& value) { return text.substr(0, at) + value + text.substr(at + 8); };
  const size_t cap = gecko::kMaxJsonStringBytes;
  // At the cap, quotes included: read.
  auto fits = gecko::read_gecko(with("\"" + std::string(cap - 2, 'w') + "\""), "t");
  REQUIRE(fits.ok());
  CHECK(fits->processes[0].threads[1].name.size() == cap - 2);
  const std::string too_long = with("\"" + std::string(cap - 1, 'w') + "\"");
  const std::string expected =
      "t: a string longer than 1 MiB at byte " + std::to_string(at) + " (the limit for one name or value)";
  for (size_t chunk : {gecko::kReadChunkBytes, size_t{4096}, size_t{777}}) {
    INFO(chunk);
    auto r = gecko::read_gecko(too_long, "t", nullptr, chunk);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == expected);
  }
  // A number as long, where a string is expected or not.
  auto number = gecko::read_gecko(with(std::string(cap + 1, '7')), "t");
  REQUIRE_FALSE(number.ok());
  CHECK(number.error() ==
        "t: a number longer than 1 MiB at byte " + std::to_string(at) + " (the limit for one name or value)");
  // Inside a value that is copied whole (meta), a number or a run of whitespace as long: refused at the
  // run's first byte, in any chunking (a 2 MB gzip of whitespace in meta took 432 MB; a 200 MB number was
  // accepted).
  const size_t meta = text.find("\"meta\":{");
  REQUIRE(meta != std::string::npos);
  const size_t pad_at = meta + 8 + 6;  // after `"meta":{"pad":`
  for (const std::string& pad : {std::string(cap + 1, '7'), "1" + std::string(cap + 1, ' ')}) {
    const std::string in_meta = text.substr(0, meta + 8) + "\"pad\":" + pad + "," + text.substr(meta + 8);
    for (size_t chunk : {gecko::kReadChunkBytes, size_t{4096}, size_t{777}}) {
      INFO(chunk << " " << pad.substr(0, 2));
      auto r = gecko::read_gecko(in_meta, "t", nullptr, chunk);
      REQUIRE_FALSE(r.ok());
      CHECK(r.error() == "t: a number or whitespace longer than 1 MiB at byte " + std::to_string(pad_at) +
                             " (the limit for one name or value)");
    }
  }
  // An array of numbers longer than the cap is many short values: read.
  std::string numbers = "[1";
  while (numbers.size() < 2 * cap) numbers += ", 1";
  const std::string many = text.substr(0, meta + 8) + "\"pad\":" + numbers + "]," + text.substr(meta + 8);
  CHECK(gecko::read_gecko(many, "t", nullptr, 4096).ok());
  // A huge string in gzip (a few KiB of it) is refused after about its cap, not after the inflate cap.
  const std::string gz = dir.file("long.json.gz");
  spit(gz, gzip_members(with("\"" + std::string(64 * cap, 'w') + "\""), {}));
  CHECK(load_error(gz) == gz + ": a string longer than 1 MiB at byte " + std::to_string(at) +
                              " (the limit for one name or value)");
}

TEST_CASE("libs_only reads each process's libs and no thread", "[gecko]") {
  test::TempDir dir;
  model::Profile p = sample_profile();
  model::Process child = p.processes[0];  // a second process, with a library of its own
  child.pid += 100;
  child.libs.resize(1);
  child.libs[0].name = child.libs[0].debug_name = "child.so";
  p.processes.push_back(child);
  const std::string path = dir.file("p.json.gz");
  REQUIRE(gecko::write_gecko_profile(p, path));

  gecko::ReadInfo info;
  info.libs_only = true;
  auto r = gecko::read_gecko_profile(path, &info);
  REQUIRE(r.ok());
  CHECK(r->processes.at(0).libs.size() == 2);
  REQUIRE(r->processes.size() == p.processes.size());
  CHECK(r->processes.back().libs.at(0).debug_name == "child.so");
  for (const model::Process& proc : r->processes) CHECK(proc.threads.empty());
}
