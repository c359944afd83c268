// The tuned default parameters, one row per (target family, op class). Measured on Zen 4
// (AVX-512); see bench/README.md for how they were chosen.
#include <map>
#include <utility>

#include "schedule.h"

namespace padfold {

namespace {

using Key = std::pair<TargetFamily, OpClass>;

// Flags of a row (see ScheduleParams).
enum Flags : unsigned {
  kNone = 0,
  kFit = 1,              // fit_tiles
  kTapsInner = 2,        // taps_inner
  kParallelChannels = 4  // parallel_channels
};

ScheduleParams row(int lanes, int channel_vectors, int tile_x, int tile_y, int rows_per_task,
                   int unroll_taps, int unroll_taps_outer = 0, int unroll_taps_rows = 0,
                   int unroll_channels = 0, int channels_outer_kb = 0, unsigned flags = kNone) {
  ScheduleParams p;
  p.vector_lanes = lanes;
  p.channel_vectors = channel_vectors;
  p.tile_x = tile_x;
  p.tile_y = tile_y;
  p.rows_per_task = rows_per_task;
  p.unroll_taps = unroll_taps;
  p.unroll_taps_outer = unroll_taps_outer;
  p.unroll_taps_rows = unroll_taps_rows;
  p.unroll_channels = unroll_channels;
  p.fit_tiles = (flags & kFit) != 0;
  p.taps_inner = (flags & kTapsInner) != 0;
  p.channels_outer_kb = channels_outer_kb;
  p.parallel_channels = (flags & kParallelChannels) != 0;
  return p;
}

// About 16 accumulators fill AVX-512's 32 registers without spilling; AVX2 has 16 registers and
// takes about 12 (14 spill); NEON on AArch64 has 32 registers of 4 lanes. cv x tx x ty is the
// accumulator budget of a tile. Columns: lanes, cv (channel vectors), tx, ty, rows per task,
// taps (unroll the innermost kernel axis up to this), outer (the other kernel axes), small
// (every kernel axis on outputs of at most this many rows), rc (unroll the input channels),
// outer_kb (channel blocks outermost when the weights exceed this many KiB), flags.
//
// Measured with bench/ on Zen 4 (bench/README.md has the numbers):
//  kFit everywhere: a tile that does not divide the output recomputes an overlap and, on a padded
//             axis, keeps Halide from peeling the border tiles off, so every tile tests the border
//             (resnet_3x3 with 16-column tiles on 56 columns: 82 instead of 118 GFLOP/s).
//  dense      one channel vector x 16 columns (14 after fitting 56/28): one weight vector per 14
//             broadcast FMAs streams 4x less weight data from L2 than 4x4 tiles (the 590 KB of
//             resnet_3x3_s2_same: 109 -> 114 GFLOP/s); small outputs grow the tile to the whole
//             image (seed_even_k4_s2: 4x4 pixels). All taps unrolled: border tiles then have
//             constant tap positions and Halide drops the taps in the padding (seed: 125 -> 175).
//  stem       3 input channels: the taps are the long reduction, so they go innermost and the
//             channels are unrolled (resnet_stem +1-5%).
//  pointwise  weights above 1 MiB (effnet_head_pw: 1.6 MB, more than L2): channel blocks
//             outermost, so each block's weights stay in cache over all pixels, and threads over
//             the blocks (its 7 rows split 4/3 over 2 threads); 98 -> 113 GFLOP/s.
//  depthwise  small tiles over two rows; 3x3 and 5x5 kernels fully unrolled (with Halide 21, 5x5
//             kernels whose rows stay rolled keep a select per tap in the steady state of 14x14
//             outputs; on the 7x7 effnet_dw5_s2_b unrolling drops the padding: 46 -> 106 GFLOP/s).
// AVX2 and generic (SSE4.1) rows take the same structure with their own tile budgets (spot-checked
// on this machine); NEON rows are unchanged: they cannot be timed or run here.
const std::map<Key, ScheduleParams>& table() {
  static const std::map<Key, ScheduleParams> t = {
      // clang-format off
      //                                             lanes cv tx ty rows taps outer small rc outer_kb flags
      {{TargetFamily::X86Avx512, OpClass::Dense},      row(16, 1, 16, 1, 1, 4, 4, 0, 0,    0, kFit)},
      {{TargetFamily::X86Avx512, OpClass::Stem},       row(16, 4,  4, 1, 1, 7, 0, 0, 3,    0, kFit | kTapsInner)},
      {{TargetFamily::X86Avx512, OpClass::Pointwise},  row(16, 1, 16, 1, 1, 0, 0, 0, 0, 1024, kFit | kParallelChannels)},
      {{TargetFamily::X86Avx512, OpClass::Depthwise},  row(16, 1,  4, 2, 1, 5, 5, 8, 0,    0, kFit)},
      {{TargetFamily::X86Avx512, OpClass::Pooling},    row(16, 1, 4, 1, 1, 3)},
      {{TargetFamily::X86Avx512, OpClass::Transposed}, row(16, 2, 4, 1, 1, 0)},
      {{TargetFamily::X86Avx2,   OpClass::Dense},      row(8,  2, 6, 1, 1, 4, 4, 0, 0,    0, kFit)},
      {{TargetFamily::X86Avx2,   OpClass::Stem},       row(8,  2, 6, 1, 1, 7, 0, 0, 3,    0, kFit | kTapsInner)},
      {{TargetFamily::X86Avx2,   OpClass::Pointwise},  row(8,  2, 6, 1, 1, 0, 0, 0, 0, 1024, kFit | kParallelChannels)},
      {{TargetFamily::X86Avx2,   OpClass::Depthwise},  row(8,  1, 4, 2, 1, 5, 5, 8, 0,    0, kFit)},
      {{TargetFamily::X86Avx2,   OpClass::Pooling},    row(8, 1, 4, 1, 1, 3)},
      {{TargetFamily::X86Avx2,   OpClass::Transposed}, row(8, 2, 4, 1, 1, 0)},
      {{TargetFamily::ArmNeon,   OpClass::Dense},      row(4, 4, 4, 1, 1, 3)},
      {{TargetFamily::ArmNeon,   OpClass::Stem},       row(4, 4, 4, 1, 1, 7)},
      {{TargetFamily::ArmNeon,   OpClass::Pointwise},  row(4, 4, 4, 1, 1, 0)},
      {{TargetFamily::ArmNeon,   OpClass::Depthwise},  row(4, 2, 4, 2, 1, 5)},
      {{TargetFamily::ArmNeon,   OpClass::Pooling},    row(4, 2, 4, 1, 1, 3)},
      {{TargetFamily::ArmNeon,   OpClass::Transposed}, row(4, 2, 4, 1, 1, 0)},
      {{TargetFamily::Generic,   OpClass::Dense},      row(4,  2, 4, 1, 1, 4, 4, 0, 0,    0, kFit)},
      {{TargetFamily::Generic,   OpClass::Stem},       row(4,  2, 4, 1, 1, 3, 0, 0, 3,    0, kFit | kTapsInner)},
      {{TargetFamily::Generic,   OpClass::Pointwise},  row(4,  2, 4, 1, 1, 0, 0, 0, 0, 1024, kFit | kParallelChannels)},
      {{TargetFamily::Generic,   OpClass::Depthwise},  row(4,  1, 4, 2, 1, 5, 5, 8, 0,    0, kFit)},
      {{TargetFamily::Generic,   OpClass::Pooling},    row(4, 1, 4, 1, 1, 3)},
      {{TargetFamily::Generic,   OpClass::Transposed}, row(4, 1, 4, 1, 1, 0)},
      // clang-format on
  };
  return t;
}

}  // namespace

TargetFamily target_family(const Halide::Target& t) {
  if (t.arch == Halide::Target::X86) {
    if (t.has_feature(Halide::Target::AVX512)) return TargetFamily::X86Avx512;
    if (t.has_feature(Halide::Target::AVX2)) return TargetFamily::X86Avx2;
  }
  if (t.arch == Halide::Target::ARM && !t.has_feature(Halide::Target::NoNEON))
    return TargetFamily::ArmNeon;
  if (t.arch == Halide::Target::RISCV) return TargetFamily::RiscV;
  return TargetFamily::Generic;
}

OpClass classify(const Layer& L) {
  if (L.op == Op::ConvTranspose) return OpClass::Transposed;
  if (L.op == Op::MaxPool || L.op == Op::AvgPool) return OpClass::Pooling;
  const int64_t in_per_group = L.in_channels / L.groups;
  if (in_per_group == 1 && L.groups > 1) return OpClass::Depthwise;
  bool pointwise = true;
  for (int64_t k : L.kernel) pointwise = pointwise && k == 1;
  if (pointwise) return OpClass::Pointwise;
  if (in_per_group <= 4) return OpClass::Stem;
  return OpClass::Dense;
}

std::string to_string(TargetFamily f) {
  switch (f) {
    case TargetFamily::X86Avx512:
      return "avx512";
    case TargetFamily::X86Avx2:
      return "avx2";
    case TargetFamily::ArmNeon:
      return "neon";
    case TargetFamily::RiscV:
      return "riscv";
    case TargetFamily::Generic:
      return "generic";
  }
  return "?";
}

std::string to_string(OpClass c) {
  switch (c) {
    case OpClass::Dense:
      return "dense";
    case OpClass::Stem:
      return "stem";
    case OpClass::Pointwise:
      return "pointwise";
    case OpClass::Depthwise:
      return "depthwise";
    case OpClass::Pooling:
      return "pooling";
    case OpClass::Transposed:
      return "transposed";
  }
  return "?";
}

ScheduleParams default_schedule(const Layer& layer, const Halide::Target& target) {
  const TargetFamily family = target_family(target);
  const OpClass op_class = classify(layer);
  // RISC-V: the generic rows, scalar. Halide 21's RVV code generation hits an LLVM assertion on
  // vectorized depthwise and pooling kernels (tests/kernels_compile_test.cpp compiles every case).
  const bool riscv = family == TargetFamily::RiscV;
  ScheduleParams p = table().at({riscv ? TargetFamily::Generic : family, op_class});
  if (riscv) p.vector_lanes = 1;
  p.min_task_kflop = 500;  // every family: about 5 us of work per parallel task on these cores
  p.name = to_string(family) + "." + to_string(op_class);
  return p;
}

ScheduleParams conservative_schedule(const Layer&, const Halide::Target& target) {
  ScheduleParams p;
  p.name = to_string(target_family(target)) + ".conservative";
  p.vector_lanes = 1;
  p.channel_vectors = 1;
  p.tile_x = 1;
  p.tile_y = 1;
  p.rows_per_task = 1;
  p.unroll_taps = 0;
  return p;
}

nlohmann::json to_json(const ScheduleParams& p) {
  return {{"name", p.name},
          {"vector_lanes", p.vector_lanes},
          {"channel_vectors", p.channel_vectors},
          {"tile_x", p.tile_x},
          {"tile_y", p.tile_y},
          {"rows_per_task", p.rows_per_task},
          {"unroll_taps", p.unroll_taps},
          {"inline_border", p.inline_border},
          {"unroll_taps_outer", p.unroll_taps_outer},
          {"unroll_taps_rows", p.unroll_taps_rows},
          {"unroll_channels", p.unroll_channels},
          {"taps_inner", p.taps_inner},
          {"fit_tiles", p.fit_tiles},
          {"channels_outer_kb", p.channels_outer_kb},
          {"parallel_channels", p.parallel_channels},
          {"min_task_kflop", p.min_task_kflop}};
}

void update_from_json(ScheduleParams& p, const nlohmann::json& j) {
  for (const auto& [key, value] : j.items()) {
    if (key == "name")
      p.name = value.get<std::string>();
    else if (key == "vector_lanes")
      p.vector_lanes = value.get<int>();
    else if (key == "channel_vectors")
      p.channel_vectors = value.get<int>();
    else if (key == "tile_x")
      p.tile_x = value.get<int>();
    else if (key == "tile_y")
      p.tile_y = value.get<int>();
    else if (key == "rows_per_task")
      p.rows_per_task = value.get<int>();
    else if (key == "unroll_taps")
      p.unroll_taps = value.get<int>();
    else if (key == "inline_border")
      p.inline_border = value.get<bool>();
    else if (key == "unroll_taps_outer")
      p.unroll_taps_outer = value.get<int>();
    else if (key == "unroll_taps_rows")
      p.unroll_taps_rows = value.get<int>();
    else if (key == "unroll_channels")
      p.unroll_channels = value.get<int>();
    else if (key == "taps_inner")
      p.taps_inner = value.get<bool>();
    else if (key == "fit_tiles")
      p.fit_tiles = value.get<bool>();
    else if (key == "channels_outer_kb")
      p.channels_outer_kb = value.get<int>();
    else if (key == "parallel_channels")
      p.parallel_channels = value.get<bool>();
    else if (key == "min_task_kflop")
      p.min_task_kflop = value.get<int>();
    else
      throw std::invalid_argument("unknown schedule parameter '" + key + "'");
  }
}

}  // namespace padfold
