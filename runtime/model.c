/* Whole-model runs (pf_model_*): a registry's graph is checked and planned once, at open; a run
 * binds the caller's tensors, then runs the kernels in registry order with each intermediate at
 * its offset in an arena laid out by the registry's memory plan (checked at open): the caller's
 * (pf_model_run_static), or the model's own, allocated by the first pf_model_run and kept until
 * close. A run that finds the model's arena taken by another thread (or a registry without a
 * plan, or per_run_allocation) allocates each intermediate right before its producer and frees it
 * right after its last reader.
 * Core library: no filesystem. Weight files are read through the bundle's loader, which only
 * pf_bundle_open sets (npy_load.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct pf_step {
  int out;                          /* index of the kernel's output buffer */
  int feed[PF_MAX_BUFFERS];         /* input buffers: the tensor feeding it; -1 for the others */
  const void* data[PF_MAX_BUFFERS]; /* weights and bias buffers: their values */
} pf_step;

/* A weight file's values: a block read through the hooks, or a mapping of the file. */
typedef struct pf_owned {
  void* block;
  pf_mapping map;
} pf_owned;

struct pf_model {
  const pf_registry* reg;
  pf_malloc_fn malloc_fn;
  pf_free_fn free_fn;
  void* uc;
  int num_tensors;         /* the model inputs, then one per kernel: its output */
  pf_step* steps;          /* one per kernel */
  int* last_reader;        /* per tensor: the last kernel reading it, -1 if none */
  int* output_index;       /* per tensor: the model output it is, -1 if none */
  pf_buffer_desc* outputs; /* per model output: the producer's output buffer, named after it */
  int* output_tensor;      /* per model output: its tensor */
  pf_owned* owned;         /* weight files read or mapped, released at close */
  int num_owned;
  void (*unmap)(pf_mapping*); /* the bundle's, for `owned` */
  int map_files;              /* weight files are mapped where the platform allows */
  int reuse_arena;            /* pf_model_run runs in `arena` when it can take it */
  long arena_taken;           /* a run holds `arena` (atomic flag) */
  void* arena_block;          /* as allocated by the first run that took it; NULL before */
  unsigned char* arena;       /* arena_block's first PF_ARENA_ALIGNMENT multiple */
};

/* The model's arena is taken with an atomic exchange, so that concurrent runs never share it; a
 * compiler without these atomics (or PF_NO_ATOMICS, for a core without them) never reuses it. */
#if !defined(PF_NO_ATOMICS) && (defined(__GNUC__) || defined(__clang__))
static int take_arena(pf_model* m) {
  return __atomic_exchange_n(&m->arena_taken, 1L, __ATOMIC_ACQUIRE) == 0;
}
static void give_arena_back(pf_model* m) {
  __atomic_store_n(&m->arena_taken, 0L, __ATOMIC_RELEASE);
}
#elif !defined(PF_NO_ATOMICS) && defined(_MSC_VER)
#include <intrin.h>
static int take_arena(pf_model* m) {
  return _InterlockedExchange(&m->arena_taken, 1L) == 0;
}
static void give_arena_back(pf_model* m) {
  _InterlockedExchange(&m->arena_taken, 0L);
}
#else
static int take_arena(pf_model* m) {
  (void)m;
  return 0;
}
static void give_arena_back(pf_model* m) {
  (void)m;
}
#endif

static void* default_malloc(void* uc, size_t n) {
  (void)uc;
  return malloc(n ? n : 1);
}

static void default_free(void* uc, void* p) {
  (void)uc;
  free(p);
}

static void* alloc(const pf_model* m, size_t n) {
  return m->malloc_fn(m->uc, n);
}

static void release(const pf_model* m, void* p) {
  if (p) m->free_fn(m->uc, p);
}

/* The first PF_ARENA_ALIGNMENT multiple in a block allocated PF_ARENA_ALIGNMENT - 1 bytes larger
 * than it needs: a cache line, where vector loads of weights and tensors do not straddle two. */
static unsigned char* align_up(void* block) {
  const uintptr_t p = (uintptr_t)block;
  return (unsigned char*)((p + PF_ARENA_ALIGNMENT - 1) & ~(uintptr_t)(PF_ARENA_ALIGNMENT - 1));
}

/* n zeroed elements of the given size through the hooks (NULL on overflow or failure). */
static void* alloc_zeroed(const pf_model* m, size_t n, size_t size) {
  void* p;
  if (n == 0 || n > (size_t)-1 / size) return NULL;
  if ((p = alloc(m, n * size)) != NULL) memset(p, 0, n * size);
  return p;
}

