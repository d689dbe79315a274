// The Gecko reader on arbitrary bytes: `load`, `export`, `report` and `diff` read profiles users are sent.
// The reader streams its text in chunks: each input is read whole and again in small chunks (a border every
// few bytes), and both readings must agree, error message included.
// Two paths libFuzzer's short inputs would not reach on their own:
//  - the cap on one string or number (kMaxJsonStringBytes, 1 MiB): every third input is also read, whole
//    and in chunks, with a cap of 8..263 bytes, so strings and numbers just under and over it are refused
//    (or not) at every chunk border, and both readings must still agree;
//  - the names printed on a terminal (base/terminal.h): the input's bytes and every process and thread name
//    read go through terminal_safe(), whose output must hold no control byte.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/terminal.h"
#include "gecko/gecko_reader.h"

namespace {

void check_terminal_safe(const std::string& name) {
  for (char c : fxprof::terminal_safe(name)) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7F) std::abort();
  }
}

void check_readings(std::string_view json, size_t chunk, size_t cap) {
  using fxprof::gecko::read_gecko;
  auto whole = read_gecko(json, "fuzz", nullptr, fxprof::gecko::kReadChunkBytes, cap);
  auto chunked = read_gecko(json, "fuzz", nullptr, chunk, cap);
  if (whole.ok() != chunked.ok()) std::abort();
  if (!whole.ok() && whole.error() != chunked.error()) std::abort();
  if (whole.ok() && whole->processes.size() != chunked->processes.size()) std::abort();
  if (whole.ok()) {
    for (const auto& proc : whole->processes) {
      check_terminal_safe(proc.name);
      for (const auto& t : proc.threads) check_terminal_safe(t.name);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  check_terminal_safe(std::string(json.substr(0, 4096)));  // arbitrary bytes: invalid UTF-8, C1, NUL
  check_readings(json, 1 + size % 61, fxprof::gecko::kMaxJsonStringBytes);
  if (size % 3 == 0) check_readings(json, 1 + size % 61, 8 + size % 256);
  return 0;
}
