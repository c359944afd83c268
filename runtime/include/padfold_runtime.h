/* padfold runtime: opens the kernels of a padfold bundle and runs them on caller memory.
 *
 *   pf_bundle_open()    a bundle directory written by `padfold compile` (manifest.json + one shared
 *                       library per target; picks the best target this CPU runs). Needs the full
 *                       library (padfold_runtime: cJSON + libdl).
 *   pf_registry_open()  a registry compiled into the application (embedded builds; the core library
 *                       padfold_runtime_core needs neither a filesystem nor libdl nor cJSON).
 *   pf_model_open()     the whole model of an open bundle: pf_model_run runs every kernel in order
 *                       on the model's inputs, intermediates allocated through hooks;
 *                       pf_model_run_static keeps them in one caller's arena of a size known at
 *                       compile time, allocating nothing.
 *
 * Errors: every fallible call returns a pf_status and writes a NUL-terminated message into the
 * caller's buffer `err` of `errlen` bytes (truncated if needed; err may be NULL). The runtime keeps
 * no mutable global state: any number of threads may call pf_run on the same kernel at once. Kernel
 * and buffer descriptions (padfold_registry.h) stay valid until pf_bundle_close. */
#ifndef PADFOLD_RUNTIME_H
#define PADFOLD_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "padfold_registry.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PF_ERRLEN 1024    /* a message buffer size that fits every message of this runtime */
#define PF_MAX_BUFFERS 64 /* most buffers per kernel (a concat of 63 inputs) */

typedef enum pf_status {
  PF_OK = 0,
  PF_ERR_ARGUMENT,    /* invalid argument (NULL handle, negative count, ...) */
  PF_ERR_NO_MEMORY,   /* malloc failed */
  PF_ERR_IO,          /* bundle directory or manifest.json missing or unreadable */
  PF_ERR_MANIFEST,    /* manifest.json is not valid JSON, or a field is missing or mistyped */
  PF_ERR_VERSION,     /* unsupported "format" or "format_version" (manifest or registry) */
  PF_ERR_NO_TARGET,   /* no target of the bundle runs on this machine (arch, OS, CPU features) */
  PF_ERR_LOAD,        /* the target's shared library or its entry symbol cannot be loaded */
  PF_ERR_MISMATCH,    /* registry and manifest differ, or the registry is malformed */
  PF_ERR_NOT_FOUND,   /* no kernel for that layer name */
  PF_ERR_UNSUPPORTED, /* the registry lacks the Halide hook needed */
  /* pf_run / pf_check: the tensors do not match the kernel's buffers */
  PF_ERR_TENSOR_COUNT, /* number of tensors differs from the kernel's buffer count */
  PF_ERR_TENSOR_NAME,  /* a tensor names no buffer of the kernel, or a buffer is given twice */
  PF_ERR_DTYPE,        /* element type differs */
  PF_ERR_RANK,         /* rank differs */
  PF_ERR_SHAPE,        /* a dimension's extent differs */
  PF_ERR_STRIDES,      /* a stride differs (kernels are specialized to the manifest's layout) */
  PF_ERR_NULL_DATA,    /* data pointer is NULL */
  PF_ERR_ALIGNMENT,    /* data pointer is not aligned to the element size */
  PF_ERR_SIZE,         /* the caller's allocation (bytes) is smaller than the buffer's extent */
  PF_ERR_KERNEL,       /* the kernel returned a nonzero Halide error code */
  /* pf_model_open: the bundle's graph cannot run whole (an input produced by an op padfold does not
   * generate, weights with neither a file nor embedded data, a dangling source, ...) */
  PF_ERR_GRAPH,
  /* pf_run / pf_model_run / pf_model_run_static: a tensor written (an output) shares memory with
   * another tensor of the call or with the arena (kernels read their inputs while they write) */
  PF_ERR_OVERLAP
} pf_status;

/* "PF_ERR_SHAPE", ... ("PF_UNKNOWN_STATUS" for other values). */
const char* pf_status_name(pf_status s);

/* "float32", "float16", "int8", "uint8", "int32"; "input", "weights", "bias", "output"; NULL if
 * out of range. */
const char* pf_dtype_name(pf_dtype t);
const char* pf_role_name(pf_role r);
size_t pf_dtype_size(pf_dtype t); /* bytes per element, 0 if unknown */

/* Bytes a buffer spans: (1 + sum_i (shape[i] - 1) * strides[i]) * element size. */
size_t pf_buffer_bytes(const pf_buffer_desc* b);

