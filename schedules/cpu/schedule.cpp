// CPU schedules. One shape for every op: the output is split into register tiles, the reduction
// is computed per tile with its accumulators vectorized and unrolled so they live in registers,
// and rows are spread over threads. The border is read through the bounded input inline; since
// every shape is fixed, Halide's loop partitioning peels the border tiles off and the interior
// tiles run with no boundary tests. Tiles that divide the output keep that partitioning possible
// (fit_tiles), and unrolled kernel taps make the tap positions of the peeled border tiles
// constant, so the taps that fall in the padding are dropped at compile time rather than
// multiplied by zero. Data-dependent choices (tile reshaping, loop order for large weights,
// threads over channel blocks for one-row outputs) are the only logic; the rest is the table.
#include <algorithm>

#include "schedules/cpu/cpu.h"
#include "schedules/tile_math.h"

namespace padfold::cpu {

using namespace Halide;

void split_tile(Func f, const Var& v, const Var& outer, const Var& inner, int factor,
                int64_t extent) {
  f.split(v, outer, inner, factor,
          extent % factor == 0 ? TailStrategy::RoundUp : TailStrategy::ShiftInwards);
}

int requested_lanes(const ScheduleParams& p, const Target& target) {
  return p.vector_lanes > 0 ? p.vector_lanes : target.natural_vector_size<float>();
}

bool too_little_for_threads(const ScheduleParams& p, double work) {
  return p.rows_per_task > 0 && p.min_task_kflop > 0 && work < 2e3 * p.min_task_kflop;
}

namespace {

int64_t weight_bytes(const Layer& L) {
  if (!L.has_weights()) return 0;
  int64_t bytes = 4;
  for (int64_t e : L.weight_shape()) bytes *= e;
  return bytes;
}

}  // namespace

bool channels_outermost(const ScheduleParams& p, const Layer& L) {
  return p.channels_outer_kb > 0 && weight_bytes(L) > int64_t{1024} * p.channels_outer_kb;
}

namespace {

// A quantized conv's weight table (schedule_dot_weights) of this many bytes or more is built by
// every thread: below, waking the threads costs more than the copy.
constexpr int64_t kParallelTableBytes = 256 * 1024;

struct Tile {
  Var vec_outer{"vo"}, vec_inner{"vi"};  // the vectorized axis: channels (NHWC) or x (NCHW)
  Var unr_outer{"uo"}, unr_inner{"ui"};  // the unrolled axis: x (NHWC) or channels (NCHW)
  Var y_outer{"yo"}, y_inner{"yi"};
};

}  // namespace

// Row tiles per parallel task: rows_per_task lowered to a divisor of the row tiles (a task split
// larger than its loop would shift it before the output's first row), then raised
// (min_task_kflop) to the smallest divisor whose task does at least that much work, keeping 16
// tasks or more (tasks of a few microseconds cost more to hand out than to run: effnet_dw_s1 at 2
// threads, 56 tasks of 0.13 MFLOP, runs 1.8x faster as 28). Divisors keep the tasks equal.
int grouped_rows_per_task(const ScheduleParams& p, int64_t row_tiles, double flops) {
  int64_t best = divisor_at_most(row_tiles, std::max(1, p.rows_per_task));
  if (p.min_task_kflop <= 0 || row_tiles < 32) return static_cast<int>(best);
  const double per_tile = flops / static_cast<double>(row_tiles);
  for (int64_t d = best; d <= row_tiles / 16; ++d) {
    if (row_tiles % d != 0) continue;
    best = d;
    if (static_cast<double>(d) * per_tile >= 1e3 * p.min_task_kflop) break;
  }
  return static_cast<int>(best);
}

namespace {

// The axes a CPU schedule tiles: the vectorized one (channels when channels-last, else x) and the
// unrolled one (x, else channels), and rows.
struct Axes {
  int dims;
  bool channels_last;
  int64_t vec_extent, unr_extent, rows;
};

Axes axes_of(const Layer& L) {
  const int D = L.spatial_dims;
  const int64_t C = L.out_channels, X = L.out_spatial[D - 1];
  const bool cl = L.layout.channels_last;
  return {D, cl, cl ? C : X, cl ? X : C, D >= 2 ? L.out_spatial[D - 2] : 1};
}

// The register tile of resolved knobs: vectors along the vectorized axis, the unrolled count.
int tile_vectors(const ScheduleParams& p, const Axes& ax) {
  return ax.channels_last ? p.channel_vectors : p.tile_x;
}
int tile_unrolled(const ScheduleParams& p, const Axes& ax) {
  return ax.channels_last ? p.tile_x : p.channel_vectors;
}

bool parallel_over_channels(const ScheduleParams& p, const Layer& L, const Axes& ax) {
  const int vec_tile = tile_vectors(p, ax) * p.vector_lanes, unroll = tile_unrolled(p, ax);
  const int64_t row_tiles =
      ax.dims >= 2 ? (ax.rows + p.tile_y - 1) / p.tile_y : (ax.unr_extent + unroll - 1) / unroll;
  const int64_t channel_tiles = ax.channels_last ? (ax.vec_extent + vec_tile - 1) / vec_tile
                                                 : (ax.unr_extent + unroll - 1) / unroll;
  if (channel_tiles < 2) return false;
  return row_tiles < 2 ||
         (channels_outermost(p, L) && (p.parallel_channels || row_tiles < p.channel_tasks_rows));
}

ScheduleParams resolve(const Layer& L, const Target& target, const ScheduleParams& p) {
  const Axes ax = axes_of(L);
  const int lanes_wanted = requested_lanes(p, target);
  const int lanes = clamp_int(lanes_wanted, 1, ax.vec_extent);
  const int accumulators = std::max(1, p.channel_vectors) * std::max(1, p.tile_x);
  int vectors =
      clamp_int(ax.channels_last ? p.channel_vectors : p.tile_x, 1, ax.vec_extent / lanes);
  int unroll = clamp_int(accumulators / vectors, 1, ax.unr_extent);
  int ty = ax.dims >= 2 ? clamp_int(p.tile_y, 1, ax.rows) : 1;
  if (p.fit_tiles) {
    // A tile that does not divide its axis recomputes an overlap (ShiftInwards), and on an axis
    // with padding it also keeps Halide from peeling the border tiles off (every tile then tests
    // the border): such tiles are reshaped within the accumulator budget to divide the axis.
    // Rows may only shrink, the unrolled axis may change within the budget left by the vectors;
    // then a tile left well short of the budget (small outputs) gets more vectors, then rows.
    const int budget = accumulators * std::max(1, ty);
    auto needs_fit = [&](int tile, int64_t extent, bool padded) {
      if (extent % tile == 0) return false;
      const double computed = static_cast<double>((extent + tile - 1) / tile * tile);
      return padded || computed > 1.05 * static_cast<double>(extent);
    };
    auto padded_axis = [&](int spatial_index) {  // 0 = innermost spatial axis
      const AxisPads& ap = L.pads.axes[static_cast<size_t>(ax.dims - 1 - spatial_index)];
      return ap.before > 0 || ap.after > 0;
    };
    if (ax.dims >= 2 && needs_fit(ty, ax.rows, padded_axis(1))) ty = fit_tile(ty, ax.rows, ty);
    if (needs_fit(unroll, ax.unr_extent, ax.channels_last && padded_axis(0))) {
      const int most = std::max(1, budget / (ty * vectors));
      unroll = fit_tile(unroll, ax.unr_extent, most);
      // No divisor near the preferred size (14 columns, at most 6): a smaller divisor, whose
      // budget left over goes to rows or vectors below (AVX2, 28x28x32 stride 2: 2x2 tiles of 2
      // vectors run 13% faster than 5 columns that overlap and test the border in most tiles).
      const int divisor = divisor_at_most(ax.unr_extent, most);
      if (ax.unr_extent % unroll != 0 && divisor >= 2) unroll = divisor;
    }
    // Rows first: a tile spanning the whole of a small output makes every tap position a
    // constant, so all the taps in the padding drop out.
    if (ax.dims >= 2 && 2 * vectors * unroll * ty <= budget)
      ty = std::max(ty, divisor_at_most(ax.rows, std::max(1, budget / (vectors * unroll))));
    if (2 * vectors * unroll * ty <= budget) {
      const int want = std::max(1, budget / (unroll * ty));
      const int64_t whole_vectors = ax.vec_extent / lanes;
      vectors = ax.vec_extent % lanes == 0 ? std::max(1, divisor_at_most(whole_vectors, want))
                                           : clamp_int(want, 1, whole_vectors);
    }
  }
  ScheduleParams r = p;
  r.vector_lanes = lanes;
  r.channel_vectors = ax.channels_last ? vectors : unroll;
  r.tile_x = ax.channels_last ? unroll : vectors;
  r.tile_y = ty;
  r.fit_tiles = false;
  r.min_task_kflop = 0;
  r.fused_strips = 0;  // a block's (resolve_block_schedule sets it back)
  // So that they choose the direct loops.
  r.winograd = r.winograd_min_tiles = r.gemm_pixels = 0;
  r.gemm_vectors = ScheduleParams{}.gemm_vectors;
  // The dot products read the bordered input staged per tile: read inline, the border's selects
  // in every partition of the loops make LLVM run for more than 10 minutes on one 28x28 kernel.
  if (quantized_dot_product(L)) r.inline_border = false;
  if (p.rows_per_task > 0 && !parallel_over_channels(r, L, ax)) {
    const int64_t row_tiles =
        ax.dims >= 2 ? (ax.rows + ty - 1) / ty : (ax.unr_extent + unroll - 1) / unroll;
    r.rows_per_task = grouped_rows_per_task(p, row_tiles, L.flops());
  }
  if (too_little_for_threads(p, L.flops())) r.rows_per_task = 0;
  return r;
}

// The reduction of a register tile computed at `at`: accumulators vectorized along the
// vectorized axis and unrolled over the tile, the reduction loops (input channels, kernel taps)
// outside them in the order and with the unrolling the knobs say. `rows`: the output's rows (for
// unroll_taps_rows).
void schedule_reduction(Algorithm& a, const ScheduleParams& p, const LoopLevel& at, int64_t rows) {
  const Layer& L = *a.layer;
  const int D = L.spatial_dims;
  const bool cl = L.layout.channels_last;
  const Var vec_var = cl ? a.c : a.spatial[0];
  const Var unr_var = cl ? a.spatial[0] : a.c;
  const int lanes = p.vector_lanes;
  a.reduce.compute_at(at);
  std::vector<VarOrRVar> inner{vec_var, unr_var};
  if (D >= 2) inner.push_back(a.spatial[1]);
  a.reduce.vectorize(vec_var, lanes).unroll(vec_var).unroll(unr_var);
  if (D >= 2) a.reduce.unroll(a.spatial[1]);
  auto update = a.reduce.update();

  // The reduction: input channels (when the RDom has them) and kernel taps, innermost first.
  const int first_tap = a.r.dimensions() - D;
  const bool has_rc = first_tap > 0;
  std::vector<VarOrRVar> channel_loops, tap_loops;
  // Quantized dot products take four channels per step in a vector reduction (one u8 x i8 or
  // i8 x i8 dot product per accumulator lane): the channel loop below steps over groups of four.
  RVar dot("rdot");
  const bool dot4 = quantized_dot_product(L);
  if (has_rc) {
    const int64_t per_step = dot4 ? 4 : 1;
    const int64_t steps = reduction_channels(L) / per_step;  // only convolutions reduce channels
    RVar channels = a.r[0];
    if (dot4) {
      channels = RVar("rdot_o");
      update.split(a.r[0], channels, dot, 4);
    }
    const int f = p.unroll_channels > 1 ? divisor_at_most(steps, p.unroll_channels) : 1;
    if (f > 1 && f < steps) {
      RVar rco("rco"), rci("rci");
      update.split(channels, rco, rci, f);
      channel_loops = {rci, rco};
      update.unroll(rci);
    } else {
      channel_loops = {channels};
      if (f > 1) update.unroll(channels);
    }
  }
  for (int i = first_tap; i < a.r.dimensions(); ++i) tap_loops.push_back(a.r[i]);
  std::vector<VarOrRVar> update_order = inner;
  if (dot4) update_order.insert(update_order.begin(), dot);
  const auto& first = p.taps_inner ? tap_loops : channel_loops;
  const auto& second = p.taps_inner ? channel_loops : tap_loops;
  update_order.insert(update_order.end(), first.begin(), first.end());
  update_order.insert(update_order.end(), second.begin(), second.end());
  for (int j = 2; j < D; ++j) update_order.push_back(a.spatial[j]);
  update_order.push_back(a.n);
  if (dot4) update.atomic().vectorize(dot);
  update.reorder(update_order).vectorize(vec_var, lanes).unroll(vec_var).unroll(unr_var);
  if (D >= 2) update.unroll(a.spatial[1]);
  // Short kernel axes are unrolled: the innermost one (the RDom's first spatial variable) up to
  // unroll_taps, the others up to unroll_taps_outer, all of them on outputs of at most
  // unroll_taps_rows rows. Unrolled taps make the border conditions of border tiles constant, so
  // Halide drops the taps that fall in the padding.
  const bool small_output = p.unroll_taps_rows > 0 && rows <= p.unroll_taps_rows;
  for (int j = 0; j < D; ++j) {
    const int64_t taps = L.kernel[D - 1 - j];
    const int limit = j == 0 ? p.unroll_taps : p.unroll_taps_outer;
    if (taps > 1 && (small_output || (limit > 0 && taps <= limit)))
      update.unroll(a.r[first_tap + j]);
  }
}

// With channel blocks outermost, a block's weights are read once per pixel tile; in the layouts
// that keep output channels innermost (HWIO) a block of 8 or 16 channels is a strip of each
// reduction step's row, so the steps are a stride of a whole row apart (2 KiB for 512 channels:
// a new page every other step, which the prefetchers do not follow). Copied once per block into
// a buffer of their own, channels innermost, the steps are contiguous.
// The output channels of a block whose weights the kernel of resolved knobs `p` copies (or reads
// prepared: weight_form), 0 where it reads them as they are.
int packed_block_channels(const Layer& L, const ScheduleParams& p) {
  const Axes ax = axes_of(L);
  const int vec_tile = tile_vectors(p, ax) * p.vector_lanes;
  // The dot products' weights are a table of their own already (quantized_dot_product).
  if (!L.has_weights() || !ax.channels_last || !channels_outermost(p, L) ||
      p.pack_weights_kb <= 0 || quantized_dot_product(L))
    return 0;
  if (weight_bytes(L) / L.out_channels * vec_tile > int64_t{1024} * p.pack_weights_kb) return 0;
  return vec_tile;
}

// Packed once at compile where the values are known: then no copy per block and call.
WeightForm weight_form(const Layer& L, const ScheduleParams& resolved) {
  if (quantized_dot_product(L)) {
    // The table holds the layer's output channels only: a channel tile wider than them (which
    // ShiftInwards cannot keep inside) would read past it.
    const int vec_tile = tile_vectors(resolved, axes_of(L)) * resolved.vector_lanes;
    return L.out_channels >= vec_tile ? WeightForm{0, 0, true} : WeightForm{};
  }
  const int block = packed_block_channels(L, resolved);
  if (block > 0 && blocked_weights_apply(L, block)) return {0, block};
  return {};
}

void pack_block_weights(Algorithm& a, const ScheduleParams& p, const LoopLevel& block) {
  const Layer& L = *a.layer;
  if (packed_block_channels(L, p) == 0 || a.weight_form.block_channels > 0) return;
  Func packed = a.weights.in(a.reduce);  // the reduction's reads only (not weight sums)
  std::vector<Var> args = packed.args();
  const std::string& order = L.weight_layout.order;  // outermost first; Halide's args innermost
  const size_t o = order.size() - 1 - order.find('O');
  std::vector<Var> storage{args[o]};
  for (size_t i = 0; i < args.size(); ++i)
    if (i != o) storage.push_back(args[i]);
  // Register memory: on the stack whatever its size, as for fused producers (apply_producer).
  packed.compute_at(block).store_in(MemoryType::Register).reorder_storage(storage);
  std::vector<VarOrRVar> loops(storage.begin(), storage.end());
  packed.reorder(loops).vectorize(args[o], p.vector_lanes);
}

// The dot products' weight table (unless the compile prepared it: WeightForm::dot_table), 16
// output channels x 4 input channels per 64-byte store, and the weights' sums per output channel
// (unless folded into the bias: WeightForm::zero_point_in_bias).
// Each block's 64 weights are first loaded into registers in the weights' own layout (four dense
// rows of 16 output channels in HWIO), so that the table's 4 x 16 transpose becomes shuffles: read
// straight from the weights, every byte was a load of its own (70 us per call on a 1280 x 320
// pointwise conv, a third of its time).
void schedule_dot_weights(Algorithm& a, const Layer& L) {
  const int block_channels = std::min<int>(16, L.out_channels);
  // Large tables are built (and summed) by every thread: groups of 4 input channels to each.
  int64_t bytes = L.out_channels * reduction_channels(L);
  for (int64_t k : L.kernel) bytes *= k;
  const bool parallel = bytes >= kParallelTableBytes;
  if (a.dot_weights.defined()) {
    const std::vector<Var> args = a.dot_weights.args();
    Var co("co"), ci("ci");
    a.dot_weights.split(args[1], co, ci, block_channels)
        .reorder(args[0], ci, co)
        .vectorize(ci)
        .vectorize(args[0]);
    if (parallel) a.dot_weights.parallel(args[2]);
    Func block = a.weights.in(a.dot_weights);
    const std::vector<Var> dims = block.args();
    block.compute_at(a.dot_weights, co).store_in(MemoryType::Register).vectorize(dims[0]);
    for (size_t i = 1; i < dims.size(); ++i) block.unroll(dims[i]);
  }
  // The sums, 16 channels to a vector (every reduction step one load of the table's dense
  // channels): a scalar sum took 0.27 ms per call on that conv. None where the bias holds them.
  if (!a.weight_sum.defined()) return;
  Var so("so"), si("si");
  std::vector<VarOrRVar> sum_order{si};
  for (const RVar& r : a.weight_sum.rvars()) sum_order.push_back(r);
  sum_order.push_back(so);
  Stage sum = a.weight_sum.update();
  // A prepared table (an input buffer) is read no further than the layer's channels.
  const bool guard = !a.dot_weights.defined() && L.out_channels % block_channels != 0;
  sum.split(a.c, so, si, block_channels, guard ? TailStrategy::GuardWithIf : TailStrategy::Auto)
      .reorder(sum_order)
      .vectorize(si);
  if (parallel) sum.parallel(so);
}

// One shape for every op (see the top of this file), from resolved knobs.
ScheduleResult apply(Algorithm& a, const ScheduleParams& p, const Target&) {
  ScheduleResult result{p};
  const Layer& L = *a.layer;
  for (Func h : a.helpers) h.compute_root();
  if (quantized_dot_product(L)) schedule_dot_weights(a, L);
  const Axes ax = axes_of(L);
  const int D = ax.dims;
  const bool cl = ax.channels_last;
  const Var vec_var = cl ? a.c : a.spatial[0];
  const Var unr_var = cl ? a.spatial[0] : a.c;
  const int lanes = p.vector_lanes;
  const int vec_tile = tile_vectors(p, ax) * lanes;
  const int unroll = tile_unrolled(p, ax);
  const int ty = p.tile_y;

  Tile t;
  Func out = a.output;
  split_tile(out, vec_var, t.vec_outer, t.vec_inner, vec_tile, ax.vec_extent);
  split_tile(out, unr_var, t.unr_outer, t.unr_inner, unroll, ax.unr_extent);
  std::vector<VarOrRVar> order{t.vec_inner, t.unr_inner};
  if (D >= 2) {
    split_tile(out, a.spatial[1], t.y_outer, t.y_inner, ty, ax.rows);
    order.push_back(t.y_inner);
  }
  // Tile loops, innermost first: the vectorized block, then the unrolled block, then rows; with
  // channels_outer the channel block loop goes outside the pixel loops.
  const Var chan_outer = cl ? t.vec_outer : t.unr_outer;
  const Var pix_outer = cl ? t.unr_outer : t.vec_outer;
  const bool channels_outer = channels_outermost(p, L);
  if (channels_outer) {
    order.push_back(pix_outer);
  } else {
    order.push_back(t.vec_outer);
    order.push_back(t.unr_outer);
  }
  if (D >= 2) order.push_back(t.y_outer);
  for (int j = 2; j < D; ++j) order.push_back(a.spatial[j]);
  if (channels_outer) order.push_back(chan_outer);
  order.push_back(a.n);
  out.reorder(order);
  out.vectorize(t.vec_inner, lanes);

  // Accumulators: one register tile, computed per tile of the output.
  const Var innermost_tile = channels_outer ? pix_outer : t.vec_outer;
  schedule_reduction(a, p, LoopLevel(out, innermost_tile), ax.rows);
  if (channels_outer && cl) pack_block_weights(a, p, LoopLevel(out, chan_outer));

  if (!p.inline_border) a.bordered.compute_at(out, innermost_tile);
  // All channels of a pixel tile: channels-last tiles keep channel blocks inside pixel blocks;
  // channels-first ones have channel blocks outside the column blocks, so a strip of rows.
  if (!channels_outer && (cl || D >= 2))
    result.pixel_tile = LoopLevel(out, cl ? t.unr_outer : t.y_outer);
  else
    result.pixel_tile = LoopLevel(out, a.n);

  // A fused block's consumer in row strips (fused_strips): the row tiles split into strips of
  // equal size where a divisor allows, one parallel task each; producers read through a window
  // slide along the row tiles of a strip (apply_block_schedule). Each strip recomputes the rows
  // its window reads above its first row, so a strip should be long against the window.
  const bool strips = p.fused_strips > 0 && a.source.defined() && cl && D >= 2 && !channels_outer;
  if (strips) {
    const int64_t row_tiles = (ax.rows + ty - 1) / ty;
    const int64_t want = (row_tiles + p.fused_strips - 1) / p.fused_strips;
    int64_t per = want;
    while (per < row_tiles && row_tiles % per != 0) ++per;
    if (per > want + want / 4) per = want;  // no divisor nearby: the last strip shifts inwards
    const Var strip("ys");
    split_tile(out, t.y_outer, strip, t.y_outer, static_cast<int>(per), row_tiles);
    if (p.rows_per_task > 0 && per < row_tiles) out.parallel(strip);
    out.never_partition(strip);  // one body for every strip
    result.strips = true;
    result.row_tile = LoopLevel(out, t.y_outer);
    result.row_strip = LoopLevel(out, strip);
  } else if (p.rows_per_task > 0) {
    // Threads over rows (the outermost spatial tile loop); over channel blocks instead when they
    // are the outer loop, or when the output is a single row of tiles.
    if (parallel_over_channels(p, L, ax))
      out.parallel(chan_outer);
    else
      out.parallel(D >= 2 ? t.y_outer : t.unr_outer, p.rows_per_task);
  }
  return result;
}

// A fused block's producer at `where`, with its own layer's register tile. Channels-last: its
// output split into tiles of channel vectors x columns (the rows of its tile budget go to
// columns: a producer's region is one row, or a few), the reduction per tile in registers as in
// a layer of its own, tap and channel unrolling from its knobs. Columns tile only a region of a
// known width (a whole row, or the pixel tile of a 1x1 reader), by a divisor of it, so that no
// tile reads past the producer's input; other regions are computed a column at a time. Channels
// first: vectorized along columns, guarded.
void apply_producer(Algorithm& a, const ScheduleParams& p, const ProducerPlace& where,
                    const Target&) {
  const Layer& L = *a.layer;
  for (Func h : a.helpers) h.compute_root();
  const bool cl = L.layout.channels_last;
  const int D = L.spatial_dims;
  // On the stack, not Halide's heap (where.in_registers): the window exceeds the 16 KB up to which
  // Halide puts Auto and Stack memory on the stack; Register memory goes there whatever its size
  // (an alloca at the task's entry). A whole-model static run so allocates nothing; each thread
  // holds its task's window in its frame, as the manifest states (halide_scratch).
  const MemoryType memory = where.in_registers ? MemoryType::Register : MemoryType::Auto;
  a.output.compute_at(where.compute).store_at(where.store).store_in(memory);
  if (where.fold_rows > 0 && D >= 2 && where.fold_rows < L.out_spatial[D - 2])
    a.output.fold_storage(a.spatial[1], where.fold_rows);
  if (!cl || !a.reduce.defined()) {
    const Var vec = cl ? a.c : a.spatial[0];
    const int64_t extent = cl ? L.out_channels : L.out_spatial.back();
    const int lanes = clamp_int(p.vector_lanes, 1, extent);
    // Channels: the consumer reads all of them, so the region is never narrower than the vector;
    // columns: a tile may be, so those are guarded.
    const TailStrategy tail = cl ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf;
    if (a.reduce.defined()) a.reduce.compute_at(where.compute).store_in(memory);
    if (lanes > 1) {
      a.output.vectorize(vec, lanes, tail);
      if (a.reduce.defined()) {
        a.reduce.vectorize(vec, lanes, tail);
        a.reduce.update().vectorize(vec, lanes, TailStrategy::GuardWithIf);
      }
    }
    if (!a.reduce.defined()) return;
    const int first_tap = a.r.dimensions() - D;
    for (int j = 0; j < D; ++j)
      if (L.kernel[D - 1 - j] > 1 && L.kernel[D - 1 - j] <= std::max(p.unroll_taps, 1))
        a.reduce.update().unroll(a.r[first_tap + j]);
    return;
  }
  // The register tile: vectors of channels (the consumer reads all of them, so the region spans
  // every channel) by columns.
  const int64_t C = L.out_channels;
  const int lanes = clamp_int(p.vector_lanes, 1, C);
  const int budget = std::max(1, p.channel_vectors) * std::max(1, p.tile_x) * std::max(1, p.tile_y);
  int vectors = clamp_int(p.channel_vectors, 1, std::max<int64_t>(1, C / lanes));
  if (C % (static_cast<int64_t>(vectors) * lanes) != 0 && C % lanes == 0)
    vectors = std::max(1, divisor_at_most(C / lanes, vectors));
  int columns = 1;
  if (where.columns > 0) columns = divisor_at_most(where.columns, std::max(1, budget / vectors));
  ScheduleParams q = p;
  q.vector_lanes = lanes;
  q.channel_vectors = vectors;
  q.tile_x = columns;
  q.tile_y = 1;
  const int vec_tile = vectors * lanes;
  Func out = a.output;
  const Var x = a.spatial[0];
  Var co("pco"), ci("pci"), xo("pxo"), xi("pxi");
  split_tile(out, a.c, co, ci, vec_tile, C);
  std::vector<VarOrRVar> order{ci};
  if (columns > 1) {
    out.split(x, xo, xi, columns, TailStrategy::RoundUp);  // columns divides the region
    order.push_back(xi);
    order.push_back(co);
    order.push_back(xo);
  } else {
    order.push_back(co);
    order.push_back(x);
  }
  for (int j = 1; j < D; ++j) order.push_back(a.spatial[j]);
  order.push_back(a.n);
  out.reorder(order).vectorize(ci, lanes);
  if (columns > 1) out.unroll(xi);
  schedule_reduction(a, q, LoopLevel(out, co),
                     L.out_spatial.size() >= 2 ? L.out_spatial[D - 2] : 1);
}

const ScheduleStrategy kStrategy = {"cpu",          kCapabilities, resolve, apply,
                                    apply_producer, weight_form,   nullptr, conservative_knobs()};

}  // namespace

ScheduleParams conservative_knobs() {
  return with_knobs({}, {{"vector_lanes", 1},
                         {"channel_vectors", 1},
                         {"tile_x", 1},
                         {"tile_y", 1},
                         {"rows_per_task", 1},
                         {"unroll_taps", 0}});
}

const Implementation kDirect = {"direct", 1, &kStrategy, nullptr, nullptr};

}  // namespace padfold::cpu
