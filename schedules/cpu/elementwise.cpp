// CPU schedule of add, mul, concat, softmax, quantize and dequantize: memory-bound copies and sums
// with no reduction. The innermost axis is vectorized (channels when channels-last, else x) and
// rows go over threads; the register tile knobs of schedule.cpp do not apply.
#include <algorithm>

#include "schedules/cpu/cpu.h"
#include "schedules/tile_math.h"

namespace padfold::cpu {

using namespace Halide;

namespace {

int64_t innermost_extent(const Layer& L) {
  return L.layout.channels_last ? L.out_channels : L.out_spatial.back();
}

// Threads go over the outermost axis but the batch: the outermost spatial axis when channels are
// last, else channels (a parallel loop over rows inside the channel loop would hand out one
// round of tasks per channel: EfficientNet-B0's channels-first scales ran 20x slower at 2
// threads than at 1).
bool rows_are_channels(const Layer& L) {
  return !L.layout.channels_last;
}

// Elements read and written.
double traffic(const Layer& L) {
  double elements = static_cast<double>(L.batch * L.out_channels);
  for (int64_t d : L.out_spatial) elements *= static_cast<double>(d);
  return elements * static_cast<double>(L.inputs.size() + 1);
}
int64_t rows_extent(const Layer& L) {
  return rows_are_channels(L) ? L.out_channels : L.out_spatial.front();
}

ScheduleParams resolve(const Layer& L, const Target& target, const ScheduleParams& p) {
  ScheduleParams r = p;
  r.vector_lanes = clamp_int(requested_lanes(p, target), 1, innermost_extent(L));
  // Tasks of equal rows (a divisor of the rows: a split of the parallel loop never overhangs).
  if (p.rows_per_task > 0) r.rows_per_task = divisor_at_most(rows_extent(L), p.rows_per_task);
  if (too_little_for_threads(p, traffic(L))) r.rows_per_task = 0;
  r.fit_tiles = false;
  r.min_task_kflop = 0;
  return r;
}

ScheduleResult apply(Algorithm& a, const ScheduleParams& p, const Target&) {
  const Layer& L = *a.layer;
  for (Func h : a.helpers) h.compute_root();  // softmax's per-pixel max and sum
  Func out = a.output;
  const Var inner = a.vars.front();
  const int64_t extent = innermost_extent(L);
  if (p.vector_lanes > 1) {
    Var vo("vo"), vi("vi");
    out.split(inner, vo, vi, p.vector_lanes,
              extent % p.vector_lanes == 0 ? TailStrategy::RoundUp : TailStrategy::ShiftInwards)
        .vectorize(vi);
  }
  const Var rows = rows_are_channels(L) ? a.c : a.spatial.back();
  if (p.rows_per_task > 1)
    out.parallel(rows, p.rows_per_task);
  else if (p.rows_per_task == 1)
    out.parallel(rows);
  return {p};
}

}  // namespace

const ScheduleStrategy kElementwiseStrategy = {
    "cpu", kCapabilities, resolve,
    apply, nullptr,       with_knobs({}, {{"vector_lanes", 1}, {"rows_per_task", 1}})};

}  // namespace padfold::cpu
