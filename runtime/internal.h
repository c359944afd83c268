/* Declarations shared by the runtime's sources; not installed. */
#ifndef PADFOLD_RUNTIME_INTERNAL_H
#define PADFOLD_RUNTIME_INTERNAL_H

#include "padfold_runtime.h"

#if defined(__GNUC__) || defined(__clang__)
#define PF_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PF_PRINTF(a, b)
#endif

/* A weight file mapped read-only: its values at data, the mapping at base (NULL: not mapped). */
typedef struct pf_mapping {
  void* base;
  size_t length;
  const void* data;
} pf_mapping;

/* The handle pf_bundle_open / pf_registry_open return. */
struct pf_bundle {
  const pf_registry* reg;
  const pf_device_hooks* device; /* a GPU target's device calls, NULL on the CPU */
  char* dir;
  void (*release)(void*);
  void* release_ctx;
  /* Reads a weights/bias buffer's .npy file (set by pf_bundle_open; NULL for linked registries,
   * which have no filesystem: see pf_model_open). */
  pf_status (*load_weights)(const char* dir, const char* layer, const pf_buffer_desc* b, void* dst,
                            size_t bytes, char* err, size_t errlen);
  /* Maps it instead, where the platform and the file allow (pf_npy_map_weights); NULL: never. */
  pf_status (*map_weights)(const char* dir, const char* layer, const pf_buffer_desc* b,
                           size_t bytes, pf_mapping* out, char* err, size_t errlen);
  void (*unmap_weights)(pf_mapping* m);
  /* Halide's own parallel loop, kept while a padfold pool serves b (pf_bundle_use_pool). */
  pf_do_par_for_fn halide_do_par_for;
};

/* Called when pf_model_run or pf_model_run_static returns (NULL: nothing): the installed worker
 * pool parks its workers (pool.c, pf_bundle_use_pool). */
extern void (*pf_model_run_end_hook)(void);

/* A parallel loop of task(user_context, i, closure) for i in [min, min + size) on pool p's
 * threads, as Halide's halide_do_par_for (pool.c; NULL p: serially). */
int pf_pool_do_par_for(pf_pool* p, void* user_context, pf_task_fn task, int min, int size,
                       uint8_t* closure);
/* How many of p's workers sleep now (tests). */
int pf_pool_sleeping(pf_pool* p);

/* Writes the formatted message into err (if any) and returns s. */
pf_status pf_fail(char* err, size_t errlen, pf_status s, const char* fmt, ...) PF_PRINTF(4, 5);

/* Appends formatted text at buf + strlen(buf), truncating to len. */
void pf_append(char* buf, size_t len, const char* fmt, ...) PF_PRINTF(3, 4);

/* A machine: Halide's arch ("x86", "arm", ...), bits, OS ("linux", ...) and CPU flags. */
typedef struct pf_cpu {
  const char* arch;
  int bits;
  const char* os;
  uint64_t flags;
  int known; /* 0 when the flags could not be detected: feature checks then pass */
} pf_cpu;

/* This machine, with opts->cpu_flags replacing detection if set. */
pf_status pf_cpu_get(const pf_open_options* opts, pf_cpu* cpu, char* err, size_t errlen);

/* "x86-64-linux: sse41 avx ..." */
void pf_cpu_describe(const pf_cpu* cpu, char* buf, size_t len);

/* 1 if a manifest arch ("x86" or "x86-64") and bits (0: any) name cpu's architecture. */
int pf_cpu_arch_matches(const pf_cpu* cpu, const char* arch, int bits);

/* PF_OK if cpu runs code with these Halide features for arch/bits; else PF_ERR_NO_TARGET with the
 * reasons ("needs avx512_skylake, this CPU lacks avx512bw avx512dq") written into why. */
pf_status pf_cpu_check(const pf_cpu* cpu, const char* arch, int bits, const char* const* features,
                       int num_features, char* why, size_t whylen);

/* Checks reg's structure and format version; PF_ERR_MISMATCH / PF_ERR_VERSION otherwise. */
pf_status pf_registry_validate(const pf_registry* reg, char* err, size_t errlen);

