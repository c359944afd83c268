/* What `padfold compile` emits for each target: a table describing every generated kernel. The
 * generated registry.c fills these structs; the runtime (padfold_runtime.h) reads them, either from
 * a bundle's shared object (dlopen) or from a registry compiled into the application (embedded). */
#ifndef PADFOLD_REGISTRY_H
#define PADFOLD_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PF_FORMAT_VERSION 5
/* The oldest format this runtime still opens: format 2 has no memory plan (pf_registry.memory_plan
 * and the manifest's memory_plan are new in 3), so its models run with pf_model_run only. Format 4
 * stores weights the compile prepared in the form their kernel reads (a buffer's layout says which,
 * e.g. winograd_f4_u): a reader of format 3 would take them for the spec's own weights. Format 5
 * adds the kernels that prepare weights the caller passes (pf_registry.prepares): a kernel with one
 * reads its weights in a prepared form even without a file. */
#define PF_FORMAT_VERSION_MIN 2
/* The "format" of a bundle's manifest.json (format_version: PF_FORMAT_VERSION). */
#define PF_FORMAT_NAME "padfold-bundle"
#define PF_MAX_RANK 8
/* The static arena of a whole-model run (pf_model_run_static): its start, every intermediate's
 * offset in it and every intermediate's size in it are multiples of this. 64 bytes is the widest
 * alignment Halide's own allocator gives any target (HalideRuntime.h: halide_malloc aligns to 32
 * bytes on arm, 64 on x86), a cache line, and one AVX-512 vector: a tensor in the arena is at
 * least as aligned as one Halide or malloc (16 bytes) would allocate, and no two tensors share a
 * cache line. */
#define PF_ARENA_ALIGNMENT 64

/* Weights embedded in a registry (padfold compile --embed-weights) start at such a multiple too,
 * as the runtime's mapped and read weight files do: no vector load of them straddles two cache
 * lines. (C99 has no alignment specifier; other compilers keep their own alignment.) */
#if defined(__GNUC__) || defined(__clang__)
#define PF_WEIGHTS_ALIGNED __attribute__((aligned(PF_ARENA_ALIGNMENT)))
#else
#define PF_WEIGHTS_ALIGNED
#endif

/* Quantized layers (docs/int8.md): int8/uint8 activations, int8 weights, int32 bias. */
typedef enum pf_dtype { PF_F32 = 0, PF_F16 = 1, PF_I8 = 2, PF_U8 = 3, PF_I32 = 4 } pf_dtype;
typedef enum pf_role {
  PF_ROLE_INPUT = 0,
  PF_ROLE_WEIGHTS = 1,
  PF_ROLE_BIAS = 2,
  PF_ROLE_OUTPUT = 3
} pf_role;

/* One buffer argument of a kernel, or one tensor of the model graph. shape and strides are
 * outermost-first, in the order the layout string names them (e.g. "NHWC"); strides count
 * elements. */
typedef struct pf_buffer_desc {
  const char* name; /* "input", "input0".."inputN" (add, concat), "weights", "bias", "output" */
  pf_role role;
  pf_dtype dtype;
  const char* layout; /* e.g. "NHWC", "HWIO", "O" */
  int rank;
  int64_t shape[PF_MAX_RANK];
  int64_t strides[PF_MAX_RANK];
  /* Where the values come from in a whole-model run (pf_model_run):
   *   input buffers: the tensor that feeds it, a model input's name or an earlier layer's name;
   *   weights, bias: the .npy file holding them, relative to the bundle directory, or NULL when
   *                  the spec named none (the caller then passes them to pf_run itself);
   *   output:        NULL (a layer's output tensor is named after the layer);
   *   model inputs (pf_registry.inputs): NULL, or the op outside padfold that produces this
   *                  tensor (e.g. "ONNX node 'resize_1' (Resize)"): such a model is not runnable
   *                  whole. */
  const char* source;
  /* Weights and bias baked into the library (`padfold compile --embed-weights`): dense values in
   * the buffer's layout, shape[0]*...*shape[rank-1] elements; NULL otherwise. */
  const void* data;
} pf_buffer_desc;

/* A Halide AOT entry point in its argv form: args[i] points to the i-th buffer's halide_buffer_t,
 * in the order of `buffers`. */
typedef int (*pf_argv_fn)(void** args);

struct halide_buffer_t;
struct halide_device_interface_t;

/* The device calls of a GPU target's Halide runtime (HalideRuntime.h's functions of those names),
 * which pf_run uses to move host memory in and out. NULL for CPU targets. */
