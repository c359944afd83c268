/* The runtime's core: registry handles, kernel lookup, tensor checks and kernel calls. No
 * filesystem, no libdl, no JSON: embedded builds compile this, cpu.c, model.c and status.c only. */
#include <HalideRuntime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if defined(__GNUC__) || defined(__clang__)
#define PF_TLS __thread
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_THREADS__)
#define PF_TLS _Thread_local
#endif

size_t pf_dtype_size(pf_dtype t) {
  switch (t) {
    case PF_F32:
      return 4;
    case PF_F16:
      return 2;
    case PF_I8:
    case PF_U8:
      return 1;
    case PF_I32:
      return 4;
  }
  return 0;
}

static size_t span_bytes(int rank, const int64_t* shape, const int64_t* strides, pf_dtype t) {
  uint64_t last = 0;
  int i;
  for (i = 0; i < rank; i++) {
    if (shape[i] <= 0) return 0;
    last += (uint64_t)(shape[i] - 1) * (uint64_t)strides[i];
  }
  return (size_t)((last + 1) * pf_dtype_size(t));
}

size_t pf_buffer_bytes(const pf_buffer_desc* b) {
  return b ? span_bytes(b->rank, b->shape, b->strides, b->dtype) : 0;
}

pf_tensor pf_tensor_of(const pf_buffer_desc* b, void* data, size_t bytes) {
  pf_tensor t;
  memset(&t, 0, sizeof t);
  if (b) {
    t.name = b->name;
    t.dtype = b->dtype;
    t.rank = b->rank;
    t.shape = b->shape;
    t.strides = b->strides;
  }
  t.data = data;
  t.bytes = bytes;
  return t;
}

/* ---- registry checks ---- */

/* What is wrong with description b (NULL if nothing): fields, ranges, and `data` on a buffer that
 * is not weights or bias. */
static const char* malformed_desc(const pf_buffer_desc* b) {
  double span = 0;
  int d;
  if (!b->name || !b->layout) return "NULL name or layout";
  if (!pf_role_name(b->role)) return "unknown role";
  if (!pf_dtype_name(b->dtype)) return "unknown dtype";
  if (b->rank < 0 || b->rank > PF_MAX_RANK) return "rank out of range";
  for (d = 0; d < b->rank; d++) {
    if (b->shape[d] < 1 || b->shape[d] > INT32_MAX) return "extent out of range";
    if (b->strides[d] < 0 || b->strides[d] > INT32_MAX) return "stride out of range";
    span += (double)(b->shape[d] - 1) * (double)b->strides[d];
  }
  if ((span + 1) * (double)pf_dtype_size(b->dtype) > (double)(SIZE_MAX / 2)) {
    return "larger than the address space";
  }
  if (b->data && b->role != PF_ROLE_WEIGHTS && b->role != PF_ROLE_BIAS) {
    return "embedded data on a buffer that is not weights or bias";
  }
  return NULL;
}

static pf_status check_buffer(const pf_kernel_desc* k, int i, char* err, size_t errlen) {
  const pf_buffer_desc* b = &k->buffers[i];
  const char* what = malformed_desc(b);
  int j;
  for (j = 0; !what && j < i; j++) {
    if (strcmp(k->buffers[j].name, b->name) == 0) what = "duplicate buffer name";
  }
  if (what) {
    return pf_fail(err, errlen, PF_ERR_MISMATCH, "malformed registry: kernel '%s' buffer %d: %s",
                   k->layer, i, what);
  }
  return PF_OK;
}