void pf_model_close(pf_model* m) {
  int i;
  if (!m) return;
  for (i = 0; m->owned && i < m->num_owned; i++) {
    release(m, m->owned[i].block);
    if (m->owned[i].map.base) m->unmap(&m->owned[i].map);
  }
  release(m, m->owned);
  release(m, m->steps);
  release(m, m->last_reader);
  release(m, m->output_index);
  release(m, m->outputs);
  release(m, m->output_tensor);
  release(m, m->arena_block);
  release(m, m);
}

#define GRAPH_FAIL(...) pf_fail(err, errlen, PF_ERR_GRAPH, __VA_ARGS__)

/* The tensor `name` feeding kernel `at`: a model input, or the output of an earlier kernel. */
static pf_status resolve(const pf_registry* reg, int at, const pf_buffer_desc* b, int* tensor,
                         char* err, size_t errlen) {
  const char* layer = reg->kernels[at].layer;
  int i;
  if (!b->source) {
    return GRAPH_FAIL(
        "kernel '%s' buffer '%s' has no source: the registry does not say which tensor feeds it",
        layer, b->name);
  }
  for (i = 0; i < reg->num_inputs; i++) {
    if (strcmp(reg->inputs[i].name, b->source) == 0) {
      *tensor = i;
      return PF_OK;
    }
  }
  for (i = 0; i < reg->num_kernels; i++) {
    if (strcmp(reg->kernels[i].layer, b->source) != 0) continue;
    if (i < at) {
      *tensor = reg->num_inputs + i;
      return PF_OK;
    }
    return GRAPH_FAIL(
        "kernel '%s' buffer '%s' reads layer '%s', which does not run before it (kernels must be "
        "in a topological order)",
        layer, b->name, b->source);
  }
  return GRAPH_FAIL("kernel '%s' buffer '%s' reads '%s', which is no model input and no layer",
                    layer, b->name, b->source);
}

/* The tensor t (description d) can feed buffer b: same dtype, rank, shape and strides. */
static pf_status check_feed(const pf_kernel_desc* k, const pf_buffer_desc* b,
                            const pf_buffer_desc* d, char* err, size_t errlen) {
  const char* what = NULL;
  int dim = 0;
  long long got = 0, want = 0;
  if (d->dtype != b->dtype) {
    return GRAPH_FAIL("kernel '%s' buffer '%s' is %s, the tensor '%s' feeding it is %s", k->layer,
                      b->name, pf_dtype_name(b->dtype), b->source, pf_dtype_name(d->dtype));
  }
  if (d->rank != b->rank) {
    return GRAPH_FAIL(
        "kernel '%s' buffer '%s' has rank %d (%s), the tensor '%s' feeding it %d (%s)", k->layer,
        b->name, b->rank, b->layout, b->source, d->rank, d->layout);
  }
  for (dim = 0; !what && dim < b->rank; dim++) {
    if (d->shape[dim] != b->shape[dim]) {
      what = "shape", want = b->shape[dim], got = d->shape[dim];
    } else if (d->strides[dim] != b->strides[dim]) {
      what = "strides", want = b->strides[dim], got = d->strides[dim];
    }
  }
  if (what) {
    return GRAPH_FAIL("kernel '%s' buffer '%s' %s[%d] is %lld, the tensor '%s' feeding it has %lld",
                      k->layer, b->name, what, dim - 1, want, b->source, got);
  }
  return PF_OK;
}

/* The values of weights/bias buffer j of kernel i: embedded, or from its file once (mapped where
 * the options and the platform allow, else read). */
