/* What this machine is, and whether it runs code compiled for a Halide target. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* getauxval, syscall */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#define PF_HOST_ARCH "x86"
#elif defined(__aarch64__) || defined(__arm__)
#define PF_HOST_ARCH "arm"
#if defined(__linux__)
#include <sys/auxv.h>
#endif
#elif defined(__riscv)
#define PF_HOST_ARCH "riscv"
#if defined(__linux__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif
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

/* CPU flags, named as Linux's /proc/cpuinfo names them (sse4_1 aside; abm is LZCNT; apx, which
 * Linux does not list, is APX_F with the OS saving its registers; riscv: v, the vector extension,
 * and vlen<n>, its register width in bits). */
enum {
  SSE41,
  SSSE3,
  SSE42,
  POPCNT,
  AVX,
  AVX2,
  FMA,
  FMA4,
  F16C,
  BMI1,
  BMI2,
  ABM,
  MOVBE,
  SSE4A,
  GFNI,
  AVX512F,
  AVX512CD,
  AVX512ER,
  AVX512PF,
  AVX512BW,
  AVX512DQ,
  AVX512VL,
  AVX512IFMA,
  AVX512VBMI,
  AVX512VBMI2,
  AVX512VNNI,
  AVX512BF16,
  AVX512BITALG,
  AVX512VPOPCNTDQ,
  AVX512FP16,
  AVXVNNI,
  AMXTILE,
  AMXINT8,
  AMXBF16,
  APX,
  NEON,
  VFPV4,
  IDIVA,
  ASIMDDP,
  FPHP,
  ASIMDHP,
  SVE,
  SVE2,
  ATOMICS,
  ASIMDRDM,
  LRCPC,
  FCMA,
  ILRCPC,
  FLAGM,
  USCAT,
  RVV,
  VLEN128,
  VLEN256,
  VLEN512,
  VLEN1024,
  NUM_FLAGS
};
/* clang-format off */
static const char* const flag_names[NUM_FLAGS] = {
    "sse41", "ssse3", "sse4_2", "popcnt", "avx", "avx2", "fma", "fma4", "f16c", "bmi1", "bmi2",
    "abm", "movbe", "sse4a", "gfni",
    "avx512f", "avx512cd", "avx512er", "avx512pf", "avx512bw", "avx512dq", "avx512vl",
    "avx512ifma", "avx512vbmi", "avx512_vbmi2", "avx512_vnni", "avx512_bf16", "avx512_bitalg",
    "avx512_vpopcntdq", "avx512_fp16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "apx",
    "neon", "vfpv4", "idiva", "asimddp", "fphp", "asimdhp", "sve", "sve2", "atomics", "asimdrdm",
    "lrcpc", "fcma", "ilrcpc", "flagm", "uscat",
    "v", "vlen128", "vlen256", "vlen512", "vlen1024"};
/* clang-format on */

/* Other spellings pf_open_options.cpu_flags accepts: Linux's, and those of padfold before
 * Halide 21. */
static const struct {
  const char *alias, *name;
} flag_aliases[] = {
    {"sse4_1", "sse41"}, {"avx512vnni", "avx512_vnni"}, {"avx512bf16", "avx512_bf16"}};

#define B(f) (1ull << (f))
typedef char pf_flags_fit_in_uint64[NUM_FLAGS <= 64 ? 1 : -1];
/* What LLVM's own feature implications add: sse4.1 -> ssse3, avx -> sse4.2, avx512f -> avx2 fma
 * f16c, amx-int8/amx-bf16 -> amx-tile. */
