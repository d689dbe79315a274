// Hand-built profiles for the sink tests (folded, pprof, SVG, report, call tree): known call paths with
// known counts, so every expected number below is written out, not computed.
#pragma once

#include <vector>

#include "model/profile.h"

namespace fxprof::test {

inline constexpr uint64_t kSinkT0 = 1'000'000'000'000;

// Process "app" (pid 10): thread "app" (tid 10, main) and "worker" (tid 11); process "child" (pid 20).
//   app:    main;compute x5, main;compute;helper x3, main;helper x2, main;rec;rec x2, main;compute;ksys_read
//   x1 worker: main;compute x4 (cpu 2 ms each), (no stack) x1 child:  main;compute x1, a native frame in
//   libdemo.so x2 (below main)
// Totals: 20 samples with a stack, 1 without.
inline model::Profile sink_profile() {
  model::Profile p;
  p.meta.start_unix_ms = 1.7e12;
  p.meta.start_monotonic_ns = kSinkT0;
  p.meta.end_monotonic_ns = kSinkT0 + 100'000'000;
  auto fn = [&](const char* name) { return p.label_frame(name, model::Category::User); };
  model::FrameId main_f = fn("main"), compute = fn("compute"), helper = fn("helper"), rec = fn("rec");
  model::FrameId kread = p.kernel_frame(0xffffffff81000010);
  p.frames.mutable_frame(kread).name = p.strings.intern("ksys_read");
  model::FrameId native = p.native_frame(0x7f0000001234);

  auto stack = [&](std::vector<model::FrameId> v) { return p.stacks.intern_path(v); };
  model::StackId mc = stack({main_f, compute}), mch = stack({main_f, compute, helper}),
                 mh = stack({main_f, helper}), mrr = stack({main_f, rec, rec}),
                 mck = stack({main_f, compute, kread}), mn = stack({main_f, native});

  model::Process& app = p.processes.emplace_back();
  app.pid = 10;
  app.name = "app";
  app.start_ns = kSinkT0;
  app.libs.push_back({0x555555554000, 0x555555560000, 0, "app", "/tmp/app", "app", "/tmp/app",
                      "0123456789ABCDEF0123456789ABCDEF0", "efcdab8967452301efcdab8967452301"});
  model::Thread& t = app.threads.emplace_back();
  t.tid = 10;
  t.name = "app";
  t.is_main = true;
  uint64_t time = kSinkT0;
  auto add = [&](model::Thread& th, model::StackId s, int n, int32_t cpu = 1'000'000) {
    for (int i = 0; i < n; ++i) th.samples.push_back({time += 1'000'000, s, cpu});
  };
  add(t, mc, 5);
  add(t, mch, 3);
  add(t, mh, 2);
  add(t, mrr, 2);
  add(t, mck, 1);
  model::Thread& w = app.threads.emplace_back();
  w.tid = 11;
  w.name = "worker";
  add(w, mc, 4, 2'000'000);
  w.samples.push_back({time += 1'000'000, model::kNoStack, 0});

  model::Process& child = p.processes.emplace_back();
  child.pid = 20;
  child.name = "child";
  child.start_ns = kSinkT0 + 10'000'000;
  child.libs.push_back({0x7f0000000000, 0x7f0000010000, 0x1000, "libdemo.so", "/tmp/libdemo.so", "libdemo.so",
                        "/tmp/libdemo.so", "AABBCCDDEEFF00112233445566778899A0",
                        "ddccbbaaffee11002233445566778899"});
  model::Thread& ct = child.threads.emplace_back();
  ct.tid = 20;
  ct.name = "child";
  ct.is_main = true;
  add(ct, mc, 1);
  add(ct, mn, 2);
  return p;
}

}  // namespace fxprof::test
