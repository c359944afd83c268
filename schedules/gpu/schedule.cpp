// GPU schedules (CUDA and OpenCL alike: no CUDA-only directives such as gpu_lanes). The output's
// two innermost axes (channels-last: channels and x; channels-first: x and y, or x and channels
// for 1-D) are split into blocks of gpu_threads_x x gpu_threads_y threads, each computing a
// gpu_tile_x x gpu_tile_y register tile; the other axes (rows, depth, batch) are fused into one
// block dimension. The reduction runs per thread with its accumulators unrolled (registers),
// the input channels split by gpu_unroll_channels and the inner part unrolled. The bordered input
// (the algorithm's explicit clamps/selects, never BoundaryConditions: their likely() tags make
// Halide partition the staging loops) is staged per block in shared memory, so the border costs a
// select or clamp per staged element, not per multiply-add; a tile too large for gpu_stage_kb
// reads the bordered input inline instead.
#include <algorithm>

#include "padding/padding.h"
#include "schedules/gpu/gpu.h"
#include "schedules/tile_math.h"

namespace padfold::gpu {

using namespace Halide;

namespace {

// The output's extent along Halide dimension d (innermost first).
int64_t out_extent(const Layer& L, int d) {
  const std::vector<int64_t> shape = L.output_shape_full();
  return shape[shape.size() - 1 - static_cast<size_t>(d)];
}

bool is_channel_dim(const Layer& L, int d) {
  return L.layout.channels_last ? d == 0 : d == L.spatial_dims;
}
// The spatial index (0 = innermost, W) of Halide dimension d, or -1.
int spatial_index(const Layer& L, int d) {
  const int j = L.layout.channels_last ? d - 1 : d;
  return j >= 0 && j < L.spatial_dims ? j : -1;
}

ScheduleParams resolve(const Layer& L, const Target&, const ScheduleParams& p) {
  ScheduleParams r = p;
  const int64_t e0 = out_extent(L, 0), e1 = out_extent(L, 1);
  // A block's tile fits in the output, so that the last block shifts inwards (ShiftInwards)
  // instead of computing past the edge: its threads' register tiles would read weights of
  // channels that do not exist.
  r.gpu_threads_x = clamp_int(p.gpu_threads_x, 1, e0);
  r.gpu_tile_x = clamp_int(p.gpu_tile_x, 1, e0 / r.gpu_threads_x);
  r.gpu_threads_y = clamp_int(p.gpu_threads_y, 1, std::min<int64_t>(e1, 1024 / r.gpu_threads_x));
  r.gpu_tile_y = clamp_int(p.gpu_tile_y, 1, e1 / r.gpu_threads_y);
  r.gpu_unroll_channels = divisor_at_most(reduction_channels(L), p.gpu_unroll_channels);
  r.winograd = 0;  // direct convolution only
  return r;
}

// A concat's updates, one per input: the two innermost axes (the input's channels an RVar where
// they are one of them) tiled into blocks of threads, the next axes one more block dimension
// (pure ones fused), any axis after an RVar there (the batch) a loop on the host.
void apply_concat(Algorithm& a, const ScheduleParams& p) {
  Func out = a.output;
  for (int u = 0; u < out.num_update_definitions(); ++u) {
    Stage s = out.update(u);
    const std::vector<VarOrRVar> dims = concat_loops(a, u);
    s.reorder(dims);
    const auto named = [&](const VarOrRVar& d, const std::string& n) {
      return d.is_rvar ? VarOrRVar(RVar(n)) : VarOrRVar(Var(n));
    };
    const VarOrRVar o0 = named(dims[0], "c0o"), i0 = named(dims[0], "c0i"),
                    o1 = named(dims[1], "c1o"), i1 = named(dims[1], "c1i");
    s.gpu_tile(dims[0], dims[1], o0, o1, i0, i1, p.gpu_threads_x, p.gpu_threads_y,
               TailStrategy::GuardWithIf);
    if (dims.size() < 3) continue;
    VarOrRVar z = dims[2];
    for (size_t i = 3; i < dims.size() && !z.is_rvar && !dims[i].is_rvar; ++i) {
      const Var fused("cz" + std::to_string(i));
      s.fuse(z.var, dims[i].var, fused);
      z = fused;
    }
    s.gpu_blocks(z);
  }
}

}  // namespace

int64_t staged_bytes(const Layer& L, const ScheduleParams& p) {
  if (!L.has_window()) return 0;
  const int rank = L.spatial_dims + 2;
  const int64_t per_group = reduction_channels(L);
  const int64_t out_per_group = L.has_weights() ? L.out_channels / L.groups : 1;
  int64_t elements = 1;
  for (int d = 0; d < rank - 1; ++d) {  // the batch: one per block
    const int64_t block = d == 0   ? int64_t{p.gpu_threads_x} * p.gpu_tile_x
                          : d == 1 ? int64_t{p.gpu_threads_y} * p.gpu_tile_y
                                   : 1;
    if (is_channel_dim(L, d)) {
      // The input channels the block's output channels read.
      const int64_t groups = std::min<int64_t>(L.has_weights() ? L.groups : L.in_channels,
                                               (block + out_per_group - 1) / out_per_group + 1);
      elements *= std::min<int64_t>(L.in_channels, groups * per_group);
    } else {
      const size_t ax = static_cast<size_t>(L.spatial_dims - 1 - spatial_index(L, d));
      const AxisParams axis = L.axes()[ax];
      elements *=
          L.op == Op::ConvTranspose ? block + window_extent(axis) : window_extent(axis, block);
    }
  }
  return 4 * elements;
}

namespace {

ScheduleResult apply(Algorithm& a, const ScheduleParams& p, const Target&) {
  const Layer& L = *a.layer;
  if (L.op == Op::Concat) {
    apply_concat(a, p);
    return {p};
  }
  for (Func h : a.helpers) h.compute_root();
  const int tx = p.gpu_threads_x, ty = p.gpu_threads_y, rx = p.gpu_tile_x, ry = p.gpu_tile_y;
  Func out = a.output;
  const Var v0 = a.vars[0], v1 = a.vars[1];
  Var v0o("v0o"), v1o("v1o"), v0i("v0i"), v1i("v1i"), v0t("v0t"), v1t("v1t"), v0r("v0r"),
      v1r("v1r");
  out.split(v0, v0o, v0i, tx * rx, TailStrategy::ShiftInwards)
      .split(v1, v1o, v1i, ty * ry, TailStrategy::ShiftInwards)
      .split(v0i, v0t, v0r, rx)
      .split(v1i, v1t, v1r, ry);
  // The fused outer axes (rows x batch can pass 65535) are the first block dimension, the only
  // one CUDA allows more blocks than that; blocks next to each other share halo rows in cache.
  std::vector<VarOrRVar> order{v0r, v1r, v0t, v1t};
  Var z = a.vars[2];
  for (size_t i = 2; i < a.vars.size(); ++i) order.push_back(a.vars[i]);
  order.push_back(v0o);
  order.push_back(v1o);
  out.reorder(order);
  for (size_t i = 3; i < a.vars.size(); ++i) {
    Var fused("z" + std::to_string(i));
    out.fuse(z, a.vars[i], fused);
    z = fused;
  }
  out.gpu_blocks(z, v0o, v1o).gpu_threads(v0t, v1t).unroll(v0r).unroll(v1r);
  if (!a.reduce.defined()) return {p};

  // Accumulators: the thread's register tile.
  a.reduce.compute_at(out, v0t).unroll(v0).unroll(v1);
  auto update = a.reduce.update();
  const int D = L.spatial_dims;
  const int first_tap = a.r.dimensions() - D;
  std::vector<VarOrRVar> update_order{v0, v1};
  std::vector<VarOrRVar> outer;
  if (first_tap > 0) {
    const int f = p.gpu_unroll_channels;
    if (f > 1 && f < reduction_channels(L)) {
      RVar rco("rco"), rci("rci");
      update.split(a.r[0], rco, rci, f).unroll(rci);
      update_order.push_back(rci);
      outer.push_back(rco);
    } else {
      if (f > 1) update.unroll(a.r[0]);
      update_order.push_back(a.r[0]);
    }
  }
  for (int i = first_tap; i < a.r.dimensions(); ++i) update_order.push_back(a.r[i]);
  update_order.insert(update_order.end(), outer.begin(), outer.end());
  for (size_t i = 2; i < a.vars.size(); ++i) update_order.push_back(a.vars[i]);
  update.reorder(update_order).unroll(v0).unroll(v1);
  if (L.kernel[static_cast<size_t>(D - 1)] <= 5) update.unroll(a.r[first_tap]);

  // The bordered input tile + halo of the block, in shared memory, loaded by the block's threads.
  // The loops over a thread's share of the tile are unrolled (a few iterations: the tile over the
  // block's threads): PoCL 3.1 (LLVM 15) miscompiles them as loops when a staging loop outside
  // them runs mostly over the border, e.g. a 3-D max pool whose window is wider than the input's
  // depth (-inf stored where the input is, so the pool returned 0 or crashed).
  if (p.gpu_stage_kb > 0 && staged_bytes(L, p) <= int64_t{1024} * p.gpu_stage_kb) {
    Func staged = a.bordered;
    const std::vector<Var> args = staged.args();
    Var b0o("s0o"), b0i("s0i"), b1o("s1o"), b1i("s1i");
    staged.compute_at(out, z)
        .store_in(MemoryType::GPUShared)
        .split(args[0], b0o, b0i, tx, TailStrategy::GuardWithIf)
        .split(args[1], b1o, b1i, ty, TailStrategy::GuardWithIf)
        .reorder(b0i, b1i, b0o, b1o)
        .gpu_threads(b0i, b1i)
        .unroll(b0o)
        .unroll(b1o);
  }
  return {p};
}

const ScheduleStrategy kStrategy = {"gpu", kCapabilities, resolve, apply, nullptr, nullptr, nullptr,
                                    // Conservative: one output per thread, nothing staged.
                                    with_knobs({}, {{"gpu_threads_x", 8},
                                                    {"gpu_threads_y", 8},
                                                    {"gpu_tile_x", 1},
                                                    {"gpu_tile_y", 1},
                                                    {"gpu_unroll_channels", 1},
                                                    {"gpu_stage_kb", 0}})};

}  // namespace

const Implementation kDirect = {"direct", 1, &kStrategy, nullptr, nullptr};

}  // namespace padfold::gpu
