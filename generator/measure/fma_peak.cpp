#include "measure/fma_peak.h"

#include <time.h>

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace padfold::measure {
namespace {

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

volatile float sink = 0;
volatile float seed = 0.999999f;  // read at run time: the chains cannot be folded

// Twelve chains per run (two FMA ports of four cycles' latency need eight; Zen 5 has four ports
// for 256-bit halves), written out so that each stays in its own register.
#define PF_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
constexpr int kChains = 12;
constexpr long kIterations = 4000000;

#if defined(__x86_64__)
// Sums through memory: GCC 12 warns inside _mm512_reduce_add_ps in a target("avx512f") function.
__attribute__((target("avx512f"))) float lanes(__m512 v) {
  alignas(64) float f[16];
  _mm512_store_ps(f, v);
  float s = 0;
  for (float x : f) s += x;
  return s;
}

__attribute__((target("avx512f"))) double run_avx512() {
  const __m512 a = _mm512_set1_ps(seed), b = _mm512_set1_ps(1e-7f);
#define PF_DECLARE(i) __m512 acc##i = _mm512_set1_ps(static_cast<float>(i));
#define PF_STEP(i) acc##i = _mm512_fmadd_ps(acc##i, a, b);
#define PF_SUM(i) total += lanes(acc##i);
  PF_CHAINS(PF_DECLARE)
  const double t0 = thread_seconds();
  for (long i = 0; i < kIterations; ++i) {
    PF_CHAINS(PF_STEP)
  }
  const double t = thread_seconds() - t0;
  float total = 0;
  PF_CHAINS(PF_SUM)
  sink = total;
  return 2.0 * 16 * kChains * kIterations / t;
#undef PF_DECLARE
#undef PF_STEP
#undef PF_SUM
}

__attribute__((target("avx2,fma"))) float lanes(__m256 v) {
  alignas(32) float f[8];
  _mm256_store_ps(f, v);
  float s = 0;
  for (float x : f) s += x;
  return s;
}

__attribute__((target("avx2,fma"))) double run_avx2() {
  const __m256 a = _mm256_set1_ps(seed), b = _mm256_set1_ps(1e-7f);
#define PF_DECLARE(i) __m256 acc##i = _mm256_set1_ps(static_cast<float>(i));
#define PF_STEP(i) acc##i = _mm256_fmadd_ps(acc##i, a, b);
#define PF_SUM(i) total += lanes(acc##i);

  PF_CHAINS(PF_DECLARE)
  const double t0 = thread_seconds();
  for (long i = 0; i < kIterations; ++i) {
    PF_CHAINS(PF_STEP)
  }
  const double t = thread_seconds() - t0;
  float total = 0;
  PF_CHAINS(PF_SUM)
  sink = total;
  return 2.0 * 8 * kChains * kIterations / t;
#undef PF_DECLARE
#undef PF_STEP
#undef PF_SUM
}

double run_sse() {
  const __m128 a = _mm_set1_ps(seed), b = _mm_set1_ps(1e-7f);
#define PF_DECLARE(i) __m128 acc##i = _mm_set1_ps(static_cast<float>(i));
#define PF_STEP(i) acc##i = _mm_add_ps(_mm_mul_ps(acc##i, a), b);
#define PF_SUM(i) total += _mm_cvtss_f32(acc##i);
  PF_CHAINS(PF_DECLARE)
  const double t0 = thread_seconds();
  for (long i = 0; i < kIterations; ++i) {
    PF_CHAINS(PF_STEP)
  }
  const double t = thread_seconds() - t0;
  float total = 0;
  PF_CHAINS(PF_SUM)
  sink = total;
  return 2.0 * 4 * kChains * kIterations / t;
#undef PF_DECLARE
#undef PF_STEP
#undef PF_SUM
}
#elif defined(__aarch64__)
double run_neon() {
  const float32x4_t a = vdupq_n_f32(seed), b = vdupq_n_f32(1e-7f);
#define PF_DECLARE(i) float32x4_t acc##i = vdupq_n_f32(static_cast<float>(i));
#define PF_STEP(i) acc##i = vfmaq_f32(b, acc##i, a);
#define PF_SUM(i) total += vaddvq_f32(acc##i);
  PF_CHAINS(PF_DECLARE)
  const double t0 = thread_seconds();
  for (long i = 0; i < kIterations; ++i) {
    PF_CHAINS(PF_STEP)
  }
  const double t = thread_seconds() - t0;
  float total = 0;
  PF_CHAINS(PF_SUM)
  sink = total;
  return 2.0 * 4 * kChains * kIterations / t;
#undef PF_DECLARE
#undef PF_STEP
#undef PF_SUM
}
#endif

double best_of(double (*run)()) {
  double best = 0;
  for (int i = 0; i < 5; ++i) best = std::max(best, run());
  return best / 1e9;
}

}  // namespace

FmaPeak fma_peak(const std::string& target) {
  const bool host = target.rfind("host", 0) == 0;
#if defined(__x86_64__)
  const bool avx512 =
      (host || target.find("avx512") != std::string::npos) && __builtin_cpu_supports("avx512f");
  const bool avx2 = (host || target.find("avx2") != std::string::npos) &&
                    __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx512) return {"avx512", best_of(run_avx512)};
  if (avx2) return {"avx2", best_of(run_avx2)};
  return {"sse", best_of(run_sse)};
#elif defined(__aarch64__)
  (void)host;
  return {"neon", best_of(run_neon)};
#else
  (void)host;
  return {"none", 0};
#endif
}

}  // namespace padfold::measure
