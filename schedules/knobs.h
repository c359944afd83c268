// Every schedule knob, declared once. The struct, JSON reading and writing, validation, the docs
// table (`padfold knobs`, docs/schedule-knobs.md) and a tuner's search space all come from the
// list below: adding a knob is one line here (and its use in a schedule function).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace padfold {

// X(type, name, default, min, max, scale, scope, doc). type is int or bool (bool knobs ignore
// min/max); scale is a search hint (linear, or pow2: 0 where min is 0, then powers of two); scope
// is the schedule family that reads the knob (cpu, gpu).
#define PADFOLD_SCHEDULE_KNOBS(X)                                                                 \
  X(int, vector_lanes, 8, 0, 64, pow2, cpu,                                                       \
    "floats per vector; 0 = the target's natural width (clamped to the vectorized axis)")         \
  X(int, channel_vectors, 1, 1, 16, linear, cpu,                                                  \
    "vectors of output channels in a register tile (channels-last; channels-first: channels)")    \
  X(int, tile_x, 4, 1, 64, linear, cpu,                                                           \
    "output columns in a register tile (channels-first: vectors of columns)")                     \
  X(int, tile_y, 1, 1, 32, linear, cpu, "output rows in a register tile")                         \
  X(int, rows_per_task, 1, 0, 256, linear, cpu, "row tiles per parallel task; 0 = no threads")    \
  X(int, min_task_kflop, 0, 0, 1000000, linear, cpu,                                              \
    "raise rows_per_task to tasks of at least this many kFLOP (a divisor of the row tiles, "      \
    "16 tasks or more); a kernel with less work than two such tasks runs on one thread; "         \
    "0 = off")                                                                                    \
  X(int, unroll_taps, 0, 0, 16, linear, cpu,                                                      \
    "unroll the innermost kernel axis when it has at most this many taps")                        \
  X(int, unroll_taps_outer, 0, 0, 16, linear, cpu,                                                \
    "unroll the outer kernel axes (H, D) when they have at most this many taps")                  \
  X(int, unroll_taps_rows, 0, 0, 256, linear, cpu,                                                \
    "unroll every kernel axis when the output has at most this many rows")                        \
  X(int, unroll_channels, 0, 0, 64, linear, cpu,                                                  \
    "unroll the input-channel reduction by this factor (its largest divisor at most this)")       \
  X(bool, taps_inner, false, 0, 1, linear, cpu,                                                   \
    "reduction order: kernel taps inside input channels (else channels innermost)")               \
  X(bool, inline_border, true, 0, 1, linear, cpu,                                                 \
    "read the border through the bounded input inline (else stage the bordered input per tile)")  \
  X(bool, fit_tiles, false, 0, 1, linear, cpu,                                                    \
    "reshape the register tile within its accumulator budget to divide the output")               \
  X(int, channels_outer_kb, 0, 0, 1048576, linear, cpu,                                           \
    "channel blocks outermost when the weights exceed this many KiB; 0 = never")                  \
  X(bool, parallel_channels, false, 0, 1, linear, cpu,                                            \
    "with channel blocks outermost, threads over the blocks instead of rows")                     \
  X(int, channel_tasks_rows, 0, 0, 256, linear, cpu,                                              \
    "with channel blocks outermost, threads over the blocks instead of rows when the output "     \
    "has fewer row tiles than this")                                                              \
  X(int, pack_weights_kb, 0, 0, 4096, linear, cpu,                                                \
    "with channel blocks outermost (channels-last), copy each block's weights into a "            \
    "contiguous stack buffer when it takes at most this many KiB (weights from a bundle's files " \
    "are stored so, blocked, instead); 0 = never")                                                \
  X(int, winograd, 0, 0, 2, linear, cpu,                                                          \
    "3x3 stride-1 2D dense convs: 1 = Winograd F(2,3), 2 = F(4,3) (tiles of 2x2 or 4x4 "          \
    "outputs; vectors of output channels by tile_x tiles in registers); 0 = direct")              \
  X(int, winograd_min_tiles, 0, 0, 4096, pow2, cpu,                                               \
    "with winograd: only on outputs of at least this many tiles (U, the weights transformed "     \
    "once, is read per row of tiles, a cost the tiles share); F(4,3) with fewer tiles is "        \
    "F(2,3) where that has enough, else direct")                                                  \
  X(int, gemm_pixels, 0, 0, 32, linear, cpu,                                                      \
    "pointwise float convs without padding: the output plane as one run of pixels (GEMM-like), "  \
    "register tiles of this many pixels by gemm_vectors vectors of channels; 0 = direct loops")   \
  X(int, gemm_vectors, 4, 1, 8, linear, cpu,                                                      \
    "with gemm_pixels: vectors of output channels in a register tile")                            \
  X(int, fused_strips, 0, 0, 64, linear, cpu,                                                     \
    "fused blocks: the rows in this many parallel strips, and a producer read through a window "  \
    "computed per row tile, sliding along its strip (no halo recompute); 0 = per pixel tile")     \
  X(int, gpu_threads_x, 16, 1, 256, pow2, gpu,                                                    \
    "GPU: threads of a block along the innermost output axis (channels-last: channels)")          \
  X(int, gpu_threads_y, 8, 1, 64, pow2, gpu,                                                      \
    "GPU: threads of a block along the next output axis (channels-last: x, else y)")              \
  X(int, gpu_tile_x, 2, 1, 8, linear, gpu,                                                        \
    "GPU: outputs per thread (a register tile) along the innermost output axis")                  \
  X(int, gpu_tile_y, 2, 1, 8, linear, gpu,                                                        \
    "GPU: outputs per thread (a register tile) along the next output axis")                       \
  X(int, gpu_unroll_channels, 4, 1, 32, linear, gpu,                                              \
    "GPU: the input-channel reduction split by this factor (a divisor), inner part unrolled")     \
  X(int, gpu_stage_kb, 40, 0, 96, linear, gpu,                                                    \
    "GPU: stage a block's bordered input tile + halo in shared memory (the border resolved "      \
    "while staging) when it fits in this many KiB; else read the bordered input inline")          \
  X(int, gpu_max_registers, 128, 0, 255, linear, gpu,                                             \
    "GPU (CUDA): HL_CUDA_JIT_MAX_REGISTERS, the highest of the bundle; 0 = Halide's 64")

