/* Files of a bundle directory: paths joined and checked to stay inside it; whole text files. */
#define _XOPEN_SOURCE 700 /* POSIX.1-2008: realpath */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

char* pf_path_join(const char* dir, const char* name) {
  char* p = (char*)malloc(strlen(dir) + strlen(name) + 2);
  if (p) sprintf(p, "%s%s%s", name[0] == '/' ? "" : dir, name[0] == '/' ? "" : "/", name);
  return p;
}

int pf_path_relative_inside(const char* p) {
  const char* c = p;
  if (!p[0] || p[0] == '/') return 0;
  while (*c) {
    size_t n = strcspn(c, "/");
    if (n == 2 && c[0] == '.' && c[1] == '.') return 0;
    c += n;
    while (*c == '/') c++;
  }
  return 1;
}

int pf_path_resolves_inside(const char* dir, const char* path) {
  char* d = realpath(dir, NULL);
  char* p = realpath(path, NULL);
  size_t n = d ? strlen(d) : 0;
  int inside = d && p && strncmp(d, p, n) == 0 && (p[n] == '/' || (n == 1 && d[0] == '/'));
  free(d);
  free(p);
  return inside;
}

char* pf_read_text(const char* path, size_t max_bytes) {
  FILE* f;
  char *text = NULL, *grown = NULL;
  size_t len = 0, cap = 0, got;
  struct stat st;
  if (stat(path, &st) != 0) return NULL;
  if (!S_ISREG(st.st_mode)) {
    errno = EINVAL;
    return NULL;
  }
  if ((size_t)st.st_size > max_bytes) {
    errno = EFBIG;
    return NULL;
  }
  if (!(f = fopen(path, "rb"))) return NULL;
  do {
    if (len + 4096 + 1 > cap) {
      cap = 2 * cap + 4096 + 1;
      if (!(grown = (char*)realloc(text, cap))) break;
      text = grown;
    }
    len += got = fread(text + len, 1, cap - len - 1, f);
  } while (got > 0 && len <= max_bytes);
  if (ferror(f) || !grown || len > max_bytes) {
    free(text);
    text = NULL;
  } else {
    text[len] = '\0';
  }
  fclose(f);
  return text;
}
