/* Opens a bundle directory: manifest.json (cJSON), target choice, dlopen, registry cross-check. */
#define _XOPEN_SOURCE 700 /* POSIX.1-2008 with realpath */
#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

#define BUNDLE_FORMAT "padfold-bundle"
#define MAX_FEATURES 64

typedef struct mf_target {
  const char *target, *arch, *os, *dir, *lib;
  const char* device_api;      /* "cuda", "opencl", or NULL for a CPU target */
  int64_t bits, max_registers; /* max_registers: HL_CUDA_JIT_MAX_REGISTERS, 0 = unset */
  const char* features[MAX_FEATURES];
  int num_features;
} mf_target;

typedef struct manifest {
  const char *file, *model;
  int num_targets, num_kernels;
  mf_target* targets;
  pf_kernel_desc* kernels;
  pf_buffer_desc* buffers; /* PF_MAX_BUFFERS per kernel */
  int num_inputs, num_outputs, embedded_weights;
  pf_buffer_desc* inputs; /* graph.inputs (source: produced_by) */
  const char** outputs;   /* graph.outputs */
  char* err;
  size_t errlen;
} manifest;

#define MAX_MANIFEST_BYTES ((size_t)64 << 20)

/* ---- typed field access with messages naming the field's path ---- */

static const char* json_type(const cJSON* v) {
  if (cJSON_IsString(v)) return "a string";
  if (cJSON_IsNumber(v)) return "a number";
  if (cJSON_IsBool(v)) return "a boolean";
  if (cJSON_IsNull(v)) return "null";
  if (cJSON_IsArray(v)) return "an array";
  return "an object";
}

static pf_status bad(manifest* m, const char* path, const char* key, const char* want,
                     const cJSON* v) {
  const char* dot = path[0] ? "." : "";
  if (!v) {
    return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST, "%s: missing field %s%s%s", m->file, path,
                   dot, key);
  }
  return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST, "%s: %s%s%s: expected %s, got %s", m->file,
                 path, dot, key, want, json_type(v));
}

static pf_status get_str(manifest* m, const cJSON* obj, const char* path, const char* key,
                         int nullable, const char** out) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NULL;
  if (nullable && cJSON_IsNull(v)) return PF_OK;
  if (!cJSON_IsString(v)) return bad(m, path, key, nullable ? "a string or null" : "a string", v);
  *out = v->valuestring;
  return PF_OK;
}

static int as_int(const cJSON* v, int64_t* out) {
  if (!cJSON_IsNumber(v) || !(v->valuedouble > -9e18 && v->valuedouble < 9e18) ||
      v->valuedouble != (double)(int64_t)v->valuedouble) {
    return 0;
  }
  *out = (int64_t)v->valuedouble;
  return 1;
}

static pf_status get_int(manifest* m, const cJSON* obj, const char* path, const char* key,
                         int64_t* out) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return as_int(v, out) ? PF_OK : bad(m, path, key, "an integer", v);
}

static pf_status get_array(manifest* m, const cJSON* obj, const char* path, const char* key,
                           int max, const cJSON** out) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = v;
  if (!cJSON_IsArray(v)) return bad(m, path, key, "an array", v);
  if (cJSON_GetArraySize(v) > max) {
    return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST, "%s: %s%s%s: more than %d entries", m->file,
                   path, path[0] ? "." : "", key, max);
  }
  return PF_OK;
}

/* ---- manifest parts ---- */

