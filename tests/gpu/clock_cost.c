// Cost of the clocks the shim's launch gate may read on this machine (tests/gpu/shim_run.sh runs it):
// rdtsc, rdtscp, clock_gettime(CLOCK_MONOTONIC) and CLOCK_MONOTONIC_COARSE; median of 21 rounds of 1e6 calls.
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <x86intrin.h>
static double now_ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static int cmp(const void* a, const void* b) { double x = *(const double*)a, y = *(const double*)b; return x < y ? -1 : x > y; }
#define N 1000000
#define R 21
static volatile uint64_t sink;
static double round_cost(int kind) {
  double t0 = now_ns();
  for (int i = 0; i < N; ++i) {
    struct timespec t; unsigned aux;
    switch (kind) {
      case 0: sink += __rdtsc(); break;
      case 1: sink += __rdtscp(&aux); break;
      case 2: clock_gettime(CLOCK_MONOTONIC, &t); sink += t.tv_nsec; break;
      case 3: clock_gettime(CLOCK_MONOTONIC_COARSE, &t); sink += t.tv_nsec; break;
    }
  }
  return (now_ns() - t0) / N;
}
int main(void) {
  const char* names[] = {"rdtsc", "rdtscp", "clock_gettime(MONOTONIC)", "clock_gettime(MONOTONIC_COARSE)"};
  for (int k = 0; k < 4; ++k) {
    double v[R];
    for (int r = 0; r < R; ++r) v[r] = round_cost(k);
    qsort(v, R, sizeof v[0], cmp);
    printf("%-34s median %.1f ns/call (min %.1f, max %.1f)\n", names[k], v[R / 2], v[0], v[R - 1]);
  }
  return 0;
}