static pf_status load_values(pf_model* m, const pf_bundle* bundle, int i, int j, char* err,
                             size_t errlen) {
  const pf_kernel_desc* k = &m->reg->kernels[i];
  const pf_buffer_desc* b = &k->buffers[j];
  size_t bytes = pf_buffer_bytes(b);
  int pi, pj;
  pf_owned* owned;
  pf_status s;
  if (!pf_buffer_is_dense(b)) {
    return GRAPH_FAIL(
        "kernel '%s' buffer '%s' is not dense: weights from a file or embedded are dense in the "
        "buffer's layout",
        k->layer, b->name);
  }
  if (b->data) {
    m->steps[i].data[j] = b->data;
    return PF_OK;
  }
  if (!b->source) {
    return GRAPH_FAIL(
        "kernel '%s' buffer '%s' has no values: the spec names no .npy file for it (weight_files) "
        "and they are not embedded; name them in the spec, or run the kernels one by one and pass "
        "them to pf_run",
        k->layer, b->name);
  }
  if (!bundle->load_weights) {
    return GRAPH_FAIL(
        "kernel '%s' buffer '%s' is in the file '%s', and a linked registry has no files: compile "
        "with --embed-weights, or open the bundle directory (pf_bundle_open)",
        k->layer, b->name, b->source);
  }
  for (pi = 0; pi <= i; pi++) { /* the same file read for an earlier buffer */
    const pf_kernel_desc* pk = &m->reg->kernels[pi];
    for (pj = 0; pj < (pi == i ? j : pk->num_buffers); pj++) {
      const pf_buffer_desc* pb = &pk->buffers[pj];
      if ((pb->role == PF_ROLE_WEIGHTS || pb->role == PF_ROLE_BIAS) && !pb->data && pb->source &&
          strcmp(pb->source, b->source) == 0 && pb->dtype == b->dtype && pb->rank == b->rank &&
          memcmp(pb->shape, b->shape, sizeof b->shape[0] * (size_t)b->rank) == 0) {
        m->steps[i].data[j] = m->steps[pi].data[pj];
        return PF_OK;
      }
    }
  }
  owned = &m->owned[m->num_owned++];
  if (m->map_files && bundle->map_weights) {
    s = bundle->map_weights(bundle->dir, k->layer, b, bytes, &owned->map, err, errlen);
    if (s != PF_OK || owned->map.base) {
      m->unmap = bundle->unmap_weights;
      m->steps[i].data[j] = owned->map.data;
      return s;
    }
  }
  if (bytes > (size_t)-1 - PF_ARENA_ALIGNMENT ||
      !(owned->block = alloc(m, bytes + PF_ARENA_ALIGNMENT - 1))) {
    return pf_fail(err, errlen, PF_ERR_NO_MEMORY,
                   "out of memory for kernel '%s' buffer '%s' (%lu bytes of %s)", k->layer, b->name,
                   (unsigned long)bytes, b->source);
  }
  s = bundle->load_weights(bundle->dir, k->layer, b, align_up(owned->block), bytes, err, errlen);
  if (s == PF_OK) m->steps[i].data[j] = align_up(owned->block);
  return s;
}

/* The graph checks that need no memory: inputs, names, outputs. */
static pf_status check_names(const pf_registry* reg, char* err, size_t errlen) {
  int i, j;
  if (reg->num_kernels == 0) return GRAPH_FAIL("model '%s' has no kernels", reg->model);
  for (i = 0; i < reg->num_inputs; i++) {
    const pf_buffer_desc* x = &reg->inputs[i];
    if (x->source) {
      return pf_fail(err, errlen, PF_ERR_GRAPH,
                     "model input '%s' is produced by %s, which padfold does not generate: run "
                     "the kernels one by one",
                     x->name, x->source);
    }
    for (j = 0; j < reg->num_kernels; j++) {
      if (strcmp(reg->kernels[j].layer, x->name) == 0) {
        return GRAPH_FAIL("model input '%s' has the name of a layer", x->name);
      }
    }
  }
  if (reg->num_outputs == 0) return GRAPH_FAIL("model '%s' names no outputs", reg->model);
  for (i = 0; i < reg->num_outputs; i++) {
    for (j = 0; j < i; j++) {
      if (strcmp(reg->outputs[i], reg->outputs[j]) == 0) {
        return GRAPH_FAIL("model output '%s' is listed twice", reg->outputs[i]);
      }
    }
  }
  return PF_OK;
}

/* Plans kernel i: its feeds, output and values. */
static pf_status plan_kernel(pf_model* m, const pf_bundle* bundle, int i, char* err,
                             size_t errlen) {
  const pf_registry* reg = m->reg;
  const pf_kernel_desc* k = &reg->kernels[i];
  pf_step* st = &m->steps[i];
  int j, t = -1, outs = 0;
  pf_status s;
  st->out = -1;
  for (j = 0; j < k->num_buffers; j++) {
    const pf_buffer_desc* b = &k->buffers[j];
    st->feed[j] = -1;
    if (b->role == PF_ROLE_OUTPUT) {
      st->out = j;
      outs++;
    } else if (b->role == PF_ROLE_INPUT) {
      if ((s = resolve(reg, i, b, &t, err, errlen)) != PF_OK) return s;
      s = check_feed(
          k, b,
          t < reg->num_inputs
              ? &reg->inputs[t]
              : &reg->kernels[t - reg->num_inputs].buffers[m->steps[t - reg->num_inputs].out],
          err, errlen);
      if (s != PF_OK) return s;
      st->feed[j] = t;
      m->last_reader[t] = i;
    } else if ((s = load_values(m, bundle, i, j, err, errlen)) != PF_OK) {
      return s;
    }
  }
  if (outs != 1) {
    return GRAPH_FAIL("kernel '%s' has %d output buffers, a model run needs exactly one", k->layer,
                      outs);
  }
  return PF_OK;
}

