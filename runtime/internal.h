/* Declarations shared by the runtime's sources; not installed. */
#ifndef PADFOLD_RUNTIME_INTERNAL_H
#define PADFOLD_RUNTIME_INTERNAL_H

#include "padfold_runtime.h"

#if defined(__GNUC__) || defined(__clang__)
#define PF_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PF_PRINTF(a, b)
#endif

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

/* Creates a handle over reg (validated, CPU-checked). On success the handle owns `release(ctx)`,
 * called by pf_bundle_close; on failure nothing is released. dir may be NULL. */
pf_status pf_bundle_create(const pf_registry* reg, const pf_open_options* opts, const char* dir,
                           void (*release)(void*), void* ctx, pf_bundle** out, char* err,
                           size_t errlen);

/* Parses and validates manifest text as pf_bundle_open does, without loading anything (for the
 * fuzzer). label names the text in messages. */
pf_status pf_manifest_check(const char* text, size_t len, const char* label, char* err,
                            size_t errlen);

#endif
