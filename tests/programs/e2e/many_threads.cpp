// Sixteen threads: fifteen idle ones started first, then one busy one (300 ms of CPU), so that the busiest
// thread's index in the profile is 15 or more (the front end's URL encodes it as a letter: issue 38.1).
#include <pthread.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cpu_spin.h"

namespace {
std::mutex mu;
std::condition_variable cv;
bool done = false;
volatile int after;
__attribute__((noinline)) void many_busy_spin() {
  spin_cpu_ms(300);
  after = 1;
}
}  // namespace

int main() {
  std::vector<std::thread> idle;
  for (int i = 0; i < 15; ++i)
    idle.emplace_back([i] {
      pthread_setname_np(pthread_self(), ("many-idle-" + std::to_string(i)).c_str());
      std::unique_lock lock(mu);
      cv.wait(lock, [] { return done; });
    });
  std::thread busy([] {
    pthread_setname_np(pthread_self(), "many-busy");
    many_busy_spin();
    cpu_log("many-busy");
  });
  busy.join();
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  for (std::thread& t : idle) t.join();
  std::puts("many done");
  return 0;
}
