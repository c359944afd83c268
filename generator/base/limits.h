// Every limit padfold puts on its input, in one place (docs/spec-and-cli.md, "Limits"), and the
// checked arithmetic used wherever sizes given by a user are added or multiplied.
//
// Sizes: every spatial extent (input, padded input, output, the effective kernel), kernel, stride,
// dilation, explicit pad, output_padding, output_shape, channel count, batch and groups must fit
// an int32, and every buffer of a layer (input, weights, bias, output) must be under 2^31 bytes:
// the generated Halide code indexes with 32-bit integers. The padding module enforces the per-axis
// limits (padding.h), the frontend the rest (frontend/spec.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace padfold {

// The largest size of any one quantity: INT32_MAX.
inline constexpr int64_t kMaxSize = 2147483647;
// Every buffer must be smaller than this many bytes (2 GiB).
inline constexpr int64_t kMaxBufferBytes = int64_t{1} << 31;

// Spec files (frontend/spec.cpp).
inline constexpr int64_t kMaxSpecFileBytes = int64_t{64} << 20;  // 64 MiB
inline constexpr int kMaxJsonDepth = 64;        // arrays and objects nested in one another
inline constexpr size_t kMaxNameLength = 64;    // model and layer names (they become C symbols)
inline constexpr size_t kMaxPathLength = 4096;  // weight_files paths
// Inputs of one add or concat layer: the runtime's PF_MAX_BUFFERS (64) less the output
// (DenseNet-201 concatenates up to 49 tensors).
inline constexpr size_t kMaxJoinInputs = 63;

// A bundle's manifest.json or an import's report, as padfold compile reads it before replacing the
// directory (the runtime's limit on a manifest, MAX_MANIFEST_BYTES in runtime/manifest.c).
inline constexpr int64_t kMaxManifestBytes = int64_t{64} << 20;  // 64 MiB
// A lowered statement padfold stmt-check reads (<target>/<layer>.stmt).
inline constexpr int64_t kMaxStmtFileBytes = int64_t{256} << 20;  // 256 MiB

// Checked int64 arithmetic: nullopt where the exact result does not fit an int64_t.
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checked_sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
// The product of all values (1 for none), or nullopt on overflow.
inline std::optional<int64_t> checked_product(const std::vector<int64_t>& values) {
  int64_t p = 1;
  for (int64_t v : values) {
    const auto next = checked_mul(p, v);
    if (!next) return std::nullopt;
    p = *next;
  }
  return p;
}

}  // namespace padfold
