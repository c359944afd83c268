/* Deterministic test data for padfold kernels, identical on every platform (integer arithmetic,
 * exactly representable floats). Shared by the embedded example (main.c, model_main.c), its
 * weights script (make_weights.py, the same in Python) and the host tests that check its output
 * (tests/e2e/embedded_cross_test.cpp).
 *
 *   seed  = FNV-1a (32 bit) of "<layer>/<buffer>", e.g. "stem/weights"; a model input "x" of a
 *           whole-model run (model_main.c): "x/input"
 *   state = state * 1664525 + 1013904223 (mod 2^32), once per element
 *   value = ((state >> 8) - 2^23) / 2^23, in [-1, 1) with 24 significant bits
 * Integer buffers of quantized layers (pf_lcg_fill_int): int8 = the state's top byte minus 128,
 * uint8 = the top byte, int32 (bias) = (state >> 20) - 2048, in [-2048, 2048). */
#ifndef PADFOLD_EXAMPLE_LCG_H
#define PADFOLD_EXAMPLE_LCG_H

#include <stddef.h>
#include <stdint.h>

static uint32_t pf_lcg_seed(const char* layer, const char* buffer) {
  uint32_t h = 2166136261u;
  const char* p;
  for (p = layer; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
  h = (h ^ (uint8_t)'/') * 16777619u;
  for (p = buffer; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
  return h;
}

static void pf_lcg_fill(float* x, size_t n, uint32_t seed) {
  uint32_t s = seed;
  size_t i;
  for (i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)((int32_t)(s >> 8) - 8388608) * (1.0f / 8388608.0f);
  }
}

/* An integer buffer of `bytes_per_value` 1 (int8 when is_signed, else uint8) or 4 (int32). */
static void pf_lcg_fill_int(void* x, size_t n, int bytes_per_value, int is_signed, uint32_t seed) {
  uint32_t s = seed;
  size_t i;
  for (i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    if (bytes_per_value == 4)
      ((int32_t*)x)[i] = (int32_t)(s >> 20) - 2048;
    else if (is_signed)
      ((int8_t*)x)[i] = (int8_t)((int32_t)(s >> 24) - 128);
    else
      ((uint8_t*)x)[i] = (uint8_t)(s >> 24);
  }
}

#endif