static pf_status parse_target(manifest* m, const cJSON* j, int i, mf_target* t) {
  char path[32];
  const cJSON *fs, *f;
  pf_status s;
  snprintf(path, sizeof path, "targets[%d]", i);
  if (!cJSON_IsObject(j)) return bad(m, "", path, "an object", j);
  if ((s = get_str(m, j, path, "target", 0, &t->target)) ||
      (s = get_str(m, j, path, "arch", 0, &t->arch)) ||
      (s = get_int(m, j, path, "bits", &t->bits)) || (s = get_str(m, j, path, "os", 0, &t->os)) ||
      (s = get_str(m, j, path, "dir", 0, &t->dir)) ||
      (s = get_str(m, j, path, "shared_library", 1, &t->lib)) ||
      (s = get_array(m, j, path, "features", MAX_FEATURES, &fs))) {
    return s;
  }
  /* Optional (bundles without GPU targets may omit them): device_api, cuda_jit_max_registers. */
  if (cJSON_GetObjectItemCaseSensitive(j, "device_api") &&
      (s = get_str(m, j, path, "device_api", 1, &t->device_api))) {
    return s;
  }
  f = cJSON_GetObjectItemCaseSensitive(j, "cuda_jit_max_registers");
  if (f && !cJSON_IsNull(f) &&
      ((s = get_int(m, j, path, "cuda_jit_max_registers", &t->max_registers)) ||
       t->max_registers < 0 || t->max_registers > 255)) {
    return s ? s
             : pf_fail(m->err, m->errlen, PF_ERR_MANIFEST,
                       "%s: %s.cuda_jit_max_registers: expected 0 to 255, got %lld", m->file, path,
                       (long long)t->max_registers);
  }
  if (t->lib && !pf_path_relative_inside(t->lib)) {
    return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST,
                   "%s: %s.shared_library: expected a relative path inside the bundle (no '..'), "
                   "got '%s'",
                   m->file, path, t->lib);
  }
  t->num_features = 0;
  cJSON_ArrayForEach(f, fs) {
    if (!cJSON_IsString(f)) {
      char key[32];
      snprintf(key, sizeof key, "features[%d]", t->num_features);
      return bad(m, path, key, "a string", f);
    }
    t->features[t->num_features++] = f->valuestring;
  }
  return PF_OK;
}

static pf_status parse_dims(manifest* m, const cJSON* j, const char* path, const char* key,
                            int64_t* dims, int* rank) {
  const cJSON *a, *v;
  int n = 0;
  pf_status s = get_array(m, j, path, key, PF_MAX_RANK, &a);
  if (s) return s;
  cJSON_ArrayForEach(v, a) {
    if (!as_int(v, &dims[n])) {
      char k[32];
      snprintf(k, sizeof k, "%s[%d]", key, n);
      return bad(m, path, k, "an integer", v);
    }
    n++;
  }
  *rank = n;
  return PF_OK;
}

static pf_status parse_enum(manifest* m, const char* path, const char* key, const char* value,
                            const char* (*name_of)(int), int* out) {
  int i;
  for (i = 0; name_of(i); i++) {
    if (strcmp(name_of(i), value) == 0) {
      *out = i;
      return PF_OK;
    }
  }
  return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST, "%s: %s.%s: unknown value '%s'", m->file, path,
                 key, value);
}

static const char* dtype_at(int i) {
  return pf_dtype_name((pf_dtype)i);
}
static const char* role_at(int i) {
  return pf_role_name((pf_role)i);
}

static pf_status parse_buffer(manifest* m, const cJSON* j, const char* path, pf_buffer_desc* b) {
  const char *role, *dtype;
  int r = 0, t = 0, srank = 0;
  pf_status s;
  if (!cJSON_IsObject(j)) return bad(m, "", path, "an object", j);
  if ((s = get_str(m, j, path, "name", 0, &b->name)) ||
      (s = get_str(m, j, path, "role", 0, &role)) ||
      (s = get_str(m, j, path, "dtype", 0, &dtype)) ||
      (s = get_str(m, j, path, "layout", 0, &b->layout)) ||
      (s = parse_enum(m, path, "role", role, role_at, &r)) ||
      (s = parse_enum(m, path, "dtype", dtype, dtype_at, &t)) ||
      (s = parse_dims(m, j, path, "shape", b->shape, &b->rank)) ||
      (s = parse_dims(m, j, path, "strides", b->strides, &srank))) {
    return s;
  }
  b->role = (pf_role)r;
  b->dtype = (pf_dtype)t;
  if (srank != b->rank) {
    return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST, "%s: %s: %d strides for rank %d", m->file,
                   path, srank, b->rank);
  }
  return PF_OK;
}

