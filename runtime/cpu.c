/* What this machine is, and whether it runs code compiled for a Halide target. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* getauxval */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define PF_HOST_ARCH "x86"
#elif defined(__aarch64__) || defined(__arm__)
#define PF_HOST_ARCH "arm"
#if defined(__linux__)
#include <sys/auxv.h>
#endif
#elif defined(__riscv)
#define PF_HOST_ARCH "riscv"
#elif defined(__powerpc__)
#define PF_HOST_ARCH "powerpc"
#elif defined(__wasm__)
#define PF_HOST_ARCH "wasm"
#else
#define PF_HOST_ARCH "unknown"
#endif

#if defined(__ANDROID__)
#define PF_HOST_OS "android"
#elif defined(__linux__)
#define PF_HOST_OS "linux"
#elif defined(__APPLE__)
#define PF_HOST_OS "osx"
#elif defined(_WIN32)
#define PF_HOST_OS "windows"
#else
#define PF_HOST_OS "noos"
#endif

/* CPU flags, named as Linux's /proc/cpuinfo names them (sse4_1 aside). */
enum {
  SSE41,
  AVX,
  AVX2,
  FMA,
  FMA4,
  F16C,
  AVX512F,
  AVX512CD,
  AVX512ER,
  AVX512PF,
  AVX512BW,
  AVX512DQ,
  AVX512VL,
  AVX512IFMA,
  AVX512VBMI,
  AVX512VNNI,
  AVX512BF16,
  NEON,
  VFPV4,
  ASIMDDP,
  FPHP,
  ASIMDHP,
  SVE,
  SVE2,
  ATOMICS,
  ASIMDRDM,
  NUM_FLAGS
};
static const char* const flag_names[NUM_FLAGS] = {
    "sse41",      "avx",        "avx2",       "fma",      "fma4",     "f16c",     "avx512f",
    "avx512cd",   "avx512er",   "avx512pf",   "avx512bw", "avx512dq", "avx512vl", "avx512ifma",
    "avx512vbmi", "avx512vnni", "avx512bf16", "neon",     "vfpv4",    "asimddp",  "fphp",
    "asimdhp",    "sve",        "sve2",       "atomics",  "asimdrdm"};

#define B(f) (1ull << (f))
#define X_AVX2 (B(AVX2) | B(AVX) | B(SSE41) | B(FMA) | B(F16C)) /* every AVX2 CPU has FMA, F16C */
#define X_512 (X_AVX2 | B(AVX512F) | B(AVX512CD))
#define X_SKX (X_512 | B(AVX512BW) | B(AVX512DQ) | B(AVX512VL))
#define X_CNL (X_SKX | B(AVX512IFMA) | B(AVX512VBMI))

/* Halide 14 target features and the CPU flags they need (the LLVM attributes Halide enables). */
static const struct feature {
  const char *name, *arch;
  uint64_t needs;
} cpu_features[] = {
    {"sse41", "x86", B(SSE41)},
    {"avx", "x86", B(AVX) | B(SSE41)},
    {"avx2", "x86", X_AVX2},
    {"fma", "x86", B(FMA)},
    {"fma4", "x86", B(FMA4)},
    {"f16c", "x86", B(F16C)},
    {"avx512", "x86", X_512},
    {"avx512_knl", "x86", X_512 | B(AVX512ER) | B(AVX512PF)},
    {"avx512_skylake", "x86", X_SKX},
    {"avx512_cannonlake", "x86", X_CNL},
    {"avx512_sapphirerapids", "x86", X_CNL | B(AVX512VNNI) | B(AVX512BF16)},
    {"arm_dot_prod", "arm", B(ASIMDDP)},
    {"arm_fp16", "arm", B(FPHP) | B(ASIMDHP)},
    {"armv81a", "arm", B(ATOMICS) | B(ASIMDRDM)},
    {"armv7s", "arm", B(VFPV4)},
    {"sve", "arm", B(SVE)},
    {"sve2", "arm", B(SVE) | B(SVE2)},
    {"no_neon", "arm", 0},
};

/* Features that change code generation but need nothing from the CPU. */
static const char* const neutral_features[] = {
    "no_asserts",
    "no_bounds_query",
    "no_runtime",
    "large_buffers",
    "strict_float",
    "debug",
    "profile",
    "profile_by_timer",
    "c_plus_plus_mangling",
    "embed_bitcode",
    "enable_llvm_loop_opt",
    "disable_llvm_loop_opt",
    "check_unsafe_promises",
    "fuzz_float_stores",
    "soft_float_abi",
    "trace_loads",
    "trace_stores",
    "trace_realizations",
    "trace_pipeline",
    "msan",
    "asan",
    "tsan",
    "sanitizer_coverage",
    "llvm_large_code_model",
};

