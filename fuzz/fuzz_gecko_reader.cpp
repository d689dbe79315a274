// The Gecko reader on arbitrary bytes: `load`, `export`, `report` and `diff` read profiles users are sent.
// The reader streams its text in chunks: each input is read whole and again in small chunks (a border every
// few bytes), and both readings must agree, error message included.
// Two paths libFuzzer's short inputs would not reach on their own:
//  - one string or number at the length cap (kMaxJsonStringBytes): the bytes "\x01\x02" followed by a byte
//    N stand for kMaxJsonStringBytes - 128 + N copies of 'x', so strings and numbers around the cap are
//    built inside and outside the profile's outline;
//  - the names printed on a terminal (base/terminal.h): the input's bytes and every process and thread name
//    read go through terminal_safe(), whose output must hold no control byte.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/terminal.h"
#include "exporter/gecko_reader.h"

namespace {

std::string expand(std::string_view in) {
  std::string out;
  const size_t at = in.find("\x01\x02");
  if (at == std::string_view::npos || at + 2 >= in.size()) return std::string(in);
  out.reserve(in.size() + fxprof::exporter::kMaxJsonStringBytes);
  out.append(in.substr(0, at));
  out.append(fxprof::exporter::kMaxJsonStringBytes - 128 + static_cast<unsigned char>(in[at + 2]), 'x');
  out.append(in.substr(at + 3));
  return out;
}

void check_terminal_safe(const std::string& name) {
  for (char c : fxprof::terminal_safe(name)) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7F) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = expand(std::string_view(reinterpret_cast<const char*>(data), size));
  const std::string_view json(text);
  auto whole = fxprof::exporter::read_gecko(json, "fuzz");
  auto chunked = fxprof::exporter::read_gecko(json, "fuzz", nullptr, 1 + size % 61);
  if (whole.ok() != chunked.ok()) std::abort();
  if (!whole.ok() && whole.error() != chunked.error()) std::abort();
  if (whole.ok() && whole->processes.size() != chunked->processes.size()) std::abort();
  check_terminal_safe(std::string(json.substr(0, 4096)));  // arbitrary bytes: invalid UTF-8, C1, NUL
  if (whole.ok()) {
    for (const auto& proc : whole->processes) {
      check_terminal_safe(proc.name);
      for (const auto& t : proc.threads) check_terminal_safe(t.name);
    }
  }
  return 0;
}