/* A kernel buffer's "source": input: the tensor feeding it; weights/bias: null or a .npy file
 * inside the bundle (null when the weights are embedded); output: null. */
static pf_status parse_source(manifest* m, const cJSON* j, const char* path, pf_buffer_desc* b) {
  pf_status s = get_str(m, j, path, "source", b->role != PF_ROLE_INPUT, &b->source);
  const char* why = NULL;
  if (s) return s;
  if (b->role == PF_ROLE_INPUT && !b->source[0]) {
    why = "expected the name of the tensor feeding the input, got ''";
  } else if (b->role == PF_ROLE_OUTPUT && b->source) {
    why = "expected null for an output buffer";
  } else if (b->source && b->role != PF_ROLE_INPUT && !pf_path_relative_inside(b->source)) {
    why = "expected a relative path inside the bundle (no '..')";
  } else if (b->source && b->role != PF_ROLE_INPUT && m->embedded_weights) {
    why = "a weights file in a bundle whose weights are embedded (embedded_weights true)";
  }
  if (why) {
    return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST, "%s: %s.source: %s%s%s%s", m->file, path,
                   why, b->source && b->source[0] ? ", got '" : "",
                   b->source && b->source[0] ? b->source : "",
                   b->source && b->source[0] ? "'" : "");
  }
  return PF_OK;
}

static pf_status parse_kernel(manifest* m, const cJSON* j, int i) {
  pf_kernel_desc* k = &m->kernels[i];
  pf_buffer_desc* bufs = &m->buffers[i * PF_MAX_BUFFERS];
  char path[32], bpath[64];
  const cJSON *bs, *b;
  pf_status s;
  snprintf(path, sizeof path, "kernels[%d]", i);
  if (!cJSON_IsObject(j)) return bad(m, "", path, "an object", j);
  if ((s = get_str(m, j, path, "layer", 0, &k->layer)) ||
      (s = get_str(m, j, path, "function", 0, &k->function)) ||
      (s = get_str(m, j, path, "op", 0, &k->op)) ||
      (s = get_array(m, j, path, "buffers", PF_MAX_BUFFERS, &bs))) {
    return s;
  }
  k->buffers = bufs;
  k->num_buffers = 0;
  cJSON_ArrayForEach(b, bs) {
    snprintf(bpath, sizeof bpath, "%s.buffers[%d]", path, k->num_buffers);
    if ((s = parse_buffer(m, b, bpath, &bufs[k->num_buffers])) ||
        (s = parse_source(m, b, bpath, &bufs[k->num_buffers]))) {
      return s;
    }
    k->num_buffers++;
  }
  return PF_OK;
}

static int has_layer(const manifest* m, const char* name) {
  int i;
  for (i = 0; i < m->num_kernels; i++) {
    if (strcmp(m->kernels[i].layer, name) == 0) return 1;
  }
  return 0;
}

