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

// A schedule family's way of computing one algorithm variant: how knobs become Halide scheduling
// directives.
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
  // The algorithm it schedules, for resolved knobs: sets the fields of `variant` that are its to
  // choose (Winograd's m); null: the direct algorithm.
  void (*variant)(const Layer& layer, const ScheduleParams& resolved, AlgorithmVariant& variant);
  // Knobs simple enough to compile where the tuned ones made Halide crash or hang: scalar, one
  // output per tile, nothing unrolled.
  ScheduleParams conservative;
};

// One way of computing a row's layers, as TVM's strategies list implementations: a schedule
// strategy with the algorithm variant it schedules, the layers it can compute, and the rule by
// which requested knobs choose it.
struct Implementation {
  const char* name;  // "direct", "winograd": ScheduleParams::implementation
  // The meaning of its knobs: a layer's tuning records are keyed by the versions of the
  // implementations that can compute it (tune/signature.h's toolchain_key). Bump it when a knob it
  // reads changes meaning, and only the layers it applies to lose their records.
  int version;
  const ScheduleStrategy* strategy;
  // Whether it can compute the layer at all; null: every layer of its row.
  bool (*applies)(const Layer& layer);
  // Whether the requested knobs choose it for the layer (the cost model's rule); null: whenever no
  // implementation before it is chosen (a row's last has none).
  bool (*chosen)(const Layer& layer, const ScheduleParams& requested);
};

struct StrategyRow {
  TargetFamily family;
  OpClass op_class;
  // The first chosen computes a layer; the last is chosen for every layer of the row, and is the
  // one fused blocks are built of.
  std::vector<Implementation> implementations;
  ScheduleParams defaults;  // tuned defaults; name is "<family>.<op class>"
};

// Every (target family, op class) row: the schedule families' rows (schedules/strategy.cpp).
const std::vector<StrategyRow>& strategy_table();
const StrategyRow& strategy_row(TargetFamily family, OpClass op_class);
// The implementation of the layer's row that the requested knobs choose (their `implementation`
// field says nothing here: it is resolve_schedule's answer).
const Implementation& implementation_for(const Layer& layer, const Halide::Target& target,
                                         const ScheduleParams& requested);
// The row's last implementation: what every layer can be computed by, and fused blocks are.
const Implementation& fused_implementation(const Layer& layer, const Halide::Target& target);
// The implementations of the layer's row that can compute it, in the row's order.
std::vector<const Implementation*> applicable_implementations(const Layer& layer,
                                                              const Halide::Target& target);
// What the target's schedule family can do. Ask this rather than Target::has_gpu_feature(): which
// targets are GPUs, and what that implies, is the strategy table's to say (target_family).
Capabilities capabilities(const Halide::Target& target);
// The knob scope the target family's schedules read ("cpu", "gpu"): what its tuning records are of.
const char* knob_scope(const Halide::Target& target);

// The tuned defaults for a layer on a target.
ScheduleParams default_schedule(const Layer& layer, const Halide::Target& target);
// A grouped float conv on a CPU, channels last: its vectors of output channels kept within a
// group. A vector spanning two groups reads each lane's input channel from its own group, a
// gather per load, where one group's lanes read one channel, broadcast (RegNetY's 8 channels per
// group under AVX-512's 16 lanes ran at 5% of the FMA peak, at 8 lanes 57%). The lanes become the
// largest power of two, at least 8, that divides the channels per group, and a register tile of
// several vectors wider than a group one vector by more pixels. AVX2, 8 channels per group, HWIO,
// 2 vectors x 6 pixels against 1 x 12: 104 channels (a tile shifted inwards starts inside a
// group) 0.37 -> 0.20 ms, 256 channels 0.89 -> 0.39 ms (stride 2: 1.38 -> 0.39), but 208 and 48
// channels 0.083 -> 0.095 and 0.27 -> 0.30 ms: the one-vector tile avoids the slow cases.
// Other layers, and groups of fewer channels, keep `p`.
void keep_vectors_in_groups(const Layer& layer, const Halide::Target& target, ScheduleParams& p);
// The conservative knobs of the layer's schedule family ("<family>.conservative").
ScheduleParams conservative_schedule(const Layer& layer, const Halide::Target& target);
// The knobs in effect (see ScheduleStrategy::resolve) of the implementation they choose, named.
ScheduleParams resolve_schedule(const Layer& layer, const Halide::Target& target,
                                const ScheduleParams& requested);
ScheduleParams resolve_schedule(const Implementation& implementation, const Layer& layer,
                                const Halide::Target& target, const ScheduleParams& requested);
// The form in which the kernel of resolved knobs reads the layer's weights best
// (ScheduleStrategy::weight_form of their implementation).
WeightForm weight_form_for(const Layer& layer, const Halide::Target& target,
                           const ScheduleParams& resolved);
// Resolves and applies `requested`; returns the knobs in effect and the loop levels chosen.
ScheduleResult apply_schedule(Algorithm& algorithm, const ScheduleParams& requested,
                              const Halide::Target& target);

}  // namespace padfold
