// Where sinks write: default names beside the input, standard output for "-", files (plain or gzip) that
// appear only when finished.
#include "sinks/output.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>

#include "tests/support/support.h"

using namespace fxprof;

TEST_CASE("default outputs go beside the input") {
  CHECK(sinks::output_beside("/tmp/p.json.gz", ".svg") == "/tmp/p.svg");
  CHECK(sinks::output_beside("p.json", ".folded") == "p.folded");
  CHECK(sinks::output_beside("run", ".pb.gz") == "run.pb.gz");
}

TEST_CASE("a file output appears only when finished") {
  test::TempDir dir;
  auto out = sinks::open_output(dir.file("x.txt"));
  REQUIRE(out);
  (*out)->write("hello\n");
  REQUIRE((*out)->finish());
  CHECK(test::read_profile_text(dir.file("x.txt")) == "hello\n");
  auto bad = sinks::open_output(dir.file("no/such/dir/x"));
  CHECK(!bad);
}

TEST_CASE("a JSON writer over an output file, plain or gzip") {
  test::TempDir dir;
  for (std::string name : {"x.json", "x.json.gz"}) {
    std::string path = dir.file(name);
    auto out = sinks::OutputFile::create(path);
    REQUIRE(out);
    {
      JsonWriter w(**out);
      w.begin_object().key("a").begin_array().value(1).value(-2).value(0.1).value(1e300).null().end_array();
      w.key("b").value(true).key("c").begin_object().end_object().key("d").value("é").end_object();
    }
    // Not visible under its final name before finish().
    CHECK(access(path.c_str(), F_OK) != 0);
    REQUIRE((*out)->finish());
    CHECK(test::read_profile_text(path) == "{\"a\":[1,-2,0.1,1e+300,null],\"b\":true,\"c\":{},\"d\":\"é\"}");
  }
}

TEST_CASE("an output file that is never finished leaves nothing behind") {
  test::TempDir dir;
  std::string path = dir.file("p.json.gz");
  {
    auto out = sinks::OutputFile::create(path);
    REQUIRE(out);
    (*out)->write("{\"partial\":");
  }
  CHECK(access(path.c_str(), F_OK) != 0);
  CHECK(rmdir(dir.path().c_str()) == 0);  // the temporary file is gone too
  mkdir(dir.path().c_str(), 0755);
}

TEST_CASE("an output file in a missing folder is a clear error") {
  auto out = sinks::OutputFile::create("/nonexistent-dir/p.json");
  REQUIRE_FALSE(out);
  CHECK(out.error().find("cannot create /nonexistent-dir/p.json") == 0);
  CHECK(out.error().find("No such file or directory") != std::string::npos);
}

// Past its first megabyte a .gz output is deflated on a thread of its own while the writer goes on: the same
// bytes as the plain file after gunzip, in one gzip member (the whole of it inflates in one zlib stream).
TEST_CASE("a large gzip output deflated beside the writer gives the plain file's bytes") {
  test::TempDir dir;
  const std::string plain = dir.file("big.json"), gz = dir.file("big.json.gz");
  for (const std::string& path : {plain, gz}) {
    auto out = sinks::OutputFile::create(path);
    REQUIRE(out);
    {
      JsonWriter w(**out);  // flushed into the output when it goes, before finish()
      w.begin_array();
      uint64_t x = 88172645463325252ull;  // xorshift: numbers that do not compress to nothing
      for (int i = 0; i < 600000; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w.begin_object().key("type").value("Native allocation").key("size").value(x % 100000);
        w.key("stack").value(static_cast<uint64_t>(i)).end_object();
      }
      w.end_array();
    }
    REQUIRE((*out)->finish());
  }
  const std::string text = test::read_profile_text(plain);
  REQUIRE(text.size() > 20u << 20);  // many buffers through the thread
  CHECK(test::read_profile_text(gz) == text);
  // One member: zlib inflates the file to its end in a single stream.
  std::string packed;
  {
    std::ifstream f(gz, std::ios::binary);
    packed.assign(std::istreambuf_iterator<char>(f), {});
  }
  z_stream z{};
  REQUIRE(inflateInit2(&z, 15 + 16) == Z_OK);
  std::string out(text.size() + 1, '\0');
  z.next_in = reinterpret_cast<Bytef*>(packed.data());
  z.avail_in = static_cast<uInt>(packed.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  CHECK(inflate(&z, Z_FINISH) == Z_STREAM_END);
  CHECK(z.avail_in == 0);
  CHECK(z.total_out == text.size());
  inflateEnd(&z);
}

TEST_CASE("a large gzip output never finished leaves nothing behind") {
  test::TempDir dir;
  const std::string path = dir.file("p.json.gz");
  {
    auto out = sinks::OutputFile::create(path);
    REQUIRE(out);
    const std::string mb(1 << 20, 'x');
    for (int i = 0; i < 8; ++i) (*out)->write(mb);  // the deflating thread has started
  }
  CHECK(access(path.c_str(), F_OK) != 0);
  CHECK(rmdir(dir.path().c_str()) == 0);
  mkdir(dir.path().c_str(), 0755);
}

// The body record --share and --push upload: made in memory, the bytes a file of that name gets (gzip past
// the deflating thread's first megabyte too).
TEST_CASE("an in-memory output holds the bytes of the file") {
  test::TempDir dir;
  std::string text;
  for (int i = 0; text.size() < (3u << 20); ++i)
    text += "{\"sample\":" + std::to_string(i * 7919 % 100003) + "},";
  for (const bool gzip : {false, true}) {
    const std::string path = dir.file(gzip ? "m.json.gz" : "m.json");
    auto file = sinks::OutputFile::create(path);
    REQUIRE(file);
    std::string bytes;
    auto memory = sinks::OutputFile::in_memory(bytes, gzip);
    for (size_t at = 0; at < text.size(); at += 100000) {
      (*file)->write(std::string_view(text).substr(at, 100000));
      memory->write(std::string_view(text).substr(at, 100000));
    }
    REQUIRE((*file)->finish());
    REQUIRE(memory->finish());
    std::ifstream f(path, std::ios::binary);
    const std::string on_disk((std::istreambuf_iterator<char>(f)), {});
    CHECK(bytes == on_disk);
    CHECK(bytes.size() < (gzip ? text.size() / 2 : text.size() + 1));
  }
}