// Each knob scope's schedule-space version (scope, version), part of the tuning database's
// toolchain key for the targets whose schedules read that scope (tune/signature.h): bump a scope's
// version when one of its knobs is removed or changes meaning, or is added with a default that
// changes what the schedules do, so that its old measurements stop applying. The other scopes'
// records stay valid, and so do this scope's when a knob is added with a default that keeps the
// schedules as they were: a record stores only the knobs off their defaults (knobs_text).
#define PADFOLD_KNOB_SCOPES(X) \
  X(cpu, 3)                    \
  X(gpu, 1)

// The version of `scope` (a name in PADFOLD_KNOB_SCOPES); throws std::invalid_argument otherwise.
int schedule_space_version(const std::string& scope);

// A layer's schedule: every knob, plus the name of the strategy-table row it came from.
struct ScheduleParams {
  std::string name;  // "<family>.<op class>", e.g. "avx512.dense", or "<family>.conservative"
  // The row's implementation that computes the layer with these knobs ("direct", "winograd"):
  // resolve_schedule sets it and the manifest records it. The knobs choose it, not this field
  // (requested_schedule refuses overrides naming another).
  std::string implementation;
#define PADFOLD_KNOB_FIELD(type, id, def, lo, hi, scale, scope, doc) type id = def;
  PADFOLD_SCHEDULE_KNOBS(PADFOLD_KNOB_FIELD)
#undef PADFOLD_KNOB_FIELD

  bool operator==(const ScheduleParams& other) const;
  bool operator!=(const ScheduleParams& other) const {
    return !(*this == other);
  }
};

enum class KnobType { Int, Bool };
enum class KnobScale { Linear, Pow2 };

struct Knob {
  const char* name;
  KnobType type;
  int64_t default_value, min, max;  // bools: 0 and 1
  KnobScale scale;
  const char* scope;
  const char* doc;
  int64_t (*get)(const ScheduleParams&);
  void (*set)(ScheduleParams&, int64_t);

  std::string range() const;  // "[0, 64]" or "true or false"
  // The values a search visits: every value of a small linear range, else powers of two (and 0).
  std::vector<int64_t> search_values() const;
};

// Every knob in declaration order.
const std::vector<Knob>& knobs();
const Knob* find_knob(const std::string& name);

// Bad knob JSON: what() names the knob, what was given and what is expected.
struct KnobError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

nlohmann::json to_json(const ScheduleParams& params);
// Sets knobs from a JSON object ("name" and "implementation" are also accepted, for a manifest's
// entry read back).
// Unknown keys, wrong types and values out of range throw KnobError; `params` is left unchanged.
void update_from_json(ScheduleParams& params, const nlohmann::json& j);

// `base` with the given knobs set, by name (for tables of defaults). Throws std::logic_error for
// an unknown knob or a value out of range: a table bug, caught by the schedules tests.
ScheduleParams with_knobs(ScheduleParams base,
                          std::initializer_list<std::pair<const char*, int64_t>> values);

// The knob table as Markdown (docs/schedule-knobs.md is this text).
std::string knobs_markdown();

}  // namespace padfold
