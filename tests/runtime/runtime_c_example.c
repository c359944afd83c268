/* Using the padfold runtime from C99: open a bundle, list its kernels, run one on buffers of the
 * right size (inputs set to 1), print the start of its output. Usage: BUNDLE_DIR LAYER */
#include <stdio.h>
#include <stdlib.h>

#include "padfold_runtime.h"

int main(int argc, char** argv) {
  char err[PF_ERRLEN];
  pf_bundle* bundle = NULL;
  const pf_kernel_desc* k = NULL;
  pf_tensor tensors[PF_MAX_BUFFERS];
  int i, n = 0, rc = 1;
  if (argc != 3) {
    fprintf(stderr, "usage: %s BUNDLE_DIR LAYER\n", argv[0]);
    return 2;
  }
  if (pf_bundle_open(argv[1], NULL, &bundle, err, sizeof err) != PF_OK ||
      pf_bundle_find(bundle, argv[2], &k, err, sizeof err) != PF_OK) {
    fprintf(stderr, "error: %s\n", err);
    goto done;
  }
  printf("model %s, target %s\n", pf_bundle_model(bundle), pf_bundle_target(bundle));
  for (i = 0; i < pf_bundle_num_kernels(bundle); i++) {
    printf("  kernel %s (%s)\n", pf_bundle_kernel(bundle, i)->layer,
           pf_bundle_kernel(bundle, i)->op);
  }
  for (n = 0; n < k->num_buffers; n++) { /* float32 buffers, as the manifest describes them */
    const pf_buffer_desc* b = &k->buffers[n];
    size_t j, bytes = pf_buffer_bytes(b);
    float* data = (float*)malloc(bytes);
    if (!data) goto done;
    for (j = 0; j < bytes / sizeof(float); j++) data[j] = b->role == PF_ROLE_OUTPUT ? 0.f : 1.f;
    tensors[n] = pf_tensor_of(b, data, bytes);
  }
  if (pf_run(k, tensors, n, err, sizeof err) != PF_OK) {
    fprintf(stderr, "error: %s\n", err);
    goto done;
  }
  for (i = 0; i < n; i++) {
    if (k->buffers[i].role == PF_ROLE_OUTPUT) {
      const float* out = (const float*)tensors[i].data;
      printf("%s: output[0] = %g, output[1] = %g\n", k->layer, out[0], out[1]);
    }
  }
  rc = 0;
done:
  while (n > 0) free(tensors[--n].data);
  pf_bundle_close(bundle);
  return rc;
}