/* The model graph's fields: inputs (role input, no data, unique names) and output names. */
static pf_status check_graph(const pf_registry* reg, char* err, size_t errlen) {
  int i, j;
  const char* what = NULL;
  if (reg->num_inputs < 0 || (reg->num_inputs && !reg->inputs) || reg->num_outputs < 0 ||
      (reg->num_outputs && !reg->outputs)) {
    return pf_fail(err, errlen, PF_ERR_MISMATCH,
                   "malformed registry: negative num_inputs/num_outputs or NULL inputs/outputs");
  }
  for (i = 0; i < reg->num_inputs; i++) {
    const pf_buffer_desc* b = &reg->inputs[i];
    if (!(what = malformed_desc(b)) && b->role != PF_ROLE_INPUT) what = "role is not input";
    if (!what && b->data) what = "embedded data on a model input";
    for (j = 0; !what && j < i; j++) {
      if (strcmp(reg->inputs[j].name, b->name) == 0) what = "duplicate name";
    }
    if (what) {
      return pf_fail(err, errlen, PF_ERR_MISMATCH, "malformed registry: model input %d ('%s'): %s",
                     i, b->name ? b->name : "?", what);
    }
  }
  for (i = 0; i < reg->num_outputs; i++) {
    if (!reg->outputs[i]) {
      return pf_fail(err, errlen, PF_ERR_MISMATCH, "malformed registry: model output %d is NULL",
                     i);
    }
  }
  return PF_OK;
}

/* Format 3 on: an arena of aligned size, and each kernel's offset -1 or aligned inside it (where
 * each intermediate ends, and that live ones do not overlap, pf_model_open checks). */
static pf_status check_memory_plan(const pf_registry* reg, char* err, size_t errlen) {
  const pf_memory_plan* p = &reg->memory_plan;
  int i;
  if (p->alignment != PF_ARENA_ALIGNMENT || p->arena_bytes < 0 ||
      p->arena_bytes % PF_ARENA_ALIGNMENT || (reg->num_kernels && !p->offsets)) {
    return pf_fail(err, errlen, PF_ERR_MISMATCH,
                   "malformed registry: memory plan of alignment %lld and %lld bytes (expected "
                   "alignment %d, a multiple of it, and offsets)",
                   (long long)p->alignment, (long long)p->arena_bytes, PF_ARENA_ALIGNMENT);
  }
  for (i = 0; i < reg->num_kernels; i++) {
    const int64_t o = p->offsets[i];
    if (o != -1 && (o < 0 || o % PF_ARENA_ALIGNMENT || o > p->arena_bytes)) {
      return pf_fail(err, errlen, PF_ERR_MISMATCH,
                     "malformed registry: kernel '%s' arena offset %lld is neither -1 nor a "
                     "multiple of %d inside the arena (%lld bytes)",
                     reg->kernels[i].layer, (long long)o, PF_ARENA_ALIGNMENT,
                     (long long)p->arena_bytes);
    }
  }
  return PF_OK;
}

static const pf_buffer_desc* buffer_named(const pf_kernel_desc* k, const char* name) {
  int i;
  for (i = 0; i < k->num_buffers; i++) {
    if (strcmp(k->buffers[i].name, name) == 0) return &k->buffers[i];
  }
  return NULL;
}

static const pf_kernel_desc* kernel_of_layer(const pf_registry* reg, const char* layer) {
  int i;
  for (i = 0; i < reg->num_kernels; i++) {
    if (strcmp(reg->kernels[i].layer, layer) == 0) return &reg->kernels[i];
  }
  return NULL;
}

/* What is wrong with prepare kernel p (NULL if nothing): its fields, its two buffers ("weights" in,
 * "prepared" out, of one dtype), and "prepared" being its kernel's weights buffer. */
static const char* malformed_prepare(const pf_registry* reg, const pf_kernel_desc* p) {
  const pf_kernel_desc* k;
  const pf_buffer_desc *raw, *prepared, *w;
  const char* what;
  int d;
  if (!p->layer || !p->function || !p->op || !p->argv_fn || !p->buffers || p->num_buffers != 2 ||
      p->device) {
    return "NULL field, a device, or not two buffers";
  }
  if ((what = malformed_desc(&p->buffers[0])) || (what = malformed_desc(&p->buffers[1]))) {
    return what;
  }
  raw = &p->buffers[0];
  prepared = &p->buffers[1];
  if (strcmp(raw->name, "weights") != 0 || raw->role != PF_ROLE_INPUT ||
      strcmp(prepared->name, "prepared") != 0 || prepared->role != PF_ROLE_OUTPUT ||
      raw->dtype != prepared->dtype || raw->data || prepared->data) {
    return "buffers not \"weights\" (input) and \"prepared\" (output) of one dtype";
  }
  if (!(k = kernel_of_layer(reg, p->layer))) return "no kernel of its layer";
  w = buffer_named(k, "weights");
  if (!w || w->role != PF_ROLE_WEIGHTS || w->dtype != prepared->dtype ||
      w->rank != prepared->rank || strcmp(w->layout, prepared->layout) != 0) {
    return "\"prepared\" is not its kernel's weights buffer";
  }
  for (d = 0; d < w->rank; d++) {
    if (w->shape[d] != prepared->shape[d] || w->strides[d] != prepared->strides[d]) {
      return "\"prepared\" is not its kernel's weights buffer";
    }
  }
  return NULL;
}

