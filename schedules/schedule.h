// Schedules: how a layer's algorithm (generator/algorithm/) is computed on a target. A strategy
// table maps (target family, op class) to a schedule family's functions, capabilities and default
// knobs (schedules/knobs.h); each family is one folder (schedules/cpu/, schedules/gpu/).
#pragma once

#include <Halide.h>

#include <string>
#include <vector>

#include "algorithm/algorithm.h"
#include "schedules/knobs.h"

namespace padfold {

enum class TargetFamily { X86Avx512, X86Avx2, ArmNeon, RiscV, Generic, Gpu };
enum class OpClass { Dense, Stem, Pointwise, Depthwise, Pooling, Transposed, Elementwise };

TargetFamily target_family(const Halide::Target& target);
OpClass classify(const Layer& layer);
std::string to_string(TargetFamily family);
std::string to_string(OpClass op_class);

// Where a fused block's producer is computed: per pixel tile of the block's consumer (compute and
// store at its pixel tile), or per row tile and stored per strip of rows, so that it slides along
// the rows (fused_strips).
struct ProducerPlace {
  Halide::LoopLevel compute, store;
  // The columns of the producer's region computed at `compute` when they are a known constant
  // (a whole row, or the consumer's pixel tile read by a 1x1 stride-1 consumer); 0 otherwise.
  int64_t columns = 0;
  // Rows of the producer's storage, folded (a ring of rows) when it slides along rows; 0 = none.
  int fold_rows = 0;
  // The producer's buffers in Register memory: on the stack whatever their size (Halide puts
  // Auto memory over 16 KB on its heap), which needs sizes Halide can bound by constants.
  bool in_registers = true;
};

// What applying a schedule decided that later code reads: the knobs in effect and, for a fused
// block's consumer, where its producers can be computed.
struct ScheduleResult {
  ScheduleParams resolved;  // the knobs in effect, as the manifest records them
  // The loop level of the output at which one tile of pixels is computed for all channels; a
  // fused block computes its producers there.
  Halide::LoopLevel pixel_tile = Halide::LoopLevel::root();
  // A fused block's consumer computed in row strips (fused_strips): the loop level of one row
  // tile, and of its strip (a parallel task). A producer read through a window is stored per strip
  // and computed per row tile, so it slides along the rows. Both root when there are no strips
  // (strips false).
  bool strips = false;
  Halide::LoopLevel row_tile = Halide::LoopLevel::root();
  Halide::LoopLevel row_strip = Halide::LoopLevel::root();
};

// What a schedule family can do. Every strategy of a family declares the same (schedules_test
// checks), so that a target's answer (capabilities below) does not depend on the layer.
struct Capabilities {
  // The algorithm's bordered input written as clamps and selects (build_algorithm's
  // explicit_border) instead of Halide's BoundaryConditions.
  bool explicit_border;
  bool fuses;    // compiles fused blocks (compile/fusion.h); otherwise every layer alone
  bool tunable;  // padfold tune can search its knobs (it measures candidates on this CPU)
};

// A schedule family: how knobs become Halide scheduling directives.
struct ScheduleStrategy {
  const char* scope;  // the knob scope it reads ("cpu")
  Capabilities capabilities;
  // The knobs in effect for `requested` on this layer and target: clamped to the shapes, tiles
  // fitted, tasks grouped. Resolving its own result changes nothing, and both schedule alike.
  ScheduleParams (*resolve)(const Layer& layer, const Halide::Target& target,
                            const ScheduleParams& requested);
  // Applies resolved knobs to the algorithm's Funcs; returns them with the loop levels it chose.
  ScheduleResult (*apply)(Algorithm& algorithm, const ScheduleParams& resolved,
                          const Halide::Target& target);
  // Schedules a fused block's producer layer with its own resolved knobs (`own`: its register
  // tile) where `where` says; null where the op class is never a producer.
  void (*apply_producer)(Algorithm& producer, const ScheduleParams& own, const ProducerPlace& where,
                         const Halide::Target& target);
  // The form in which the kernel of resolved knobs reads the layer's weights best, when the compile
  // knows their values (a bundle's weight files) and can prepare them once (algorithm/
  // weight_form.h); null, or an unprepared form, where the file's own form is best.
  WeightForm (*weight_form)(const Layer& layer, const ScheduleParams& resolved);
  // Knobs simple enough to compile where the tuned ones made Halide crash or hang: scalar, one
  // output per tile, nothing unrolled.
  ScheduleParams conservative;
};

struct StrategyRow {
  TargetFamily family;
  OpClass op_class;
  const ScheduleStrategy* strategy;
  ScheduleParams defaults;  // tuned defaults; name is "<family>.<op class>"
};

// Every (target family, op class) row: the schedule families' rows (schedules/strategy.cpp).
const std::vector<StrategyRow>& strategy_table();
const StrategyRow& strategy_row(TargetFamily family, OpClass op_class);
// The strategy of the layer's row on the target's family.
const ScheduleStrategy& strategy_for(const Layer& layer, const Halide::Target& target);
// What the target's schedule family can do. Ask this rather than Target::has_gpu_feature(): which
// targets are GPUs, and what that implies, is the strategy table's to say (target_family).
Capabilities capabilities(const Halide::Target& target);
// The knob scope the target family's schedules read ("cpu", "gpu"): what its tuning records are of.
const char* knob_scope(const Halide::Target& target);

// The tuned defaults for a layer on a target.
ScheduleParams default_schedule(const Layer& layer, const Halide::Target& target);
// The conservative knobs of the layer's schedule family ("<family>.conservative").
ScheduleParams conservative_schedule(const Layer& layer, const Halide::Target& target);
// The knobs in effect (see ScheduleStrategy::resolve).
ScheduleParams resolve_schedule(const Layer& layer, const Halide::Target& target,
                                const ScheduleParams& requested);
// Resolves and applies `requested`; returns the knobs in effect and the loop levels chosen.
ScheduleResult apply_schedule(Algorithm& algorithm, const ScheduleParams& requested,
                              const Halide::Target& target);

}  // namespace padfold
