/* One core's float32 FMA peak, measured with a register-only loop: 24 independent AVX-512 FMA
 * chains (enough to cover the latency of two FMA ports), no memory traffic. Prints GFLOP/s (the
 * best of 5 runs of ~0.2 s, thread CPU time). Build: cc -O2 -mavx512f bench/fma_peak.c */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Twenty-four accumulators written out, so that the compiler keeps each in its own register. */
#define FOR_CHAINS(X)                                                                          \
  X(0)                                                                                         \
  X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16) X(17) \
      X(18) X(19) X(20) X(21) X(22) X(23)
#define DECLARE(i) __m512 acc##i = _mm512_set1_ps((float)(i));
#define STEP(i) acc##i = _mm512_fmadd_ps(acc##i, a, b);
#define SUM(i) sink += _mm512_reduce_add_ps(acc##i);

int main(void) {
  enum { CHAINS = 24 };
  const long iters = 20000000;
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    FOR_CHAINS(DECLARE)
    const double t0 = now();
    for (long k = 0; k < iters; ++k) {
      FOR_CHAINS(STEP)
    }
    const double dt = now() - t0;
    float sink = 0;
    FOR_CHAINS(SUM)
    const double gflops = 2.0 * 16 * CHAINS * (double)iters / dt * 1e-9;
    if (gflops > best) best = gflops;
    if (sink == 12345.f) puts(""); /* keeps the chains live */
  }
  printf("%.1f\n", best);
  return 0;
}