/* "graph": {"inputs": [{name, dtype, layout, shape, strides, produced_by}], "outputs": [layer]} */
static pf_status parse_graph(manifest* m, const cJSON* root) {
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "graph"), *ins, *outs, *v;
  char path[48];
  const char* dtype;
  int i = 0, j, t = 0;
  pf_status s;
  if (!cJSON_IsObject(g)) return bad(m, "", "graph", "an object", g);
  if ((s = get_array(m, g, "graph", "inputs", 1 << 16, &ins)) ||
      (s = get_array(m, g, "graph", "outputs", 1 << 16, &outs))) {
    return s;
  }
  m->num_inputs = cJSON_GetArraySize(ins);
  m->num_outputs = cJSON_GetArraySize(outs);
  m->inputs = (pf_buffer_desc*)calloc((size_t)m->num_inputs + 1, sizeof *m->inputs);
  m->outputs = (const char**)calloc((size_t)m->num_outputs + 1, sizeof *m->outputs);
  if (!m->inputs || !m->outputs) return pf_fail(m->err, m->errlen, PF_ERR_NO_MEMORY, "OOM");
  cJSON_ArrayForEach(v, ins) {
    pf_buffer_desc* b = &m->inputs[i];
    int srank = 0;
    snprintf(path, sizeof path, "graph.inputs[%d]", i);
    if (!cJSON_IsObject(v)) return bad(m, "", path, "an object", v);
    if ((s = get_str(m, v, path, "name", 0, &b->name)) ||
        (s = get_str(m, v, path, "dtype", 0, &dtype)) ||
        (s = get_str(m, v, path, "layout", 0, &b->layout)) ||
        (s = parse_enum(m, path, "dtype", dtype, dtype_at, &t)) ||
        (s = parse_dims(m, v, path, "shape", b->shape, &b->rank)) ||
        (s = parse_dims(m, v, path, "strides", b->strides, &srank)) ||
        (s = get_str(m, v, path, "produced_by", 1, &b->source))) {
      return s;
    }
    b->role = PF_ROLE_INPUT;
    b->dtype = (pf_dtype)t;
    if (srank != b->rank) {
      return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST, "%s: %s: %d strides for rank %d", m->file,
                     path, srank, b->rank);
    }
    for (j = 0; j < i; j++) {
      if (strcmp(m->inputs[j].name, b->name) == 0) {
        return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST, "%s: %s.name: '%s' is listed twice",
                       m->file, path, b->name);
      }
    }
    if (has_layer(m, b->name)) {
      return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST,
                     "%s: %s.name: '%s' is also the name of a layer", m->file, path, b->name);
    }
    i++;
  }
  i = 0;
  cJSON_ArrayForEach(v, outs) {
    snprintf(path, sizeof path, "outputs[%d]", i);
    if (!cJSON_IsString(v)) return bad(m, "graph", path, "a string", v);
    m->outputs[i] = v->valuestring;
    if (!has_layer(m, m->outputs[i])) {
      return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST, "%s: graph.%s: '%s' is no layer", m->file,
                     path, m->outputs[i]);
    }
    for (j = 0; j < i; j++) {
      if (strcmp(m->outputs[j], m->outputs[i]) == 0) {
        return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST, "%s: graph.%s: '%s' is listed twice",
                       m->file, path, m->outputs[i]);
      }
    }
    i++;
  }
  return PF_OK;
}

static pf_status parse_manifest(manifest* m, const cJSON* root) {
  const char* format;
  const cJSON *ts, *ks, *v;
  int64_t version = 0;
  int i = 0;
  pf_status s;
  if (!cJSON_IsObject(root)) return bad(m, "", "(top level)", "an object", root);
  if ((s = get_str(m, root, "", "format", 0, &format))) return s;
  if (strcmp(format, BUNDLE_FORMAT) != 0) {
    return pf_fail(m->err, m->errlen, PF_ERR_VERSION, "%s: format is '%s', expected '%s'", m->file,
                   format, BUNDLE_FORMAT);
  }
  if ((s = get_int(m, root, "", "format_version", &version))) return s;
  if (version != PF_FORMAT_VERSION) {
    return pf_fail(m->err, m->errlen, PF_ERR_VERSION,
                   "%s: format_version %lld is not supported by this runtime (supports %d): use a "
                   "padfold runtime matching the padfold that wrote the bundle",
                   m->file, (long long)version, PF_FORMAT_VERSION);
  }
  v = cJSON_GetObjectItemCaseSensitive(root, "embedded_weights");
  if (!cJSON_IsBool(v)) return bad(m, "", "embedded_weights", "a boolean", v);
  m->embedded_weights = cJSON_IsTrue(v);
  if ((s = get_str(m, root, "", "model", 0, &m->model)) ||
      (s = get_array(m, root, "", "targets", 256, &ts)) ||
      (s = get_array(m, root, "", "kernels", 1 << 16, &ks))) {
    return s;
  }
  m->num_targets = cJSON_GetArraySize(ts);
  m->num_kernels = cJSON_GetArraySize(ks);
  if (m->num_targets == 0) {
    return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST, "%s: targets is empty", m->file);
  }
  m->targets = (mf_target*)calloc((size_t)m->num_targets, sizeof *m->targets);
  m->kernels = (pf_kernel_desc*)calloc((size_t)m->num_kernels + 1, sizeof *m->kernels);
  m->buffers =
      (pf_buffer_desc*)calloc((size_t)m->num_kernels * PF_MAX_BUFFERS + 1, sizeof *m->buffers);
  if (!m->targets || !m->kernels || !m->buffers) {
    return pf_fail(m->err, m->errlen, PF_ERR_NO_MEMORY, "out of memory");
  }
  cJSON_ArrayForEach(v, ts) {
    if ((s = parse_target(m, v, i, &m->targets[i]))) return s;
    i++;
  }
  i = 0;
  cJSON_ArrayForEach(v, ks) {
    if ((s = parse_kernel(m, v, i++))) return s;
  }
  return parse_graph(m, root);
}

