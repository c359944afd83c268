/* Opens a bundle directory: target choice, dlopen, the registry checked against the manifest. */
#define _XOPEN_SOURCE 700 /* POSIX.1-2008: setenv */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

/* ---- target choice ---- */

static pf_status choose_target(pf_manifest* m, const pf_cpu* cpu, const char* dir, int* chosen) {
  char why[768], msg[4096];
  int i;
  snprintf(msg, sizeof msg, "no target of bundle '%s' runs on this machine (", dir);
  pf_cpu_describe(cpu, msg + strlen(msg), sizeof msg - strlen(msg));
  pf_append(msg, sizeof msg, "):");
  for (i = 0; i < m->num_targets; i++) {
    const pf_manifest_target* t = &m->targets[i];
    if (strcmp(t->os, cpu->os) != 0) {
      snprintf(why, sizeof why, "is for os %s, this machine runs %s", t->os, cpu->os);
    } else if (pf_cpu_check(cpu, t->arch, (int)t->bits, t->features, t->num_features, why,
                            sizeof why) == PF_OK) {
      if (!t->lib) {
        snprintf(why, sizeof why,
                 "has no shared library (no linker for it when the bundle was built): link its "
                 "static library and use pf_registry_open");
      } else if (!t->device_api || pf_device_probe(t->device_api, why, sizeof why) == PF_OK) {
        *chosen = i;
        return PF_OK;
      }
    }
    pf_append(msg, sizeof msg, "\n  target %s %s", t->target, why);
  }
  pf_append(msg, sizeof msg,
            "\nthe bundle has no fallback target for this machine: recompile with --target "
            "host,%s-%d-%s (or add ',host' after a GPU target)",
            cpu->arch, cpu->bits, cpu->os);
  return pf_fail(m->err, m->errlen, PF_ERR_NO_TARGET, "%s", msg);
}

/* ---- registry against manifest ---- */

#define DIFFER(fmt, ...)                \
  pf_fail(err, errlen, PF_ERR_MISMATCH, \
          "corrupted or mismatched bundle: %s does not match %s: " fmt, lib, file, __VA_ARGS__)

/* "'text'" or "null" as three printf arguments. */
#define QUOTED(p) (p) ? "'" : "", (p) ? (p) : "null", (p) ? "'" : ""