#define L_SSE41 (B(SSE41) | B(SSSE3))
#define L_AVX (B(AVX) | B(SSE42) | L_SSE41)
#define L_AVX2 (B(AVX2) | L_AVX)
#define L_512 (B(AVX512F) | B(AVX512CD) | L_AVX2 | B(FMA) | B(F16C))
/* What the -mcpu Halide picks for a feature lets LLVM use without intrinsics (target-cpu, besides
 * the target-features that mattrs() lists): popcnt from corei7-avx on; bmi1 bmi2 lzcnt movbe from
 * haswell on (every later -mcpu has them); sse4a, gfni, avx512_vpopcntdq from znver4/znver5;
 * gfni, avx512_vpopcntdq, avx512_fp16 from sapphirerapids. Features only intrinsics reach (aes,
 * sha, vaes, rdrand, xsave, movdiri, vp2intersect, ...) are left out: Halide emits none of them. */
#define CPU_AVX (L_AVX | B(POPCNT))
#define CPU_HSW (L_AVX2 | B(FMA) | B(F16C) | B(POPCNT) | B(BMI1) | B(BMI2) | B(ABM) | B(MOVBE))
#define CPU_ZEN4 (CPU_HSW | B(SSE4A) | B(GFNI) | B(AVX512VPOPCNTDQ))
#define CPU_SPR (CPU_HSW | B(GFNI) | B(AVX512VPOPCNTDQ) | B(AVX512FP16))
/* The target-features mattrs() gives the AVX-512 levels (complete_x86_target's implications in). */
#define X_SKX (L_512 | B(AVX512BW) | B(AVX512DQ) | B(AVX512VL))
#define X_CNL (X_SKX | B(AVX512IFMA) | B(AVX512VBMI))
#define X_ZEN4 (X_CNL | B(AVX512BF16) | B(AVX512VNNI) | B(AVX512BITALG) | B(AVX512VBMI2))
#define X_AVX10 (X_ZEN4 | B(AVX512VPOPCNTDQ) | B(AVX512FP16)) /* avx10.1-256/-512 */
#define X_SPR (X_ZEN4 | B(AVXVNNI) | B(AMXTILE) | B(AMXINT8) | B(AMXBF16))
/* arm: cortex-x1, sve2's -mcpu (64-bit, not Apple): v8.2a (lse, rdm), rcpc, fullfp16, dotprod. */
#define A_X1 (B(ATOMICS) | B(ASIMDRDM) | B(LRCPC) | B(FPHP) | B(ASIMDHP) | B(ASIMDDP))

/* Halide 21 target features and the CPU flags code for them may use: what CodeGen_X86/CodeGen_ARM
 * tell LLVM (mattrs() as target-features, mcpu_target() as target-cpu) for a target with the
 * feature, after complete_x86_target / complete_arm_target add the features it implies. */