static pf_status check_prepares(const pf_registry* reg, char* err, size_t errlen) {
  int i, j;
  if (reg->num_prepares < 0 || reg->num_prepares > reg->num_kernels ||
      (reg->num_prepares && !reg->prepares)) {
    return pf_fail(err, errlen, PF_ERR_MISMATCH,
                   "malformed registry: %d prepare kernels for %d kernels", reg->num_prepares,
                   reg->num_kernels);
  }
  for (i = 0; i < reg->num_prepares; i++) {
    const pf_kernel_desc* p = &reg->prepares[i];
    const char* what = malformed_prepare(reg, p);
    for (j = 0; !what && j < i; j++) {
      if (strcmp(reg->prepares[j].layer, p->layer) == 0) what = "a second one for its layer";
    }
    if (what) {
      return pf_fail(err, errlen, PF_ERR_MISMATCH,
                     "malformed registry: prepare kernel %d ('%s'): %s", i,
                     p->layer ? p->layer : "?", what);
    }
  }
  return PF_OK;
}

pf_status pf_registry_validate(const pf_registry* reg, char* err, size_t errlen) {
  int i, j;
  pf_status s;
  if (!reg) return pf_fail(err, errlen, PF_ERR_ARGUMENT, "registry is NULL");
  if (reg->format_version < PF_FORMAT_VERSION_MIN || reg->format_version > PF_FORMAT_VERSION) {
    return pf_fail(err, errlen, PF_ERR_VERSION,
                   "registry format_version %d is not supported by this runtime (supports %d to "
                   "%d)",
                   reg->format_version, PF_FORMAT_VERSION_MIN, PF_FORMAT_VERSION);
  }
  if (!reg->model || !reg->target || reg->num_kernels < 0 || (reg->num_kernels && !reg->kernels)) {
    return pf_fail(err, errlen, PF_ERR_MISMATCH,
                   "malformed registry: NULL model, target or kernels, or negative num_kernels");
  }
  for (i = 0; i < reg->num_kernels; i++) {
    const pf_kernel_desc* k = &reg->kernels[i];
    if (!k->layer || !k->function || !k->op || !k->argv_fn || !k->buffers || k->num_buffers < 1 ||
        k->num_buffers > PF_MAX_BUFFERS) {
      return pf_fail(
          err, errlen, PF_ERR_MISMATCH,
          "malformed registry: kernel %d ('%s'): NULL field or buffer count not in 1..%d", i,
          k->layer ? k->layer : "?", PF_MAX_BUFFERS);
    }
    for (j = 0; j < i; j++) {
      if (strcmp(reg->kernels[j].layer, k->layer) == 0) {
        return pf_fail(err, errlen, PF_ERR_MISMATCH,
                       "malformed registry: two kernels for layer '%s'", k->layer);
      }
    }
    for (j = 0; j < k->num_buffers; j++) {
      if ((s = check_buffer(k, j, err, errlen)) != PF_OK) return s;
    }
  }
  if (reg->format_version >= 3 && (s = check_memory_plan(reg, err, errlen)) != PF_OK) return s;
  if (reg->format_version >= 5 && (s = check_prepares(reg, err, errlen)) != PF_OK) return s;
  return check_graph(reg, err, errlen);
}

/* ---- Halide error capture: the handler writes into the current thread's pf_run, if any ---- */

typedef struct pf_call {
  char* msg;
  size_t len;
  int captured;
} pf_call;

#ifdef PF_TLS
static PF_TLS pf_call* current_call;

