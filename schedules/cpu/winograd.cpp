// The CPU schedule of a Winograd F(m, 3) convolution (algorithm/winograd.h). Weights passed raw
// are transformed once per call (vectorized over output channels, threads over input channels);
// prepared ones are read as they are. Then
// per row of output tiles (a parallel task): the row's inputs transformed (vectorized over input
// channels, the border read through the bounded input, so Halide peels the border tiles off),
// the t*t products over input channels as register tiles of `channel_vectors` vectors of output
// channels by `tile_x` tiles, and each output tile's inverse transform, vectorized over output
// channels with the tile's pixels unrolled, feeding the epilogue.
#include "algorithm/winograd.h"

#include <stdexcept>

#include "schedules/cpu/cpu.h"
#include "schedules/tile_math.h"

namespace padfold::cpu {

using namespace Halide;

namespace {

int64_t tiles(int64_t extent, int m) {
  return (extent + m - 1) / m;
}

TailStrategy exact_or_guarded(int64_t extent, int factor) {
  return extent % factor == 0 ? TailStrategy::RoundUp : TailStrategy::GuardWithIf;
}

// A row of tiles' transformed inputs and products take at most this much of a thread's stack
// (glibc's threads have 8 MiB); larger rows go to Halide's heap.
constexpr int64_t kRowStackBytes = int64_t{1} << 20;

// The winograd knob the layer is computed with: the requested one, or F(2,3) where F(4,3) would
// leave fewer than winograd_min_tiles tiles and F(2,3) does not; 0: direct.
int knob_in_effect(const Layer& L, const ScheduleParams& p) {
  if (!winograd_applies(L)) return 0;
  for (int knob = std::min(p.winograd, 2); knob >= 1; --knob) {
    const int m = winograd_outputs(knob);
    if (tiles(L.out_spatial[0], m) * tiles(L.out_spatial[1], m) >= p.winograd_min_tiles)
      return knob;
  }
  return 0;
}

bool chosen(const Layer& L, const ScheduleParams& p) {
  return knob_in_effect(L, p) > 0;
}

ScheduleParams resolve(const Layer& L, const Target& target, const ScheduleParams& p) {
  const int knob = knob_in_effect(L, p);
  const int m = winograd_outputs(knob);
  const int64_t K = L.out_channels, C = L.in_channels;
  ScheduleParams r = p;
  r.winograd = knob;
  r.winograd_min_tiles = 0;
  r.vector_lanes = clamp_int(requested_lanes(p, target), 1, K);
  r.channel_vectors = clamp_int(p.channel_vectors, 1, K / r.vector_lanes);
  r.tile_x = clamp_int(p.tile_x, 1, tiles(L.out_spatial[1], m));
  r.unroll_channels = p.unroll_channels > 1 ? divisor_at_most(C, p.unroll_channels) : 0;
  if (r.unroll_channels == 1) r.unroll_channels = 0;
  // The direct loops' knobs mean nothing here: fixed, so that candidates differing only in them
  // are one kernel.
  r.tile_y = 1;
  r.unroll_taps = r.unroll_taps_outer = r.unroll_taps_rows = 0;
  r.taps_inner = false;
  r.inline_border = true;
  r.fit_tiles = false;
  r.channels_outer_kb = r.channel_tasks_rows = r.pack_weights_kb = 0;
  r.parallel_channels = false;
  r.min_task_kflop = 0;
  r.fused_strips = 0;
  r.gemm_pixels = 0;
  r.gemm_vectors = ScheduleParams{}.gemm_vectors;
  if (p.rows_per_task > 0)
    r.rows_per_task = grouped_rows_per_task(p, tiles(L.out_spatial[0], m), L.flops());
  if (too_little_for_threads(p, L.flops())) r.rows_per_task = 0;
  return r;
}

ScheduleResult apply(Algorithm& a, const ScheduleParams& p, const Target&) {
  const Layer& L = *a.layer;
  WinogradStages& w = a.winograd;
  const int m = winograd_outputs(p.winograd);
  if (w.m != m || m == 0)
    throw std::logic_error("layer '" + L.name + "': the algorithm is not Winograd F(" +
                           std::to_string(m) + ", 3) as its knobs say");
  const int64_t X = L.out_spatial[1], Y = L.out_spatial[0], K = L.out_channels, C = L.in_channels;
  const int lanes = p.vector_lanes, block = p.channel_vectors * lanes;
  const bool threads = p.rows_per_task > 0;

  // The output: m x m pixel tiles by a vector of channels, the pixels unrolled; rows of tiles in
  // tasks of rows_per_task.
  Func out = a.output;
  const Var x = a.spatial[0], y = a.spatial[1];
  Var tile_y("wg_ty"), yi("wg_yi"), tile_x("wg_tx"), xi("wg_xi"), ko("wg_ko"), ki("wg_ki"),
      task("wg_task");
  out.split(y, tile_y, yi, m, exact_or_guarded(Y, m))
      .split(x, tile_x, xi, m, exact_or_guarded(X, m));
  split_tile(out, a.c, ko, ki, lanes, K);
  out.reorder(ki, xi, yi, ko, tile_x, tile_y, a.n).vectorize(ki).unroll(xi).unroll(yi);
  if (threads) {
    out.split(tile_y, task, tile_y, p.rows_per_task, TailStrategy::RoundUp).parallel(task);
  }

  // The inverse transform of a tile, per vector of output channels.
  w.output_rows.compute_at(out, ko)
      .reorder(w.k, w.xi, w.a)
      .vectorize(w.k, lanes)
      .unroll(w.xi)
      .unroll(w.a);

  // The products of a row of tiles: register tiles of `block` output channels by tile_x tiles,
  // input channels innermost; each (a, b) sweeps the row's tiles per channel block, so a block's
  // transformed weights stay in cache across the row.
  // On the stack, not Halide's heap: freed per row there, glibc gives the pages back at once
  // (its heap top trimmed past 128 KiB) and faults them in zeroed for the next row, which took
  // 2.2 of a 56x56x64 F(2,3) kernel's 3.5 ms on Zen 3. Register memory is an alloca at the task's
  // entry whatever its size (Auto and Stack only up to 16 KB).
  const int64_t row_bytes = (C + K) * w.t * w.t * tiles(X, m) * 4;
  const MemoryType row_memory =
      row_bytes <= kRowStackBytes ? MemoryType::Register : MemoryType::Auto;
  Var pko("wg_pko"), pki("wg_pki"), pto("wg_pto"), pti("wg_pti");
  w.products.compute_at(out, tile_y).store_in(row_memory);
  split_tile(w.products, w.k, pko, pki, block, K);
  split_tile(w.products, w.tx, pto, pti, p.tile_x, tiles(X, m));
  w.products.reorder(pki, pti, pto, pko, w.a, w.b, w.ty, a.n)
      .vectorize(pki, lanes)
      .unroll(pki)
      .unroll(pti);
  w.product.compute_at(w.products, pto).vectorize(w.k, lanes).unroll(w.k).unroll(w.tx);
  Stage update = w.product.update();
  std::vector<VarOrRVar> order{w.k, w.tx};
  const int f = p.unroll_channels;
  if (f > 1 && f < C) {
    RVar rco("wg_rco"), rci("wg_rci");
    update.split(w.rc, rco, rci, f).unroll(rci);
    order.push_back(rci);
    order.push_back(rco);
  } else {
    order.push_back(w.rc);
    if (f > 1) update.unroll(w.rc);
  }
  for (const Var& v : {w.a, w.b, w.ty, a.n}) order.push_back(v);
  update.reorder(order).vectorize(w.k, lanes).unroll(w.k).unroll(w.tx);

  // The inputs of a row of tiles, vectorized over input channels, per tile.
  const int in_lanes = clamp_int(lanes, 1, C);
  Var vco("wg_vco"), vci("wg_vci");
  w.input.compute_at(out, tile_y).store_in(row_memory);
  split_tile(w.input, w.c, vco, vci, in_lanes, C);
  w.input.reorder(vci, w.a, w.b, vco, w.tx, w.ty, a.n).vectorize(vci).unroll(w.a).unroll(w.b);
  w.input_rows.compute_at(w.input, vco)
      .reorder(w.c, w.j, w.a)
      .vectorize(w.c, in_lanes)
      .unroll(w.j)
      .unroll(w.a);

  // The weights, once per call, unless the compile prepared them (then U reads its buffer inline).
  if (!w.weights_rows.defined()) return ScheduleResult{p};
  Var uko("wg_uko"), uki("wg_uki");
  w.weights.compute_root();
  split_tile(w.weights, w.k, uko, uki, lanes, K);
  w.weights.reorder(uki, w.a, w.b, uko, w.c).vectorize(uki).unroll(w.a).unroll(w.b);
  if (threads) w.weights.parallel(w.c, clamp_int(C / 8, 1, C));
  w.weights_rows.compute_at(w.weights, uko)
      .reorder(w.k, w.s, w.a)
      .vectorize(w.k, lanes)
      .unroll(w.s)
      .unroll(w.a);
  return ScheduleResult{p};
}

// Transformed once by the compile where the bundle has the weights' values.
WeightForm weight_form(const Layer&, const ScheduleParams& resolved) {
  return {winograd_outputs(resolved.winograd)};
}

void variant(const Layer&, const ScheduleParams& resolved, AlgorithmVariant& v) {
  v.winograd_m = winograd_outputs(resolved.winograd);
}

const ScheduleStrategy kWinogradStrategy = {"cpu",   kCapabilities, resolve, apply,
                                            nullptr, weight_form,   variant, conservative_knobs()};

}  // namespace

// Its own knobs are the cpu scope's winograd and winograd_min_tiles; the register tile reads
// vector_lanes, channel_vectors, tile_x, unroll_channels and the task knobs as the direct loops do.
const Implementation kWinograd = {"winograd", 1, &kWinogradStrategy, winograd_applies, chosen};

}  // namespace padfold::cpu
