/* padfold embedded example, whole model: runs the model graph of a bundle compiled with
 * `padfold compile --embed-weights` through the STATIC registry linked into this program
 * (pf_registry_open + pf_model_open + pf_model_run_static). The weights are in the program's
 * read-only data; the intermediates live in model_arena, a static array of the size the bundle's
 * header states at compile time (PADFOLD_<MODEL>_ARENA_BYTES), and the run allocates nothing. The
 * model is then run once more with pf_model_run, every allocation of which (and of pf_model_open,
 * the Halide runtime and this program's input and output buffers) comes from a second static
 * arena, a bump allocator, and both runs' outputs must be equal bit for bit. Parallel loops run
 * serially on the calling thread: no filesystem, no malloc from the model, no threads. Model
 * inputs are filled deterministically (lcg.h: model input "x" from the seed of "x/input").
 *
 *   usage: model_app [OUTDIR]
 *     OUTDIR  also write each model output as OUTDIR/<layer>.bin (raw float32, native byte order,
 *             in the layout the registry lists, e.g. NHWC), after the model is closed
 * Prints a checksum line per output (of the static run) and the memory used:
 *   memory static arena: <bytes> bytes (PADFOLD_<MODEL>_ARENA_BYTES)
 *   memory static run: <n> model allocs, <n> halide allocs   (during pf_model_run_static)
 *   static run equals pf_model_run: yes
 *   memory model: <allocs> allocs, <frees> frees   (pf_model_options hooks, open and pf_model_run)
 *   memory halide: <allocs> allocs, <frees> frees  (pf_bundle_set_allocator hooks)
 *   memory peak: <bytes> of <arena bytes> bytes
 * Exit status: 0 on success, 1 if padfold fails, 2 on bad usage, I/O errors or leaked blocks. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "example_io.h"
#include "lcg.h"
#include "padfold_runtime.h"

/* The registry that the bundle's registry.c defines: padfold_registry_<model>. The CMake project
 * sets PF_REGISTRY from PADFOLD_MODEL. */
#ifndef PF_REGISTRY
#define PF_REGISTRY padfold_registry_embedded_graph
#endif
extern const pf_registry PF_REGISTRY;

/* The bundle's umbrella header padfold_<model>.h, which defines PADFOLD_<MODEL>_ARENA_BYTES: the
 * CMake project sets PF_MODEL_HEADER and PF_MODEL_ARENA_BYTES from PADFOLD_MODEL. */
#ifndef PF_MODEL_HEADER
#define PF_MODEL_HEADER "padfold_embedded_graph.h"
#define PF_MODEL_ARENA_BYTES PADFOLD_EMBEDDED_GRAPH_ARENA_BYTES
#endif
#include PF_MODEL_HEADER

/* ---- the static run's arena: exactly the planned size, aligned to PF_ARENA_ALIGNMENT (C99 has no
 * _Alignas: the array has room to align its start) ---- */
static unsigned char model_arena_space[PF_MODEL_ARENA_BYTES + PF_ARENA_ALIGNMENT];

static void* model_arena(void) {
  const uintptr_t p = (uintptr_t)model_arena_space;
  return (void*)((p + PF_ARENA_ALIGNMENT - 1) & ~(uintptr_t)(PF_ARENA_ALIGNMENT - 1));
}

/* ---- the other arena: a bump allocator over static memory ----
 * Blocks are 128-byte aligned (Halide's halide_malloc alignment, more than any tensor needs). A
 * free only counts; the arena starts over when no block is live. A firmware sizes ARENA_BYTES from
 * the "memory peak" line. Single-threaded: parallel loops run on this thread (serial_par_for). */
#ifndef ARENA_BYTES
#define ARENA_BYTES (256 * 1024)
#endif
#define ARENA_ALIGN 128

static unsigned char arena[ARENA_BYTES + ARENA_ALIGN];
static size_t arena_top, arena_peak;
static unsigned long arena_live;

typedef struct counter {
  unsigned long allocs, frees;
} counter;
static counter model_mem, halide_mem, app_mem;

static void* arena_alloc(counter* c, size_t n) {
  const uintptr_t base = ((uintptr_t)arena + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1);
  const size_t need = n ? (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1) : ARENA_ALIGN;
  void* p;
  if (n > ARENA_BYTES || need > ARENA_BYTES - arena_top) return NULL;
  p = (void*)(base + arena_top);
  arena_top += need;
  if (arena_top > arena_peak) arena_peak = arena_top;
  c->allocs++;
  arena_live++;
  return p;
}

