// The tuned default parameters, one row per (target family, op class). Measured on Zen 4
// (AVX-512); see bench/README.md for how they were chosen.
#include <map>
#include <utility>

#include "schedule.h"

namespace padfold {

namespace {

using Key = std::pair<TargetFamily, OpClass>;

ScheduleParams row(int lanes, int channel_vectors, int tile_x, int tile_y, int rows_per_task,
                   int unroll_taps) {
  ScheduleParams p;
  p.vector_lanes = lanes;
  p.channel_vectors = channel_vectors;
  p.tile_x = tile_x;
  p.tile_y = tile_y;
  p.rows_per_task = rows_per_task;
  p.unroll_taps = unroll_taps;
  return p;
}

// About 16 accumulators fill AVX-512's 32 registers without spilling; AVX2 has 16 registers and
// takes about 12; NEON on AArch64 has 32 registers of 4 lanes.
const std::map<Key, ScheduleParams>& table() {
  static const std::map<Key, ScheduleParams> t = {
      // clang-format off
      //                                             lanes cv  tx ty rows unroll
      {{TargetFamily::X86Avx512, OpClass::Dense},      row(16, 4, 4, 1, 1, 3)},
      {{TargetFamily::X86Avx512, OpClass::Stem},       row(16, 4, 4, 1, 1, 7)},
      {{TargetFamily::X86Avx512, OpClass::Pointwise},  row(16, 4, 4, 1, 1, 0)},
      {{TargetFamily::X86Avx512, OpClass::Depthwise},  row(16, 1, 4, 2, 1, 5)},
      {{TargetFamily::X86Avx512, OpClass::Pooling},    row(16, 1, 4, 1, 1, 3)},
      {{TargetFamily::X86Avx512, OpClass::Transposed}, row(16, 2, 4, 1, 1, 0)},
      {{TargetFamily::X86Avx2,   OpClass::Dense},      row(8, 2, 6, 1, 1, 3)},
      {{TargetFamily::X86Avx2,   OpClass::Stem},       row(8, 2, 6, 1, 1, 7)},
      {{TargetFamily::X86Avx2,   OpClass::Pointwise},  row(8, 2, 6, 1, 1, 0)},
      {{TargetFamily::X86Avx2,   OpClass::Depthwise},  row(8, 1, 4, 2, 1, 5)},
      {{TargetFamily::X86Avx2,   OpClass::Pooling},    row(8, 1, 4, 1, 1, 3)},
      {{TargetFamily::X86Avx2,   OpClass::Transposed}, row(8, 2, 4, 1, 1, 0)},
      {{TargetFamily::ArmNeon,   OpClass::Dense},      row(4, 4, 4, 1, 1, 3)},
      {{TargetFamily::ArmNeon,   OpClass::Stem},       row(4, 4, 4, 1, 1, 7)},
      {{TargetFamily::ArmNeon,   OpClass::Pointwise},  row(4, 4, 4, 1, 1, 0)},
      {{TargetFamily::ArmNeon,   OpClass::Depthwise},  row(4, 2, 4, 2, 1, 5)},
      {{TargetFamily::ArmNeon,   OpClass::Pooling},    row(4, 2, 4, 1, 1, 3)},
      {{TargetFamily::ArmNeon,   OpClass::Transposed}, row(4, 2, 4, 1, 1, 0)},
      {{TargetFamily::Generic,   OpClass::Dense},      row(4, 2, 4, 1, 1, 3)},
      {{TargetFamily::Generic,   OpClass::Stem},       row(4, 2, 4, 1, 1, 3)},
      {{TargetFamily::Generic,   OpClass::Pointwise},  row(4, 2, 4, 1, 1, 0)},
      {{TargetFamily::Generic,   OpClass::Depthwise},  row(4, 1, 4, 2, 1, 3)},
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
  ScheduleParams p = table().at({family, op_class});
  p.name = to_string(family) + "." + to_string(op_class);
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
          {"inline_border", p.inline_border}};
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
    else
      throw std::invalid_argument("unknown schedule parameter '" + key + "'");
  }
}

}  // namespace padfold