static void capture_error(void* user_context, const char* msg) {
  pf_call* c = current_call;
  (void)user_context;
  if (c && !c->captured) {
    c->captured = 1;
    if (c->msg && c->len > 0) snprintf(c->msg, c->len, "%s", msg);
  } else if (!c) {
    fprintf(stderr, "padfold: Halide error: %s\n", msg);
  }
}
#endif

/* ---- handles ---- */

pf_status pf_bundle_create(const pf_registry* reg, const pf_open_options* opts, const char* dir,
                           void (*release)(void*), void* ctx, pf_bundle** out, char* err,
                           size_t errlen) {
  pf_bundle* b;
  pf_status s;
  if ((s = pf_registry_validate(reg, err, errlen)) != PF_OK) return s;
  if ((s = pf_target_check(reg->target, opts, err, errlen)) != PF_OK) return s;
  b = (pf_bundle*)calloc(1, sizeof *b);
  if (!b || (dir && !(b->dir = (char*)malloc(strlen(dir) + 1)))) {
    free(b);
    return pf_fail(err, errlen, PF_ERR_NO_MEMORY, "out of memory");
  }
  if (dir) strcpy(b->dir, dir);
  b->reg = reg;
  b->device = reg->num_kernels > 0 ? reg->kernels[0].device : NULL;
  b->release = release;
  b->release_ctx = ctx;
#ifdef PF_TLS
  if (reg->hooks.set_error_handler && !(opts && opts->keep_error_handler)) {
    reg->hooks.set_error_handler(capture_error);
  }
#endif
  *out = b;
  return PF_OK;
}

pf_status pf_registry_open(const pf_registry* reg, const pf_open_options* opts, pf_bundle** out,
                           char* err, size_t errlen) {
  if (!out) return pf_fail(err, errlen, PF_ERR_ARGUMENT, "out is NULL");
  *out = NULL;
  return pf_bundle_create(reg, opts, NULL, NULL, NULL, out, err, errlen);
}

void pf_bundle_close(pf_bundle* b) {
  if (!b) return;
  /* A GPU bundle library's context, modules and cached allocations go before the library (a
   * linked registry's runtime is the application's). */
  if (b->device && b->release) b->device->device_release(NULL, b->device->device_interface());
  if (b->release) b->release(b->release_ctx);
  free(b->dir);
  free(b);
}

const char* pf_bundle_model(const pf_bundle* b) {
  return b ? b->reg->model : NULL;
}
const char* pf_bundle_target(const pf_bundle* b) {
  return b ? b->reg->target : NULL;
}
const char* pf_bundle_dir(const pf_bundle* b) {
  return b ? b->dir : NULL;
}
const pf_registry* pf_bundle_registry(const pf_bundle* b) {
  return b ? b->reg : NULL;
}
int pf_bundle_num_kernels(const pf_bundle* b) {
  return b ? b->reg->num_kernels : 0;
}

const pf_kernel_desc* pf_bundle_kernel(const pf_bundle* b, int i) {
  return b && i >= 0 && i < b->reg->num_kernels ? &b->reg->kernels[i] : NULL;
}

const pf_kernel_desc* pf_registry_prepare(const pf_registry* reg, const char* layer) {
  int i;
  if (reg->format_version < 5) return NULL;
  for (i = 0; i < reg->num_prepares; i++) {
    if (strcmp(reg->prepares[i].layer, layer) == 0) return &reg->prepares[i];
  }
  return NULL;
}

const pf_kernel_desc* pf_bundle_prepare_kernel(const pf_bundle* b, const pf_kernel_desc* k) {
  return b && k && k->layer ? pf_registry_prepare(b->reg, k->layer) : NULL;
}

pf_status pf_bundle_find(const pf_bundle* b, const char* layer, const pf_kernel_desc** out,
                         char* err, size_t errlen) {
  int i;
  if (!b || !layer || !out) return pf_fail(err, errlen, PF_ERR_ARGUMENT, "NULL argument");
  *out = NULL;
  for (i = 0; i < b->reg->num_kernels; i++) {
    if (strcmp(b->reg->kernels[i].layer, layer) == 0) {
      *out = &b->reg->kernels[i];
      return PF_OK;
    }
  }
  pf_fail(err, errlen, PF_ERR_NOT_FOUND,
          "model '%s' has no kernel for layer '%s' (layers:", b->reg->model, layer);
  for (i = 0; i < b->reg->num_kernels; i++) {
    pf_append(err, errlen, "%s %s", i ? "," : "", b->reg->kernels[i].layer);
  }
  pf_append(err, errlen, ")");
  return PF_ERR_NOT_FOUND;
}

