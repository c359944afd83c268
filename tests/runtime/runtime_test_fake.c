/* A fake bundle library for the runtime tests: three hand-written kernels in the argv form Halide
 * generates (reading and writing through halide_buffer_t, checking their buffers like Halide's
 * asserts do) and a fake Halide runtime with the hooks a registry exposes.
 *   scale     output = 2 * input, [1,3,4,5] NCHW; runs channels through do_par_for and a scratch
 *             row from the custom malloc
 *   add_bias  output = input + bias[c], [1,3,4,5] NCHW, bias [3]
 *   checked   output = input, [2]; fails (Halide style) when input[0] < 0
 * As a model graph: inputs x [1,3,4,5] and c [2], scale(x) -> add_bias (bias from
 * weights/add_bias_bias.npy), checked(c); outputs add_bias and checked.
 * FAKE_TARGET: the registry's target string. FAKE_ENTRY: the entry's name (default
 * padfold_bundle_registry). FAKE_NO_ENTRY: build without an entry. */
#include <HalideRuntime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "padfold_registry.h"

#ifndef FAKE_ENTRY
#define FAKE_ENTRY padfold_bundle_registry
#endif

/* ---- fake Halide runtime ---- */

static void* default_malloc(void* uc, size_t n) {
  (void)uc;
  return malloc(n);
}
static void default_free(void* uc, void* p) {
  (void)uc;
  free(p);
}
static int default_do_par_for(void* uc, pf_task_fn f, int min, int size, uint8_t* closure) {
  int i, rc;
  for (i = min; i < min + size; i++) {
    if ((rc = f(uc, i, closure)) != 0) return rc;
  }
  return 0;
}
static void default_error(void* uc, const char* msg) {
  (void)uc;
  fprintf(stderr, "Error: %s\n", msg);
}

static pf_malloc_fn cur_malloc = default_malloc;
static pf_free_fn cur_free = default_free;
static pf_do_par_for_fn cur_do_par_for = default_do_par_for;
static pf_error_handler_fn cur_error = default_error;
static int cur_threads = 0;

#define SETTER(name, type, var) \
  static type name(type fn) {   \
    type old = var;             \
    var = fn;                   \
    return old;                 \
  }
SETTER(set_malloc, pf_malloc_fn, cur_malloc)
SETTER(set_free, pf_free_fn, cur_free)
SETTER(set_do_par_for, pf_do_par_for_fn, cur_do_par_for)
SETTER(set_error_handler, pf_error_handler_fn, cur_error)
SETTER(set_num_threads, int, cur_threads)

/* ---- kernels ---- */

/* Halide's checks: float32, rank, mins 0, extents (innermost first), dense strides. */
static int expect(const halide_buffer_t* b, const char* name, int rank, const int* extents) {
  char msg[128];
  int d, stride = 1;
  const char* bad = NULL;
  if (!b->host)
    bad = "host is NULL";
  else if (b->type.code != halide_type_float || b->type.bits != 32 || b->type.lanes != 1)
    bad = "type is not float32";
  else if (b->dimensions != rank)
    bad = "wrong dimensions";
  for (d = 0; !bad && d < rank; d++) {
    if (b->dim[d].min != 0 || b->dim[d].extent != extents[d] || b->dim[d].stride != stride)
      bad = "wrong min, extent or stride";
    stride *= extents[d];
  }
  if (!bad) return 0;
  snprintf(msg, sizeof msg, "buffer %s: %s", name, bad);
  cur_error(NULL, msg);
  return -2;
}

static const int nchw[4] = {5, 4, 3, 1}; /* W, H, C, N */

static int scale_channel(void* uc, int c, uint8_t* closure) {
  halide_buffer_t** bufs = (halide_buffer_t**)closure;
  const float* in = (const float*)bufs[0]->host;
  float *out = (float*)bufs[1]->host, *row;
  int h, w;
  (void)uc;
  if (!(row = (float*)cur_malloc(NULL, 5 * sizeof(float)))) return -3;
  for (h = 0; h < 4; h++) {
    for (w = 0; w < 5; w++) row[w] = 2.0f * in[c * bufs[0]->dim[2].stride + h * 5 + w];
    memcpy(out + c * bufs[1]->dim[2].stride + h * 5, row, sizeof(float) * 5);
  }
  cur_free(NULL, row);
  return 0;
}

