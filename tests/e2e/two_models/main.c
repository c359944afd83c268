/* Links the registries of models a_b and a and runs layer c of a_b and layer b_c of a (the same
 * conv, then a relu) on the same data: each registry must reach its own kernel, so b_c's output
 * is relu(c's output), and c's has negative values. */
#include <stdio.h>
#include <string.h>

#include "padfold_runtime.h"

extern const pf_registry padfold_registry_a_b;
extern const pf_registry padfold_registry_a;

enum { N = 1 * 6 * 6 * 4, W = 3 * 3 * 4 * 4 };

/* Runs `layer` of `reg` on x and w into y; returns its kernel or NULL on failure. */
static const pf_kernel_desc* run_layer(const pf_registry* reg, const char* layer, float* x,
                                       float* w, float* y) {
  char err[512];
  pf_bundle* b = NULL;
  const pf_kernel_desc* k = NULL;
  pf_tensor t[3];
  if (pf_registry_open(reg, NULL, &b, err, sizeof err) != PF_OK ||
      pf_bundle_find(b, layer, &k, err, sizeof err) != PF_OK) {
    fprintf(stderr, "%s\n", err);
    return NULL;
  }
  t[0] = pf_tensor_of(&k->buffers[0], x, N * sizeof(float));
  t[1] = pf_tensor_of(&k->buffers[1], w, W * sizeof(float));
  t[2] = pf_tensor_of(&k->buffers[2], y, N * sizeof(float));
  if (k->num_buffers != 3 || pf_run(k, t, 3, err, sizeof err) != PF_OK) {
    fprintf(stderr, "%s: %s\n", k->function, k->num_buffers != 3 ? "expected 3 buffers" : err);
    k = NULL;
  }
  pf_bundle_close(b);
  return k;
}

int main(void) {
  static float x[N], w[W], conv[N], relu[N];
  const pf_kernel_desc *kc, *kr;
  int i, negative = 0, positive = 0, wrong = 0;
  for (i = 0; i < N; ++i) x[i] = (float)((i * 7) % 11) - 5.0f;
  for (i = 0; i < W; ++i) w[i] = (float)((i * 5) % 7) - 3.0f;
  if (!(kc = run_layer(&padfold_registry_a_b, "c", x, w, conv)) ||
      !(kr = run_layer(&padfold_registry_a, "b_c", x, w, relu)))
    return 1;
  printf("a_b.c: %s, a.b_c: %s\n", kc->function, kr->function);
  if (strcmp(kc->function, kr->function) == 0 || kc->argv_fn == kr->argv_fn) {
    fprintf(stderr, "both layers call one kernel (%s)\n", kc->function);
    return 1;
  }
  for (i = 0; i < N; ++i) {
    negative += conv[i] < 0;
    positive += relu[i] > 0;
    wrong += relu[i] != (conv[i] > 0 ? conv[i] : 0.0f);
  }
  if (negative == 0 || positive == 0 || wrong > 0) {
    fprintf(stderr, "a_b.c: %d negative values; a.b_c: %d positive, %d not relu(a_b.c)\n", negative,
            positive, wrong);
    return 1;
  }
  printf("two models ok: %d of %d values of a_b.c negative, a.b_c = relu(a_b.c)\n", negative, N);
  return 0;
}