typedef struct pf_device_hooks {
  const char* api; /* "cuda" or "opencl" */
  int (*copy_to_host)(void* user_context, struct halide_buffer_t* buf);
  int (*device_free)(void* user_context, struct halide_buffer_t* buf);
  int (*device_sync)(void* user_context, struct halide_buffer_t* buf);
  void (*device_release)(void* user_context, const struct halide_device_interface_t* interface);
  const struct halide_device_interface_t* (*device_interface)(void);
} pf_device_hooks;

typedef struct pf_kernel_desc {
  const char* layer;    /* layer name from the spec */
  const char* function; /* C symbol of the kernel */
  const char* op;       /* conv2d, max_pool, ... */
  pf_argv_fn argv_fn;
  int num_buffers;
  const pf_buffer_desc* buffers;
  const pf_device_hooks* device; /* GPU targets: the device calls; NULL on CPU targets */
} pf_kernel_desc;

/* Function types of the Halide runtime hooks: the same types as HalideRuntime.h's halide_malloc_t,
 * halide_free_t, halide_task_t, halide_do_par_for_t and halide_error_handler_t, repeated here so
 * this header stands alone. registry.c assigns halide_set_custom_malloc etc. without casts. */
typedef void* (*pf_malloc_fn)(void* user_context, size_t size);
typedef void (*pf_free_fn)(void* user_context, void* ptr);
typedef int (*pf_task_fn)(void* user_context, int task_number, uint8_t* closure);
typedef int (*pf_do_par_for_fn)(void* user_context, pf_task_fn task, int min, int size,
                                uint8_t* closure);
typedef void (*pf_error_handler_fn)(void* user_context, const char* msg);

/* Halide runtime hooks of the bundle (NULL where unavailable): halide_set_custom_malloc,
 * halide_set_custom_free, halide_set_custom_do_par_for, halide_set_num_threads and
 * halide_set_error_handler of the Halide runtime the kernels are linked with. */
typedef struct pf_runtime_hooks {
  pf_malloc_fn (*set_custom_malloc)(pf_malloc_fn fn);
  pf_free_fn (*set_custom_free)(pf_free_fn fn);
  pf_do_par_for_fn (*set_custom_do_par_for)(pf_do_par_for_fn fn);
  int (*set_num_threads)(int n);
  pf_error_handler_fn (*set_error_handler)(pf_error_handler_fn fn);
} pf_runtime_hooks;

/* Where a whole-model run keeps its intermediates in one caller's arena (pf_model_run_static),
 * planned by `padfold compile`: each intermediate (a kernel's output that is no model output)
 * from the start of its kernel's run to the end of its last reader's. */
typedef struct pf_memory_plan {
  int64_t arena_bytes; /* the arena's size: every intermediate ends at or before it */
  int64_t alignment;   /* PF_ARENA_ALIGNMENT: of the arena's start and every offset */
  /* Per kernel, in registry order: its output's offset in the arena; -1 for a model output,
   * written straight into the caller's output tensor. */
  const int64_t* offsets;
  /* NULL, or the first kernel whose own Halide scratch is on the heap (a fused block's window
   * Halide cannot bound by a constant): a static run would allocate, so pf_model_run_static
   * refuses the model. */
  const char* heap_scratch_kernel;
} pf_memory_plan;

typedef struct pf_registry {
  int format_version; /* PF_FORMAT_VERSION */
  const char* model;
  const char* target; /* Halide target string, e.g. "x86-64-linux-avx2-fma" */
  int num_kernels;
  const pf_kernel_desc* kernels;
  pf_runtime_hooks hooks;
  /* The model graph: kernels are in a topological order (each input comes from a model input or
   * an earlier kernel). */
  int num_inputs;
  const pf_buffer_desc* inputs; /* model inputs (role input; source: see pf_buffer_desc) */
  int num_outputs;
  const char* const* outputs; /* names of the layers whose outputs are the model's outputs */
  /* Format 3 on: the registry of an older library ends before this field, which must not be
   * read when format_version < 3. */
  pf_memory_plan memory_plan;
  /* Format 5 on (not to be read before): the kernels that put weights the caller passes into the
   * form a kernel reads them in (`padfold compile --prepare-entry`), at most one per kernel. Each
   * is named after its kernel's layer, op "prepare_weights", and has two buffers: "weights" (role
   * input), the weights as the spec lays them out, and "prepared" (role output), which is that
   * kernel's weights buffer. pf_bundle_prepare_kernel finds them. */
  int num_prepares;
  const pf_kernel_desc* prepares;
} pf_registry;

/* Every bundle shared object exports this symbol, returning its registry. */
#define PF_BUNDLE_ENTRY "padfold_bundle_registry"
typedef const pf_registry* (*pf_bundle_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