/* ---- hooks ---- */

static pf_status no_hook(const pf_bundle* b, const char* hook, char* err, size_t errlen) {
  return pf_fail(err, errlen, PF_ERR_UNSUPPORTED, "the registry of model '%s' (%s) has no %s hook",
                 b->reg->model, b->reg->target, hook);
}

pf_status pf_bundle_set_allocator(pf_bundle* b, pf_malloc_fn malloc_fn, pf_free_fn free_fn,
                                  pf_malloc_fn* old_malloc, pf_free_fn* old_free, char* err,
                                  size_t errlen) {
  pf_malloc_fn m;
  pf_free_fn f;
  if (!b || !malloc_fn || !free_fn) {
    return pf_fail(err, errlen, PF_ERR_ARGUMENT,
                   "NULL bundle or function (to restore Halide's allocator, pass back the old "
                   "functions)");
  }
  if (!b->reg->hooks.set_custom_malloc) return no_hook(b, "set_custom_malloc", err, errlen);
  if (!b->reg->hooks.set_custom_free) return no_hook(b, "set_custom_free", err, errlen);
  m = b->reg->hooks.set_custom_malloc(malloc_fn);
  f = b->reg->hooks.set_custom_free(free_fn);
  if (old_malloc) *old_malloc = m;
  if (old_free) *old_free = f;
  return PF_OK;
}

pf_status pf_bundle_set_do_par_for(pf_bundle* b, pf_do_par_for_fn fn, pf_do_par_for_fn* old_fn,
                                   char* err, size_t errlen) {
  pf_do_par_for_fn old;
  if (!b || !fn) return pf_fail(err, errlen, PF_ERR_ARGUMENT, "NULL bundle or function");
  if (!b->reg->hooks.set_custom_do_par_for) return no_hook(b, "set_custom_do_par_for", err, errlen);
  old = b->reg->hooks.set_custom_do_par_for(fn);
  if (old_fn) *old_fn = old;
  return PF_OK;
}

pf_status pf_bundle_set_num_threads(pf_bundle* b, int n, int* old_n, char* err, size_t errlen) {
  int old;
  if (!b || n < 0) return pf_fail(err, errlen, PF_ERR_ARGUMENT, "NULL bundle or n < 0");
  if (!b->reg->hooks.set_num_threads) return no_hook(b, "set_num_threads", err, errlen);
  old = b->reg->hooks.set_num_threads(n);
  if (old_n) *old_n = old;
  return PF_OK;
}

/* ---- tensors ---- */

static int find_desc(const pf_buffer_desc* descs, int n, const char* name) {
  int i;
  for (i = 0; i < n; i++) {
    if (strcmp(descs[i].name, name) == 0) return i;
  }
  return -1;
}

static void list_descs(const pf_buffer_desc* descs, int n, char* err, size_t errlen) {
  int i;
  for (i = 0; i < n; i++) pf_append(err, errlen, "%s%s", i ? ", " : " (", descs[i].name);
  pf_append(err, errlen, "%s", n ? ")" : " (none)");
}

/* The description tensor i binds to: the one it names, or the one at its position; -1 if none. */
static int desc_of(const pf_buffer_desc* descs, int n_descs, const pf_tensor* t, int i) {
  return t[i].name ? find_desc(descs, n_descs, t[i].name) : i;
}

/* Binds and checks; with bound NULL (no memory) a tensor given twice is found by scanning the
 * tensors before it, else through bound. */
