// The CPU schedule of a pointwise conv as a GEMM (AlgorithmVariant::pixel_runs): the output plane
// is one run of pixels, cut into register tiles of gemm_pixels consecutive pixels (a tile may span
// rows) by gemm_vectors vectors of output channels; per tile the input channels are the
// reduction, innermost loop outside the unrolled accumulators, each step one broadcast per pixel
// and one weight vector per channel vector. The direct loops tile a row, so a 7x7 or 14x14 plane
// leaves them 7 or 14 columns to fill a tile with; here every tile is full but the last, which
// shifts inwards. Weights above channels_outer_kb: channel blocks outermost, so that each block's
// weights stay in cache over every pixel (stored blocked where the compile prepares them).
#include <algorithm>

#include "algorithm/weight_form.h"
#include "schedules/cpu/cpu.h"
#include "schedules/tile_math.h"

namespace padfold::cpu {

using namespace Halide;

namespace {

int64_t pixels(const Layer& L) {
  return L.out_spatial[0] * L.out_spatial[1];
}

// Planes of fewer tiles (a squeeze-and-excite conv's or a classifier's single pixel) leave a GEMM
// nothing to tile: the direct loops spread their channels over threads (EfficientNet-B0's 1280 ->
// 1000 classifier at 2 threads on Zen 4: 0.043 ms direct, 0.093 ms as a one-pixel GEMM).
constexpr int64_t kMinPixelTiles = 4;

// Threads over channel blocks only where there are enough of them to share evenly: 3 blocks on 2
// threads took 1.34x the direct kernel on EfficientNet-B0's 7x7 1152 -> 192 projections.
constexpr int64_t kMinChannelTasks = 8;

bool chosen(const Layer& L, const ScheduleParams& p) {
  return p.gemm_pixels > 0 && pixels(L) >= kMinPixelTiles * p.gemm_pixels;
}

ScheduleParams resolve(const Layer& L, const Target& target, const ScheduleParams& p) {
  const int64_t K = L.out_channels;
  ScheduleParams r = p;
  // Channel blocks that divide the output channels: every tile whole along them.
  int lanes = clamp_int(requested_lanes(p, target), 1, K);
  while (K % lanes != 0) lanes /= 2;
  r.vector_lanes = lanes;
  r.gemm_vectors = static_cast<int>(divisor_at_most(K / lanes, p.gemm_vectors));
  r.gemm_pixels = clamp_int(p.gemm_pixels, 1, pixels(L));
  // The direct loops' knobs mean nothing here: fixed, so that candidates differing only in them
  // are one kernel.
  const ScheduleParams defaults;
  r.channel_vectors = defaults.channel_vectors;
  r.tile_x = defaults.tile_x;
  r.tile_y = defaults.tile_y;
  r.unroll_taps = r.unroll_taps_outer = r.unroll_taps_rows = r.unroll_channels = 0;
  r.taps_inner = false;
  r.inline_border = true;
  r.fit_tiles = false;
  r.pack_weights_kb = 0;
  r.channel_tasks_rows = 0;
  r.winograd = r.winograd_min_tiles = 0;
  r.fused_strips = 0;
  r.min_task_kflop = 0;
  const int64_t channel_blocks = K / (r.vector_lanes * r.gemm_vectors);
  if (!channels_outermost(r, L) || channel_blocks < kMinChannelTasks) r.parallel_channels = false;
  if (p.rows_per_task > 0) {
    const int64_t tiles = (pixels(L) + r.gemm_pixels - 1) / r.gemm_pixels;
    r.rows_per_task = grouped_rows_per_task(p, tiles, L.flops());
  }
  if (too_little_for_threads(p, L.flops())) r.rows_per_task = 0;
  return r;
}

ScheduleResult apply(Algorithm& a, const ScheduleParams& p, const Target&) {
  const Layer& L = *a.layer;
  if (!a.pixel_runs)
    throw std::logic_error("layer '" + L.name + "': the algorithm is not a run of pixels");
  const int lanes = p.vector_lanes, block = lanes * p.gemm_vectors, tile = p.gemm_pixels;
  const bool outer = channels_outermost(p, L), threads = p.rows_per_task > 0;
  // The output's one update, over the run of pixels: tiles of `tile` pixels by `block` channels.
  Stage out = a.output.update();
  RVar po("gm_po"), pi("gm_pi"), task("gm_task");
  Var co("gm_co"), ci("gm_ci");
  out.split(a.pixels.x, po, pi, tile, TailStrategy::GuardWithIf);
  out.split(a.c, co, ci, block, TailStrategy::RoundUp);  // block divides the channels
  if (outer)
    out.reorder(ci, pi, po, co, a.n);
  else
    out.reorder(ci, pi, co, po, a.n);
  out.vectorize(ci, lanes).unroll(ci).unroll(pi);
  // Each pixel is written once, whatever task writes it (Halide cannot prove it of p % W, p / W).
  out.allow_race_conditions();
  if (threads && outer && p.parallel_channels) {
    out.parallel(co);
  } else if (threads) {
    out.split(po, task, po, p.rows_per_task, TailStrategy::GuardWithIf).parallel(task);
  }

  // A tile's accumulators: its channel vectors by its pixels, the input channels outside them.
  const LoopLevel tile_level = outer ? LoopLevel(a.output, po) : LoopLevel(a.output, co);
  const std::vector<Var> args = a.reduce.args();  // (c, p, n)
  a.reduce.compute_at(tile_level)
      .store_in(MemoryType::Register)
      .vectorize(args[0], lanes)
      .unroll(args[0])
      .unroll(args[1]);
  std::vector<VarOrRVar> order{args[0], args[1]};
  for (int i = 0; i < a.r.dimensions(); ++i) order.push_back(a.r[i]);
  order.push_back(args[2]);
  a.reduce.update().reorder(order).vectorize(args[0], lanes).unroll(args[0]).unroll(args[1]);
  return ScheduleResult{p};
}

// Weights above channels_outer_kb in blocks of a tile's channels, each contiguous.
WeightForm weight_form(const Layer& L, const ScheduleParams& resolved) {
  const int block = resolved.vector_lanes * resolved.gemm_vectors;
  if (channels_outermost(resolved, L) && blocked_weights_apply(L, block)) return {0, block};
  return {};
}

void variant(const Layer&, const ScheduleParams&, AlgorithmVariant& v) {
  v.pixel_runs = true;
}

const ScheduleStrategy kGemmStrategy = {"cpu",   kCapabilities, resolve, apply,
                                        nullptr, weight_form,   variant, conservative_knobs()};

}  // namespace

// Its own knobs are gemm_pixels and gemm_vectors; vector_lanes, channels_outer_kb,
// parallel_channels and the task knobs mean what they mean to the direct loops.
const Implementation kGemm = {"gemm", 1, &kGemmStrategy, pixel_runs_apply, chosen};

}  // namespace padfold::cpu
