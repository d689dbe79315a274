// usdt_requests' probe with a semaphore (<sys/sdt.h> gives semaphores to every probe of a file that asks):
// fxtest:tick computes its argument only while a tracer raised fxtest_tick_semaphore.
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

extern "C" {
unsigned short fxtest_tick_semaphore __attribute__((section(".probes"))) = 0;
}

void usdt_tick(int id) {
  if (fxtest_tick_semaphore) STAP_PROBE1(fxtest, tick, static_cast<short>(id));
}