static pf_status bind(const char* kind, const char* owner, const char* noun,
                      const pf_buffer_desc* descs, int n_descs, const pf_tensor* t, int n,
                      const pf_tensor** bound, char* err, size_t errlen) {
  int i, j, k, first;
  if (n != n_descs) {
    pf_fail(err, errlen, PF_ERR_TENSOR_COUNT, "%s '%s': expected %d %s%stensors, got %d", kind,
            owner, n_descs, strcmp(noun, "buffer") ? noun : "", strcmp(noun, "buffer") ? " " : "",
            n);
    list_descs(descs, n_descs, err, errlen);
    return PF_ERR_TENSOR_COUNT;
  }
  for (i = 0; bound && i < n; i++) bound[i] = NULL;
  for (i = 0; i < n; i++) {
    if ((j = desc_of(descs, n_descs, t, i)) < 0) {
      pf_fail(err, errlen, PF_ERR_TENSOR_NAME, "%s '%s': tensor %d is named '%s', no %s is", kind,
              owner, i, t[i].name, noun);
      list_descs(descs, n_descs, err, errlen);
      return PF_ERR_TENSOR_NAME;
    }
    first = -1;
    if (bound) {
      if (bound[j])
        first = (int)(bound[j] - t);
      else
        bound[j] = &t[i];
    } else {
      for (k = 0; first < 0 && k < i; k++) {
        if (desc_of(descs, n_descs, t, k) == j) first = k;
      }
    }
    if (first >= 0) {
      return pf_fail(err, errlen, PF_ERR_TENSOR_NAME,
                     "%s '%s': %s '%s' is given twice (tensors %d and %d)", kind, owner, noun,
                     descs[j].name, first, i);
    }
  }
  return PF_OK;
}

pf_status pf_bind_check(const char* kind, const char* owner, const char* noun,
                        const pf_buffer_desc* descs, int n_descs, const pf_tensor* t, int n,
                        char* err, size_t errlen) {
  return bind(kind, owner, noun, descs, n_descs, t, n, NULL, err, errlen);
}

const pf_tensor* pf_bound_tensor(const pf_buffer_desc* descs, int n_descs, const pf_tensor* t,
                                 int n, int d) {
  int i;
  for (i = 0; i < n; i++) {
    if (desc_of(descs, n_descs, t, i) == d) return &t[i];
  }
  return NULL;
}

pf_status pf_bind_tensors(const char* kind, const char* owner, const char* noun,
                          const pf_buffer_desc* descs, int n_descs, const pf_tensor* t, int n,
                          const pf_tensor** bound, char* err, size_t errlen) {
  return bind(kind, owner, noun, descs, n_descs, t, n, bound, err, errlen);
}

static char axis(const pf_buffer_desc* b, int d) {
  return (int)strlen(b->layout) == b->rank ? b->layout[d] : '?';
}

int pf_buffer_is_dense(const pf_buffer_desc* b) {
  int64_t dense = 1;
  int d;
  for (d = b->rank - 1; d >= 0; d--) {
    if (b->strides[d] != dense) return 0;
    dense *= b->shape[d];
  }
  return 1;
}

pf_status pf_check_tensor(const char* kind, const char* owner, const char* noun,
                          const pf_buffer_desc* b, const pf_tensor* t, char* err, size_t errlen) {
  int d;
  int64_t dense = 1, got;
  size_t need = pf_buffer_bytes(b), esize = pf_dtype_size(b->dtype);
#define PF_FAIL(code, fmt, ...) \
  pf_fail(err, errlen, code, "%s '%s': %s '%s'" fmt, kind, owner, noun, __VA_ARGS__)
  if (!t->data) return PF_FAIL(PF_ERR_NULL_DATA, ": data pointer is NULL", b->name);
  if (t->dtype != b->dtype) {
    const char* got_name = pf_dtype_name(t->dtype);
    return PF_FAIL(PF_ERR_DTYPE, ": expected dtype %s, got %s", b->name, pf_dtype_name(b->dtype),
                   got_name ? got_name : "(invalid)");
  }
  if (t->rank != b->rank) {
    return PF_FAIL(PF_ERR_RANK, ": expected rank %d (%s), got %d", b->name, b->rank, b->layout,
                   t->rank);
  }
  if (b->rank > 0 && !t->shape) return PF_FAIL(PF_ERR_ARGUMENT, ": shape is NULL", b->name);
  for (d = 0; d < b->rank; d++) {
    if (t->shape[d] != b->shape[d]) {
      return PF_FAIL(PF_ERR_SHAPE, " dim %d (%c): expected %lld, got %lld", b->name, d, axis(b, d),
                     (long long)b->shape[d], (long long)t->shape[d]);
    }
  }
  for (d = b->rank - 1; d >= 0; d--) {
    got = t->strides ? t->strides[d] : dense;
    if (got != b->strides[d]) {
      return PF_FAIL(PF_ERR_STRIDES, " dim %d (%c): expected stride %lld, got %lld%s", b->name, d,
                     axis(b, d), (long long)b->strides[d], (long long)got,
                     t->strides ? "" : " (strides NULL: dense row-major)");
    }
    dense *= b->shape[d];
  }
  if ((uintptr_t)t->data % esize != 0) {
    return PF_FAIL(PF_ERR_ALIGNMENT, ": data pointer %p is not aligned to %u bytes (%s)", b->name,
                   t->data, (unsigned)esize, pf_dtype_name(b->dtype));
  }
  if (t->bytes < need) {
    return PF_FAIL(PF_ERR_SIZE, ": the kernel accesses %lu bytes, the allocation has %lu", b->name,
                   (unsigned long)need, (unsigned long)t->bytes);
  }
#undef PF_FAIL
  return PF_OK;
}