typedef struct pf_bundle pf_bundle;

typedef struct pf_open_options {
  /* CPU flags to assume instead of detecting them, separated by commas or spaces, named as
   * pf_host_describe names them ("sse41,ssse3,sse4_2,popcnt,avx,avx2,fma,f16c,bmi1,bmi2,abm,
   * movbe,avx512f,..." as /proc/cpuinfo does); NULL: detect. For tests,
   * and to check a bundle against another machine of the same architecture. */
  const char* cpu_flags;
  /* Nonzero: leave the Halide runtime's error handler alone. By default opening installs one that
   * copies Halide's error messages into the err buffer of the pf_run that raised them (messages
   * raised outside pf_run or on Halide worker threads go to stderr). */
  int keep_error_handler;
} pf_open_options;

/* Opens a bundle directory: reads manifest.json, picks the first target (best first) whose arch and
 * OS match, whose features this CPU has and, for a GPU target (device_api cuda or opencl), whose
 * device is usable (libcuda.so.1 / libOpenCL.so.1 loaded at run time and asked for a device),
 * dlopens its shared library and checks its registry against the manifest. On a GPU target pf_run
 * copies host memory to the device and back and frees the device memory after each run.
 * opts may be NULL. On error *out is NULL. */
pf_status pf_bundle_open(const char* dir, const pf_open_options* opts, pf_bundle** out, char* err,
                         size_t errlen);

/* Uses a registry linked into the application. Checks its format version, its contents and that
 * this CPU has its target's features. The registry must outlive the handle. opts may be NULL. */
pf_status pf_registry_open(const pf_registry* reg, const pf_open_options* opts, pf_bundle** out,
                           char* err, size_t errlen);

/* Releases the handle (and dlcloses the bundle's library). NULL is ignored. On a GPU target it also
 * releases the device state of the library's Halide runtime (context, loaded kernels): close it
 * when no other handle of the same bundle is running kernels. */
void pf_bundle_close(pf_bundle* b);

const char* pf_bundle_model(const pf_bundle* b);
const char* pf_bundle_target(const pf_bundle* b); /* the chosen Halide target string */
const char* pf_bundle_dir(const pf_bundle* b);    /* NULL for pf_registry_open */
const pf_registry* pf_bundle_registry(const pf_bundle* b);

/* Kernels in registry order; pf_bundle_kernel returns NULL when i is out of range. */
int pf_bundle_num_kernels(const pf_bundle* b);
const pf_kernel_desc* pf_bundle_kernel(const pf_bundle* b, int i);
pf_status pf_bundle_find(const pf_bundle* b, const char* layer, const pf_kernel_desc** out,
                         char* err, size_t errlen);

/* The kernel that puts the weights of kernel k (of bundle b) into the form k reads them in, from
 * the weights as the spec lays them out: Winograd's transformed weights, an int8 dot-product table,
 * blocks of output channels (docs/prepared-weights.md). A bundle has one for each layer whose
 * weights the caller passes and whose kernel computes with them prepared, when compiled with
 * `padfold compile --prepare-entry`. Run it once with pf_run (buffers "weights" in, the spec's
 * layout, and "prepared" out, described as k's weights buffer), then pass "prepared" as k's weights
 * on every run. NULL when k reads the caller's weights as they are. */
const pf_kernel_desc* pf_bundle_prepare_kernel(const pf_bundle* b, const pf_kernel_desc* k);

/* A caller's buffer. shape and strides are outermost-first as in the kernel's layout; strides count
 * elements (NULL: dense row-major). bytes is the size of the allocation at data: the runtime
 * checks that the kernel's accesses stay inside it. */
typedef struct pf_tensor {
  const char* name; /* buffer name, or NULL to bind to the buffer at the same position */
  void* data;
  pf_dtype dtype;
  int rank;
  const int64_t* shape;
  const int64_t* strides;
  size_t bytes;
} pf_tensor;

/* A tensor with b's name, dtype, shape and strides. */
pf_tensor pf_tensor_of(const pf_buffer_desc* b, void* data, size_t bytes);

/* Checks tensors against kernel k without running it. */
pf_status pf_check(const pf_kernel_desc* k, const pf_tensor* tensors, int n, char* err,
                   size_t errlen);

/* Checks, then runs k on the tensors' memory (zero copy). Thread-safe. */
pf_status pf_run(const pf_kernel_desc* k, const pf_tensor* tensors, int n, char* err,
                 size_t errlen);

