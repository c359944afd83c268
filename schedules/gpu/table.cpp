// The default knobs of the GPU family, one row per op class. Untuned starting points (no GPU was
// at hand when they were written): 128 threads a block, 2x2 outputs per thread, channel-split
// reductions unrolled by 4; depthwise and pooling layers, which do little work per output, get
// wider blocks along the innermost axis.
#include "schedules/gpu/gpu.h"

namespace padfold::gpu {

namespace {

using C = OpClass;

StrategyRow row(OpClass op_class, std::initializer_list<std::pair<const char*, int64_t>> knobs) {
  ScheduleParams p = with_knobs({}, knobs);
  p.name = to_string(TargetFamily::Gpu) + "." + to_string(op_class);
  return {TargetFamily::Gpu, op_class, {kDirect}, p};
}

}  // namespace

std::vector<StrategyRow> strategy_rows() {
  return {
      row(C::Dense, {}),
      row(C::Stem, {{"gpu_unroll_channels", 3}}),
      row(C::Pointwise, {{"gpu_unroll_channels", 8}}),
      row(C::Depthwise, {{"gpu_threads_x", 32}, {"gpu_threads_y", 4}, {"gpu_tile_x", 1}}),
      row(C::Pooling, {{"gpu_threads_x", 32}, {"gpu_threads_y", 4}, {"gpu_tile_x", 1}}),
      row(C::Transposed, {}),
      row(C::Elementwise,
          {{"gpu_threads_x", 32}, {"gpu_threads_y", 8}, {"gpu_tile_x", 1}, {"gpu_tile_y", 1}}),
  };
}

}  // namespace padfold::gpu