static pf_status plan_outputs(pf_model* m, char* err, size_t errlen) {
  const pf_registry* reg = m->reg;
  int i, j;
  for (i = 0; i < reg->num_outputs; i++) {
    for (j = 0; j < reg->num_kernels; j++) {
      if (strcmp(reg->kernels[j].layer, reg->outputs[i]) == 0) break;
    }
    if (j == reg->num_kernels) {
      return GRAPH_FAIL("model output '%s' names no layer of model '%s'", reg->outputs[i],
                        reg->model);
    }
    m->outputs[i] = reg->kernels[j].buffers[m->steps[j].out];
    m->outputs[i].name = reg->kernels[j].layer;
    m->outputs[i].source = NULL;
    m->output_tensor[i] = reg->num_inputs + j;
    m->output_index[reg->num_inputs + j] = i;
  }
  return PF_OK;
}

/* The bytes of kernel i's output. */
static size_t output_bytes(const pf_model* m, int i) {
  return pf_buffer_bytes(&m->reg->kernels[i].buffers[m->steps[i].out]);
}

/* The step after which the output of kernel i is dead (its last reader, or itself). */
static int last_step(const pf_model* m, int i) {
  int r = m->last_reader[m->reg->num_inputs + i];
  return r > i ? r : i;
}

/* The registry's memory plan (format 3) fits this graph: every intermediate, and only they, at an
 * offset where it ends inside the arena and overlaps no intermediate live at the same time. */
static pf_status check_memory_plan(const pf_model* m, char* err, size_t errlen) {
  const pf_registry* reg = m->reg;
  const int64_t* off = reg->memory_plan.offsets;
  int i, j;
  for (i = 0; i < reg->num_kernels; i++) {
    int in_arena = m->output_index[reg->num_inputs + i] < 0;
    if (in_arena != (off[i] >= 0) || (in_arena && (uint64_t)off[i] + output_bytes(m, i) >
                                                      (uint64_t)reg->memory_plan.arena_bytes)) {
      return pf_fail(err, errlen, PF_ERR_MISMATCH,
                     "malformed registry: memory plan puts kernel '%s' (%s, %lu bytes) at offset "
                     "%lld of an arena of %lld bytes",
                     reg->kernels[i].layer, in_arena ? "an intermediate" : "a model output",
                     (unsigned long)output_bytes(m, i), (long long)off[i],
                     (long long)reg->memory_plan.arena_bytes);
    }
    for (j = 0; in_arena && j < i; j++) {
      if (off[j] >= 0 && last_step(m, j) >= i && off[i] < off[j] + (int64_t)output_bytes(m, j) &&
          off[j] < off[i] + (int64_t)output_bytes(m, i)) {
        return pf_fail(err, errlen, PF_ERR_MISMATCH,
                       "malformed registry: memory plan overlaps the outputs of kernels '%s' and "
                       "'%s', which are live at the same time",
                       reg->kernels[j].layer, reg->kernels[i].layer);
      }
    }
  }
  return PF_OK;
}