/* Halide runtime hooks. They are process-wide for the Halide runtime of the bundle's library (for
 * pf_registry_open: the Halide runtime linked into the application, shared by all its Halide
 * code); set them before running kernels, not concurrently with pf_run. Previous values are
 * returned through the optional old_* pointers, to restore them later (NULL is not accepted). */
pf_status pf_bundle_set_allocator(pf_bundle* b, pf_malloc_fn malloc_fn, pf_free_fn free_fn,
                                  pf_malloc_fn* old_malloc, pf_free_fn* old_free, char* err,
                                  size_t errlen);
pf_status pf_bundle_set_do_par_for(pf_bundle* b, pf_do_par_for_fn fn, pf_do_par_for_fn* old_fn,
                                   char* err, size_t errlen);
/* n = 0: Halide's default (HL_NUM_THREADS or the number of cores). */
pf_status pf_bundle_set_num_threads(pf_bundle* b, int n, int* old_n, char* err, size_t errlen);

/* padfold's worker pool for the kernels' parallel loops, in place of Halide's (which puts its
 * workers to sleep between two kernels, so that every kernel of a model run wakes them): an idle
 * worker spins for `spin_us` after the last loop it saw, then sleeps; pf_model_run and
 * pf_model_run_static park the workers of the installed pool when they return (nothing spins
 * between runs), and pf_pool_park does it at any time. Loops of several threads' kernels at once,
 * and nested loops, run on their caller's thread alone. POSIX threads; the full runtime only
 * (bundle directories), not the core of embedded builds, which keep Halide's hooks. */
typedef struct pf_pool pf_pool;
typedef struct pf_pool_options {
  int threads; /* threads running a loop, the caller's included: 0 = the cores, 1 = no worker */
  int spin_us; /* how long an idle worker spins before it sleeps: < 0 = 1000, 0 = never */
} pf_pool_options;
pf_status pf_pool_create(const pf_pool_options* opts, pf_pool** out, char* err, size_t errlen);
/* Makes b's kernels run their parallel loops on p (NULL p: on Halide's pool again). One pool per
 * process: the last installed serves every bundle using one. Not concurrently with runs. */
pf_status pf_bundle_use_pool(pf_bundle* b, pf_pool* p, char* err, size_t errlen);
int pf_pool_threads(const pf_pool* p);
void pf_pool_park(pf_pool* p); /* idle workers sleep now */
/* Joins the workers; bundles using it then run their loops serially until pf_bundle_use_pool
 * gives them another pool or Halide's. Not while a kernel runs on it. */
void pf_pool_destroy(pf_pool* p);

/* This machine as Halide names it and its CPU flags, e.g. "x86-64-linux: sse41 avx avx2 fma ...".
 * Returns the length of the full text (like snprintf). */
size_t pf_host_describe(char* buf, size_t len);

/* PF_OK if this machine (with opts->cpu_flags if set) can run code for the Halide target string
 * (e.g. "x86-64-linux-avx512_skylake"); else PF_ERR_NO_TARGET naming the missing CPU flags. */
pf_status pf_target_check(const char* target, const pf_open_options* opts, char* err,
                          size_t errlen);

/* ---- whole-model runs ----
 *
 * A bundle's registry (format 2) describes a graph: model inputs, kernels in a topological order
 * whose input buffers name the tensor feeding them (a model input or an earlier layer), weights and
 * bias in .npy files of the bundle or embedded in the library, and the layers whose outputs are the
 * model's outputs. */

typedef struct pf_model pf_model;

typedef struct pf_model_options {
  /* Every allocation of the model: its plan and the weights read from files (at open, where they
   * are read: read_weights), the model's arena (by the first pf_model_run), all freed at close;
   * and, per pf_model_run that does not run in that arena, one bookkeeping block and each
   * intermediate tensor (allocated right before its producer runs, freed right after its last
   * reader). NULL and NULL: malloc and free;
   * set both or neither. The memory must be aligned for the tensors' element type. */
  pf_malloc_fn malloc_fn;
  pf_free_fn free_fn;
  void* user_context; /* passed to both; must stay valid until pf_model_close */
  /* Nonzero: pf_model_run never keeps an arena; every run allocates and frees its intermediates
   * as above (a model that is open long and run rarely then holds only its plan and weights). */
  int per_run_allocation;
  /* Zero (the default): a bundle directory's weight files are mapped read-only (POSIX mmap) and
   * their values used where they lie, not copied: no read at open, the pages shared with the page
   * cache and with other processes that open the bundle. The files must then stay as they are
   * until pf_model_close (truncating a mapped file makes the next run fault, as with any mapped
   * file). Nonzero: they are read into blocks from the hooks above, as they are on a platform
   * without mmap or where the values cannot be used as the file holds them (big-endian hosts). */
  int read_weights;
} pf_model_options;