static int flag_index(const char* name, size_t len) {
  int i;
  for (i = 0; i < NUM_FLAGS; i++) {
    if (strlen(flag_names[i]) == len && strncmp(flag_names[i], name, len) == 0) return i;
  }
  return -1;
}

#if defined(__x86_64__) || defined(__i386__)
static uint64_t detect_flags(int* known) {
  unsigned a, b, c, d, xcr0 = 0, lo, hi;
  uint64_t f = 0;
  int ymm, zmm;
  *known = 1;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  if (c & (1u << 19)) f |= B(SSE41);
  if (c & (1u << 27)) { /* OSXSAVE: the OS saves the registers AVX and AVX-512 use */
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = lo;
  }
  ymm = (xcr0 & 0x6) == 0x6;
  zmm = ymm && (xcr0 & 0xe0) == 0xe0;
  if (ymm && (c & (1u << 28))) f |= B(AVX);
  if (ymm && (c & (1u << 12))) f |= B(FMA);
  if (ymm && (c & (1u << 29))) f |= B(F16C);
  if (ymm && __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 16))) f |= B(FMA4);
  if (ymm && __get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    unsigned ebx = b, ecx = c;
    if (ebx & (1u << 5)) f |= B(AVX2);
    if (zmm) {
      static const struct {
        int bit, flag;
      } ebx_bits[] = {{16, AVX512F},  {17, AVX512DQ}, {21, AVX512IFMA}, {26, AVX512PF},
                      {27, AVX512ER}, {28, AVX512CD}, {30, AVX512BW},   {31, AVX512VL}};
      size_t i;
      for (i = 0; i < sizeof ebx_bits / sizeof ebx_bits[0]; i++) {
        if (ebx & (1u << ebx_bits[i].bit)) f |= B(ebx_bits[i].flag);
      }
      if (ecx & (1u << 1)) f |= B(AVX512VBMI);
      if (ecx & (1u << 11)) f |= B(AVX512VNNI);
      if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5))) f |= B(AVX512BF16);
    }
  }
  return f;
}
#elif defined(__aarch64__) && defined(__linux__)
static uint64_t detect_flags(int* known) {
  unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  uint64_t f = B(NEON) | B(VFPV4);
  *known = 1;
  if (hw & (1ul << 8)) f |= B(ATOMICS);
  if (hw & (1ul << 9)) f |= B(FPHP);
  if (hw & (1ul << 10)) f |= B(ASIMDHP);
  if (hw & (1ul << 12)) f |= B(ASIMDRDM);
  if (hw & (1ul << 20)) f |= B(ASIMDDP);
  if (hw & (1ul << 22)) f |= B(SVE);
  if (hw2 & (1ul << 1)) f |= B(SVE2);
  return f;
}
#elif defined(__arm__) && defined(__linux__)
static uint64_t detect_flags(int* known) {
  unsigned long hw = getauxval(AT_HWCAP);
  uint64_t f = 0;
  *known = 1;
  if (hw & (1ul << 12)) f |= B(NEON);
  if (hw & (1ul << 16)) f |= B(VFPV4);
  return f;
}
#else
static uint64_t detect_flags(int* known) {
  *known = 0; /* cannot tell: trust the build */
  return 0;
}
#endif

pf_status pf_cpu_get(const pf_open_options* opts, pf_cpu* cpu, char* err, size_t errlen) {
  const char* p = opts ? opts->cpu_flags : NULL;
  cpu->arch = PF_HOST_ARCH;
  cpu->bits = (int)sizeof(void*) * 8;
  cpu->os = PF_HOST_OS;
  if (!p) {
    cpu->flags = detect_flags(&cpu->known);
    return PF_OK;
  }
  cpu->flags = 0;
  cpu->known = 1;
  while (*p) {
    size_t len = strcspn(p, ", ");
    if (len > 0) {
      int i = flag_index(p, len);
      if (i < 0) {
        return pf_fail(err, errlen, PF_ERR_ARGUMENT, "cpu_flags: unknown CPU flag '%.*s'", (int)len,
                       p);
      }
      cpu->flags |= B(i);
    }
    p += len + (p[len] != '\0');
  }
  return PF_OK;
}

int pf_cpu_arch_matches(const pf_cpu* cpu, const char* arch, int bits) {
  size_t n = strlen(cpu->arch);
  if (bits > 0 && bits != cpu->bits) return 0;
  if (strcmp(arch, cpu->arch) == 0) return 1;
  return strncmp(arch, cpu->arch, n) == 0 && arch[n] == '-' && atoi(arch + n + 1) == cpu->bits;
}

static void append_flags(char* buf, size_t len, uint64_t flags) {
  int i;
  for (i = 0; i < NUM_FLAGS; i++) {
    if (flags & B(i)) pf_append(buf, len, " %s", flag_names[i]);
  }
}