pf_status pf_model_open(pf_bundle* b, const pf_model_options* opts, pf_model** out, char* err,
                        size_t errlen) {
  const pf_registry* reg;
  pf_malloc_fn malloc_fn = default_malloc;
  pf_free_fn free_fn = default_free;
  pf_model probe, *m;
  int i, j, files = 0;
  pf_status s;
  if (!out) return pf_fail(err, errlen, PF_ERR_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!b) return pf_fail(err, errlen, PF_ERR_ARGUMENT, "bundle is NULL");
  if (opts && !opts->malloc_fn != !opts->free_fn) {
    return pf_fail(err, errlen, PF_ERR_ARGUMENT,
                   "pf_model_options: set both malloc_fn and free_fn, or neither");
  }
  if (opts && opts->malloc_fn) malloc_fn = opts->malloc_fn, free_fn = opts->free_fn;
  reg = b->reg;
  if ((s = check_names(reg, err, errlen)) != PF_OK) return s;
  for (i = 0; i < reg->num_kernels; i++) {
    for (j = 0; j < reg->kernels[i].num_buffers; j++) {
      const pf_buffer_desc* x = &reg->kernels[i].buffers[j];
      files += (x->role == PF_ROLE_WEIGHTS || x->role == PF_ROLE_BIAS) && x->source && !x->data;
    }
  }
  memset(&probe, 0, sizeof probe);
  probe.malloc_fn = malloc_fn;
  probe.free_fn = free_fn;
  probe.uc = opts ? opts->user_context : NULL;
  if (!(m = (pf_model*)alloc_zeroed(&probe, 1, sizeof *m))) {
    return pf_fail(err, errlen, PF_ERR_NO_MEMORY, "out of memory");
  }
  *m = probe;
  m->reg = reg;
  m->map_files = !(opts && opts->read_weights);
  m->num_tensors = reg->num_inputs + reg->num_kernels;
  m->steps = (pf_step*)alloc_zeroed(m, (size_t)reg->num_kernels, sizeof *m->steps);
  m->last_reader = (int*)alloc_zeroed(m, (size_t)m->num_tensors, sizeof(int));
  m->output_index = (int*)alloc_zeroed(m, (size_t)m->num_tensors, sizeof(int));
  m->outputs = (pf_buffer_desc*)alloc_zeroed(m, (size_t)reg->num_outputs, sizeof *m->outputs);
  m->output_tensor = (int*)alloc_zeroed(m, (size_t)reg->num_outputs, sizeof(int));
  if (files) m->owned = (pf_owned*)alloc_zeroed(m, (size_t)files, sizeof *m->owned);
  if (!m->steps || !m->last_reader || !m->output_index || !m->outputs || !m->output_tensor ||
      (files && !m->owned)) {
    pf_model_close(m);
    return pf_fail(err, errlen, PF_ERR_NO_MEMORY, "out of memory");
  }
  for (i = 0; i < m->num_tensors; i++) m->last_reader[i] = m->output_index[i] = -1;
  for (i = 0, s = PF_OK; s == PF_OK && i < reg->num_kernels; i++) {
    s = plan_kernel(m, b, i, err, errlen);
  }
  if (s == PF_OK) s = plan_outputs(m, err, errlen);
  if (s == PF_OK && reg->format_version >= 3) s = check_memory_plan(m, err, errlen);
  if (s != PF_OK) {
    pf_model_close(m);
    return s;
  }
  m->reuse_arena = reg->format_version >= 3 && !(opts && opts->per_run_allocation);
  *out = m;
  return PF_OK;
}

int pf_model_num_inputs(const pf_model* m) {
  return m ? m->reg->num_inputs : 0;
}
const pf_buffer_desc* pf_model_input(const pf_model* m, int i) {
  return m && i >= 0 && i < m->reg->num_inputs ? &m->reg->inputs[i] : NULL;
}
int pf_model_num_outputs(const pf_model* m) {
  return m ? m->reg->num_outputs : 0;
}
const pf_buffer_desc* pf_model_output(const pf_model* m, int i) {
  return m && i >= 0 && i < m->reg->num_outputs ? &m->outputs[i] : NULL;
}
const char* pf_model_output_name(const pf_model* m, int i) {
  const pf_buffer_desc* b = pf_model_output(m, i);
  return b ? b->name : NULL;
}

/* ---- runs ---- */

typedef struct pf_slot {
  void* data;
  size_t bytes;
} pf_slot;

/* Where tensor t of a run is (the run's context ctx). */
typedef pf_slot (*pf_where_fn)(const void* ctx, int t);

/* An intermediate: a kernel's output that is no model output. */
static int intermediate(const pf_model* m, int t) {
  return t >= m->reg->num_inputs && m->output_index[t] < 0;
}

/* Runs kernel i on the tensors where `where` puts them. */
static pf_status run_step(const pf_model* m, int i, pf_where_fn where, const void* ctx, char* err,
                          size_t errlen) {
  const pf_kernel_desc* k = &m->reg->kernels[i];
  const pf_step* st = &m->steps[i];
  pf_tensor ts[PF_MAX_BUFFERS];
  char msg[PF_ERRLEN];
  int j;
  pf_status s;
  for (j = 0; j < k->num_buffers; j++) {
    const pf_buffer_desc* b = &k->buffers[j];
    pf_slot at;
    if (j == st->out || st->feed[j] >= 0) {
      at = where(ctx, j == st->out ? m->reg->num_inputs + i : st->feed[j]);
      ts[j] = pf_tensor_of(b, at.data, at.bytes);
    } else {
      ts[j] = pf_tensor_of(b, (void*)st->data[j], pf_buffer_bytes(b));
    }
  }
  msg[0] = '\0';
  if ((s = pf_run(k, ts, k->num_buffers, msg, sizeof msg)) != PF_OK) {
    return pf_fail(err, errlen, s, "model '%s': %s", m->reg->model, msg);
  }
  return PF_OK;
}

