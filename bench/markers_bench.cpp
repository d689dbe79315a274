// The marker header's cost per marker (include/fxprof/markers.h): FXPROF_SCOPE, begin/end and an instant with
// two fields, each timed over N markers, not recording (FXPROF_MARKERS unset: one thread-local test) and
// recording (FXPROF_MARKERS set: two clock reads and a line copied into the thread's mapped file), in CPU
// time per marker.
//   fxprof_markers_bench [N]   (bench/run.sh runs it both ways)
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "fxprof/markers.h"

namespace {

volatile unsigned sink;

// The thread's CPU time (user and system: the page faults of the mapped file count), not the wall clock:
// other programs on this machine would stretch the latter.
uint64_t cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

template <typename F>
double ns_per(unsigned n, F&& f) {
  const uint64_t t0 = cpu_ns();
  for (unsigned i = 0; i < n; ++i) f(i);
  return static_cast<double>(cpu_ns() - t0) / n;
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned n = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 1000000;
  const char* dir = std::getenv("FXPROF_MARKERS");
  const bool on = fxprof_enabled();
  const double empty = ns_per(n, [](unsigned i) { sink = i; });
  const double scope = ns_per(n, [](unsigned i) {
    FXPROF_SCOPE("request");
    sink = i;
  });
  const double begin_end = ns_per(n, [](unsigned i) {
    fxprof_mark_begin("db", "query");
    sink = i;
    fxprof_mark_end();
  });
  const double instant = ns_per(n, [](unsigned i) {
    fxprof_field f[] = {fxprof_num("id", i), fxprof_str("table", "users")};
    fxprof_mark_instant("db", "commit", f, 2);
  });
  std::printf(
      "markers %s (%u each): loop %.1f ns; FXPROF_SCOPE %.1f ns, begin/end %.1f ns, instant+2 fields %.1f ns "
      "per marker\n",
      on ? "recording" : (dir ? "not recording (FXPROF_MARKERS unusable)" : "not recording"), n, empty,
      scope - empty, begin_end - empty, instant - empty);
  return 0;
}
