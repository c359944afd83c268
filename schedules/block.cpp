// Fused blocks: the consumer's knobs for a chain, the row strips its windows allow, and where each
// producer is computed in the consumer's loops.
#include "schedules/block.h"

#include <algorithm>
#include <stdexcept>

#include "padding/padding.h"

namespace padfold {

int max_block_strips(const std::vector<const Layer*>& chain) {
  const Layer& consumer = *chain.back();
  if (consumer.spatial_dims < 2) return 1;
  const size_t y = consumer.out_spatial.size() - 2;
  // Producer rows per consumer row, from the consumer back to each producer.
  double rows_per_out = 1;
  int most = 1 << 20;
  for (size_t i = chain.size() - 1; i >= 1; --i) {
    const Layer& reader = *chain[i];
    const AxisParams a = reader.axes()[y];
    const int64_t k = window_extent(a), s = a.stride;
    rows_per_out *= static_cast<double>(s);
    if (k > s) {
      // A strip recomputes k - s producer rows above its first row: strips of at least
      // kStripOverlaps times that many rows.
      const double overlap_out = static_cast<double>(k - s) / rows_per_out;
      const double rows = static_cast<double>(consumer.out_spatial[y]);
      most = std::min(most, std::max(1, static_cast<int>(rows / (kStripOverlaps * overlap_out))));
    }
  }
  return most;
}

ScheduleParams resolve_block_schedule(const std::vector<const Layer*>& chain,
                                      const Halide::Target& target,
                                      const ScheduleParams& requested) {
  ScheduleParams p = requested;
  p.channels_outer_kb = 0;
  p.parallel_channels = false;
  // Its rows are split into strips (fused_strips), one task each: the consumer's own work says
  // nothing of the block's.
  p.min_task_kflop = 0;
  // Its consumer runs the loops its producers are placed in: the row's fused implementation.
  const Layer& consumer = *chain.back();
  ScheduleParams r = resolve_schedule(fused_implementation(consumer, target), consumer, target, p);
  // A single layer's resolve clears it; strips no shorter than their window allows.
  r.fused_strips = std::min(requested.fused_strips, max_block_strips(chain));
  return r;
}

ScheduleResult apply_block_schedule(std::vector<Algorithm>& chain, const ScheduleParams& requested,
                                    const Halide::Target& target, bool in_registers) {
  std::vector<const Layer*> layers;
  for (const Algorithm& a : chain) layers.push_back(a.layer);
  const ScheduleParams resolved = resolve_block_schedule(layers, target, requested);
  Algorithm& consumer = chain.back();
  const ScheduleResult placed =
      fused_implementation(*consumer.layer, target).strategy->apply(consumer, resolved, target);
  for (size_t i = 0; i + 1 < chain.size(); ++i) {
    const Layer& producer = *chain[i].layer;
    const Layer& reader = *chain[i + 1].layer;
    const Implementation& implementation = fused_implementation(producer, target);
    const ScheduleStrategy& s = *implementation.strategy;
    if (!s.apply_producer)
      throw std::logic_error("layer '" + producer.name + "' cannot be a fused producer");
    bool windowed = false;
    for (int64_t k : reader.kernel) windowed = windowed || k > 1;
    ProducerPlace where;
    where.in_registers = in_registers;
    if (windowed && placed.strips) {
      // A whole row (the reader sees the producer through its border, clamped to the row).
      where.compute = placed.row_tile;
      where.store = placed.row_strip;
      where.columns = producer.out_spatial.back();
      // The window's rows for one row tile of the consumer (the readers between it and the
      // consumer are 1x1), as a power of two: Halide does not fold this storage by itself (the
      // reader's border clamps the rows it reads) and would keep every row of the strip.
      // Only where the reader's border clamps its window to the rows (zeros or a constant): a
      // reflected, replicated or circular border reads rows elsewhere.
      const bool clamped = reader.border == Border::Zeros || reader.border == Border::Constant;
      if (reader.spatial_dims >= 2 && clamped) {
        const size_t y = reader.out_spatial.size() - 2;
        // One step more than the window: Halide's bounds of a clamped (pooling) window can
        // span a row more than the window (a 2-row average pool needed 3).
        const int64_t rows = window_extent(reader.axes()[y], resolved.tile_y + 1);
        where.fold_rows = 1;
        while (where.fold_rows < rows) where.fold_rows *= 2;
      }
    } else {
      where.compute = where.store = placed.pixel_tile;
      const size_t x = reader.out_spatial.size() - 1;
      if (&reader == consumer.layer && !windowed && reader.stride[x] == 1 &&
          reader.layout.channels_last)
        where.columns = std::min<int64_t>(resolved.tile_x, reader.out_spatial[x]);
    }
    const ScheduleParams own =
        resolve_schedule(implementation, producer, target, default_schedule(producer, target));
    s.apply_producer(chain[i], own, where, target);
  }
  return placed;
}

}  // namespace padfold