static int same_str(const char* a, const char* b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

/* The graph: model inputs, outputs, and where the weights are. */
static pf_status compare_graph(const pf_manifest* m, const pf_registry* reg, const char* lib,
                               const char* file, char* err, size_t errlen) {
  int i, j, d;
  if (reg->num_inputs != m->num_inputs || reg->num_outputs != m->num_outputs) {
    return DIFFER("graph: manifest has %d inputs and %d outputs, library has %d and %d",
                  m->num_inputs, m->num_outputs, reg->num_inputs, reg->num_outputs);
  }
  for (i = 0; i < m->num_inputs; i++) {
    const pf_buffer_desc *x = &m->inputs[i], *y = &reg->inputs[i];
    int same = x->dtype == y->dtype && x->rank == y->rank && strcmp(x->layout, y->layout) == 0;
    for (d = 0; same && d < x->rank; d++) {
      same = x->shape[d] == y->shape[d] && x->strides[d] == y->strides[d];
    }
    if (strcmp(x->name, y->name) != 0) {
      return DIFFER("graph input %d: manifest has '%s', library has '%s'", i, x->name, y->name);
    }
    if (!same) {
      return DIFFER("graph input '%s': dtype, layout, shape or strides differ", x->name);
    }
    if (!same_str(x->source, y->source)) {
      return DIFFER("graph input '%s' produced_by: manifest has %s%s%s, library has %s%s%s",
                    x->name, QUOTED(x->source), QUOTED(y->source));
    }
  }
  for (i = 0; i < m->num_outputs; i++) {
    if (strcmp(m->outputs[i], reg->outputs[i]) != 0) {
      return DIFFER("graph output %d: manifest has '%s', library has '%s'", i, m->outputs[i],
                    reg->outputs[i]);
    }
  }
  for (i = 0; !m->embedded_weights && i < reg->num_kernels; i++) {
    for (j = 0; j < reg->kernels[i].num_buffers; j++) {
      if (reg->kernels[i].buffers[j].data) {
        return DIFFER(
            "kernel '%s' buffer '%s': the library embeds its values, the manifest says "
            "embedded_weights false",
            reg->kernels[i].layer, reg->kernels[i].buffers[j].name);
      }
    }
  }
  return PF_OK;
}

static pf_status compare_kernel(const pf_kernel_desc* a, const pf_kernel_desc* b, const char* lib,
                                const char* file, char* err, size_t errlen) {
  int i, d;
  if (strcmp(a->function, b->function) != 0 || strcmp(a->op, b->op) != 0) {
    return DIFFER("kernel '%s' function/op: manifest has %s/%s, library has %s/%s", a->layer,
                  a->function, a->op, b->function, b->op);
  }
  if (a->num_buffers != b->num_buffers) {
    return DIFFER("kernel '%s': manifest has %d buffers, library has %d", a->layer, a->num_buffers,
                  b->num_buffers);
  }
  for (i = 0; i < a->num_buffers; i++) {
    const pf_buffer_desc *x = &a->buffers[i], *y = &b->buffers[i];
    char xs[24], ys[24];
    const char *field = NULL, *xv = xs, *yv = ys;
    snprintf(xs, sizeof xs, "%d", x->rank);
    snprintf(ys, sizeof ys, "%d", y->rank);
    if (strcmp(x->name, y->name) != 0)
      field = "name", xv = x->name, yv = y->name;
    else if (x->role != y->role)
      field = "role", xv = pf_role_name(x->role), yv = pf_role_name(y->role);
    else if (x->dtype != y->dtype)
      field = "dtype", xv = pf_dtype_name(x->dtype), yv = pf_dtype_name(y->dtype);
    else if (strcmp(x->layout, y->layout) != 0)
      field = "layout", xv = x->layout, yv = y->layout;
    else if (x->rank != y->rank)
      field = "rank";
    if (field) {
      return DIFFER("kernel '%s' buffer %d ('%s') %s: manifest has %s, library has %s", a->layer, i,
                    x->name, field, xv, yv);
    }
    if (!same_str(x->source, y->source)) {
      return DIFFER("kernel '%s' buffer '%s' source: manifest has %s%s%s, library has %s%s%s",
                    a->layer, x->name, QUOTED(x->source), QUOTED(y->source));
    }
    for (d = 0; d < x->rank; d++) {
      if (x->shape[d] != y->shape[d] || x->strides[d] != y->strides[d]) {
        int sh = x->shape[d] != y->shape[d];
        return DIFFER("kernel '%s' buffer '%s' %s[%d]: manifest has %lld, library has %lld",
                      a->layer, x->name, sh ? "shape" : "strides", d,
                      (long long)(sh ? x->shape[d] : x->strides[d]),
                      (long long)(sh ? y->shape[d] : y->strides[d]));
      }
    }
  }
  return PF_OK;
}

/* Format 3 on: the arena's size and every kernel's offset in it (alignments are checked on both
 * sides against PF_ARENA_ALIGNMENT). */
static pf_status compare_memory_plan(const pf_manifest* m, const pf_registry* reg, const char* lib,
                                     const char* file, char* err, size_t errlen) {
  const pf_memory_plan* p = &reg->memory_plan;
  int i;
  if (p->arena_bytes != m->arena_bytes) {
    return DIFFER("memory_plan.arena_bytes: manifest has %lld, library has %lld",
                  (long long)m->arena_bytes, (long long)p->arena_bytes);
  }
  for (i = 0; i < m->num_kernels; i++) {
    if (p->offsets[i] != m->arena_offsets[i]) {
      return DIFFER("kernel '%s' arena_offset: manifest has %lld, library has %lld",
                    reg->kernels[i].layer, (long long)m->arena_offsets[i],
                    (long long)p->offsets[i]);
    }
  }
  return PF_OK;
}

static pf_status compare(const pf_manifest* m, const pf_manifest_target* t, const pf_registry* reg,
                         const char* lib, char* err, size_t errlen) {
  const char* file = m->file;
  int i;
  pf_status s;
  if (reg->format_version != m->format_version) {
    return DIFFER("format_version: manifest has %d, library has %d", m->format_version,
                  reg->format_version);
  }
  if ((s = pf_registry_validate(reg, err, errlen)) != PF_OK) return s;
  if (strcmp(reg->model, m->model) != 0 || strcmp(reg->target, t->target) != 0) {
    return DIFFER("model/target: manifest has %s/%s, library has %s/%s", m->model, t->target,
                  reg->model, reg->target);
  }
  if (reg->num_kernels != m->num_kernels) {
    return DIFFER("manifest has %d kernels, library has %d", m->num_kernels, reg->num_kernels);
  }
  for (i = 0; i < m->num_kernels; i++) {
    if (strcmp(m->kernels[i].layer, reg->kernels[i].layer) != 0) {
      return DIFFER("kernel %d: manifest has layer '%s', library has '%s'", i, m->kernels[i].layer,
                    reg->kernels[i].layer);
    }
    if ((s = compare_kernel(&m->kernels[i], &reg->kernels[i], lib, file, err, errlen))) return s;
    if (m->format_version >= 5) {
      const pf_kernel_desc* p = pf_registry_prepare(reg, reg->kernels[i].layer);
      const char* want = m->prepare_functions[i];
      if ((p == NULL) != (want == NULL) || (p && strcmp(p->function, want) != 0)) {
        return DIFFER("kernel '%s' prepare: manifest has %s, library has %s", reg->kernels[i].layer,
                      want ? want : "none", p ? p->function : "none");
      }
    }
  }
  if ((s = compare_graph(m, reg, lib, file, err, errlen)) != PF_OK) return s;
  return m->format_version >= 3 ? compare_memory_plan(m, reg, lib, file, err, errlen) : PF_OK;
}

/* ---- loading ---- */

static void release_library(void* handle) {
  dlclose(handle);
}

static pf_status load(const char* dir, const char* path, const char* target, void** handle,
                      const pf_registry** reg, char* err, size_t errlen) {
  struct stat st;
  pf_bundle_entry_fn entry;
  void* sym;
  if (stat(path, &st) != 0) {
    return pf_fail(err, errlen, PF_ERR_LOAD, "shared library of target %s is missing: %s: %s",
                   target, path, strerror(errno));
  }
  if (!S_ISREG(st.st_mode) || !pf_path_resolves_inside(dir, path)) {
    return pf_fail(err, errlen, PF_ERR_LOAD,
                   "shared library of target %s is not a file inside the bundle: %s (a link "
                   "leaving the bundle is refused: opening a bundle runs its code)",
                   target, path);
  }
  if (!(*handle = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
    return pf_fail(err, errlen, PF_ERR_LOAD, "cannot load %s: %s", path, dlerror());
  }
  if (!(sym = dlsym(*handle, PF_BUNDLE_ENTRY))) {
    return pf_fail(err, errlen, PF_ERR_LOAD, "%s does not export %s (not a padfold bundle library)",
                   path, PF_BUNDLE_ENTRY);
  }
  memcpy(&entry, &sym, sizeof entry); /* POSIX: data and function pointers convert */
  if (!(*reg = entry())) {
    return pf_fail(err, errlen, PF_ERR_LOAD, "%s: %s() returned NULL", path, PF_BUNDLE_ENTRY);
  }
  return PF_OK;
}

static pf_status open_parsed(pf_manifest* m, const char* dir, const pf_open_options* opts,
                             pf_bundle** out, char* err, size_t errlen) {
  pf_cpu cpu;
  int chosen = -1;
  char* lib = NULL;
  void* handle = NULL;
  const pf_registry* reg = NULL;
  pf_status s = pf_cpu_get(opts, &cpu, err, errlen);
  if (!s && !(s = choose_target(m, &cpu, dir, &chosen))) {
    lib = pf_path_join(dir, m->targets[chosen].lib);
    s = lib ? load(dir, lib, m->targets[chosen].target, &handle, &reg, err, errlen)
            : pf_fail(err, errlen, PF_ERR_NO_MEMORY, "out of memory");
  }
  if (!s) s = compare(m, &m->targets[chosen], reg, lib, err, errlen);
  if (!s && m->targets[chosen].max_registers > 0) {
    /* Read by Halide's CUDA runtime when it loads the kernels (the first pf_run); a value the
     * caller set wins. */
    char regs[16];
    snprintf(regs, sizeof regs, "%d", (int)m->targets[chosen].max_registers);
    setenv("HL_CUDA_JIT_MAX_REGISTERS", regs, 0);
  }
  if (!s) s = pf_bundle_create(reg, opts, dir, release_library, handle, out, err, errlen);
  if (!s) {
    (*out)->load_weights = pf_npy_load_weights;
    (*out)->map_weights = pf_npy_map_weights;
    (*out)->unmap_weights = pf_npy_unmap_weights;
  }
  if (s && handle) dlclose(handle);
  free(lib);
  return s;
}

pf_status pf_bundle_open(const char* dir, const pf_open_options* opts, pf_bundle** out, char* err,
                         size_t errlen) {
  struct stat st;
  pf_manifest m;
  char* path;
  pf_status s;
  if (!dir || !out) return pf_fail(err, errlen, PF_ERR_ARGUMENT, "NULL directory or out");
  *out = NULL;
  if (stat(dir, &st) != 0) {
    return pf_fail(err, errlen, PF_ERR_IO, "bundle directory '%s' cannot be opened: %s", dir,
                   strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return pf_fail(err, errlen, PF_ERR_IO, "bundle path '%s' is not a directory", dir);
  }
  if (!(path = pf_path_join(dir, "manifest.json")))
    return pf_fail(err, errlen, PF_ERR_NO_MEMORY, "OOM");
  if (!(s = pf_manifest_load(&m, path, err, errlen)))
    s = open_parsed(&m, dir, opts, out, err, errlen);
  pf_manifest_free(&m);
  free(path);
  return s;
}
