/* padfold embedded example: runs every kernel of a bundle through the STATIC registry that the
 * build links into this program (pf_registry_open): no dlopen, no manifest, no filesystem access,
 * no Halide or LLVM at run time. Inputs, weights and biases are filled deterministically (lcg.h),
 * so any machine computes the same thing; the program prints a checksum line per kernel.
 *
 *   usage: app [OUTDIR|- [LAYER...]]
 *     OUTDIR  also write each output as OUTDIR/<layer>.bin (raw float32, native byte order, in the
 *             layout the kernel lists, e.g. NHWC); "-": write nothing
 *     LAYER   run these layers (looked up by name), in this order; default: every kernel
 * Exit status: 0 on success, 1 if a kernel fails, 2 on bad usage or I/O errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_io.h"
#include "lcg.h"
#include "padfold_runtime.h"

/* The registry that the bundle's registry.c defines: padfold_registry_<model>. The CMake project
 * sets PF_REGISTRY from PADFOLD_MODEL. */
#ifndef PF_REGISTRY
#define PF_REGISTRY padfold_registry_embedded
#endif
extern const pf_registry PF_REGISTRY;

/* Runs kernel k on freshly filled buffers; prints "layer op output-shape sum max|y|". */
static int run_kernel(const pf_kernel_desc* k, const char* outdir) {
  char err[PF_ERRLEN], shape[64];
  pf_tensor t[PF_MAX_BUFFERS];
  const float* y = NULL;
  const pf_buffer_desc* yb = NULL;
  size_t i, n = 0;
  int j, nb = 0, rc = 0;
  double sum = 0, amax = 0;
  for (nb = 0; nb < k->num_buffers; nb++) {
    const pf_buffer_desc* b = &k->buffers[nb];
    const size_t bytes = pf_buffer_bytes(b);
    float* data = (float*)malloc(bytes);
    if (!data) {
      fprintf(stderr, "%s: out of memory\n", k->layer);
      rc = 2;
      goto done;
    }
    if (b->role == PF_ROLE_OUTPUT) {
      memset(data, 0, bytes);
      y = data;
      yb = b;
      n = bytes / sizeof(float);
    } else {
      pf_lcg_fill(data, bytes / sizeof(float), pf_lcg_seed(k->layer, b->name));
    }
    t[nb] = pf_tensor_of(b, data, bytes);
  }
  if (!y || pf_run(k, t, nb, err, sizeof err) != PF_OK) {
    fprintf(stderr, "%s: %s\n", k->layer, y ? err : "no output buffer");
    rc = 1;
    goto done;
  }
  for (i = 0; i < n; i++) {
    sum += y[i];
    if (fabs(y[i]) > amax) amax = fabs(y[i]);
  }
  format_shape(yb, shape, sizeof shape);
  printf("  %-10s %-9s %-18s sum %+11.5f  max|y| %.5f\n", k->layer, k->op, shape, sum, amax);
  if (outdir) rc = write_output(outdir, k->layer, y, n);
done:
  for (j = 0; j < nb; j++) free(t[j].data);
  return rc;
}

int main(int argc, char** argv) {
  char err[PF_ERRLEN], host[512];
  pf_bundle* bundle = NULL;
  const char* outdir = argc > 1 && strcmp(argv[1], "-") != 0 ? argv[1] : NULL;
  int i, n, rc = 0;
  if (argc > 1 && argv[1][0] == '-' && argv[1][1] != '\0') {
    fprintf(stderr, "usage: %s [OUTDIR|- [LAYER...]]\n", argv[0]);
    return 2;
  }
  pf_host_describe(host, sizeof host);
  printf("cpu: %s\n", host);
  /* Checks the registry's format and contents, and that this CPU has its target's features. */
  if (pf_registry_open(&PF_REGISTRY, NULL, &bundle, err, sizeof err) != PF_OK) {
    fprintf(stderr, "padfold: %s\n", err);
    return 1;
  }
  n = argc > 2 ? argc - 2 : pf_bundle_num_kernels(bundle);
  printf("model %s, target %s, %d kernels\n", pf_bundle_model(bundle), pf_bundle_target(bundle),
         pf_bundle_num_kernels(bundle));
  for (i = 0; i < n && rc == 0; i++) {
    const pf_kernel_desc* k = pf_bundle_kernel(bundle, i);
    if (argc > 2 && pf_bundle_find(bundle, argv[i + 2], &k, err, sizeof err) != PF_OK) {
      fprintf(stderr, "padfold: %s\n", err);
      rc = 2;
      break;
    }
    rc = run_kernel(k, outdir);
  }
  pf_bundle_close(bundle);
  if (rc == 0) printf("ok\n");
  return rc;
}