pf_status pf_check_apart(const char* kind, const char* owner, const char* a_what, const void* a,
                         size_t a_bytes, const char* b_what, const void* b, size_t b_bytes,
                         char* err, size_t errlen) {
  const uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
  if (a_bytes == 0 || b_bytes == 0 || pa >= pb + b_bytes || pb >= pa + a_bytes) return PF_OK;
  return pf_fail(err, errlen, PF_ERR_OVERLAP,
                 "%s '%s': %s (%lu bytes at %p) overlaps %s (%lu bytes at %p); the kernels read "
                 "while they write: give it memory of its own",
                 kind, owner, a_what, (unsigned long)a_bytes, a, b_what, (unsigned long)b_bytes, b);
}

static pf_status check_all(const pf_kernel_desc* k, const pf_tensor* t, int n,
                           const pf_tensor** bound, char* err, size_t errlen) {
  int i, j;
  pf_status s;
  if (!k || (n > 0 && !t) || n < 0 || k->num_buffers > PF_MAX_BUFFERS) {
    return pf_fail(err, errlen, PF_ERR_ARGUMENT, "NULL kernel or tensors, or bad count");
  }
  s = pf_bind_tensors("kernel", k->layer, "buffer", k->buffers, k->num_buffers, t, n, bound, err,
                      errlen);
  for (i = 0; s == PF_OK && i < n; i++) {
    s = pf_check_tensor("kernel", k->layer, "buffer", &k->buffers[i], bound[i], err, errlen);
  }
  for (i = 0; s == PF_OK && i < n; i++) { /* an output aliasing another buffer */
    char a[96], b[96];
    if (k->buffers[i].role != PF_ROLE_OUTPUT) continue;
    for (j = 0; s == PF_OK && j < n; j++) {
      if (j == i) continue;
      snprintf(a, sizeof a, "buffer '%s'", k->buffers[i].name);
      snprintf(b, sizeof b, "buffer '%s'", k->buffers[j].name);
      s = pf_check_apart("kernel", k->layer, a, bound[i]->data, pf_buffer_bytes(&k->buffers[i]), b,
                         bound[j]->data, pf_buffer_bytes(&k->buffers[j]), err, errlen);
    }
  }
  return s;
}

pf_status pf_check(const pf_kernel_desc* k, const pf_tensor* tensors, int n, char* err,
                   size_t errlen) {
  const pf_tensor* bound[PF_MAX_BUFFERS];
  return check_all(k, tensors, n, bound, err, errlen);
}

/* The element type Halide's buffer checks expect: float32/float16 are floats, int8 and int32 signed
 * integers, uint8 unsigned. */
static struct halide_type_t halide_type(pf_dtype t) {
  struct halide_type_t h;
  h.code = halide_type_float;
  switch (t) {
    case PF_I8:
    case PF_I32:
      h.code = halide_type_int;
      break;
    case PF_U8:
      h.code = halide_type_uint;
      break;
    case PF_F32:
    case PF_F16:
      break;
  }
  h.bits = (uint8_t)(pf_dtype_size(t) * 8);
  h.lanes = 1;
  return h;
}

