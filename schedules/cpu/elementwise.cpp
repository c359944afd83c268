// CPU schedule of add, mul, activation, concat, softmax, quantize, dequantize and transpose:
// memory-bound copies and sums with no reduction. The innermost axis is vectorized (channels when
// channels-last, else x) and rows go over threads; the register tile knobs of schedule.cpp do not
// apply. A transpose moves square tiles through registers: loaded along the input's innermost
// axis, stored along the output's.
#include <algorithm>

#include "schedules/cpu/cpu.h"
#include "schedules/tile_math.h"

namespace padfold::cpu {

using namespace Halide;

namespace {

int64_t innermost_extent(const Layer& L) {
  return L.layout.channels_last ? L.out_channels : L.out_spatial.back();
}

// A transpose's output Halide dimension holding the input's innermost axis (0: the same axis).
size_t input_inner_dim(const Layer& L) {
  const size_t rank = L.perm.size();
  for (size_t k = 0; k < rank; ++k)
    if (static_cast<size_t>(L.perm[k]) == rank - 1) return rank - 1 - k;
  return 0;
}

// The extent of output Halide dimension d.
int64_t out_extent(const Layer& L, size_t d) {
  const std::vector<int64_t> shape = L.output_shape_full();
  return shape[shape.size() - 1 - d];
}

// Threads go over the outermost axis but the batch: the outermost spatial axis when channels are
// last, else channels (a parallel loop over rows inside the channel loop would hand out one
// round of tasks per channel: EfficientNet-B0's channels-first scales ran 20x slower at 2
// threads than at 1).
bool rows_are_channels(const Layer& L) {
  return !L.layout.channels_last;
}

// An activation looks each element up in a table (int8: a gather) or computes a transcendental:
// worth about this many elements of a copy when weighing threads against the work.
constexpr double kActivationWorkPerElement = 8;

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
  const int64_t inner = L.op == Op::Transpose
                            ? std::max(innermost_extent(L), out_extent(L, input_inner_dim(L)))
                            : innermost_extent(L);
  r.vector_lanes = clamp_int(requested_lanes(p, target), 1, inner);
  // Tasks of equal rows (a divisor of the rows: a split of the parallel loop never overhangs).
  if (p.rows_per_task > 0) r.rows_per_task = divisor_at_most(rows_extent(L), p.rows_per_task);
  // A concat's inputs are copied by a parallel loop each: threads where its average input's
  // copy pays for waking them.
  const double n = static_cast<double>(L.inputs.size());
  const double work = L.op == Op::Concat       ? 2 * traffic(L) / ((n + 1) * n)
                      : L.op == Op::Activation ? kActivationWorkPerElement * traffic(L)
                                               : traffic(L);
  if (too_little_for_threads(p, work)) r.rows_per_task = 0;
  r.fit_tiles = false;
  r.min_task_kflop = 0;
  return r;
}

// A transpose: where the input's innermost axis is another output axis, tiles of lanes x lanes
// (both axes' extents at least that) are staged in registers, loaded along the input's innermost
// axis and stored along the output's; a short output innermost axis (NCHW to NHWC of 3 channels)
// is unrolled under a vectorized input axis, each row an interleaved store.
void apply_transpose(Algorithm& a, const ScheduleParams& p) {
  const Layer& L = *a.layer;
  Func out = a.output;
  const size_t rank = L.perm.size();
  const size_t k = input_inner_dim(L);
  const int lanes = p.vector_lanes;
  const Var v0 = a.vars[0];
  Var rows = a.vars[rank - 2];  // the outermost axis but the batch: threads
  // Tiles divide the extents (an overhanging tile's shifted start would stay a min() in the
  // staging loop, where Halide does not partition it out); no such divisor of at least half the
  // lanes: the plain copy, vectorized along the output.
  const int64_t e0 = out_extent(L, 0), ek = k > 0 ? out_extent(L, k) : 0;
  const int t0 = divisor_at_most(e0, lanes), tk = k > 0 ? divisor_at_most(ek, lanes) : 0;
  const bool tiled = k > 0 && lanes > 1 && 2 * tk >= lanes && (e0 < lanes || 2 * t0 >= lanes);
  if (!tiled) {
    if (lanes > 1) {
      Var vo("vo"), vi("vi");
      out.split(v0, vo, vi, clamp_int(lanes, 1, e0), TailStrategy::ShiftInwards).vectorize(vi);
    }
  } else {
    const Var vk = a.vars[k];
    Var ko("ko"), ki("ki");
    out.split(vk, ko, ki, tk);
    if (k == rank - 2) rows = ko;
    if (e0 < lanes) {  // the output's innermost axis whole, unrolled
      out.reorder(v0, ki, ko).vectorize(ki).unroll(v0);
    } else {
      Var o0("o0"), i0("i0");
      out.split(v0, o0, i0, t0).reorder(i0, ki, o0, ko);
      out.vectorize(i0).unroll(ki);
      Func tile = a.input.in();
      tile.compute_at(out, o0);
      const std::vector<Var> tile_vars = tile.args();  // the input's Halide order
      const size_t along_out0 = rank - 1 - static_cast<size_t>(L.perm[rank - 1]);
      tile.vectorize(tile_vars[0]).unroll(tile_vars[along_out0]);
    }
  }
  if (p.rows_per_task > 0) out.parallel(rows);
}

// A concat's updates, one per input: the innermost axis vectorized (the input's channels when
// channels-last: an RVar, its tail guarded), rows over threads as for the other ops.
void apply_concat(Algorithm& a, const ScheduleParams& p) {
  const Layer& L = *a.layer;
  Func out = a.output;
  for (int u = 0; u < out.num_update_definitions(); ++u) {
    Stage s = out.update(u);
    const std::vector<VarOrRVar> loops = concat_loops(a, u);
    s.reorder(loops);
    const VarOrRVar inner = loops.front();
    const int64_t extent =
        L.layout.channels_last ? L.input_channels[static_cast<size_t>(u)] : L.out_spatial.back();
    const int lanes = clamp_int(p.vector_lanes, 1, extent);
    if (lanes > 1) {
      const VarOrRVar o = inner.is_rvar ? VarOrRVar(RVar("vo")) : VarOrRVar(Var("vo")),
                      i = inner.is_rvar ? VarOrRVar(RVar("vi")) : VarOrRVar(Var("vi"));
      s.split(inner, o, i, lanes, TailStrategy::GuardWithIf).vectorize(i);
    }
    const VarOrRVar rows = rows_are_channels(L) ? loops[loops.size() - 2] : a.spatial.back();
    if (p.rows_per_task > 1)
      s.parallel(rows, p.rows_per_task, TailStrategy::GuardWithIf);
    else if (p.rows_per_task == 1)
      s.parallel(rows);
  }
}

ScheduleResult apply(Algorithm& a, const ScheduleParams& p, const Target&) {
  const Layer& L = *a.layer;
  if (L.op == Op::Transpose) {
    apply_transpose(a, p);
    return {p};
  }
  if (L.op == Op::Concat) {
    apply_concat(a, p);
    return {p};
  }
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

const ScheduleStrategy kElementwiseStrategy = {
    "cpu",   kCapabilities, resolve, apply,
    nullptr, nullptr,       nullptr, with_knobs({}, {{"vector_lanes", 1}, {"rows_per_task", 1}})};

}  // namespace

const Implementation kElementwise = {"elementwise", 1, &kElementwiseStrategy, nullptr, nullptr};

}  // namespace padfold::cpu
