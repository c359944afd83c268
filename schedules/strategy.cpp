// The strategy table: target families, op classes and the (family, class) rows of every schedule
// family.
#include <stdexcept>

#include "base/enum_names.h"
#include "schedules/cpu/cpu.h"
#include "schedules/gpu/gpu.h"
#include "schedules/schedule.h"

namespace padfold {

namespace {

const EnumName<TargetFamily> kFamilyNames[] = {
    {TargetFamily::X86Avx512, "avx512"}, {TargetFamily::X86Avx2, "avx2"},
    {TargetFamily::ArmNeon, "neon"},     {TargetFamily::RiscV, "riscv"},
    {TargetFamily::Generic, "generic"},  {TargetFamily::Gpu, "gpu"},
};
const EnumName<OpClass> kOpClassNames[] = {
    {OpClass::Dense, "dense"},
    {OpClass::Stem, "stem"},
    {OpClass::Pointwise, "pointwise"},
    {OpClass::Depthwise, "depthwise"},
    {OpClass::Pooling, "pooling"},
    {OpClass::Transposed, "transposed"},
    {OpClass::Elementwise, "elementwise"},
};

}  // namespace

// The strategy table: each schedule family contributes its rows; a new family is one more entry.
const std::vector<StrategyRow>& strategy_table() {
  static const std::vector<StrategyRow> rows = [] {
    std::vector<StrategyRow> all;
    for (const auto& family_rows : {cpu::strategy_rows(), gpu::strategy_rows()})
      all.insert(all.end(), family_rows.begin(), family_rows.end());
    return all;
  }();
  return rows;
}

const StrategyRow& strategy_row(TargetFamily family, OpClass op_class) {
  for (const StrategyRow& row : strategy_table())
    if (row.family == family && row.op_class == op_class) return row;
  throw std::logic_error("no schedule for " + to_string(op_class) + " layers on " +
                         to_string(family) + " targets");
}

namespace {

const StrategyRow& row_of(const Layer& layer, const Halide::Target& target) {
  return strategy_row(target_family(target), classify(layer));
}

bool applies(const Implementation& i, const Layer& layer) {
  return !i.applies || i.applies(layer);
}

}  // namespace

const Implementation& implementation_for(const Layer& layer, const Halide::Target& target,
                                         const ScheduleParams& requested) {
  const StrategyRow& row = row_of(layer, target);
  const Implementation* chosen = &row.implementations.back();
  for (const Implementation& i : row.implementations)
    if (applies(i, layer) && (!i.chosen || i.chosen(layer, requested))) {
      chosen = &i;
      break;
    }
  return *chosen;
}

const Implementation& fused_implementation(const Layer& layer, const Halide::Target& target) {
  return row_of(layer, target).implementations.back();
}

std::vector<const Implementation*> applicable_implementations(const Layer& layer,
                                                              const Halide::Target& target) {
  std::vector<const Implementation*> all;
  for (const Implementation& i : row_of(layer, target).implementations)
    if (applies(i, layer)) all.push_back(&i);
  return all;
}

namespace {

// Any strategy of the target's family: they all declare the same capabilities and scope
// (schedules_test).
const ScheduleStrategy& family_strategy(const Halide::Target& target) {
  const TargetFamily family = target_family(target);
  for (const StrategyRow& row : strategy_table())
    if (row.family == family) return *row.implementations.back().strategy;
  throw std::logic_error("no schedule for " + to_string(family) + " targets");
}

}  // namespace

Capabilities capabilities(const Halide::Target& target) {
  return family_strategy(target).capabilities;
}

const char* knob_scope(const Halide::Target& target) {
  return family_strategy(target).scope;
}

TargetFamily target_family(const Halide::Target& t) {
  using T = Halide::Target;
  if (t.has_gpu_feature()) return TargetFamily::Gpu;
  if (t.arch == T::X86) {
    // Any AVX-512 flavour implies the base (x86-64-linux-avx512_skylake names only the flavour).
    if (t.features_any_of({T::AVX512, T::AVX512_KNL, T::AVX512_Skylake, T::AVX512_Cannonlake,
                           T::AVX512_SapphireRapids, T::AVX512_Zen4, T::AVX512_Zen5}))
      return TargetFamily::X86Avx512;
    if (t.has_feature(T::AVX2)) return TargetFamily::X86Avx2;
  }
  if (t.arch == T::ARM && !t.has_feature(T::NoNEON)) return TargetFamily::ArmNeon;
  if (t.arch == T::RISCV) return TargetFamily::RiscV;
  return TargetFamily::Generic;
}

OpClass classify(const Layer& L) {
  if (L.op == Op::ConvTranspose) return OpClass::Transposed;
  if (L.op == Op::MaxPool || L.op == Op::AvgPool) return OpClass::Pooling;
  if (!L.has_window()) return OpClass::Elementwise;
  const int64_t in_per_group = L.in_channels / L.groups;
  if (in_per_group == 1 && L.groups > 1) return OpClass::Depthwise;
  bool pointwise = true;
  for (int64_t k : L.kernel) pointwise = pointwise && k == 1;
  if (pointwise) return OpClass::Pointwise;
  if (in_per_group <= 4) return OpClass::Stem;
  return OpClass::Dense;
}

std::string to_string(TargetFamily f) {
  return name_of(kFamilyNames, f);
}

std::string to_string(OpClass c) {
  return name_of(kOpClassNames, c);
}

ScheduleParams default_schedule(const Layer& layer, const Halide::Target& target) {
  ScheduleParams p = strategy_row(target_family(target), classify(layer)).defaults;
  // The GEMM's tiles are whole along the output channels, so channels the row's vectors do not
  // divide leave it narrower vectors (ShuffleNetV2's 58 channels: 29 of 2 lanes, a fifth of the
  // FMA peak on Zen 4); the direct loops shift their last vector inwards instead (the model 7.6
  // -> 4.4 ms, bench/results-shufflenet-zen4.md). Knobs naming gemm_pixels still choose it.
  if (p.gemm_pixels > 0 && p.vector_lanes > 0 && layer.out_channels % p.vector_lanes != 0)
    p.gemm_pixels = 0;
  keep_vectors_in_groups(layer, target, p);
  return p;
}

void keep_vectors_in_groups(const Layer& layer, const Halide::Target& target, ScheduleParams& p) {
  const OpClass c = classify(layer);
  if (target_family(target) == TargetFamily::Gpu || layer.groups <= 1 ||
      !layer.layout.channels_last || layer.quantized() ||
      (c != OpClass::Dense && c != OpClass::Stem))
    return;
  const int64_t per_group = layer.out_channels / layer.groups;
  int lanes = p.vector_lanes > 0 ? p.vector_lanes : target.natural_vector_size<float>();
  while (lanes > 1 && per_group % lanes != 0) lanes /= 2;
  if (lanes < 8) return;  // 4 channels per group: narrower vectors do not pay (ResNeXt-50's)
  p.vector_lanes = lanes;
  const int vectors = std::max(1, p.channel_vectors);
  if (per_group % (lanes * vectors) != 0) {  // one vector, as many accumulators
    p.tile_x = std::max(1, p.tile_x) * vectors;
    p.channel_vectors = 1;
  }
}

ScheduleParams conservative_schedule(const Layer& layer, const Halide::Target& target) {
  ScheduleParams p = fused_implementation(layer, target).strategy->conservative;
  p.name = to_string(target_family(target)) + ".conservative";
  return p;
}

ScheduleParams resolve_schedule(const Implementation& implementation, const Layer& layer,
                                const Halide::Target& target, const ScheduleParams& requested) {
  ScheduleParams r = implementation.strategy->resolve(layer, target, requested);
  r.implementation = implementation.name;
  return r;
}

ScheduleParams resolve_schedule(const Layer& layer, const Halide::Target& target,
                                const ScheduleParams& requested) {
  return resolve_schedule(implementation_for(layer, target, requested), layer, target, requested);
}

WeightForm weight_form_for(const Layer& layer, const Halide::Target& target,
                           const ScheduleParams& resolved) {
  const ScheduleStrategy& s = *implementation_for(layer, target, resolved).strategy;
  return s.weight_form ? s.weight_form(layer, resolved) : WeightForm{};
}

ScheduleResult apply_schedule(Algorithm& algorithm, const ScheduleParams& requested,
                              const Halide::Target& target) {
  const Implementation& i = implementation_for(*algorithm.layer, target, requested);
  return i.strategy->apply(algorithm, resolve_schedule(i, *algorithm.layer, target, requested),
                           target);
}

}  // namespace padfold