static const struct feature* find_feature(const char* name) {
  size_t i;
  for (i = 0; i < sizeof cpu_features / sizeof cpu_features[0]; i++) {
    if (strcmp(cpu_features[i].name, name) == 0) return &cpu_features[i];
  }
  return NULL;
}

static int is_neutral(const char* name) {
  size_t i;
  for (i = 0; i < sizeof neutral_features / sizeof neutral_features[0]; i++) {
    if (strcmp(neutral_features[i], name) == 0) return 1;
  }
  return 0;
}

pf_status pf_cpu_check(const pf_cpu* cpu, const char* arch, int bits, const char* const* features,
                       int num_features, char* why, size_t whylen) {
  int i, problems = 0, no_neon = 0;
  if (whylen > 0) why[0] = '\0';
  if (!pf_cpu_arch_matches(cpu, arch, bits)) {
    if (strchr(arch, '-')) { /* "x86-64" style */
      pf_append(why, whylen, "is for %s, this machine is %s-%d", arch, cpu->arch, cpu->bits);
    } else {
      pf_append(why, whylen, "is for %s-%d, this machine is %s-%d", arch, bits, cpu->arch,
                cpu->bits);
    }
    return PF_ERR_NO_TARGET;
  }
  for (i = 0; i < num_features; i++) {
    const struct feature* f = find_feature(features[i]);
    const char* sep = problems++ ? "; " : "";
    if (f && strcmp(f->arch, cpu->arch) == 0) {
      uint64_t missing = cpu->known ? f->needs & ~cpu->flags : 0;
      no_neon |= strcmp(f->name, "no_neon") == 0;
      if (!missing) {
        problems--;
        continue;
      }
      pf_append(why, whylen, "%sneeds %s, this CPU lacks", sep, f->name);
      append_flags(why, whylen, missing);
    } else if (f) {
      pf_append(why, whylen, "%sfeature %s is for %s, this machine is %s", sep, f->name, f->arch,
                cpu->arch);
    } else if (is_neutral(features[i])) {
      problems--;
    } else {
      pf_append(why, whylen, "%sneeds %s, which the padfold runtime does not support", sep,
                features[i]);
    }
  }
  if (strcmp(cpu->arch, "arm") == 0 && cpu->bits == 32 && cpu->known && !no_neon &&
      !(cpu->flags & B(NEON))) {
    pf_append(why, whylen, "%sneeds neon (no no_neon feature), this CPU lacks it",
              problems++ ? "; " : "");
  }
  return problems ? PF_ERR_NO_TARGET : PF_OK;
}

void pf_cpu_describe(const pf_cpu* cpu, char* buf, size_t len) {
  if (len == 0) return;
  snprintf(buf, len, "%s-%d-%s:", cpu->arch, cpu->bits, cpu->os);
  if (cpu->known) {
    append_flags(buf, len, cpu->flags);
  } else {
    pf_append(buf, len, " CPU flags unknown");
  }
}

size_t pf_host_describe(char* buf, size_t len) {
  char text[512];
  pf_cpu cpu;
  pf_cpu_get(NULL, &cpu, NULL, 0);
  pf_cpu_describe(&cpu, text, sizeof text);
  if (len > 0) snprintf(buf, len, "%s", text);
  return strlen(text);
}

pf_status pf_target_check(const char* target, const pf_open_options* opts, char* err,
                          size_t errlen) {
  char copy[512], why[768], *tok[64], *p, *arch, *os;
  int n = 0, bits;
  pf_cpu cpu;
  pf_status s = pf_cpu_get(opts, &cpu, err, errlen);
  if (s != PF_OK) return s;
  if (!target) return pf_fail(err, errlen, PF_ERR_ARGUMENT, "target string is NULL");
  if (strcmp(target, "host") == 0) return PF_OK;
  if (strlen(target) >= sizeof copy) {
    return pf_fail(err, errlen, PF_ERR_ARGUMENT, "target string too long: '%.64s...'", target);
  }
  strcpy(copy, target);
  for (p = copy; n < 64; p++) { /* split at '-' */
    tok[n++] = p;
    p += strcspn(p, "-");
    if (*p == '\0') break;
    *p = '\0';
  }
  if (n < 3 || (bits = atoi(tok[1])) <= 0) {
    return pf_fail(err, errlen, PF_ERR_ARGUMENT,
                   "malformed target string '%s' (expected arch-bits-os[-feature...])", target);
  }
  arch = tok[0];
  os = tok[2];
  (void)os; /* a registry linked into the application runs under any OS its code was built for */
  s = pf_cpu_check(&cpu, arch, bits, (const char* const*)tok + 3, n - 3, why, sizeof why);
  if (s != PF_OK) return pf_fail(err, errlen, s, "target %s %s", target, why);
  return PF_OK;
}