static const struct feature {
  const char *name, *arch;
  short bits;        /* 0: any; else only targets of this many bits */
  short vector_bits; /* 0: any; else only with the target's vector_bits_<n> */
  short rank;        /* x86: its -mcpu, the highest wins (sapphirerapids 9 ... penryn 1, none 0) */
  uint64_t needs;
  uint64_t outranked; /* needs that a higher-ranked feature's -mcpu replaces (znver's sse4a) */
} cpu_features[] = {
    {"sse41", "x86", 0, 0, 1, L_SSE41, 0},      /* -mcpu=penryn */
    {"avx", "x86", 0, 0, 2, CPU_AVX, 0},        /* -mcpu=corei7-avx */
    {"avx2", "x86", 0, 0, 3, CPU_HSW, 0},       /* -mcpu=haswell, +fma +f16c */
    {"fma", "x86", 0, 0, 0, B(FMA) | L_AVX, 0}, /* +fma */
    {"fma4", "x86", 0, 0, 0, B(FMA4) | B(SSE4A) | L_AVX, 0},
    {"f16c", "x86", 0, 0, 0, B(F16C) | L_AVX, 0},
    {"avxvnni", "x86", 0, 0, 0, B(AVXVNNI) | L_AVX2, 0}, /* +avxvnni (given with AVX-512 only) */
    {"avx512", "x86", 0, 0, 3, CPU_HSW | L_512, 0},      /* -mcpu=haswell */
    {"avx512_knl", "x86", 0, 0, 4, CPU_HSW | L_512 | B(AVX512ER) | B(AVX512PF), 0},
    {"avx512_skylake", "x86", 0, 0, 5, CPU_HSW | X_SKX, 0},
    {"avx512_cannonlake", "x86", 0, 0, 6, CPU_HSW | X_CNL, 0},
    {"avx512_zen4", "x86", 0, 0, 7, CPU_ZEN4 | X_ZEN4, B(SSE4A)},
    {"avx512_zen5", "x86", 0, 0, 8, CPU_ZEN4 | X_ZEN4 | B(AVXVNNI), B(SSE4A)},
    {"avx512_sapphirerapids", "x86", 0, 0, 9, CPU_SPR | X_SPR, 0},
    {"avx10_1", "x86", 0, 256, 3, CPU_HSW | X_AVX10, 0},         /* implies avx2 */
    {"avx10_1", "x86", 0, 512, 9, CPU_SPR | X_SPR | X_AVX10, 0}, /* implies sapphirerapids */
    {"x86apx", "x86", 64, 0, 0, B(APX), 0},                      /* +egpr +push2pop2 +ppx +ndd */
    {"arm_dot_prod", "arm", 0, 0, 0, B(ASIMDDP), 0},
    {"arm_fp16", "arm", 0, 0, 0, B(FPHP) | B(ASIMDHP), 0},
    {"armv8a", "arm", 64, 0, 0, 0, 0},
    {"armv81a", "arm", 64, 0, 0, B(ATOMICS) | B(ASIMDRDM), 0},
    {"armv82a", "arm", 64, 0, 0, B(ATOMICS) | B(ASIMDRDM), 0},
    {"armv83a", "arm", 64, 0, 0, B(ATOMICS) | B(ASIMDRDM) | B(LRCPC) | B(FCMA), 0},
    {"armv84a", "arm", 64, 0, 0,
     B(ATOMICS) | B(ASIMDRDM) | B(LRCPC) | B(FCMA) | B(ASIMDDP) | B(ILRCPC) | B(FLAGM) | B(USCAT),
     0},
    {"armv7s", "arm", 0, 0, 0, B(NEON) | B(VFPV4) | B(IDIVA), 0}, /* -mcpu=swift */
    {"sve", "arm", 0, 0, 0, B(SVE) | B(FPHP) | B(ASIMDHP), 0},    /* +sve implies +fullfp16 */
    {"sve2", "arm", 0, 0, 0, B(SVE) | B(SVE2) | A_X1, 0},         /* +sve2, -mcpu=cortex-x1 */
    {"no_neon", "arm", 0, 0, 0, 0, 0},
    /* +v +zvl<n>b, and Halide fixes vscale to vector_bits / 64: the vector registers must be
     * exactly that wide. Halide compiles riscv code with rvv and vector_bits only. */
    {"rvv", "riscv", 0, 128, 0, B(RVV) | B(VLEN128), 0},
    {"rvv", "riscv", 0, 256, 0, B(RVV) | B(VLEN256), 0},
    {"rvv", "riscv", 0, 512, 0, B(RVV) | B(VLEN512), 0},
    {"rvv", "riscv", 0, 1024, 0, B(RVV) | B(VLEN1024), 0},
};

/* Halide 21 features that change code generation but need nothing from the CPU (and
 * disable_llvm_loop_opt, a Halide 14 one). tune_<cpu> tokens change instruction scheduling only;
 * vector_bits_<n> is read with the features it sizes (avx10_1; sve/sve2, whose code checks the
 * vector length it runs with). */
static const char* const neutral_features[] = {
    "no_asserts",
    "no_bounds_query",
    "no_runtime",
    "large_buffers",
    "strict_float",
    "debug",
    "enable_backtraces",
    "profile",
    "profile_by_timer",
    "c_plus_plus_name_mangling",
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
  size_t i;
  for (i = 0; i < NUM_FLAGS; i++) {
    if (strlen(flag_names[i]) == len && strncmp(flag_names[i], name, len) == 0) return (int)i;
  }
  for (i = 0; i < sizeof flag_aliases / sizeof flag_aliases[0]; i++) {
    if (strlen(flag_aliases[i].alias) == len && strncmp(flag_aliases[i].alias, name, len) == 0) {
      return flag_index(flag_aliases[i].name, strlen(flag_aliases[i].name));
    }
  }
  return -1;
}