/* The caller's tensors bound to the model's inputs and outputs and checked, with no memory. */
static pf_status check_io(const pf_model* m, const pf_tensor* inputs, int n_in,
                          const pf_tensor* outputs, int n_out, char* err, size_t errlen) {
  const pf_registry* reg = m->reg;
  int i;
  pf_status s = pf_bind_check("model", reg->model, "input", reg->inputs, reg->num_inputs, inputs,
                              n_in, err, errlen);
  if (s == PF_OK) {
    s = pf_bind_check("model", reg->model, "output", m->outputs, reg->num_outputs, outputs, n_out,
                      err, errlen);
  }
  for (i = 0; s == PF_OK && i < reg->num_inputs; i++) {
    s = pf_check_tensor("model", reg->model, "input", &reg->inputs[i],
                        pf_bound_tensor(reg->inputs, reg->num_inputs, inputs, n_in, i), err,
                        errlen);
  }
  for (i = 0; s == PF_OK && i < reg->num_outputs; i++) {
    s = pf_check_tensor("model", reg->model, "output", &m->outputs[i],
                        pf_bound_tensor(m->outputs, reg->num_outputs, outputs, n_out, i), err,
                        errlen);
  }
  for (i = 0; s == PF_OK && i < reg->num_outputs; i++) { /* an output aliasing another tensor */
    const pf_tensor* o = pf_bound_tensor(m->outputs, reg->num_outputs, outputs, n_out, i);
    char a[96], b[96];
    int j;
    snprintf(a, sizeof a, "output '%s'", m->outputs[i].name);
    for (j = 0; s == PF_OK && j < reg->num_inputs + i; j++) {
      const int in = j < reg->num_inputs;
      const pf_buffer_desc* d = in ? &reg->inputs[j] : &m->outputs[j - reg->num_inputs];
      const pf_tensor* t =
          in ? pf_bound_tensor(reg->inputs, reg->num_inputs, inputs, n_in, j)
             : pf_bound_tensor(m->outputs, reg->num_outputs, outputs, n_out, j - reg->num_inputs);
      snprintf(b, sizeof b, "%s '%s'", in ? "input" : "output", d->name);
      s = pf_check_apart("model", reg->model, a, o->data, pf_buffer_bytes(&m->outputs[i]), b,
                         t->data, pf_buffer_bytes(d), err, errlen);
    }
  }
  return s;
}

/* No caller tensor inside the arena a static run lays its intermediates out in. */
static pf_status check_outside_arena(const pf_model* m, const void* arena, size_t arena_bytes,
                                     const pf_tensor* inputs, int n_in, const pf_tensor* outputs,
                                     int n_out, char* err, size_t errlen) {
  const pf_registry* reg = m->reg;
  int i;
  pf_status s = PF_OK;
  for (i = 0; s == PF_OK && i < reg->num_inputs + reg->num_outputs; i++) {
    const int in = i < reg->num_inputs;
    const pf_buffer_desc* d = in ? &reg->inputs[i] : &m->outputs[i - reg->num_inputs];
    const pf_tensor* t =
        in ? pf_bound_tensor(reg->inputs, reg->num_inputs, inputs, n_in, i)
           : pf_bound_tensor(m->outputs, reg->num_outputs, outputs, n_out, i - reg->num_inputs);
    char a[96];
    snprintf(a, sizeof a, "%s '%s'", in ? "input" : "output", d->name);
    s = pf_check_apart("model", reg->model, a, t->data, pf_buffer_bytes(d), "the arena", arena,
                       arena_bytes, err, errlen);
  }
  return s;
}

static pf_slot slot_at(const void* slots, int t) {
  return ((const pf_slot*)slots)[t];
}

/* pf_model_run's step: the output allocated, the kernel run, the intermediates read for the last
 * time (or never) freed. */
static pf_status run_kernel(const pf_model* m, pf_slot* slots, int i, char* err, size_t errlen) {
  const pf_step* st = &m->steps[i];
  int j, t = m->reg->num_inputs + i;
  pf_status s;
  if (!slots[t].data) {
    slots[t].bytes = output_bytes(m, i);
    if (!(slots[t].data = alloc(m, slots[t].bytes))) {
      return pf_fail(err, errlen, PF_ERR_NO_MEMORY,
                     "model '%s': out of memory for the output of kernel '%s' (%lu bytes)",
                     m->reg->model, m->reg->kernels[i].layer, (unsigned long)slots[t].bytes);
    }
  }
  if ((s = run_step(m, i, slot_at, slots, err, errlen)) != PF_OK) return s;
  for (j = 0; j < m->reg->kernels[i].num_buffers; j++) { /* intermediates this kernel read last */
    int u = st->feed[j];
    if (u >= 0 && intermediate(m, u) && m->last_reader[u] == i && slots[u].data) {
      release(m, slots[u].data);
      slots[u].data = NULL;
    }
  }
  if (intermediate(m, t) && m->last_reader[t] < 0) { /* read by nothing */
    release(m, slots[t].data);
    slots[t].data = NULL;
  }
  return PF_OK;
}

