/* Error messages (pf_fail, pf_append) and the names of statuses, dtypes and roles. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

pf_status pf_fail(char* err, size_t errlen, pf_status s, const char* fmt, ...) {
  va_list ap;
  if (err && errlen > 0) {
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return s;
}

void pf_append(char* buf, size_t len, const char* fmt, ...) {
  va_list ap;
  size_t used;
  if (!buf || len == 0) return;
  used = strlen(buf);
  if (used + 1 >= len) return;
  va_start(ap, fmt);
  vsnprintf(buf + used, len - used, fmt, ap);
  va_end(ap);
}

const char* pf_status_name(pf_status s) {
  static const char* const names[] = {"PF_OK",
                                      "PF_ERR_ARGUMENT",
                                      "PF_ERR_NO_MEMORY",
                                      "PF_ERR_IO",
                                      "PF_ERR_MANIFEST",
                                      "PF_ERR_VERSION",
                                      "PF_ERR_NO_TARGET",
                                      "PF_ERR_LOAD",
                                      "PF_ERR_MISMATCH",
                                      "PF_ERR_NOT_FOUND",
                                      "PF_ERR_UNSUPPORTED",
                                      "PF_ERR_TENSOR_COUNT",
                                      "PF_ERR_TENSOR_NAME",
                                      "PF_ERR_DTYPE",
                                      "PF_ERR_RANK",
                                      "PF_ERR_SHAPE",
                                      "PF_ERR_STRIDES",
                                      "PF_ERR_NULL_DATA",
                                      "PF_ERR_ALIGNMENT",
                                      "PF_ERR_SIZE",
                                      "PF_ERR_KERNEL",
                                      "PF_ERR_GRAPH",
                                      "PF_ERR_OVERLAP"};
  if ((int)s < 0 || (size_t)s >= sizeof names / sizeof names[0]) return "PF_UNKNOWN_STATUS";
  return names[s];
}

const char* pf_dtype_name(pf_dtype t) {
  switch (t) {
    case PF_F32:
      return "float32";
    case PF_F16:
      return "float16";
    case PF_I8:
      return "int8";
    case PF_U8:
      return "uint8";
    case PF_I32:
      return "int32";
  }
  return NULL;
}

const char* pf_role_name(pf_role r) {
  switch (r) {
    case PF_ROLE_INPUT:
      return "input";
    case PF_ROLE_WEIGHTS:
      return "weights";
    case PF_ROLE_BIAS:
      return "bias";
    case PF_ROLE_OUTPUT:
      return "output";
  }
  return NULL;
}