/* ---- target choice ---- */

static pf_status choose_target(manifest* m, const pf_cpu* cpu, const char* dir, int* chosen) {
  char why[768], msg[4096];
  int i;
  snprintf(msg, sizeof msg, "no target of bundle '%s' runs on this machine (", dir);
  pf_cpu_describe(cpu, msg + strlen(msg), sizeof msg - strlen(msg));
  pf_append(msg, sizeof msg, "):");
  for (i = 0; i < m->num_targets; i++) {
    const mf_target* t = &m->targets[i];
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
static pf_status compare_graph(const manifest* m, const pf_registry* reg, const char* lib,
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

static pf_status compare(const manifest* m, const mf_target* t, const pf_registry* reg,
                         const char* lib, char* err, size_t errlen) {
  const char* file = m->file;
  int i;
  pf_status s;
  if (reg->format_version != PF_FORMAT_VERSION) {
    return DIFFER("format_version: manifest has %d, library has %d", PF_FORMAT_VERSION,
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
  }
  return compare_graph(m, reg, lib, file, err, errlen);
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

static pf_status open_parsed(manifest* m, const char* dir, const pf_open_options* opts,
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
  if (!s) (*out)->load_weights = pf_npy_load_weights;
  if (s && handle) dlclose(handle);
  free(lib);
  return s;
}

pf_status pf_manifest_check(const char* text, size_t len, const char* label, char* err,
                            size_t errlen) {
  manifest m;
  cJSON* root = cJSON_ParseWithLength(text, len);
  pf_status s;
  memset(&m, 0, sizeof m);
  m.file = label;
  m.err = err;
  m.errlen = errlen;
  s = root ? parse_manifest(&m, root)
           : pf_fail(err, errlen, PF_ERR_MANIFEST, "%s: invalid JSON", label);
  cJSON_Delete(root);
  free(m.targets);
  free(m.kernels);
  free(m.buffers);
  free(m.inputs);
  free(m.outputs);
  return s;
}

pf_status pf_bundle_open(const char* dir, const pf_open_options* opts, pf_bundle** out, char* err,
                         size_t errlen) {
  struct stat st;
  manifest m;
  cJSON* root = NULL;
  char *path, *text = NULL;
  const char* end = NULL;
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
  memset(&m, 0, sizeof m);
  m.file = path;
  m.err = err;
  m.errlen = errlen;
  if (!(text = pf_read_text(path, MAX_MANIFEST_BYTES))) {
    s = pf_fail(err, errlen, PF_ERR_IO, "cannot read %s: %s (not a padfold bundle directory?)",
                path,
                errno == EINVAL  ? "not a regular file"
                : errno == EFBIG ? "larger than 64 MiB"
                                 : strerror(errno));
  } else if (!(root = cJSON_ParseWithOpts(text, &end, 1))) {
    int line = 1;
    const char* p;
    for (p = text; end && p < end; p++) line += *p == '\n';
    s = pf_fail(err, errlen, PF_ERR_MANIFEST, "%s: invalid JSON at line %d", path, line);
  } else if (!(s = parse_manifest(&m, root))) {
    s = open_parsed(&m, dir, opts, out, err, errlen);
  }
  cJSON_Delete(root);
  free(m.targets);
  free(m.kernels);
  free(m.buffers);
  free(m.inputs);
  free(m.outputs);
  free(text);
  free(path);
  return s;
}