static pf_slot tensor_slot(const pf_tensor* t) {
  pf_slot s;
  s.data = t->data;
  s.bytes = t->bytes;
  return s;
}

size_t pf_model_arena_bytes(const pf_model* m) {
  return m && m->reg->format_version >= 3 ? (size_t)m->reg->memory_plan.arena_bytes : 0;
}

/* A run in an arena the memory plan lays out: the caller's tensors, the arena. */
typedef struct pf_static_run {
  const pf_model* m;
  unsigned char* arena;
  const pf_tensor *inputs, *outputs;
  int n_in, n_out;
} pf_static_run;

static pf_slot static_slot(const void* ctx, int t) {
  const pf_static_run* r = (const pf_static_run*)ctx;
  const pf_model* m = r->m;
  const pf_registry* reg = m->reg;
  pf_slot s;
  if (t < reg->num_inputs) {
    return tensor_slot(pf_bound_tensor(reg->inputs, reg->num_inputs, r->inputs, r->n_in, t));
  }
  if (m->output_index[t] >= 0) {
    return tensor_slot(
        pf_bound_tensor(m->outputs, reg->num_outputs, r->outputs, r->n_out, m->output_index[t]));
  }
  s.data = r->arena + reg->memory_plan.offsets[t - reg->num_inputs];
  s.bytes = output_bytes(m, t - reg->num_inputs);
  return s;
}

/* Runs the kernels with every intermediate at its planned offset in arena. */
static pf_status run_planned(const pf_model* m, unsigned char* arena, const pf_tensor* inputs,
                             int n_in, const pf_tensor* outputs, int n_out, char* err,
                             size_t errlen) {
  pf_static_run r;
  int i;
  pf_status s = PF_OK;
  r.m = m;
  r.arena = arena;
  r.inputs = inputs;
  r.outputs = outputs;
  r.n_in = n_in;
  r.n_out = n_out;
  for (i = 0; s == PF_OK && i < m->reg->num_kernels; i++) {
    s = run_step(m, i, static_slot, &r, err, errlen);
  }
  return s;
}

/* pf_model_run in the model's own arena (which the caller has taken), allocated by the first such
 * run and kept until pf_model_close. */
static pf_status run_in_own_arena(pf_model* m, const pf_tensor* inputs, int n_in,
                                  const pf_tensor* outputs, int n_out, char* err, size_t errlen) {
  const size_t need = pf_model_arena_bytes(m);
  if (need && !m->arena) {
    if (need > (size_t)-1 - PF_ARENA_ALIGNMENT ||
        !(m->arena_block = alloc(m, need + PF_ARENA_ALIGNMENT - 1))) {
      return pf_fail(err, errlen, PF_ERR_NO_MEMORY,
                     "model '%s': out of memory for the model's arena (%lu bytes, "
                     "pf_model_arena_bytes; pf_model_options.per_run_allocation allocates per "
                     "intermediate instead)",
                     m->reg->model, (unsigned long)need);
    }
    m->arena = align_up(m->arena_block);
  }
  return run_planned(m, m->arena, inputs, n_in, outputs, n_out, err, errlen);
}

void (*pf_model_run_end_hook)(void);