/* The prepare kernel of layer `layer` in reg (format 5 on), or NULL. */
const pf_kernel_desc* pf_registry_prepare(const pf_registry* reg, const char* layer);

/* Creates a handle over reg (validated, CPU-checked). On success the handle owns `release(ctx)`,
 * called by pf_bundle_close; on failure nothing is released. dir may be NULL. */
pf_status pf_bundle_create(const pf_registry* reg, const pf_open_options* opts, const char* dir,
                           void (*release)(void*), void* ctx, pf_bundle** out, char* err,
                           size_t errlen);

/* Pairs each of the n_descs descriptions with its tensor: by name where named, else by position.
 * Messages read "<kind> '<owner>': ..." and call the descriptions <noun>s ("kernel 'stem': buffer
 * 'input' is given twice"). bound has n_descs entries. */
pf_status pf_bind_tensors(const char* kind, const char* owner, const char* noun,
                          const pf_buffer_desc* descs, int n_descs, const pf_tensor* t, int n,
                          const pf_tensor** bound, char* err, size_t errlen);

/* pf_bind_tensors' checks (count, names, nothing given twice) with no memory: then
 * pf_bound_tensor(..., d) is the tensor bound to description d. */
pf_status pf_bind_check(const char* kind, const char* owner, const char* noun,
                        const pf_buffer_desc* descs, int n_descs, const pf_tensor* t, int n,
                        char* err, size_t errlen);
const pf_tensor* pf_bound_tensor(const pf_buffer_desc* descs, int n_descs, const pf_tensor* t,
                                 int n, int d);

/* Checks tensor t against description b (what pf_check checks for each buffer); messages start
 * "<kind> '<owner>': <noun> '<b->name>'". */
pf_status pf_check_tensor(const char* kind, const char* owner, const char* noun,
                          const pf_buffer_desc* b, const pf_tensor* t, char* err, size_t errlen);

/* PF_ERR_OVERLAP when the bytes [a, a + a_bytes) written as `a_what` ("output 'y'") share one
 * with [b, b + b_bytes) (`b_what`): no tensor a kernel writes may alias another of the call. The
 * message starts "<kind> '<owner>': ". */
pf_status pf_check_apart(const char* kind, const char* owner, const char* a_what, const void* a,
                         size_t a_bytes, const char* b_what, const void* b, size_t b_bytes,
                         char* err, size_t errlen);

/* 1 if b's strides are dense row-major for its shape. */
int pf_buffer_is_dense(const pf_buffer_desc* b);

/* ---- bundle directories, the full library only: device.c, path.c, manifest.c, npy_load.c ---- */

/* PF_OK if a device of the API ("cuda", "opencl") is usable here; else PF_ERR_NO_TARGET with the
 * reason in why ("needs a CUDA device: the CUDA driver cannot be loaded (...)"). */
pf_status pf_device_probe(const char* api, char* why, size_t len);

/* dir + "/" + name (name as is when absolute); NULL when out of memory. */
char* pf_path_join(const char* dir, const char* name);

/* 1 if p is a relative path with no ".." component (and not empty). */
int pf_path_relative_inside(const char* p);

/* 1 if path, symbolic links resolved, lies inside directory dir. */
int pf_path_resolves_inside(const char* dir, const char* path);

/* The whole of regular file path, NUL-terminated (free it); NULL with errno set when it cannot be
 * read (EINVAL: not a regular file, EFBIG: more than max_bytes). */
char* pf_read_text(const char* path, size_t max_bytes);

#define PF_MANIFEST_MAX_FEATURES 64

/* One of the manifest's targets: what choosing and loading it takes. */
typedef struct pf_manifest_target {
  const char *target, *arch, *os, *dir, *lib;
  const char* device_api;      /* "cuda", "opencl", or NULL for a CPU target */
  int64_t bits, max_registers; /* max_registers: HL_CUDA_JIT_MAX_REGISTERS, 0 = unset */
  const char* features[PF_MANIFEST_MAX_FEATURES];
  int num_features;
} pf_manifest_target;

