/* manifest.json: typed cJSON access, and the manifest parsed and checked into a pf_manifest. */
#define _XOPEN_SOURCE 700 /* POSIX errno values: EFBIG */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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

static pf_status bad(pf_manifest* m, const char* path, const char* key, const char* want,
                     const cJSON* v) {
  const char* dot = path[0] ? "." : "";
  if (!v) {
    return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST, "%s: missing field %s%s%s", m->file, path,
                   dot, key);
  }
  return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST, "%s: %s%s%s: expected %s, got %s", m->file,
                 path, dot, key, want, json_type(v));
}

static pf_status get_str(pf_manifest* m, const cJSON* obj, const char* path, const char* key,
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

static pf_status get_int(pf_manifest* m, const cJSON* obj, const char* path, const char* key,
                         int64_t* out) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return as_int(v, out) ? PF_OK : bad(m, path, key, "an integer", v);
}

static pf_status get_array(pf_manifest* m, const cJSON* obj, const char* path, const char* key,
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

static pf_status parse_target(pf_manifest* m, const cJSON* j, int i, pf_manifest_target* t) {
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
      (s = get_array(m, j, path, "features", PF_MANIFEST_MAX_FEATURES, &fs))) {
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

static pf_status parse_dims(pf_manifest* m, const cJSON* j, const char* path, const char* key,
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

static pf_status parse_enum(pf_manifest* m, const char* path, const char* key, const char* value,
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

static pf_status parse_buffer(pf_manifest* m, const cJSON* j, const char* path, pf_buffer_desc* b) {
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
static pf_status parse_source(pf_manifest* m, const cJSON* j, const char* path, pf_buffer_desc* b) {
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

static pf_status parse_kernel(pf_manifest* m, const cJSON* j, int i) {
  pf_kernel_desc* k = &m->kernels[i];
  pf_buffer_desc* bufs = &m->buffers[i * PF_MAX_BUFFERS];
  char path[32], bpath[64];
  const cJSON *bs, *b, *p;
  pf_status s;
  snprintf(path, sizeof path, "kernels[%d]", i);
  if (!cJSON_IsObject(j)) return bad(m, "", path, "an object", j);
  if ((s = get_str(m, j, path, "layer", 0, &k->layer)) ||
      (s = get_str(m, j, path, "function", 0, &k->function)) ||
      (s = get_str(m, j, path, "op", 0, &k->op)) ||
      (s = get_array(m, j, path, "buffers", PF_MAX_BUFFERS, &bs))) {
    return s;
  }
  m->prepare_functions[i] = NULL;
  if (m->format_version >= 5 && (p = cJSON_GetObjectItemCaseSensitive(j, "prepare"))) {
    char ppath[48];
    snprintf(ppath, sizeof ppath, "%s.prepare", path);
    if (!cJSON_IsObject(p)) return bad(m, path, "prepare", "an object", p);
    if ((s = get_str(m, p, ppath, "function", 0, &m->prepare_functions[i]))) return s;
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

/* Format 3 on: "memory_plan": {"alignment": PF_ARENA_ALIGNMENT, "arena_bytes": n, ...} and each
 * kernel's "arena_offset" (an aligned offset inside the arena, or null). The other fields of
 * memory_plan (lower_bound, intermediates_bytes) are for people and are not read. */
static pf_status parse_memory_plan(pf_manifest* m, const cJSON* root, const cJSON* ks) {
  const cJSON *plan = cJSON_GetObjectItemCaseSensitive(root, "memory_plan"), *k, *v;
  char path[48];
  int64_t alignment = 0;
  int i = 0;
  pf_status s;
  if (!cJSON_IsObject(plan)) return bad(m, "", "memory_plan", "an object", plan);
  if ((s = get_int(m, plan, "memory_plan", "alignment", &alignment)) ||
      (s = get_int(m, plan, "memory_plan", "arena_bytes", &m->arena_bytes))) {
    return s;
  }
  if (alignment != PF_ARENA_ALIGNMENT) {
    return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST,
                   "%s: memory_plan.alignment: expected %d, got %lld", m->file, PF_ARENA_ALIGNMENT,
                   (long long)alignment);
  }
  if (m->arena_bytes < 0 || m->arena_bytes % PF_ARENA_ALIGNMENT) {
    return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST,
                   "%s: memory_plan.arena_bytes: expected a multiple of %d, got %lld", m->file,
                   PF_ARENA_ALIGNMENT, (long long)m->arena_bytes);
  }
  cJSON_ArrayForEach(k, ks) {
    snprintf(path, sizeof path, "kernels[%d]", i);
    v = cJSON_GetObjectItemCaseSensitive(k, "arena_offset");
    m->arena_offsets[i] = -1;
    if (!cJSON_IsNull(v)) {
      if (!as_int(v, &m->arena_offsets[i])) {
        return bad(m, path, "arena_offset", "an integer or null", v);
      }
      if (m->arena_offsets[i] < 0 || m->arena_offsets[i] % PF_ARENA_ALIGNMENT ||
          m->arena_offsets[i] > m->arena_bytes) {
        return pf_fail(m->err, m->errlen, PF_ERR_MANIFEST,
                       "%s: %s.arena_offset: %lld is not a multiple of %d inside the arena (%lld "
                       "bytes)",
                       m->file, path, (long long)m->arena_offsets[i], PF_ARENA_ALIGNMENT,
                       (long long)m->arena_bytes);
      }
    }
    i++;
  }
  return PF_OK;
}

static int has_layer(const pf_manifest* m, const char* name) {
  int i;
  for (i = 0; i < m->num_kernels; i++) {
    if (strcmp(m->kernels[i].layer, name) == 0) return 1;
  }
  return 0;
}

/* "graph": {"inputs": [{name, dtype, layout, shape, strides, produced_by}], "outputs": [layer]} */
static pf_status parse_graph(pf_manifest* m, const cJSON* root) {
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

static pf_status parse_manifest(pf_manifest* m, const cJSON* root) {
  const char* format;
  const cJSON *ts, *ks, *v;
  int64_t version = 0;
  int i = 0;
  pf_status s;
  if (!cJSON_IsObject(root)) return bad(m, "", "(top level)", "an object", root);
  if ((s = get_str(m, root, "", "format", 0, &format))) return s;
  if (strcmp(format, PF_FORMAT_NAME) != 0) {
    return pf_fail(m->err, m->errlen, PF_ERR_VERSION, "%s: format is '%s', expected '%s'", m->file,
                   format, PF_FORMAT_NAME);
  }
  if ((s = get_int(m, root, "", "format_version", &version))) return s;
  if (version < PF_FORMAT_VERSION_MIN || version > PF_FORMAT_VERSION) {
    return pf_fail(m->err, m->errlen, PF_ERR_VERSION,
                   "%s: format_version %lld is not supported by this runtime (supports %d to %d): "
                   "use a padfold runtime matching the padfold that wrote the bundle",
                   m->file, (long long)version, PF_FORMAT_VERSION_MIN, PF_FORMAT_VERSION);
  }
  m->format_version = (int)version;
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
  m->targets = (pf_manifest_target*)calloc((size_t)m->num_targets, sizeof *m->targets);
  m->kernels = (pf_kernel_desc*)calloc((size_t)m->num_kernels + 1, sizeof *m->kernels);
  m->buffers =
      (pf_buffer_desc*)calloc((size_t)m->num_kernels * PF_MAX_BUFFERS + 1, sizeof *m->buffers);
  m->arena_offsets = (int64_t*)calloc((size_t)m->num_kernels + 1, sizeof *m->arena_offsets);
  m->prepare_functions =
      (const char**)calloc((size_t)m->num_kernels + 1, sizeof *m->prepare_functions);
  if (!m->targets || !m->kernels || !m->buffers || !m->arena_offsets || !m->prepare_functions) {
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
  if (m->format_version >= 3 && (s = parse_memory_plan(m, root, ks))) return s;
  return parse_graph(m, root);
}

static void start(pf_manifest* m, const char* file, char* err, size_t errlen) {
  memset(m, 0, sizeof *m);
  m->file = file;
  m->err = err;
  m->errlen = errlen;
}

/* How deep `text` nests arrays and objects at `end` (where cJSON stopped), strings skipped: cJSON
 * refuses valid JSON nested deeper than CJSON_NESTING_LIMIT, which is no syntax error. */
static int depth_at(const char* text, const char* end) {
  int depth = 0, in_string = 0;
  const char* p;
  for (p = text; p < end && *p; p++) {
    if (in_string) {
      if (*p == '\\' && p + 1 < end)
        p++;
      else if (*p == '"')
        in_string = 0;
    } else if (*p == '"') {
      in_string = 1;
    } else if (*p == '[' || *p == '{') {
      depth++;
    } else if (*p == ']' || *p == '}') {
      depth--;
    }
  }
  return depth;
}

pf_status pf_manifest_load(pf_manifest* m, const char* path, char* err, size_t errlen) {
  char* text;
  const char* end = NULL;
  pf_status s;
  start(m, path, err, errlen);
  if (!(text = pf_read_text(path, MAX_MANIFEST_BYTES))) {
    return pf_fail(err, errlen, PF_ERR_IO, "cannot read %s: %s (not a padfold bundle directory?)",
                   path,
                   errno == EINVAL  ? "not a regular file"
                   : errno == EFBIG ? "larger than 64 MiB"
                                    : strerror(errno));
  }
  if (!(m->json = cJSON_ParseWithOpts(text, &end, 1))) {
    int line = 1;
    const char* p;
    for (p = text; end && p < end; p++) line += *p == '\n';
    if (end && depth_at(text, end) >= CJSON_NESTING_LIMIT)
      s = pf_fail(err, errlen, PF_ERR_MANIFEST,
                  "%s: nested deeper than %d levels at line %d; expected a padfold manifest "
                  "(a few levels deep)",
                  path, CJSON_NESTING_LIMIT, line);
    else
      s = pf_fail(err, errlen, PF_ERR_MANIFEST, "%s: invalid JSON at line %d", path, line);
  } else {
    s = parse_manifest(m, m->json);
  }
  free(text);
  return s;
}

void pf_manifest_free(pf_manifest* m) {
  cJSON_Delete(m->json);
  free(m->targets);
  free(m->kernels);
  free(m->buffers);
  free(m->arena_offsets);
  free((void*)m->prepare_functions);
  free(m->inputs);
  free(m->outputs);
  memset(m, 0, sizeof *m);
}

pf_status pf_manifest_check(const char* text, size_t len, const char* label, char* err,
                            size_t errlen) {
  pf_manifest m;
  pf_status s;
  start(&m, label, err, errlen);
  m.json = cJSON_ParseWithLength(text, len);
  s = m.json ? parse_manifest(&m, m.json)
             : pf_fail(err, errlen, PF_ERR_MANIFEST, "%s: invalid JSON", label);
  pf_manifest_free(&m);
  return s;
}
