// Tests of server/api_common.cpp: the error bodies, refusal statuses and request addresses every JSON API
// shares.
#include <catch2/catch.hpp>
#include <string>

#include "server/internal.h"

namespace internal = fxprof::server::internal;
namespace sym = fxprof::symbolizer;

TEST_CASE("api common: error bodies are {\"error\": ...} with the status given") {
  auto r = internal::error_response(403, "refusing \"x\"\n");
  CHECK(r.http_status == 403);
  CHECK(r.body == R"({"error":"refusing \"x\"\n"})");
}

TEST_CASE("api common: each kind of refusal has its HTTP status") {
  CHECK(internal::status_of({sym::Refusal::kNotFound, ""}) == 404);
  CHECK(internal::status_of({sym::Refusal::kForbidden, ""}) == 403);
  CHECK(internal::status_of({sym::Refusal::kTooLarge, ""}) == 413);
  CHECK(internal::status_of({sym::Refusal::kUnsupported, ""}) == 422);
}

TEST_CASE("api common: addresses are hex with 0x or decimal, never overflowing") {
  uint64_t v = 0;
  CHECK((internal::parse_address("0x1a2B", v) && v == 0x1a2b));
  CHECK((internal::parse_address("4096", v) && v == 4096));
  CHECK((internal::parse_address("0xffffffffffffffff", v) && v == UINT64_MAX));
  for (const char* bad : {"", "0x", "zz", "0x1g", "-1", "0x10000000000000000", "18446744073709551616", "1.5"})
    CHECK_FALSE(internal::parse_address(bad, v));
}