/* Checks that the bundle's graph runs whole and prepares it: PF_ERR_GRAPH when a model input is
 * produced by an op outside padfold (produced_by), a weights/bias buffer has neither a file nor
 * embedded data, an input buffer's source names no model input or earlier layer (or a tensor of
 * another dtype, shape or strides), or a model output names no layer. Weight files are mapped (or
 * read, opts->read_weights) once, here (bundle directories only: a linked registry's weights must
 * be embedded, `padfold compile --embed-weights`), and are checked (a .npy of the buffer's dtype:
 * float32, int8, uint8 or int32; C order, the buffer's exact shape, file size). The bundle must
 * outlive the model. opts may be NULL. On error *out is NULL. */
pf_status pf_model_open(pf_bundle* b, const pf_model_options* opts, pf_model** out, char* err,
                        size_t errlen);

/* Frees the model and its weights. NULL is ignored. */
void pf_model_close(pf_model* m);

/* Model inputs (name, dtype, layout, shape, strides) in registry order; NULL when out of range. */
int pf_model_num_inputs(const pf_model* m);
const pf_buffer_desc* pf_model_input(const pf_model* m, int i);

/* Model outputs: the description of the producing kernel's output buffer, but named after the
 * output (the layer's name), so that pf_tensor_of(pf_model_output(m, i), ...) binds to it. */
int pf_model_num_outputs(const pf_model* m);
const pf_buffer_desc* pf_model_output(const pf_model* m, int i);
const char* pf_model_output_name(const pf_model* m, int i); /* == pf_model_output(m, i)->name */

/* Runs the model: inputs are bound to model inputs and outputs to model outputs by name (a model
 * input's name, an output layer's name) or, where the name is NULL, by position; every one must be
 * given, and each is checked as pf_check checks a kernel's tensors (dtype, rank, shape, strides,
 * alignment, bytes) before anything runs. The kernels then run in registry order (pf_run), each
 * intermediate at its memory-plan offset in the model's own arena, which the first run allocates
 * through the options' hooks (pf_model_arena_bytes(m) + PF_ARENA_ALIGNMENT - 1 bytes) and later
 * runs reuse: no allocation per run. Thread-safe: one run at a time holds the arena, and a run
 * that finds it held (or any run of a registry without a plan, or with per_run_allocation)
 * allocates each intermediate through the hooks right before its producer and frees it right
 * after its last reader. On error everything the run allocated is freed (the arena is kept) and
 * the message names the kernel or tensor. */
pf_status pf_model_run(const pf_model* m, const pf_tensor* inputs, int n_in,
                       const pf_tensor* outputs, int n_out, char* err, size_t errlen);

/* The arena pf_model_run_static needs: the registry's memory plan (`padfold compile` plans it,
 * PADFOLD_<MODEL>_ARENA_BYTES in the bundle's header says the same); 0 for a bundle of format 2,
 * which has no plan, and for a model without intermediates. */
size_t pf_model_arena_bytes(const pf_model* m);

/* pf_model_run with no allocation: every intermediate at its planned offset in the caller's
 * arena, which must start at a multiple of PF_ARENA_ALIGNMENT (64) bytes and hold at least
 * pf_model_arena_bytes(m) bytes (NULL only when that is 0). The arena, then the tensors (as
 * pf_model_run checks them) are checked before anything runs: PF_ERR_NULL_DATA, PF_ERR_ALIGNMENT,
 * PF_ERR_SIZE for the arena; PF_ERR_UNSUPPORTED for a bundle of format 2. Nothing is allocated by
 * padfold or through the pf_model_options hooks. A kernel's own Halide scratch is stack use, not
 * in the arena: padfold's CPU schedules keep their Halide buffers on the stack where Halide can
 * bound them (the manifest's halide_scratch states the bytes and names any kernel that allocates
 * on Halide's heap instead; see runtime/README.md). Thread-safe for different arenas;
 * between runs the arena is scratch. */
pf_status pf_model_run_static(const pf_model* m, void* arena, size_t arena_bytes,
                              const pf_tensor* inputs, int n_in, const pf_tensor* outputs,
                              int n_out, char* err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
