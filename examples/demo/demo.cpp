// fxprof's bundled demo: a small program with a recognisable profile, for `make demo` and the tests.
//
// About 1.5 s by default (`fxprof_demo [scale]` multiplies the work). What to look for in the profile:
//  - threads "demo-primes", "demo-walker", "demo-sleeper", "demo-io" next to the main thread;
//  - demo_compute_primes -> demo_is_prime (an always-inlined helper: symbolication shows it as an inline
//  frame);
//  - demo_recursive_walk calling itself (recursion, deep stacks);
//  - demo_wait_for_work blocked on a condition variable and sleeping (little CPU: a flat CPU graph);
//  - demo_file_io writing, reading back and removing a temporary file (kernel frames under write/read);
//  - main joining everything in demo_join_all.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

double g_scale = 1.0;
std::atomic<uint64_t> g_sink{0};  // keeps the optimiser from deleting the work

void name_thread(const char* name) { pthread_setname_np(pthread_self(), name); }

// Always inlined into demo_compute_primes: trial division.
static inline __attribute__((always_inline)) bool demo_is_prime(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

__attribute__((noinline)) uint64_t demo_compute_primes(uint64_t limit) {
  uint64_t count = 0;
  for (uint64_t n = 0; n < limit; ++n) count += demo_is_prime(n);
  return count;
}

struct Node {
  uint64_t value;
  std::vector<Node> children;
};

__attribute__((noinline)) Node demo_build_tree(int depth, uint64_t seed) {
  Node n{seed * 2654435761u % 1000, {}};
  if (depth > 0)
    for (int i = 0; i < 3; ++i)
      n.children.push_back(demo_build_tree(depth - 1, seed * 3 + static_cast<uint64_t>(i)));
  return n;
}

// Recursive: the call tree shows demo_recursive_walk nested in itself.
__attribute__((noinline)) uint64_t demo_recursive_walk(const Node& n, int depth) {
  uint64_t sum = n.value;
  for (uint64_t k = 0; k < 200; ++k) sum = sum * 6364136223846793005ull + k;  // a little work per node
  for (const Node& c : n.children) sum += demo_recursive_walk(c, depth + 1);
  asm volatile("" ::: "memory");  // not a tail call
  return sum;
}

__attribute__((noinline)) uint64_t demo_fib(int n) {
  return n < 2 ? static_cast<uint64_t>(n) : demo_fib(n - 1) + demo_fib(n - 2);
}

std::mutex g_mu;
std::condition_variable g_cv;
bool g_ready = false;

__attribute__((noinline)) void demo_wait_for_work() {
  std::unique_lock<std::mutex> lock(g_mu);
  g_cv.wait_for(lock, std::chrono::milliseconds(static_cast<int>(300 * g_scale)), [] { return g_ready; });
}

__attribute__((noinline)) void demo_sleeper() {
  name_thread("demo-sleeper");
  demo_wait_for_work();
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(200 * g_scale)));
}

__attribute__((noinline)) void demo_file_io() {
  name_thread("demo-io");
  char path[] = "/tmp/fxprof-demo-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return;
  std::vector<char> block(4096, 'x');
  int blocks = static_cast<int>(8000 * g_scale);
  for (int i = 0; i < blocks; ++i)
    if (write(fd, block.data(), block.size()) < 0) break;
  uint64_t sum = 0;
  for (int pass = 0; pass < 3; ++pass) {
    lseek(fd, 0, SEEK_SET);
    ssize_t n;
    while ((n = read(fd, block.data(), block.size())) > 0) sum += static_cast<unsigned char>(block[0]);
  }
  close(fd);
  unlink(path);
  g_sink += sum;
}

__attribute__((noinline)) void demo_primes_thread() {
  name_thread("demo-primes");
  g_sink += demo_compute_primes(static_cast<uint64_t>(2'500'000 * g_scale));
}

__attribute__((noinline)) void demo_walker_thread() {
  name_thread("demo-walker");
  Node tree = demo_build_tree(8, 1);
  int walks = static_cast<int>(250 * g_scale);
  for (int i = 0; i < walks; ++i) g_sink += demo_recursive_walk(tree, 0);
}

__attribute__((noinline)) void demo_join_all(std::vector<std::thread>& threads) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_ready = true;
  }
  g_cv.notify_all();
  for (std::thread& t : threads) t.join();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_scale = std::max(0.01, std::atof(argv[1]));
  std::vector<std::thread> threads;
  threads.emplace_back(demo_primes_thread);
  threads.emplace_back(demo_walker_thread);
  threads.emplace_back(demo_sleeper);
  threads.emplace_back(demo_file_io);
  g_sink += demo_fib(g_scale >= 1 ? 33 : 27);
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(100 * g_scale)));
  demo_join_all(threads);
  std::printf("fxprof demo done (%llu)\n", static_cast<unsigned long long>(g_sink.load() % 1000));
  return 0;
}
