// USDT probes attached with eBPF (usdt_probes.h).
#include "recorder/usdt_probes.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include "base/fd.h"
#include "elf/usdt.h"
#include "recorder/bpf_handles.h"
#include "recorder/bpf_ring.h"
#include "recorder/markers.h"

#ifdef FXPROF_HAVE_USDT_BPF
#include "recorder/usdt_bpf.h"  // kUsdtBpf: the compiled recorder/bpf/usdt.bpf.c
#endif

namespace fxprof::recorder {
namespace {

// usdt.bpf.c's struct usdt_event.
constexpr size_t kStrLen = 64;
struct Event {
  uint64_t time;
  uint32_t pid, tid;
  uint32_t probe, args;
  int64_t arg[kUsdtMaxArgs];
  char str[kUsdtMaxStrings][kStrLen];
};

constexpr size_t kUsdtMaxHits = 2 * kMaxProgramMarkers;  // a begin and an end a marker

}  // namespace

Result<std::vector<UsdtProbeUse>> plan_usdt_probes(const std::vector<std::string>& binaries,
                                                   const std::vector<UsdtRequest>& requests, bool pairs) {
  // Each binary's probes, "provider:name" of each.
  std::vector<std::set<std::string>> has;
  std::set<std::string> all;
  for (size_t i = 0; i < binaries.size(); ++i) {
    auto probes = elf::read_usdt_probes(binaries[i]);
    if (!probes && i == 0) return Err(probes.error());
    has.emplace_back();
    if (!probes) continue;
    for (const elf::UsdtProbe& p : *probes) {
      has.back().insert(p.provider + ":" + p.name);
      all.insert(p.provider + ":" + p.name);
    }
  }
  std::vector<UsdtProbeUse> uses;
  std::set<std::string> taken;
  auto add = [&](const UsdtRequest& r, size_t binary) {
    if (!taken.insert(r.provider + ":" + r.name).second) return;
    UsdtProbeUse u{r, binaries[binary], UsdtRole::Instant, ""};
    uses.push_back(std::move(u));
  };
  for (const UsdtRequest& r : requests) {
    const std::string probe = r.provider + ":" + r.name;
    size_t b = 0;
    while (b < binaries.size() && !has[b].count(probe)) ++b;
    if (b == binaries.size()) {
      std::string line = "no USDT probe " + probe + " in " + binaries[0] + " or the libraries it loads; ";
      if (all.empty()) return Err(line + "they have no probes");
      line += "they have";
      for (const std::string& p : all) line += " " + p;
      return Err(line);
    }
    add(r, b);
    if (!pairs) continue;
    // A begin's end, from the same binary, unless asked for by itself (an end alone stays instants).
    if (auto pn = usdt_pair_name(r.name);
        pn && pn->role == UsdtRole::Begin && has[b].count(r.provider + ":" + pn->partner)) {
      UsdtRequest partner{r.provider, pn->partner, {}, false};
      for (const UsdtRequest& other : requests)
        if (other.provider == r.provider && other.name == pn->partner) partner = other;
      add(partner, b);
    }
  }
  // The roles: a begin or end whose partner is attached too.
  for (UsdtProbeUse& u : uses) {
    auto pn = pairs ? usdt_pair_name(u.request.name) : std::nullopt;
    if (!pn || !taken.count(u.request.provider + ":" + pn->partner)) continue;
    u.role = pn->role;
    u.pair = u.request.provider + ":" + pn->base;
  }
  return uses;
}

struct UsdtProbes::Bpf {
  BpfObject object;
  std::vector<BpfLink> links;
  std::optional<BpfRing> ring;  // mapped once (bpf_ring.h)
  int dropped_fd = -1;
  std::mutex mu;  // the ring buffer: drained by the reader thread, then by finish()
  std::unordered_map<std::string, uint32_t> strings;  // interned string arguments
};

UsdtProbes::UsdtProbes() : bpf_(std::make_unique<Bpf>()) {}

UsdtProbes::~UsdtProbes() {
  stop_.store(true);
  if (reader_.joinable()) reader_.join();
}

Result<std::unique_ptr<UsdtProbes>> UsdtProbes::start(const std::string& program,
                                                      const std::vector<UsdtRequest>& requests, bool pairs) {
  std::vector<std::string> binaries{program};
  for (std::string& lib : elf::linked_libraries(program)) binaries.push_back(std::move(lib));
  auto plan = plan_usdt_probes(binaries, requests, pairs);
  if (!plan) return std::move(plan).take_error();
#ifndef FXPROF_HAVE_USDT_BPF
  return Err("--usdt: not built (clang was missing when fxprof was built)");
#else
  std::unique_ptr<UsdtProbes> u(new UsdtProbes());
  u->probes_ = std::move(*plan);
  Bpf& b = *u->bpf_;
  auto object = open_bpf("fxprof_usdt", kUsdtBpf, sizeof kUsdtBpf);
  if (!object) return Err("--usdt: " + object.error());
  b.object = std::move(*object);
  if (auto st = load_bpf(b.object, ""); !st)
    return Err("--usdt: USDT probes need root (CAP_BPF and CAP_PERFMON): " + st.error());
  bpf_program* hit = bpf_object__find_program_by_name(b.object.get(), "usdt_hit");
  if (!hit) return Err("--usdt: the BPF program lacks its function");
  for (size_t i = 0; i < u->probes_.size(); ++i) {
    const UsdtProbeUse& p = u->probes_[i];
    const uint64_t cookie = i | uint64_t{usdt_string_mask(p.request)} << 32;
    LIBBPF_OPTS(bpf_usdt_opts, uo, .usdt_cookie = cookie);
    bpf_link* link = bpf_program__attach_usdt(hit, -1, p.binary.c_str(), p.request.provider.c_str(),
                                              p.request.name.c_str(), &uo);
    if (!link)
      return Err("--usdt: cannot attach to " + p.request.provider + ":" + p.request.name + " in " + p.binary +
                 ": " + errno_text(errno));
    b.links.emplace_back(link);
  }
  b.dropped_fd = bpf_object__find_map_fd_by_name(b.object.get(), "dropped");
  Result<BpfRing> ring = BpfRing::open(b.object.get(), "events");
  if (!ring.ok()) return Err(ring.error());
  b.ring.emplace(std::move(*ring));
  UsdtProbes* self = u.get();
  u->reader_ = std::thread([self] {
    while (!self->stop_.load()) {
      // The program does not wake us (usdt.bpf.c): every 10 ms, what came in (the ring holds ~26,000 hits).
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::lock_guard lock(self->bpf_->mu);
      self->consume();
    }
  });
  return u;
#endif
}

UsdtHits UsdtProbes::finish() {
  bpf_->links.clear();  // detached: nothing more comes in
  stop_.store(true);
  if (reader_.joinable()) reader_.join();
  if (bpf_->ring) consume();
  return std::move(hits_);
}

void UsdtProbes::consume() {
  bpf_->ring->consume([this](std::span<const std::byte> data) {
    if (data.size() < sizeof(Event)) return;
    Event e;
    std::memcpy(&e, data.data(), sizeof e);
    if (e.probe >= probes_.size()) return;
    if (hits_.hits.size() >= kUsdtMaxHits) {  // memory is bounded: the rest are counted
      ++hits_.over_limit;
      return;
    }
    UsdtHits::Hit h{e.time,           e.pid, e.tid, e.probe, std::min<uint32_t>(e.args, kUsdtMaxArgs),
                    hits_.args.size()};
    const uint32_t mask = usdt_string_mask(probes_[e.probe].request);
    size_t s = 0;
    for (size_t i = 0; i < h.count; ++i) {
      int64_t v = e.arg[i];
      if ((mask >> i & 1) && s < kUsdtMaxStrings) {
        const std::string text(e.str[s], strnlen(e.str[s], kStrLen));
        ++s;
        auto [it, fresh] = bpf_->strings.try_emplace(text, static_cast<uint32_t>(hits_.strings.size()));
        if (fresh) hits_.strings.push_back(text);
        v = it->second;
      }
      hits_.args.push_back(v);
    }
    hits_.hits.push_back(h);
  });
}

uint64_t UsdtProbes::dropped() const {
  const uint32_t zero = 0;
  uint64_t n = 0;
  if (bpf_->dropped_fd >= 0 && bpf_map_lookup_elem(bpf_->dropped_fd, &zero, &n) != 0) n = 0;
  return n;
}

}  // namespace fxprof::recorder