#if defined(__x86_64__) && defined(__linux__)
/* Linux lets a process use AMX tiles only after it asks (without, they fault like an illegal
 * instruction); Halide's runtime does not ask, so detection does. */
static int amx_permitted(void) {
  unsigned long perm = 0;
  if (syscall(SYS_arch_prctl, 0x1022 /* ARCH_GET_XCOMP_PERM */, &perm) == 0 && (perm >> 18 & 1)) {
    return 1;
  }
  return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
}
#elif defined(__x86_64__)
static int amx_permitted(void) {
  return 1;
}
#endif

#if defined(__x86_64__) || defined(__i386__)
struct cpuid_bit {
  unsigned char reg, bit, flag; /* reg: 0 eax, 1 ebx, 2 ecx, 3 edx */
};

static uint64_t cpuid_flags(const unsigned r[4], const struct cpuid_bit* bits, size_t n) {
  uint64_t f = 0;
  size_t i;
  for (i = 0; i < n; i++) {
    if (r[bits[i].reg] >> bits[i].bit & 1) f |= B(bits[i].flag);
  }
  return f;
}

#define CPUID_FLAGS(r, bits) cpuid_flags(r, bits, sizeof bits / sizeof bits[0])

static uint64_t detect_flags(int* known) {
  /* Bits that need nothing from the OS beyond SSE; those using the AVX (ymm), AVX-512 (opmask,
   * zmm) or AMX / APX register state count only where XCR0 says the OS saves that state. */
  static const struct cpuid_bit leaf1[] = {
      {2, 9, SSSE3}, {2, 19, SSE41}, {2, 20, SSE42}, {2, 22, MOVBE}, {2, 23, POPCNT}};
  static const struct cpuid_bit leaf1_ymm[] = {{2, 12, FMA}, {2, 28, AVX}, {2, 29, F16C}};
  static const struct cpuid_bit ext1[] = {{2, 5, ABM}, {2, 6, SSE4A}};
  static const struct cpuid_bit leaf7[] = {{1, 3, BMI1}, {1, 8, BMI2}, {2, 8, GFNI}};
  static const struct cpuid_bit leaf7_zmm[] = {
      {1, 16, AVX512F},         {1, 17, AVX512DQ},   {1, 21, AVX512IFMA}, {1, 26, AVX512PF},
      {1, 27, AVX512ER},        {1, 28, AVX512CD},   {1, 30, AVX512BW},   {1, 31, AVX512VL},
      {2, 1, AVX512VBMI},       {2, 6, AVX512VBMI2}, {2, 11, AVX512VNNI}, {2, 12, AVX512BITALG},
      {2, 14, AVX512VPOPCNTDQ}, {3, 23, AVX512FP16}};
  unsigned r[4], xcr0 = 0, lo, hi, max7;
  uint64_t f = 0;
  int ymm, zmm;
  *known = 1;
  if (!__get_cpuid(1, &r[0], &r[1], &r[2], &r[3])) return 0;
  f |= CPUID_FLAGS(r, leaf1);
  if (r[2] >> 27 & 1) { /* OSXSAVE: XCR0 tells which register state the OS saves */
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = lo;
  }
  ymm = (xcr0 & 0x6) == 0x6;
  zmm = ymm && (xcr0 & 0xe0) == 0xe0;
  if (ymm) f |= CPUID_FLAGS(r, leaf1_ymm);
  if (__get_cpuid(0x80000001, &r[0], &r[1], &r[2], &r[3])) {
    f |= CPUID_FLAGS(r, ext1);
    if (ymm && (r[2] >> 16 & 1)) f |= B(FMA4);
  }
  if (!__get_cpuid_count(7, 0, &r[0], &r[1], &r[2], &r[3])) return f;
  max7 = r[0];
  f |= CPUID_FLAGS(r, leaf7);
  if (ymm && (r[1] >> 5 & 1)) f |= B(AVX2);
  if (zmm) f |= CPUID_FLAGS(r, leaf7_zmm);
#if defined(__x86_64__) /* AMX and APX: 64-bit mode only */
  if ((xcr0 & 0x60000) == 0x60000 && (r[3] >> 24 & 1) && amx_permitted()) { /* tile state */
    f |= B(AMXTILE) | (r[3] >> 25 & 1 ? B(AMXINT8) : 0) | (r[3] >> 22 & 1 ? B(AMXBF16) : 0);
  }
#endif
  if (max7 >= 1 && __get_cpuid_count(7, 1, &r[0], &r[1], &r[2], &r[3])) {
    if (ymm && (r[0] >> 4 & 1)) f |= B(AVXVNNI);
    if (zmm && (r[0] >> 5 & 1)) f |= B(AVX512BF16);
#if defined(__x86_64__)
    if ((xcr0 >> 19 & 1) && (r[3] >> 21 & 1)) f |= B(APX); /* APX_F, extended GPR state */
#endif
  }
  return f;
}
#elif defined(__aarch64__) && defined(__linux__)
static uint64_t detect_flags(int* known) {
  static const struct {
    unsigned char bit, flag;
  } hwcap[] = {{8, ATOMICS},  {9, FPHP}, {10, ASIMDHP}, {12, ASIMDRDM}, {14, FCMA}, {15, LRCPC},
               {20, ASIMDDP}, {22, SVE}, {25, USCAT},   {26, ILRCPC},   {27, FLAGM}};
  unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  uint64_t f = B(NEON) | B(VFPV4) | B(IDIVA); /* every AArch64 CPU */
  size_t i;
  *known = 1;
  for (i = 0; i < sizeof hwcap / sizeof hwcap[0]; i++) {
    if (hw >> hwcap[i].bit & 1) f |= B(hwcap[i].flag);
  }
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
  if (hw & (1ul << 17)) f |= B(IDIVA);
  return f;
}
#elif defined(__riscv) && defined(__linux__)
static uint64_t detect_flags(int* known) {
  unsigned long hw = getauxval(AT_HWCAP), vlenb = 0;
  int control = prctl(70 /* PR_RISCV_V_GET_CONTROL */, 0, 0, 0, 0);
  uint64_t f = 0;
  *known = 1;
  /* Vector instructions fault where Linux has them off for this process (a kernel without the
   * prctl, qemu-user say, reports V only where it lets every process use it). */
  if ((hw >> ('V' - 'A') & 1) && (control < 0 || (control & 3) == 2 /* ON */)) {
    __asm__ __volatile__("csrr %0, 0xc22" : "=r"(vlenb)); /* vlenb: VLEN / 8 */
    f |= B(RVV);
    if (vlenb == 16) f |= B(VLEN128);
    if (vlenb == 32) f |= B(VLEN256);
    if (vlenb == 64) f |= B(VLEN512);
    if (vlenb == 128) f |= B(VLEN1024);
  }
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

/* The entry for a feature at the target's vector_bits (NULL if none); *any: any entry of that name.
 */
static const struct feature* find_feature(const char* name, int vector_bits,
                                          const struct feature** any) {
  size_t i;
  *any = NULL;
  for (i = 0; i < sizeof cpu_features / sizeof cpu_features[0]; i++) {
    const struct feature* f = &cpu_features[i];
    if (strcmp(f->name, name) != 0) continue;
    if (!*any) *any = f;
    if (f->vector_bits == 0 || f->vector_bits == vector_bits) return f;
  }
  return NULL;
}

/* GPU features (cuda, cuda_capability_<n>, opencl, cl_<ext>): the device is probed at open
 * (device.c), not the CPU. */
static int is_device_feature(const char* name) {
  return strcmp(name, "cuda") == 0 || strcmp(name, "opencl") == 0 ||
         strncmp(name, "cuda_capability_", 16) == 0 || strncmp(name, "cl_", 3) == 0;
}

static int is_neutral(const char* name) {
  size_t i;
  if (is_device_feature(name)) return 1;
  for (i = 0; i < sizeof neutral_features / sizeof neutral_features[0]; i++) {
    if (strcmp(neutral_features[i], name) == 0) return 1;
  }
  return 0;
}

/* n for a "vector_bits_<n>" token, else -1. */
static int vector_bits_of(const char* token) {
  const char* p = token + strlen("vector_bits_");
  if (strncmp(token, "vector_bits_", strlen("vector_bits_")) != 0 || *p == '\0' ||
      strspn(p, "0123456789") != strlen(p) || strlen(p) > 6) {
    return -1;
  }
  return atoi(p);
}

pf_status pf_cpu_check(const pf_cpu* cpu, const char* arch, int bits, const char* const* features,
                       int num_features, char* why, size_t whylen) {
  int i, problems = 0, no_neon = 0, vector_bits = 0, top = 0;
  const int target_bits = bits > 0 ? bits : cpu->bits;
  const struct feature *f, *any;
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
    if (vector_bits_of(features[i]) >= 0) vector_bits = vector_bits_of(features[i]);
  }
  for (i = 0; i < num_features; i++) { /* Halide's -mcpu: that of the highest-ranked feature */
    f = find_feature(features[i], vector_bits, &any);
    if (f && strcmp(f->arch, cpu->arch) == 0 && f->rank > top) top = f->rank;
  }
  for (i = 0; i < num_features; i++) {
    const char* name = features[i];
    const char* sep = problems++ ? "; " : "";
    f = find_feature(name, vector_bits, &any);
    if (!f && (strncmp(name, "tune_", 5) == 0 || vector_bits_of(name) >= 0 || is_neutral(name))) {
      problems--; /* tuning, vector width, code generation only */
    } else if (any && strcmp(any->arch, cpu->arch) != 0) {
      pf_append(why, whylen, "%sfeature %s is for %s, this machine is %s", sep, name, any->arch,
                cpu->arch);
    } else if (any && !f) { /* avx10_1: Halide compiles it for some vector widths only */
      size_t k;
      int n = 0;
      pf_append(why, whylen, "%sneeds %s with", sep, name);
      for (k = 0; k < sizeof cpu_features / sizeof cpu_features[0]; k++) {
        if (strcmp(cpu_features[k].name, name) != 0) continue;
        pf_append(why, whylen, "%s vector_bits_%d", n++ ? " or" : "", cpu_features[k].vector_bits);
      }
      if (vector_bits) {
        pf_append(why, whylen, ", the target has vector_bits_%d", vector_bits);
      } else {
        pf_append(why, whylen, ", the target has no vector_bits_<n>");
      }
    } else if (f && f->bits && f->bits != target_bits) {
      pf_append(why, whylen, "%sfeature %s is for %s-%d targets only, this one is %s-%d", sep, name,
                f->arch, f->bits, f->arch, target_bits);
    } else if (f) {
      const uint64_t needs = f->needs & ~(f->rank < top ? f->outranked : 0);
      const uint64_t missing = cpu->known ? needs & ~cpu->flags : 0;
      no_neon |= strcmp(f->name, "no_neon") == 0;
      if (!missing) {
        problems--;
        continue;
      }
      if (f->vector_bits) {
        pf_append(why, whylen, "%sneeds %s (vector_bits_%d), this CPU lacks", sep, name,
                  vector_bits);
      } else {
        pf_append(why, whylen, "%sneeds %s, this CPU lacks", sep, name);
      }
      append_flags(why, whylen, missing);
    } else {
      pf_append(why, whylen, "%sneeds %s, which the padfold runtime does not support", sep, name);
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