/* After a GPU kernel ran (rc: its result) on host memory: the outputs copied back, then every
 * buffer's device memory freed, whatever failed before. Returns the first error, naming the call
 * (*what, NULL for the kernel itself) and the buffer. */
static int device_finish(const pf_kernel_desc* k, halide_buffer_t* hb, int rc, const char** what,
                         const char** buffer) {
  int i, r;
  for (i = 0; rc == 0 && i < k->num_buffers; i++) {
    if (k->buffers[i].role == PF_ROLE_OUTPUT && (r = k->device->copy_to_host(NULL, &hb[i])) != 0) {
      rc = r;
      *what = "halide_copy_to_host";
      *buffer = k->buffers[i].name;
    }
  }
  for (i = 0; i < k->num_buffers; i++) {
    if (hb[i].device && (r = k->device->device_free(NULL, &hb[i])) != 0 && rc == 0) {
      rc = r;
      *what = "halide_device_free";
      *buffer = k->buffers[i].name;
    }
  }
  return rc;
}

pf_status pf_run(const pf_kernel_desc* k, const pf_tensor* tensors, int n, char* err,
                 size_t errlen) {
  const pf_tensor* bound[PF_MAX_BUFFERS];
  halide_buffer_t hb[PF_MAX_BUFFERS];
  halide_dimension_t dims[PF_MAX_BUFFERS][PF_MAX_RANK];
  void* args[PF_MAX_BUFFERS];
  pf_call call, *outer = NULL;
  const char *what = NULL, *buffer = NULL;
  pf_status s = check_all(k, tensors, n, bound, err, errlen);
  int i, d, rc;
  if (s != PF_OK) return s;
  for (i = 0; i < k->num_buffers; i++) {
    const pf_buffer_desc* b = &k->buffers[i];
    memset(&hb[i], 0, sizeof hb[i]);
    hb[i].host = (uint8_t*)bound[i]->data;
    hb[i].type = halide_type(b->dtype);
    hb[i].dimensions = b->rank;
    hb[i].dim = dims[i];
    for (d = 0; d < b->rank; d++) { /* Halide lists dimensions innermost first */
      dims[i][d].min = 0;
      dims[i][d].extent = (int32_t)b->shape[b->rank - 1 - d];
      dims[i][d].stride = (int32_t)b->strides[b->rank - 1 - d];
      dims[i][d].flags = 0;
    }
    args[i] = &hb[i];
  }
  call.msg = err;
  call.len = errlen;
  call.captured = 0;
#ifdef PF_TLS
  outer = current_call;
  current_call = &call;
#endif
  if (k->device) { /* host memory: Halide copies the inputs in when they are host-dirty */
    for (i = 0; i < k->num_buffers; i++) {
      if (k->buffers[i].role != PF_ROLE_OUTPUT) hb[i].flags |= halide_buffer_flag_host_dirty;
    }
  }
  rc = k->argv_fn(args);
  if (k->device) rc = device_finish(k, hb, rc, &what, &buffer);
#ifdef PF_TLS
  current_call = outer;
#endif
  (void)outer;
  if (rc == 0) return PF_OK;
  if (call.captured && err && errlen > 0) { /* the message was captured into err */
    char msg[PF_ERRLEN];
    snprintf(msg, sizeof msg, "%s", err ? err : "");
    return pf_fail(err, errlen, PF_ERR_KERNEL,
                   "kernel '%s' (%s)%s%s%s%s failed with Halide error %d: %s", k->layer,
                   k->function, what ? ": " : "", what ? what : "", buffer ? " of buffer " : "",
                   buffer ? buffer : "", rc, msg);
  }
  return pf_fail(err, errlen, PF_ERR_KERNEL, "kernel '%s' (%s)%s%s%s%s failed with Halide error %d",
                 k->layer, k->function, what ? ": " : "", what ? what : "",
                 buffer ? " of buffer " : "", buffer ? buffer : "", rc);
}
