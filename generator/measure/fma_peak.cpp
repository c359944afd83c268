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

// Twelve chains per run (two FMA ports of four cycles' latency need eight, with room to spare),
// written out so that each stays in its own register. One body for every
// ISA: PF_VEC, PF_SET1 and PF_FMA name its vector type and operations where it is used.
#define PF_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
constexpr int kChains = 12;
constexpr long kIterations = 4000000;
#define PF_DECLARE(i) PF_VEC acc##i = PF_SET1(static_cast<float>(i));
#define PF_STEP(i) acc##i = PF_FMA(acc##i, a, b);
#define PF_SUM(i) total += lanes(acc##i);
#define PF_PEAK_BODY(width)                           \
  const PF_VEC a = PF_SET1(seed), b = PF_SET1(1e-7f); \
  PF_CHAINS(PF_DECLARE)                               \
  const double t0 = thread_seconds();                 \
  for (long i = 0; i < kIterations; ++i) {            \
    PF_CHAINS(PF_STEP)                                \
  }                                                   \
  const double t = thread_seconds() - t0;             \
  float total = 0;                                    \
  PF_CHAINS(PF_SUM)                                   \
  sink = total;                                       \
  return 2.0 * (width)*kChains * kIterations / t;

#if defined(__x86_64__)
// Sums through memory: GCC 12 warns inside _mm512_reduce_add_ps in a target("avx512f") function.
__attribute__((target("avx512f"))) float lanes(__m512 v) {
  alignas(64) float f[16];
  _mm512_store_ps(f, v);
  float s = 0;
  for (float x : f) s += x;
  return s;
}
__attribute__((target("avx2,fma"))) float lanes(__m256 v) {
  alignas(32) float f[8];
  _mm256_store_ps(f, v);
  float s = 0;
  for (float x : f) s += x;
  return s;
}
float lanes(__m128 v) {
  return _mm_cvtss_f32(v);
}

#define PF_VEC __m512
#define PF_SET1 _mm512_set1_ps
#define PF_FMA _mm512_fmadd_ps
__attribute__((target("avx512f"))) double run_avx512() {
  PF_PEAK_BODY(16)
}
#undef PF_VEC
#undef PF_SET1
#undef PF_FMA

#define PF_VEC __m256
#define PF_SET1 _mm256_set1_ps
#define PF_FMA _mm256_fmadd_ps
__attribute__((target("avx2,fma"))) double run_avx2() {
  PF_PEAK_BODY(8)
}
#undef PF_VEC
#undef PF_SET1
#undef PF_FMA

// No FMA: a multiply and an add per step, counted as two flops as an FMA is.
#define PF_VEC __m128
#define PF_SET1 _mm_set1_ps
#define PF_FMA(x, a, b) _mm_add_ps(_mm_mul_ps(x, a), b)
double run_sse() {
  PF_PEAK_BODY(4)
}
#undef PF_VEC
#undef PF_SET1
#undef PF_FMA
#elif defined(__aarch64__)
float lanes(float32x4_t v) {
  return vaddvq_f32(v);
}
#define PF_VEC float32x4_t
#define PF_SET1 vdupq_n_f32
#define PF_FMA(x, a, b) vfmaq_f32(b, x, a)
double run_neon() {
  PF_PEAK_BODY(4)
}
#undef PF_VEC
#undef PF_SET1
#undef PF_FMA
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
