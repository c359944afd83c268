// CPU schedules. One shape for every op: the output is split into register tiles, the reduction
// is computed per tile with its accumulators vectorized and unrolled so they live in registers,
// and rows are spread over threads. The border is read through the bounded input inline; since
// every shape is fixed, Halide's loop partitioning peels the border tiles off and the interior
// tiles run with no boundary tests.
#include <algorithm>

#include "schedule.h"

namespace padfold {

using namespace Halide;

namespace {

// Splits `v` of `f` by `factor` (<= extent) choosing a tail strategy that never reads outside the
// fixed buffers: exact splits round up, others shift the last tile inwards.
void split_tile(Func f, const Var& v, const Var& outer, const Var& inner, int factor,
                int64_t extent) {
  f.split(v, outer, inner, factor,
          extent % factor == 0 ? TailStrategy::RoundUp : TailStrategy::ShiftInwards);
}

int clamp_int(int64_t v, int lo, int64_t hi) {
  return static_cast<int>(std::max<int64_t>(lo, std::min<int64_t>(v, hi)));
}

struct Tile {
  Var vec_outer{"vo"}, vec_inner{"vi"};  // the vectorized axis: channels (NHWC) or x (NCHW)
  Var unr_outer{"uo"}, unr_inner{"ui"};  // the unrolled axis: x (NHWC) or channels (NCHW)
  Var y_outer{"yo"}, y_inner{"yi"};
};

}  // namespace

void apply_schedule(Algorithm& a, const ScheduleParams& p, const Target& target) {
  const Layer& L = *a.layer;
  for (Func h : a.helpers) h.compute_root();

  const int D = L.spatial_dims;
  const int64_t C = L.out_channels;
  const int64_t X = L.out_spatial[D - 1];
  const int64_t Y = D >= 2 ? L.out_spatial[D - 2] : 1;
  const int natural = target.natural_vector_size<float>();
  const int lanes_wanted = p.vector_lanes > 0 ? p.vector_lanes : natural;

  // The vectorized axis and the unrolled one.
  const bool cl = L.layout.channels_last;
  const Var vec_var = cl ? a.c : a.spatial[0];
  const Var unr_var = cl ? a.spatial[0] : a.c;
  const int64_t vec_extent = cl ? C : X;
  const int64_t unr_extent = cl ? X : C;

  // Vectors narrower than the target's native width trip Halide 14's load alignment pass on some
  // shapes (a division by zero inside the compiler), so such short axes stay scalar.
  int lanes = clamp_int(lanes_wanted, 1, vec_extent);
  if (lanes < natural) lanes = 1;
  const int accumulators = std::max(1, p.channel_vectors) * std::max(1, p.tile_x);
  int vectors = clamp_int(cl ? p.channel_vectors : p.tile_x, 1, vec_extent / lanes);
  const int unroll = clamp_int(accumulators / vectors, 1, unr_extent);
  const int ty = D >= 2 ? clamp_int(p.tile_y, 1, Y) : 1;
  const int vec_tile = vectors * lanes;

  Tile t;
  Func out = a.output;
  split_tile(out, vec_var, t.vec_outer, t.vec_inner, vec_tile, vec_extent);
  split_tile(out, unr_var, t.unr_outer, t.unr_inner, unroll, unr_extent);
  std::vector<VarOrRVar> order{t.vec_inner, t.unr_inner};
  if (D >= 2) {
    split_tile(out, a.spatial[1], t.y_outer, t.y_inner, ty, Y);
    order.push_back(t.y_inner);
  }
  // Tile loops, innermost first: the vectorized block, then the unrolled block, then rows.
  order.push_back(t.vec_outer);
  order.push_back(t.unr_outer);
  if (D >= 2) order.push_back(t.y_outer);
  for (int j = 2; j < D; ++j) order.push_back(a.spatial[j]);
  order.push_back(a.n);
  out.reorder(order);
  out.vectorize(t.vec_inner, lanes);

  // Accumulators: one register tile, computed per tile of the output.
  a.reduce.compute_at(out, t.vec_outer);
  std::vector<VarOrRVar> inner{vec_var, unr_var};
  if (D >= 2) inner.push_back(a.spatial[1]);
  a.reduce.vectorize(vec_var, lanes).unroll(vec_var).unroll(unr_var);
  if (D >= 2) a.reduce.unroll(a.spatial[1]);
  auto update = a.reduce.update();
  std::vector<VarOrRVar> update_order = inner;
  for (int i = 0; i < a.r.dimensions(); ++i) update_order.push_back(a.r[i]);
  for (int j = 2; j < D; ++j) update_order.push_back(a.spatial[j]);
  update_order.push_back(a.n);
  update.reorder(update_order).vectorize(vec_var, lanes).unroll(vec_var).unroll(unr_var);
  if (D >= 2) update.unroll(a.spatial[1]);
  // The innermost kernel tap (the RDom's first spatial variable) is unrolled when short.
  const int first_tap = a.r.dimensions() - D;
  const int64_t taps = L.kernel[D - 1];
  if (p.unroll_taps > 0 && taps <= p.unroll_taps && taps > 1) update.unroll(a.r[first_tap]);

  if (!p.inline_border) a.bordered.compute_at(out, t.vec_outer);

  // Threads over rows (the outermost spatial tile loop), fused with batch.
  if (p.rows_per_task > 0) {
    const Var rows = D >= 2 ? t.y_outer : t.unr_outer;
    out.parallel(rows, p.rows_per_task > 1 ? p.rows_per_task : 1);
  }
}

}  // namespace padfold
