/* Weight files of a bundle directory: a small, strict reader of .npy files of float32, int8, uint8
 * and int32 (the format generator/base/npy.h reads and writes), for pf_model_open. Full library
 * only (a filesystem). */
#define _XOPEN_SOURCE 700 /* POSIX.1-2008: fileno, realpath */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "internal.h"

#define NPY_MAX_DATA_BYTES ((uint64_t)1 << 31) /* as generator/base/npy.h: below 2 GiB */

typedef struct npy_parser {
  const char *s, *label;
  size_t len, pos;
  char* err;
  size_t errlen;
} npy_parser;

static int peek(const npy_parser* p) {
  return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static void skip_ws(npy_parser* p) {
  while (peek(p) == ' ' || peek(p) == '\t' || peek(p) == '\n' || peek(p) == '\r') p->pos++;
}

static pf_status syntax(const npy_parser* p, const char* what) {
  return pf_fail(p->err, p->errlen, PF_ERR_IO, "%s: bad .npy header at byte %lu: %s", p->label,
                 (unsigned long)p->pos, what);
}

static int is_digit(int c) {
  return c >= '0' && c <= '9';
}
static int is_word(int c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* A quoted string without escapes; *start and *n locate its contents. */
static pf_status string_literal(npy_parser* p, const char* what, size_t* start, size_t* n) {
  int q = peek(p), c;
  if (q != '\'' && q != '"') return syntax(p, what);
  *start = ++p->pos;
  while ((c = peek(p)) != q) {
    if (c < 0x20 || c >= 0x7f) return syntax(p, "unterminated string or a non-ASCII byte");
    if (c == '\\') return syntax(p, "escape sequences are not supported in a .npy header string");
    p->pos++;
  }
  *n = p->pos++ - *start;
  return PF_OK;
}

static int equals(const npy_parser* p, size_t start, size_t n, const char* word) {
  return strlen(word) == n && memcmp(p->s + start, word, n) == 0;
}

/* The .npy 'descr' of each dtype the runtime reads (numpy's spelling); NULL for the others. */
static const char* npy_descr(pf_dtype t) {
  switch (t) {
    case PF_F32:
      return "<f4";
    case PF_I8:
      return "|i1";
    case PF_U8:
      return "|u1";
    case PF_I32:
      return "<i4";
    case PF_F16:
      break;
  }
  return NULL;
}

/* The dtype a 'descr' names: numpy's '|i1' and '|u1', or '<i1' and '<u1' (which numpy reads the
 * same), '<f4', '<i4'. 0 when it is none of them. */
static int descr_dtype(const npy_parser* p, size_t start, size_t n, pf_dtype* t) {
  if (equals(p, start, n, "<f4")) {
    *t = PF_F32;
  } else if (equals(p, start, n, "|i1") || equals(p, start, n, "<i1")) {
    *t = PF_I8;
  } else if (equals(p, start, n, "|u1") || equals(p, start, n, "<u1")) {
    *t = PF_U8;
  } else if (equals(p, start, n, "<i4")) {
    *t = PF_I32;
  } else {
    return 0;
  }
  return 1;
}

static pf_status shape_tuple(npy_parser* p, pf_npy_header* h) {
  int trailing_comma = 0;
  if (peek(p) != '(') return syntax(p, "expected a tuple '(...)' for 'shape'");
  p->pos++;
  skip_ws(p);
  h->rank = 0;
  while (peek(p) != ')') {
    uint64_t v = 0;
    size_t start = p->pos;
    if (h->rank == PF_MAX_RANK)
      return syntax(p, "'shape' has more dimensions than the runtime's 8");
    if (peek(p) == '-') return syntax(p, "negative dimension in 'shape'");
    if (!is_digit(peek(p))) return syntax(p, "expected a non-negative integer in 'shape'");
    while (is_digit(peek(p))) {
      if (v > ((uint64_t)INT64_MAX - 9) / 10) return syntax(p, "dimension too large in 'shape'");
      v = v * 10 + (uint64_t)(peek(p) - '0');
      p->pos++;
    }
    if (p->pos - start > 1 && p->s[start] == '0') {
      p->pos = start;
      return syntax(p, "integer with a leading zero in 'shape'");
    }
    if (is_word(peek(p)) || peek(p) == '.') return syntax(p, "expected a plain integer in 'shape'");
    h->shape[h->rank++] = (int64_t)v;
    skip_ws(p);
    trailing_comma = 0;
    if (peek(p) == ',') {
      p->pos++;
      trailing_comma = 1;
      skip_ws(p);
    } else if (peek(p) != ')') {
      return syntax(p, "expected ',' or ')' in 'shape'");
    }
  }
  if (h->rank == 1 && !trailing_comma)
    return syntax(p, "'shape' (n) is not a tuple; expected (n,)");
  p->pos++;
  return PF_OK;
}

/* {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } with numpy's padding; 'descr' one
 * of descr_dtype's. */
static pf_status header_dict(npy_parser* p, pf_npy_header* h) {
  int have_descr = 0, have_order = 0, have_shape = 0, *seen, fortran = 0;
  size_t key, n, vs, vn;
  pf_status s;
  skip_ws(p);
  if (peek(p) != '{') return syntax(p, "expected '{' opening the header dict");
  p->pos++;
  for (;;) {
    size_t key_at;
    skip_ws(p);
    if (peek(p) == '}') break;
    key_at = p->pos;
    if ((s = string_literal(p, "expected a key (a quoted string)", &key, &n))) return s;
    skip_ws(p);
    if (peek(p) != ':') return syntax(p, "expected ':' after a key");
    p->pos++;
    skip_ws(p);
    if (equals(p, key, n, "descr")) {
      seen = &have_descr;
      if (peek(p) == '[')
        return syntax(p, "'descr' is a list (a structured dtype); expected '<f4'");
      if ((s = string_literal(p, "expected a quoted string for 'descr'", &vs, &vn))) return s;
      if (!descr_dtype(p, vs, vn, &h->dtype)) {
        return pf_fail(p->err, p->errlen, PF_ERR_IO,
                       "%s: dtype '%.*s' is not supported, expected little-endian float32 ('<f4'), "
                       "int8 ('|i1'), uint8 ('|u1') or int32 ('<i4')",
                       p->label, (int)(vn > 40 ? 40 : vn), p->s + vs);
      }
    } else if (equals(p, key, n, "fortran_order")) {
      seen = &have_order;
      vs = p->pos;
      while (is_word(peek(p))) p->pos++;
      if (equals(p, vs, p->pos - vs, "True")) {
        fortran = 1;
      } else if (!equals(p, vs, p->pos - vs, "False")) {
        p->pos = vs;
        return syntax(p, "expected True or False for 'fortran_order'");
      }
    } else if (equals(p, key, n, "shape")) {
      seen = &have_shape;
      if ((s = shape_tuple(p, h))) return s;
    } else {
      p->pos = key_at;
      return syntax(p,
                    "unexpected key (a .npy header has exactly 'descr', 'fortran_order' and "
                    "'shape')");
    }
    if (*seen) {
      p->pos = key_at;
      return syntax(p, "a key appears twice");
    }
    *seen = 1;
    skip_ws(p);
    if (peek(p) == ',') {
      p->pos++;
      continue;
    }
    if (peek(p) == '}') break;
    return syntax(p, "expected ',' or '}' after a value");
  }
  p->pos++;
  skip_ws(p);
  if (p->pos != p->len) return syntax(p, "unexpected bytes after the header dict");
  if (!have_descr || !have_order || !have_shape) {
    return pf_fail(p->err, p->errlen, PF_ERR_IO, "%s: bad .npy header: missing key(s)%s%s%s",
                   p->label, have_descr ? "" : " 'descr'", have_order ? "" : " 'fortran_order'",
                   have_shape ? "" : " 'shape'");
  }
  if (fortran) {
    return pf_fail(p->err, p->errlen, PF_ERR_IO,
                   "%s: fortran_order True (a Fortran-order array) is not supported; expected C "
                   "order",
                   p->label);
  }
  return PF_OK;
}

pf_status pf_npy_parse_header(const char* buf, size_t len, uint64_t file_size, const char* label,
                              pf_npy_header* h, char* err, size_t errlen) {
  const unsigned char* u = (const unsigned char*)buf;
  uint64_t header_len = 0, start, numel = 1, have, esize;
  size_t len_bytes, i;
  npy_parser p;
  pf_status s;
  int d;
  memset(h, 0, sizeof *h);
  if (len > file_size) len = (size_t)file_size;
  if (memcmp(buf, "\x93NUMPY", len < 6 ? len : 6) != 0) {
    return pf_fail(err, errlen, PF_ERR_IO,
                   "%s: not a .npy file: it does not start with \"\\x93NUMPY\"", label);
  }
  if (len < 8) {
    return pf_fail(err, errlen, PF_ERR_IO,
                   "%s: truncated .npy file: %lu bytes, too short for the magic and version", label,
                   (unsigned long)file_size);
  }
  if ((u[6] != 1 && u[6] != 2 && u[6] != 3) || u[7] != 0) {
    return pf_fail(err, errlen, PF_ERR_IO,
                   "%s: unsupported .npy version %u.%u (supported: 1.0, 2.0, 3.0)", label, u[6],
                   u[7]);
  }
  len_bytes = u[6] == 1 ? 2 : 4;
  start = 8 + len_bytes;
  if (len < start) {
    return pf_fail(err, errlen, PF_ERR_IO,
                   "%s: truncated .npy file: %lu bytes, too short for the header length field",
                   label, (unsigned long)file_size);
  }
  for (i = 0; i < len_bytes; i++) header_len |= (uint64_t)u[8 + i] << (8 * i);
  if (header_len > PF_NPY_MAX_HEADER_BYTES) {
    return pf_fail(err, errlen, PF_ERR_IO,
                   "%s: .npy header length %lu exceeds the limit of %u bytes", label,
                   (unsigned long)header_len, PF_NPY_MAX_HEADER_BYTES);
  }
  if (header_len > file_size - start || start + header_len > len) {
    return pf_fail(err, errlen, PF_ERR_IO,
                   "%s: truncated .npy file: the header length is %lu bytes but the file has only "
                   "%lu bytes after the length field",
                   label, (unsigned long)header_len, (unsigned long)(file_size - start));
  }
  p.s = buf + start;
  p.len = (size_t)header_len;
  p.pos = 0;
  p.label = label;
  p.err = err;
  p.errlen = errlen;
  if ((s = header_dict(&p, h)) != PF_OK) return s;
  esize = pf_dtype_size(h->dtype);
  for (d = 0; d < h->rank; d++) { /* each factor below the limit: the product cannot overflow */
    if ((uint64_t)h->shape[d] >= NPY_MAX_DATA_BYTES / esize ||
        (numel *= (uint64_t)h->shape[d]) >= NPY_MAX_DATA_BYTES / esize) {
      return pf_fail(err, errlen, PF_ERR_IO, "%s: the shape is too large (2 GiB of data or more)",
                     label);
    }
  }
  h->data_offset = start + header_len;
  h->data_bytes = numel * esize;
  have = file_size - h->data_offset;
  if (have != h->data_bytes) {
    return pf_fail(err, errlen, PF_ERR_IO, "%s: file has %lu bytes of data, header promises %lu%s",
                   label, (unsigned long)have, (unsigned long)h->data_bytes,
                   have < h->data_bytes ? " (truncated)" : " (extra bytes at the end)");
  }
  return PF_OK;
}

static void shape_text(char* buf, size_t len, int rank, const int64_t* shape) {
  int d;
  buf[0] = '\0';
  pf_append(buf, len, "(");
  for (d = 0; d < rank; d++) pf_append(buf, len, "%s%lld", d ? ", " : "", (long long)shape[d]);
  pf_append(buf, len, "%s)", rank == 1 ? "," : "");
}

/* The little-endian elements of a 4-byte dtype (float32, int32) in host order; bytes stay. */
static int host_is_little_endian(void) {
  const uint32_t probe = 1;
  return *(const unsigned char*)&probe == 1;
}

static void swap_if_big_endian(void* data, size_t bytes, size_t esize) {
  unsigned char *b = (unsigned char*)data, t;
  size_t i;
  if (host_is_little_endian() || esize != 4) return;
  for (i = 0; i + 4 <= bytes; i += 4) {
    t = b[i], b[i] = b[i + 3], b[i + 3] = t;
    t = b[i + 1], b[i + 1] = b[i + 2], b[i + 2] = t;
  }
}

static const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

/* Opens b's .npy file as pf_npy_load_weights describes and checks its header against b: on
 * success *f is open, positioned anywhere, and *h and *file_bytes describe it. label receives the
 * file's name for later messages. */
static pf_status open_checked(const char* dir, const char* layer, const pf_buffer_desc* b,
                              size_t bytes, FILE** f, pf_npy_header* h, uint64_t* file_bytes,
                              char* label, size_t labellen, char* err, size_t errlen) {
  char got[160], want[160];
  char *path = NULL, *head = NULL;
  struct stat st;
  size_t len;
  pf_status s = PF_OK;
  int d;
  *f = NULL;
  snprintf(label, labellen, "kernel '%s' buffer '%s': %s", layer, b->name,
           b->source ? b->source : "(no file)");
  if (!b->source || !pf_path_relative_inside(b->source)) {
    return pf_fail(err, errlen, PF_ERR_IO,
                   "%s: a weights file must be a relative path inside the bundle (no '..')", label);
  }
  if (!npy_descr(b->dtype) || !pf_buffer_is_dense(b) || bytes != pf_buffer_bytes(b)) {
    return pf_fail(err, errlen, PF_ERR_IO,
                   "%s: the runtime reads dense float32, int8, uint8 and int32 buffers only",
                   label);
  }
  if (!(path = pf_path_join(dir, b->source))) {
    return pf_fail(err, errlen, PF_ERR_NO_MEMORY, "out of memory");
  }
  snprintf(label, labellen, "kernel '%s' buffer '%s': %s", layer, b->name, path);
  if (stat(path, &st) != 0) {
    s = pf_fail(err, errlen, PF_ERR_IO, "%s: %s", label, strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    s = pf_fail(err, errlen, PF_ERR_IO, "%s: is %s, not a regular file; expected a .npy file",
                label, file_kind(st.st_mode));
  } else if (!pf_path_resolves_inside(dir, path)) {
    s = pf_fail(err, errlen, PF_ERR_IO,
                "%s: leads out of the bundle through a symbolic link; expected a file inside the "
                "bundle (a link leaving it is refused)",
                label);
  } else if (!(*f = fopen(path, "rb"))) {
    s = pf_fail(err, errlen, PF_ERR_IO, "%s: %s", label, strerror(errno));
  } else if (fstat(fileno(*f), &st) != 0 || !S_ISREG(st.st_mode)) {
    s = pf_fail(err, errlen, PF_ERR_IO, "%s: not a regular file", label);
  } else {
    *file_bytes = (uint64_t)st.st_size;
    len = (uint64_t)st.st_size < PF_NPY_MAX_PREAMBLE_BYTES ? (size_t)st.st_size
                                                           : PF_NPY_MAX_PREAMBLE_BYTES;
    if (!(head = (char*)malloc(len + 1))) {
      s = pf_fail(err, errlen, PF_ERR_NO_MEMORY, "out of memory");
    } else if (fread(head, 1, len, *f) != len) {
      s = pf_fail(err, errlen, PF_ERR_IO, "%s: cannot read the header", label);
    } else if (!(s = pf_npy_parse_header(head, len, (uint64_t)st.st_size, label, h, err, errlen))) {
      int same = h->rank == b->rank;
      for (d = 0; same && d < b->rank; d++) same = h->shape[d] == b->shape[d];
      if (h->dtype != b->dtype) {
        s = pf_fail(err, errlen, PF_ERR_IO,
                    "%s: dtype %s ('%s'), expected %s ('%s'), the buffer's dtype", label,
                    pf_dtype_name(h->dtype), npy_descr(h->dtype), pf_dtype_name(b->dtype),
                    npy_descr(b->dtype));
      } else if (!same) {
        shape_text(got, sizeof got, h->rank, h->shape);
        shape_text(want, sizeof want, b->rank, b->shape);
        s = pf_fail(err, errlen, PF_ERR_IO, "%s: shape %s, the buffer is %s %s", label, got,
                    b->layout, want);
      } else if (h->data_bytes != bytes) {
        s = pf_fail(err, errlen, PF_ERR_IO, "%s: %lu bytes of data, the buffer has %lu", label,
                    (unsigned long)h->data_bytes, (unsigned long)bytes);
      }
    }
  }
  if (s && *f) fclose(*f), *f = NULL;
  free(head);
  free(path);
  return s;
}

pf_status pf_npy_load_weights(const char* dir, const char* layer, const pf_buffer_desc* b,
                              void* dst, size_t bytes, char* err, size_t errlen) {
  char label[768];
  FILE* f;
  pf_npy_header h;
  uint64_t file_bytes;
  pf_status s =
      open_checked(dir, layer, b, bytes, &f, &h, &file_bytes, label, sizeof label, err, errlen);
  if (s) return s;
  if (fseek(f, (long)h.data_offset, SEEK_SET) != 0 || fread(dst, 1, bytes, f) != bytes) {
    s = pf_fail(err, errlen, PF_ERR_IO, "%s: cannot read %lu bytes of data", label,
                (unsigned long)bytes);
  } else {
    swap_if_big_endian(dst, bytes, pf_dtype_size(b->dtype));
  }
  fclose(f);
  return s;
}

pf_status pf_npy_map_weights(const char* dir, const char* layer, const pf_buffer_desc* b,
                             size_t bytes, pf_mapping* out, char* err, size_t errlen) {
  char label[768];
  FILE* f;
  pf_npy_header h;
  uint64_t file_bytes;
  void* base;
  pf_status s;
  memset(out, 0, sizeof *out);
  s = open_checked(dir, layer, b, bytes, &f, &h, &file_bytes, label, sizeof label, err, errlen);
  if (s) return s;
  /* The values as the file holds them only: little-endian, at an offset of whole elements. A
   * file system that cannot map (or no address space left) leaves the file to be read. */
  if (host_is_little_endian() && h.data_offset % pf_dtype_size(b->dtype) == 0 &&
      file_bytes <= (uint64_t)(size_t)-1) {
    base = mmap(NULL, (size_t)file_bytes, PROT_READ, MAP_PRIVATE, fileno(f), 0);
    if (base != MAP_FAILED) {
      out->base = base;
      out->length = (size_t)file_bytes;
      out->data = (const unsigned char*)base + h.data_offset;
    }
  }
  fclose(f); /* the mapping holds its own reference to the file */
  return PF_OK;
}

void pf_npy_unmap_weights(pf_mapping* m) {
  if (m->base) munmap(m->base, m->length);
  memset(m, 0, sizeof *m);
}
