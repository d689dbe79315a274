// fxprof recorder: `record --usdt PROVIDER:NAME[=FORMAT]` as markers: the request's syntax, and the probes'
// hits (recorder/usdt_probes.h) turned into program markers (model/markers.h) on the thread that hit them.
//
// FORMAT says what each of the probe's arguments is, in order, comma-separated: `[KEY:]CONV`, CONV one of
//   %d  a signed integer      %u  an unsigned integer      %x  an integer shown as hex ("0x2a")
//   %s  a C string, read from the process at the hit (its first 63 bytes; at most 3 strings a probe)
//   -   left out
// KEY names the marker's field (default argN, N from 1); the key `name` makes that argument the marker's
// name instead of a field (`python:function__entry=file:%s,name:%s,line:%d`). Without FORMAT every
// argument is a number, signed as its note says; arguments past FORMAT's items are left out.
//
// A hit is an instant marker named PROVIDER:NAME. With pairs (`--usdt-pair`), a probe named X__entry and
// its X__return, or Xstart and Xdone (X__start/X__done, X_start/X_done; the end is attached with the begin,
// an end asked for alone stays instants), make interval markers named
// PROVIDER:X (or by the `name` argument of the begin): per thread and pair, an end closes the latest begin
// still open (nesting). The end's fields join the begin's. Ends without a begin and begins never ended are
// counted, not shown. Each marker's category field is the provider.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/profile.h"

namespace fxprof::recorder {

inline constexpr size_t kUsdtMaxStrings = 3;  // string arguments read a hit (recorder/bpf/usdt.bpf.c)
inline constexpr size_t kUsdtMaxArgs = 12;    // libbpf's BPF_USDT_MAX_ARG_CNT

struct UsdtField {
  enum class Kind : uint8_t { Signed, Unsigned, Hex, String, Skip };
  Kind kind = Kind::Signed;
  std::string key;  // "" for argN
};

struct UsdtRequest {
  std::string provider, name;
  std::vector<UsdtField> format;  // empty: every argument as a number
  bool formatted = false;         // FORMAT given
};

// "PROVIDER:NAME[=FORMAT]"; Err says what is wrong with it, in one line.
Result<UsdtRequest> parse_usdt_request(std::string_view text);
// The arguments read as strings, as bits (bit i: argument i).
uint32_t usdt_string_mask(const UsdtRequest& r);

enum class UsdtRole : uint8_t { Instant, Begin, End };
// For a probe name that opens or closes an interval: its role, its partner's name and the pair's name
// ("function__entry": Begin, "function__return", "function"). nullopt for any other name.
struct UsdtPairName {
  UsdtRole role;
  std::string partner, base;
};
std::optional<UsdtPairName> usdt_pair_name(std::string_view name);

// A probe attached: what it was asked as, where, and its part in a pair.
struct UsdtProbeUse {
  UsdtRequest request;
  std::string binary;
  UsdtRole role = UsdtRole::Instant;
  std::string pair;  // Begin/End: the pair's marker name, PROVIDER:X
};

// The hits recorded, compact: each hit's arguments are `count` values from `first` in `args`; a string
// argument's value is its index in `strings`.
struct UsdtHits {
  struct Hit {
    uint64_t time = 0;
    uint32_t pid = 0, tid = 0, probe = 0, count = 0;
    size_t first = 0;
  };
  std::vector<Hit> hits;
  std::vector<int64_t> args;
  std::vector<std::string> strings;
  uint64_t over_limit = 0;  // hits left out: more than the recorder keeps
};

struct UsdtMarkerStats {
  uint64_t hits = 0;                // of the profile's processes
  uint64_t markers = 0;             // added
  uint64_t unmatched = 0;           // an end without its begin, a begin never ended
  uint64_t no_thread = 0;           // on a thread the profile does not have
  uint64_t over_limit = 0;          // past kMaxProgramMarkers
  std::vector<uint64_t> per_probe;  // hits of each probe (by index)
};

// Adds the hits of the profile's processes as program markers (and the schemas of their names).
UsdtMarkerStats add_usdt_markers(model::Profile& p, const std::vector<UsdtProbeUse>& probes, UsdtHits& hits);

}  // namespace fxprof::recorder
