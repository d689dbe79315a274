/* Three OpenMP parallel regions of known length, built with clang against LLVM's libomp (which carries
 * Intel's ITT notify client: under `fxprof record` it reports each region as an ITT frame and names its
 * threads). Prints the truth, each region's times read around it:
 *   omp_regions TRUTH_FILE   (lines "START_NS END_NS") */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static uint64_t now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  FILE* f = fopen(argv[1], "w");
  if (!f) return 1;
  for (int r = 0; r < 3; ++r) {
    const uint64_t start = now();
#pragma omp parallel num_threads(2)
    {
      struct timespec ts = {0, (r + 1) * 5000000L};
      nanosleep(&ts, NULL);
    }
    fprintf(f, "%llu %llu\n", (unsigned long long)start, (unsigned long long)now());
  }
  fclose(f);
  printf("done\n");
  return 0;
}
