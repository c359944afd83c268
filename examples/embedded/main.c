/* padfold embedded example: runs every kernel of a bundle through the STATIC registry that the
 * build links into this program (pf_registry_open): no dlopen, no manifest, no filesystem access,
 * no Halide or LLVM at run time. Inputs, weights and biases are filled deterministically (lcg.h),
 * so any machine computes the same thing; the program prints a checksum line per kernel.
 *
 *   usage: app [OUTDIR|- [LAYER...]]
 *     OUTDIR  also write each output as OUTDIR/<layer>.bin (raw values of its dtype, float32 or
 *             int8/uint8, native byte order, in the layout the kernel lists, e.g. NHWC); "-":
 *             write nothing
 *     LAYER   run these layers (looked up by name), in this order; default: every kernel
 * Exit status: 0 on success, 1 if a kernel fails, 2 on bad usage or I/O errors. */
#include <math.h>
#include <stdint.h>
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

/* Element i of an output buffer of dtype t, as a double. */
static double value_at(const void* y, pf_dtype t, size_t i) {
  switch (t) {
    case PF_I8:
      return ((const int8_t*)y)[i];
    case PF_U8:
      return ((const uint8_t*)y)[i];
    case PF_I32:
      return ((const int32_t*)y)[i];
    default:
      return ((const float*)y)[i];
  }
}

/* Fills an input, weights or bias buffer: float32 values in [-1, 1), or integers (lcg.h). */
static void fill(void* data, const pf_buffer_desc* b, size_t bytes, uint32_t seed) {
  const size_t size = pf_dtype_size(b->dtype);
  if (b->dtype == PF_F32)
    pf_lcg_fill((float*)data, bytes / size, seed);
  else
    pf_lcg_fill_int(data, bytes / size, (int)size, b->dtype != PF_U8, seed);
}

/* Runs kernel k on freshly filled buffers; prints "layer op output-shape sum max|y|". */
static int run_kernel(const pf_kernel_desc* k, const char* outdir) {
  char err[PF_ERRLEN], shape[64];
  pf_tensor t[PF_MAX_BUFFERS];
  const void* y = NULL;
  const pf_buffer_desc* yb = NULL;
  size_t i, n = 0, y_bytes = 0;
  int j, nb = 0, rc = 0;
  double sum = 0, amax = 0;
  for (nb = 0; nb < k->num_buffers; nb++) {
    const pf_buffer_desc* b = &k->buffers[nb];
    const size_t bytes = pf_buffer_bytes(b);
    void* data = malloc(bytes);
    if (!data || pf_dtype_size(b->dtype) == 0) {
      fprintf(stderr, "%s: %s\n", k->layer, data ? "unknown dtype" : "out of memory");
      free(data);
      rc = 2;
      goto done;
    }
    if (b->role == PF_ROLE_OUTPUT) {
      memset(data, 0, bytes);
      y = data;
      yb = b;
      y_bytes = bytes;
      n = bytes / pf_dtype_size(b->dtype);
    } else {
      fill(data, b, bytes, pf_lcg_seed(k->layer, b->name));
    }
    t[nb] = pf_tensor_of(b, data, bytes);
  }
  if (!y || pf_run(k, t, nb, err, sizeof err) != PF_OK) {
    fprintf(stderr, "%s: %s\n", k->layer, y ? err : "no output buffer");
    rc = 1;
    goto done;
  }
  for (i = 0; i < n; i++) {
    const double v = value_at(y, yb->dtype, i);
    sum += v;
    if (fabs(v) > amax) amax = fabs(v);
  }
  format_shape(yb, shape, sizeof shape);
  printf("  %-10s %-9s %-18s sum %+11.5f  max|y| %.5f\n", k->layer, k->op, shape, sum, amax);
  if (outdir) rc = write_output(outdir, k->layer, y, y_bytes);
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
