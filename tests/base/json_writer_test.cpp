// The one JSON writer, in memory and over a sink (the sinks' files are tested in
// tests/sinks/output_test.cpp).
#include "base/json_writer.h"

#include <catch2/catch.hpp>
#include <string>

using namespace fxprof;

namespace {

void write_sample(JsonWriter& w) {
  w.begin_object().key("a").begin_array().value(1).value(-2).value(0.1).value(1e300).null().end_array();
  w.key("b").value(true).key("c").begin_object().end_object().key("d").value("é");
  w.key("e").hex_value(0).key("f").hex_value(0xDEADbeef).key("g").raw("\"pre\\\"escaped\"").end_object();
}

const char* const kSample =
    "{\"a\":[1,-2,0.1,1e+300,null],\"b\":true,\"c\":{},\"d\":\"é\",\"e\":\"0x0\",\"f\":\"0xdeadbeef\","
    "\"g\":\"pre\\\"escaped\"}";

struct Collect : ByteSink {
  std::string bytes;
  int writes = 0;
  void write(std::string_view b) override {
    bytes.append(b);
    ++writes;
  }
};

}  // namespace

TEST_CASE("json writer: commas, numbers, hex addresses and raw values, appended to a string") {
  std::string out = "prefix:";
  {
    JsonWriter w(out);
    write_sample(w);
  }
  CHECK(out == std::string("prefix:") + kSample);
}

TEST_CASE("json writer: over a sink, buffered and flushed when it goes away") {
  Collect sink;
  {
    JsonWriter w(sink);
    write_sample(w);
    CHECK(sink.writes == 0);
  }
  CHECK(sink.bytes == kSample);
  CHECK(sink.writes == 1);
  // Large output is handed over in pieces, never all at the end.
  Collect big;
  {
    JsonWriter w(big);
    w.begin_array();
    for (int i = 0; i < 200000; ++i) w.value("some text");
    w.end_array();
    CHECK(big.writes > 1);
  }
  CHECK(big.bytes.size() == 2 + 200000 * 12 - 1);  // "some text" and a comma each
}