/* A parsed manifest; its strings point into json. */
typedef struct pf_manifest {
  const char *file, *model; /* file: the name messages give the manifest */
  int num_targets, num_kernels;
  pf_manifest_target* targets;
  pf_kernel_desc* kernels;
  pf_buffer_desc* buffers; /* PF_MAX_BUFFERS per kernel */
  int num_inputs, num_outputs, embedded_weights;
  int format_version; /* PF_FORMAT_VERSION_MIN..PF_FORMAT_VERSION */
  /* Format 3 on: memory_plan.arena_bytes, and per kernel its arena_offset (-1 for null). */
  int64_t arena_bytes;
  int64_t* arena_offsets;
  /* Format 5 on: per kernel, its "prepare" kernel's function, or NULL. */
  const char** prepare_functions;
  pf_buffer_desc* inputs; /* graph.inputs (source: produced_by) */
  const char** outputs;   /* graph.outputs */
  struct cJSON* json;
  char* err;
  size_t errlen;
} pf_manifest;

/* Reads manifest file path (a regular file of at most 64 MiB) into m, every field checked; path
 * must outlive m. Free m with pf_manifest_free whatever this returns. */
pf_status pf_manifest_load(pf_manifest* m, const char* path, char* err, size_t errlen);

void pf_manifest_free(pf_manifest* m);

/* Parses and validates manifest text as pf_bundle_open does, without loading anything (for the
 * fuzzer). label names the text in messages. */
pf_status pf_manifest_check(const char* text, size_t len, const char* label, char* err,
                            size_t errlen);

/* What a .npy header says: dtype, shape, where the data starts and how long it is. */
typedef struct pf_npy_header {
  pf_dtype dtype; /* PF_F32, PF_I8, PF_U8 or PF_I32 */
  int rank;
  int64_t shape[PF_MAX_RANK];
  uint64_t data_offset, data_bytes;
} pf_npy_header;

/* Largest .npy header accepted, and the bytes before the data that always suffice to parse one. */
#define PF_NPY_MAX_HEADER_BYTES (64u * 1024u)
#define PF_NPY_MAX_PREAMBLE_BYTES (12u + PF_NPY_MAX_HEADER_BYTES)

/* Parses the first `len` bytes of a .npy file of file_size bytes (len >= min(file_size,
 * PF_NPY_MAX_PREAMBLE_BYTES)) as padfold's C++ reader does (generator/base/npy.h,
 * parse_npy_header): magic, version 1.0/2.0/3.0, a header dict with exactly 'descr' ('<f4' float32,
 * '|i1' or '<i1' int8, '|u1' or '<u1' uint8, '<i4' int32), 'fortran_order' False and 'shape' (at
 * most PF_MAX_RANK dimensions), and data filling the rest of the file exactly. PF_ERR_IO messages
 * start with label. No filesystem access. */
pf_status pf_npy_parse_header(const char* buf, size_t len, uint64_t file_size, const char* label,
                              pf_npy_header* h, char* err, size_t errlen);

/* Loads the values of weights/bias buffer b of kernel `layer` from its .npy file b->source
 * (relative to dir and inside it, links resolved) into dst, which holds bytes = pf_buffer_bytes(b)
 * bytes; the file's dtype and shape must be b's and b must be dense float32, int8, uint8 or int32.
 * PF_ERR_IO naming the file (a dtype mismatch names both dtypes). */
pf_status pf_npy_load_weights(const char* dir, const char* layer, const pf_buffer_desc* b,
                              void* dst, size_t bytes, char* err, size_t errlen);

/* The same checks, then the file mapped read-only and private (POSIX mmap), its values used where
 * they lie: no copy, pages shared with the page cache. PF_OK with out->base NULL where the values
 * cannot be used as the file holds them (a big-endian host, an offset of partial elements) or the
 * file cannot be mapped (mmap fails): the caller reads them instead. pf_npy_unmap_weights releases
 * a mapping (a NULL base is ignored). */
pf_status pf_npy_map_weights(const char* dir, const char* layer, const pf_buffer_desc* b,
                             size_t bytes, pf_mapping* out, char* err, size_t errlen);
void pf_npy_unmap_weights(pf_mapping* m);

#endif