static pf_status run_model(const pf_model* m, const pf_tensor* inputs, int n_in,
                           const pf_tensor* outputs, int n_out, char* err, size_t errlen) {
  const pf_registry* reg;
  pf_slot* slots;
  int i;
  pf_status s;
  if (!m || n_in < 0 || n_out < 0 || (n_in && !inputs) || (n_out && !outputs)) {
    return pf_fail(err, errlen, PF_ERR_ARGUMENT, "NULL model or tensors, or bad count");
  }
  reg = m->reg;
  if ((s = check_io(m, inputs, n_in, outputs, n_out, err, errlen)) != PF_OK) return s;
  if (m->reuse_arena && take_arena((pf_model*)m)) { /* m was allocated writable, by open */
    s = run_in_own_arena((pf_model*)m, inputs, n_in, outputs, n_out, err, errlen);
    give_arena_back((pf_model*)m);
    return s;
  }
  if (!(slots = (pf_slot*)alloc_zeroed(m, (size_t)m->num_tensors, sizeof *slots))) {
    return pf_fail(err, errlen, PF_ERR_NO_MEMORY, "model '%s': out of memory (%lu bytes)",
                   reg->model, (unsigned long)(sizeof *slots * (size_t)m->num_tensors));
  }
  for (i = 0; i < reg->num_inputs; i++) {
    slots[i] = tensor_slot(pf_bound_tensor(reg->inputs, reg->num_inputs, inputs, n_in, i));
  }
  for (i = 0; i < reg->num_outputs; i++) {
    slots[m->output_tensor[i]] =
        tensor_slot(pf_bound_tensor(m->outputs, reg->num_outputs, outputs, n_out, i));
  }
  for (i = 0; s == PF_OK && i < reg->num_kernels; i++) s = run_kernel(m, slots, i, err, errlen);
  for (i = reg->num_inputs; i < m->num_tensors; i++) { /* after an error */
    if (intermediate(m, i)) release(m, slots[i].data);
  }
  release(m, slots);
  return s;
}

pf_status pf_model_run(const pf_model* m, const pf_tensor* inputs, int n_in,
                       const pf_tensor* outputs, int n_out, char* err, size_t errlen) {
  const pf_status s = run_model(m, inputs, n_in, outputs, n_out, err, errlen);
  if (pf_model_run_end_hook) pf_model_run_end_hook();
  return s;
}

static pf_status run_static(const pf_model* m, void* arena, size_t arena_bytes,
                            const pf_tensor* inputs, int n_in, const pf_tensor* outputs, int n_out,
                            char* err, size_t errlen) {
  size_t need;
  pf_status s;
  if (!m || n_in < 0 || n_out < 0 || (n_in && !inputs) || (n_out && !outputs)) {
    return pf_fail(err, errlen, PF_ERR_ARGUMENT, "NULL model or tensors, or bad count");
  }
  if (m->reg->format_version < 3) {
    return pf_fail(err, errlen, PF_ERR_UNSUPPORTED,
                   "model '%s': the bundle (format %d) has no memory plan: recompile it with this "
                   "padfold (format %d), or run it with pf_model_run",
                   m->reg->model, m->reg->format_version, PF_FORMAT_VERSION);
  }
  if (m->reg->memory_plan.heap_scratch_kernel) {
    return pf_fail(err, errlen, PF_ERR_UNSUPPORTED,
                   "model '%s': kernel '%s' keeps Halide scratch on the heap, so a static run "
                   "would allocate (padfold compile's halide scratch line): run it with "
                   "pf_model_run, or compile with --fuse none",
                   m->reg->model, m->reg->memory_plan.heap_scratch_kernel);
  }
  need = pf_model_arena_bytes(m);
  if (need && !arena)
    return pf_fail(err, errlen, PF_ERR_NULL_DATA, "model '%s': arena is NULL", m->reg->model);
  if ((uintptr_t)arena % PF_ARENA_ALIGNMENT) {
    return pf_fail(err, errlen, PF_ERR_ALIGNMENT,
                   "model '%s': arena %p is not aligned to %d bytes (PF_ARENA_ALIGNMENT)",
                   m->reg->model, arena, PF_ARENA_ALIGNMENT);
  }
  if (arena_bytes < need) {
    return pf_fail(err, errlen, PF_ERR_SIZE,
                   "model '%s': arena of %lu bytes, the memory plan needs %lu "
                   "(PADFOLD_<MODEL>_ARENA_BYTES, pf_model_arena_bytes)",
                   m->reg->model, (unsigned long)arena_bytes, (unsigned long)need);
  }
  if ((s = check_io(m, inputs, n_in, outputs, n_out, err, errlen)) != PF_OK) return s;
  if ((s = check_outside_arena(m, arena, need, inputs, n_in, outputs, n_out, err, errlen)) != PF_OK)
    return s;
  return run_planned(m, (unsigned char*)arena, inputs, n_in, outputs, n_out, err, errlen);
}

pf_status pf_model_run_static(const pf_model* m, void* arena, size_t arena_bytes,
                              const pf_tensor* inputs, int n_in, const pf_tensor* outputs,
                              int n_out, char* err, size_t errlen) {
  const pf_status s = run_static(m, arena, arena_bytes, inputs, n_in, outputs, n_out, err, errlen);
  if (pf_model_run_end_hook) pf_model_run_end_hook();
  return s;
}