static void arena_free(counter* c, void* p) {
  if (!p) return;
  c->frees++;
  if (--arena_live == 0) arena_top = 0;
}

/* pf_model_options hooks: user_context is the counter. */
static void* model_malloc(void* user_context, size_t n) {
  return arena_alloc((counter*)user_context, n);
}
static void model_free(void* user_context, void* p) {
  arena_free((counter*)user_context, p);
}

/* Halide runtime hooks (halide_malloc / halide_free): user_context is Halide's, not ours. */
static void* halide_malloc_hook(void* user_context, size_t n) {
  (void)user_context;
  return arena_alloc(&halide_mem, n);
}
static void halide_free_hook(void* user_context, void* p) {
  (void)user_context;
  arena_free(&halide_mem, p);
}

/* Parallel loops of the kernels, one task after the other on the calling thread: no thread pool
 * (which would also ask the OS for the number of CPUs). */
static int serial_par_for(void* user_context, pf_task_fn task, int min, int size,
                          uint8_t* closure) {
  int i, rc;
  for (i = min; i < min + size; i++) {
    if ((rc = task(user_context, i, closure)) != 0) return rc;
  }
  return 0;
}

#define MAX_TENSORS 16

int main(int argc, char** argv) {
  char err[PF_ERRLEN], host[512], shape[64];
  const char* outdir = argc > 1 ? argv[1] : NULL;
  const char* out_names[MAX_TENSORS];
  pf_bundle* bundle = NULL;
  pf_model* model = NULL;
  pf_model_options options;
  pf_tensor in[MAX_TENSORS], out[MAX_TENSORS], again[MAX_TENSORS];
  size_t out_bytes[MAX_TENSORS];
  unsigned long model_allocs, halide_allocs;
  int i, n_in = 0, n_out = 0, rc = 0;
  if (argc > 2 || (outdir && outdir[0] == '-')) {
    fprintf(stderr, "usage: %s [OUTDIR]\n", argv[0]);
    return 2;
  }
  pf_host_describe(host, sizeof host);
  printf("cpu: %s\n", host);

  /* The registry's format and contents, and that this CPU has its target's features. */
  if (pf_registry_open(&PF_REGISTRY, NULL, &bundle, err, sizeof err) != PF_OK) {
    fprintf(stderr, "padfold: %s\n", err);
    return 1;
  }
  /* Before any kernel runs: the Halide runtime's allocations and parallel loops. */
  if (pf_bundle_set_allocator(bundle, halide_malloc_hook, halide_free_hook, NULL, NULL, err,
                              sizeof err) != PF_OK ||
      pf_bundle_set_do_par_for(bundle, serial_par_for, NULL, err, sizeof err) != PF_OK) {
    fprintf(stderr, "padfold: %s\n", err);
    pf_bundle_close(bundle);
    return 1;
  }
  memset(&options, 0, sizeof options);
  options.malloc_fn = model_malloc;
  options.free_fn = model_free;
  options.user_context = &model_mem;
  /* Checks the graph and plans it; the weights are the registry's embedded data, used in place. */
  if (pf_model_open(bundle, &options, &model, err, sizeof err) != PF_OK) {
    fprintf(stderr, "padfold: %s\n", err);
    pf_bundle_close(bundle);
    return 1;
  }
  printf("model %s, target %s, %d kernels, %d inputs, %d outputs\n", pf_bundle_model(bundle),
         pf_bundle_target(bundle), pf_bundle_num_kernels(bundle), pf_model_num_inputs(model),
         pf_model_num_outputs(model));
  if (pf_model_num_inputs(model) > MAX_TENSORS || pf_model_num_outputs(model) > MAX_TENSORS) {
    fprintf(stderr, "more than %d model inputs or outputs\n", MAX_TENSORS);
    rc = 2;
    goto done;
  }

  for (n_in = 0; n_in < pf_model_num_inputs(model); n_in++) {
    const pf_buffer_desc* b = pf_model_input(model, n_in);
    const size_t bytes = pf_buffer_bytes(b);
    float* x = (float*)arena_alloc(&app_mem, bytes);
    if (!x) {
      fprintf(stderr, "input '%s': arena full (%lu bytes)\n", b->name, (unsigned long)bytes);
      rc = 2;
      goto done;
    }
    pf_lcg_fill(x, bytes / sizeof(float), pf_lcg_seed(b->name, "input"));
    in[n_in] = pf_tensor_of(b, x, bytes); /* bound by the model input's name */
    format_shape(b, shape, sizeof shape);
    printf("  input  %-10s %s\n", b->name, shape);
  }
  for (n_out = 0; n_out < pf_model_num_outputs(model); n_out++) {
    const pf_buffer_desc* b = pf_model_output(model, n_out);
    float* y = (float*)arena_alloc(&app_mem, out_bytes[n_out] = pf_buffer_bytes(b));
    float* y2 = (float*)arena_alloc(&app_mem, out_bytes[n_out]);
    if (!y || !y2) {
      fprintf(stderr, "output '%s': arena full\n", b->name);
      rc = 2;
      goto done;
    }
    memset(y, 0, out_bytes[n_out]);
    memset(y2, 0xff, out_bytes[n_out]);
    out[n_out] = pf_tensor_of(b, y, out_bytes[n_out]); /* bound by the output layer's name */
    again[n_out] = pf_tensor_of(b, y2, out_bytes[n_out]);
    out_names[n_out] = b->name;
  }

  /* The static run: the intermediates in model_arena, nothing allocated. */
  printf("memory static arena: %lu bytes (PADFOLD_<MODEL>_ARENA_BYTES)\n",
         (unsigned long)PF_MODEL_ARENA_BYTES);
  if (pf_model_arena_bytes(model) != PF_MODEL_ARENA_BYTES) {
    fprintf(stderr, "the registry's plan needs %lu bytes, the header says %lu\n",
            (unsigned long)pf_model_arena_bytes(model), (unsigned long)PF_MODEL_ARENA_BYTES);
    rc = 1;
    goto done;
  }
  model_allocs = model_mem.allocs;
  halide_allocs = halide_mem.allocs;
  if (pf_model_run_static(model, model_arena(), PF_MODEL_ARENA_BYTES, in, n_in, out, n_out, err,
                          sizeof err) != PF_OK) {
    fprintf(stderr, "padfold: %s\n", err);
    rc = 1;
    goto done;
  }
  printf("memory static run: %lu model allocs, %lu halide allocs\n",
         model_mem.allocs - model_allocs, halide_mem.allocs - halide_allocs);
  /* The same model in its own arena, which this first pf_model_run allocates through the hooks. */
  if (pf_model_run(model, in, n_in, again, n_out, err, sizeof err) != PF_OK) {
    fprintf(stderr, "padfold: %s\n", err);
    rc = 1;
    goto done;
  }
  for (i = 0; i < n_out; i++) {
    if (memcmp(out[i].data, again[i].data, out_bytes[i]) != 0) {
      fprintf(stderr, "output '%s': pf_model_run_static and pf_model_run differ\n", out_names[i]);
      rc = 1;
      goto done;
    }
  }
  printf("static run equals pf_model_run: yes\n");
  for (i = 0; i < n_out; i++) {
    const float* y = (const float*)out[i].data;
    const size_t n = out_bytes[i] / sizeof(float);
    double sum = 0, amax = 0;
    size_t e;
    for (e = 0; e < n; e++) {
      sum += y[e];
      if (fabs(y[e]) > amax) amax = fabs(y[e]);
    }
    format_shape(pf_model_output(model, i), shape, sizeof shape);
    printf("  output %-10s %-18s sum %+11.5f  max|y| %.5f\n", out_names[i], shape, sum, amax);
  }

done:
  pf_model_close(model);
  pf_bundle_close(bundle);
  /* The output files are written after padfold is done: nothing above touched the filesystem. */
  for (i = 0; i < n_out && rc == 0 && outdir; i++) {
    rc = write_output(outdir, out_names[i], out[i].data, out_bytes[i]);
  }
  for (i = 0; i < n_in; i++) arena_free(&app_mem, in[i].data);
  for (i = 0; i < n_out; i++) arena_free(&app_mem, out[i].data);
  for (i = 0; i < n_out; i++) arena_free(&app_mem, again[i].data);
  printf("memory model: %lu allocs, %lu frees\n", model_mem.allocs, model_mem.frees);
  printf("memory halide: %lu allocs, %lu frees\n", halide_mem.allocs, halide_mem.frees);
  printf("memory peak: %lu of %lu bytes\n", (unsigned long)arena_peak, (unsigned long)ARENA_BYTES);
  if (rc == 0 && (model_mem.allocs != model_mem.frees || halide_mem.allocs != halide_mem.frees ||
                  app_mem.allocs != app_mem.frees)) {
    fprintf(stderr, "leaked arena blocks\n");
    rc = 2;
  }
  if (rc == 0) printf("ok\n");
  return rc;
}