static int scale_argv(void** args) {
  halide_buffer_t* bufs[2];
  int rc;
  bufs[0] = (halide_buffer_t*)args[0];
  bufs[1] = (halide_buffer_t*)args[1];
  if ((rc = expect(bufs[0], "input", 4, nchw)) || (rc = expect(bufs[1], "output", 4, nchw)))
    return rc;
  return cur_do_par_for(NULL, scale_channel, 0, 3, (uint8_t*)bufs);
}

static int add_bias_argv(void** args) {
  const halide_buffer_t *in = (halide_buffer_t*)args[0], *bias = (halide_buffer_t*)args[1];
  const halide_buffer_t* out = (halide_buffer_t*)args[2];
  static const int c3[1] = {3};
  int rc, c, h, w;
  if ((rc = expect(in, "input", 4, nchw)) || (rc = expect(bias, "bias", 1, c3)) ||
      (rc = expect(out, "output", 4, nchw)))
    return rc;
  for (c = 0; c < 3; c++) {
    for (h = 0; h < 4; h++) {
      for (w = 0; w < 5; w++) {
        int i = c * in->dim[2].stride + h * in->dim[1].stride + w * in->dim[0].stride;
        ((float*)out->host)[i] = ((const float*)in->host)[i] + ((const float*)bias->host)[c];
      }
    }
  }
  return 0;
}

static int checked_argv(void** args) {
  const halide_buffer_t *in = (halide_buffer_t*)args[0], *out = (halide_buffer_t*)args[1];
  static const int two[1] = {2};
  const float* x = (const float*)in->host;
  int rc;
  if ((rc = expect(in, "input", 1, two)) || (rc = expect(out, "output", 1, two))) return rc;
  if (x[0] < 0) {
    char msg[64];
    snprintf(msg, sizeof msg, "checked: input[0] is negative (%g)", x[0]);
    cur_error(NULL, msg);
    return -1;
  }
  memcpy(out->host, x, 2 * sizeof(float));
  return 0;
}

/* ---- registry ---- */

/* The graph: model inputs x and c; scale(x) -> add_bias(scale, bias from its .npy file) and
 * checked(c); the model's outputs are add_bias and checked. */
#define NCHW_BUF(name, role, source) \
  { name, role, PF_F32, "NCHW", 4, {1, 3, 4, 5}, {60, 20, 5, 1}, source, NULL }
static const pf_buffer_desc scale_bufs[] = {NCHW_BUF("input", PF_ROLE_INPUT, "x"),
                                            NCHW_BUF("output", PF_ROLE_OUTPUT, NULL)};
static const pf_buffer_desc add_bias_bufs[] = {
    NCHW_BUF("input", PF_ROLE_INPUT, "scale"),
    {"bias", PF_ROLE_BIAS, PF_F32, "C", 1, {3}, {1}, "weights/add_bias_bias.npy", NULL},
    NCHW_BUF("output", PF_ROLE_OUTPUT, NULL)};
static const pf_buffer_desc checked_bufs[] = {
    {"input", PF_ROLE_INPUT, PF_F32, "C", 1, {2}, {1}, "c", NULL},
    {"output", PF_ROLE_OUTPUT, PF_F32, "C", 1, {2}, {1}, NULL, NULL}};

static const pf_kernel_desc kernels[] = {
    {"scale", "pf_fake_scale", "scale", scale_argv, 2, scale_bufs, NULL},
    {"add_bias", "pf_fake_add_bias", "add_bias", add_bias_argv, 3, add_bias_bufs, NULL},
    {"checked", "pf_fake_checked", "copy", checked_argv, 2, checked_bufs, NULL}};

static const pf_buffer_desc inputs[] = {NCHW_BUF("x", PF_ROLE_INPUT, NULL),
                                        {"c", PF_ROLE_INPUT, PF_F32, "C", 1, {2}, {1}, NULL, NULL}};
static const char* const outputs[] = {"add_bias", "checked"};

/* scale is the only intermediate: 240 bytes, 256 in the arena. */
static const int64_t arena_offsets[] = {0, -1, -1};

static const pf_registry registry = {
    PF_FORMAT_VERSION,
    "fake",
    FAKE_TARGET,
    3,
    kernels,
    {set_malloc, set_free, set_do_par_for, set_num_threads, set_error_handler},
    2,
    inputs,
    2,
    outputs,
    {256, PF_ARENA_ALIGNMENT, arena_offsets, NULL},
    0,
    NULL};

#ifndef FAKE_NO_ENTRY
const pf_registry* FAKE_ENTRY(void);
const pf_registry* FAKE_ENTRY(void) {
  return &registry;
}
#else
const pf_registry* fake_unexported(void);
const pf_registry* fake_unexported(void) {
  return &registry;
}
#endif
