// Recorder test program: `rec_threads [N]` starts and ends N (2000) threads, 8 at a time; each names itself
// "w<index>" and does a little work in rec_thread_work.
#include <pthread.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {
volatile uint64_t g_sink;

__attribute__((noinline)) void rec_thread_work(int index) {
  std::string name = "w" + std::to_string(index);
  pthread_setname_np(pthread_self(), name.c_str());
  uint64_t x = static_cast<uint64_t>(index);
  for (int i = 0; i < 200000; ++i) x = x * 6364136223846793005ull + 1;
  g_sink = x;
}
}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 2000;
  for (int i = 0; i < n; i += 8) {
    std::vector<std::thread> batch;
    for (int j = i; j < i + 8 && j < n; ++j) batch.emplace_back(rec_thread_work, j);
    for (auto& t : batch) t.join();
  }
  return 0;
}
