/* What both example programs print and write: a buffer's layout and shape, and an output's raw
 * bytes in its dtype (OUTDIR/<name>.bin, which the tests read). */
#ifndef PADFOLD_EXAMPLE_IO_H
#define PADFOLD_EXAMPLE_IO_H

#include <stdio.h>

#include "padfold_runtime.h"

/* "NHWC 1x8x7x8" */
static void format_shape(const pf_buffer_desc* b, char* buf, size_t len) {
  int d;
  size_t used = (size_t)snprintf(buf, len, "%s ", b->layout);
  for (d = 0; d < b->rank && used < len; d++)
    used += (size_t)snprintf(buf + used, len - used, d ? "x%lld" : "%lld", (long long)b->shape[d]);
}

static int write_output(const char* dir, const char* name, const void* y, size_t bytes) {
  char path[1024];
  FILE* f;
  size_t written;
  snprintf(path, sizeof path, "%s/%s.bin", dir, name);
  f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", path);
    return 2;
  }
  written = fwrite(y, 1, bytes, f);
  if (fclose(f) != 0 || written != bytes) {
    fprintf(stderr, "cannot write %s\n", path);
    return 2;
  }
  return 0;
}

#endif
