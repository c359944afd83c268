// The tuned default knobs of the CPU families, one row per (target family, op class). Measured on
// Zen 4 (AVX-512); see bench/README.md for how they were chosen.
#include "schedules/cpu/cpu.h"

namespace padfold::cpu {

namespace {

using F = TargetFamily;
using C = OpClass;

StrategyRow row(TargetFamily family, OpClass op_class,
                std::initializer_list<std::pair<const char*, int64_t>> knobs) {
  // Every family: about 5 us of work per parallel task on these cores.
  ScheduleParams p = with_knobs({}, {{"rows_per_task", 1}, {"min_task_kflop", 500}});
  p = with_knobs(p, knobs);
  p.name = to_string(family) + "." + to_string(op_class);
  // Dense convs: Winograd where their knobs choose it (3x3 stride 1), pointwise ones a GEMM over
  // their pixels where theirs do; else the direct loops.
  std::vector<Implementation> implementations{kDirect};
  if (op_class == C::Dense) implementations = {kWinograd, kDirect};
  if (op_class == C::Pointwise) implementations = {kGemm, kDirect};
  if (op_class == C::Elementwise) implementations = {kElementwise};
  return {family, op_class, implementations, p};
}

// About 16 accumulators fill AVX-512's 32 registers without spilling; AVX2 has 16 registers and
// takes about 12 (14 spill); NEON on AArch64 has 32 registers of 4 lanes. cv x tx x ty is the
// accumulator budget of a tile (channel_vectors x tile_x x tile_y). The knobs are those of
// schedules/knobs.h; a row sets only those that differ from the knob's default.
//
// Measured with bench/ on Zen 4 (bench/README.md has the numbers):
//  fit_tiles  everywhere: a tile that does not divide the output recomputes an overlap and, on a
//             padded axis, keeps Halide from peeling the border tiles off, so every tile tests the
//             border (resnet_3x3 with 16-column tiles on 56 columns: 82 instead of 118 GFLOP/s).
//  dense      one channel vector x 16 columns (14 after fitting 56/28): one weight vector per 14
//             broadcast FMAs streams 4x less weight data from L2 than 4x4 tiles (the 590 KB of
//             resnet_3x3_s2_same: 109 -> 114 GFLOP/s); small outputs grow the tile to the whole
//             image (seed_even_k4_s2: 4x4 pixels). All taps unrolled: border tiles then have
//             constant tap positions and Halide drops the taps in the padding (seed: 125 -> 175).
//  stem       3 input channels: the taps are the long reduction, so they go innermost and the
//             channels are unrolled (resnet_stem +1-5%).
//  pointwise  weights above 1 MiB (effnet_head_pw: 1.6 MB, more than L2): channel blocks
//             outermost, so each block's weights stay in cache over all pixels, and threads over
//             the blocks (its 7 rows split 4/3 over 2 threads); 98 -> 113 GFLOP/s.
// Measured on Zen 3 (AVX2) over every conv shape of ResNet-50 (bench/results-models.md):
//  dense and pointwise with weights above 128 KiB: channel blocks outermost, and each block's
//             weights packed into a stack buffer of their own (pack_weights_kb: up to 320 KiB,
//             a 3x3x512 block of 16 channels): read in place, HWIO weights of 512 or more output
//             channels put consecutive reduction steps 2 KiB or more apart, a new page every
//             other step, which the prefetchers do not follow. 7x7x2048 -> 512: 3.26 -> 1.89 ms,
//             7x7x512 3x3: 16.2 -> 6.6 ms, the 22 distinct shapes 112 -> 67 ms (1 thread).
//             Dense outputs of fewer than 16 row tiles put threads over the channel blocks
//             (7x7x512 3x3 at 2 threads: 4.4 -> 2.7 ms; 28 rows stay faster over rows).
//  depthwise  small tiles over two rows; 3x3 and 5x5 kernels fully unrolled (with Halide 21, 5x5
//             kernels whose rows stay rolled keep a select per tap in the steady state of 14x14
//             outputs; on the 7x7 effnet_dw5_s2_b unrolling drops the padding: 46 -> 106 GFLOP/s).
//  fused      pointwise and pooling rows are also the knobs of a fused block they end: 4 row strips
//             (fused_strips), producers read through a window sliding along each strip's rows
//             (bench/results-blocks.md: b2a 0.87 -> 0.43 ms, stem conv->max_pool 12.9 -> 1.1 ms,
//             1 thread, against per-pixel-tile producers that recomputed their window's halo).
// Measured on Zen 5 (AVX-512) and its AVX2 target over ResNet-50's 13 3x3 stride-1 convs
// (bench/results-models.md, "Winograd"):
//  dense      Winograd F(4,3) on outputs of 32 tiles or more (28x28 and up): 56x56x64 0.95 ->
//             0.32 ms, 28x28x128 0.95 -> 0.51 ms at 1 thread (AVX2: 2.04 -> 0.69, 2.01 -> 1.09);
//             14x14x256 (16 tiles) 0.82x and 7x7x512 0.08x (their weights, transformed per
//             call, take 9 and 38 MB).
// Measured on Zen 3 (AVX2), weights prepared by the compile and each row of tiles on the stack
// (bench/results-winograd.md): isolated, F(4,3) over direct 2.85x (56x56x64), 2.05x (28x28x128),
// 1.78x (14x14x256), 0.57x (7x7x512); in ResNet-50, where U no longer sits in L3 from one call to
// the next, F(4,3) on 14x14 made the model 9% slower and F(2,3) there 5% faster: so F(4,3) from 32
// tiles, F(2,3) below where it has 32 (winograd_min_tiles), 7x7 direct. AVX-512 takes the same
// rule, not yet measured with prepared weights.
// Measured on Zen 4 (AVX-512) and its AVX2 target over the distinct pointwise convs of ResNet-50,
// MobileNetV2 and EfficientNet-B0 (bench/results-gemm.md, 1 thread):
//  pointwise  a GEMM over the output plane's pixels (gemm.cpp) where it has 4 tiles or more:
//             AVX-512 6 pixels x 4 vectors (24 accumulators): ResNet-50's 14x14x1024 -> 256 and
//             its stride-2 downsample 28x28x512 -> 1024 1.61 -> 0.88 ms and 3.18 -> 1.82 ms
//             (their direct tiles are 14 columns of one vector, which stream the input once per
//             16 channels), the rest 0.95-1.01x (4x4 tiles: 0.97-1.02x, but whole models faster
//             with 6x4); AVX2 6 pixels x 2 vectors (12 of its 16 registers): 1.00-1.11x on every
//             shape. Whole models, default import, gemm off against on (knob_ab.sh, two runs
//             on AVX-512): ResNet-50 1.09x (1 thread) and 1.08x (2), MobileNetV2 1.00-1.04x /
//             1.00-1.03x, EfficientNet-B0 1.00-1.02x / 0.98-0.99x; AVX2 target (one run) 1.04x /
//             1.00x, 1.01x / 1.02x, 1.06x / 1.00x.
// AVX2 and generic (SSE4.1) rows take the same structure with their own tile budgets (spot-checked
// on this machine); NEON rows are unchanged: they cannot be timed or run here.
std::vector<StrategyRow> x86_and_generic_rows() {
  // clang-format off
  return {
      row(F::X86Avx512, C::Dense,      {{"channels_outer_kb", 128}, {"pack_weights_kb", 320}, {"channel_tasks_rows", 16}, {"vector_lanes", 16}, {"tile_x", 16}, {"unroll_taps", 4}, {"unroll_taps_outer", 4}, {"fit_tiles", 1}, {"winograd", 2}, {"winograd_min_tiles", 32}}),
      row(F::X86Avx512, C::Stem,       {{"vector_lanes", 16}, {"channel_vectors", 4}, {"unroll_taps", 7}, {"unroll_channels", 3}, {"fit_tiles", 1}, {"taps_inner", 1}}),
      row(F::X86Avx512, C::Pointwise,  {{"vector_lanes", 16}, {"tile_x", 16}, {"channels_outer_kb", 128}, {"pack_weights_kb", 320}, {"fit_tiles", 1}, {"parallel_channels", 1}, {"fused_strips", 4}, {"gemm_pixels", 6}, {"gemm_vectors", 4}}),
      row(F::X86Avx512, C::Depthwise,  {{"vector_lanes", 16}, {"tile_y", 2}, {"unroll_taps", 5}, {"unroll_taps_outer", 5}, {"unroll_taps_rows", 8}, {"fit_tiles", 1}}),
      row(F::X86Avx512, C::Pooling,    {{"vector_lanes", 16}, {"unroll_taps", 3}, {"fused_strips", 4}}),
      row(F::X86Avx512, C::Transposed, {{"vector_lanes", 16}, {"channel_vectors", 2}}),
      row(F::X86Avx512, C::Elementwise, {{"vector_lanes", 16}}),
      row(F::X86Avx2,   C::Dense,      {{"channels_outer_kb", 128}, {"pack_weights_kb", 320}, {"channel_tasks_rows", 16}, {"vector_lanes", 8}, {"channel_vectors", 2}, {"tile_x", 6}, {"unroll_taps", 4}, {"unroll_taps_outer", 4}, {"fit_tiles", 1}, {"winograd", 2}, {"winograd_min_tiles", 32}}),
      row(F::X86Avx2,   C::Stem,       {{"vector_lanes", 8}, {"channel_vectors", 2}, {"tile_x", 6}, {"unroll_taps", 7}, {"unroll_channels", 3}, {"fit_tiles", 1}, {"taps_inner", 1}}),
      row(F::X86Avx2,   C::Pointwise,  {{"vector_lanes", 8}, {"channel_vectors", 2}, {"tile_x", 6}, {"channels_outer_kb", 128}, {"pack_weights_kb", 320}, {"fit_tiles", 1}, {"parallel_channels", 1}, {"fused_strips", 4}, {"gemm_pixels", 6}, {"gemm_vectors", 2}}),
      row(F::X86Avx2,   C::Depthwise,  {{"vector_lanes", 8}, {"tile_y", 2}, {"unroll_taps", 5}, {"unroll_taps_outer", 5}, {"unroll_taps_rows", 8}, {"fit_tiles", 1}}),
      row(F::X86Avx2,   C::Pooling,    {{"vector_lanes", 8}, {"unroll_taps", 3}, {"fused_strips", 4}}),
      row(F::X86Avx2,   C::Transposed, {{"vector_lanes", 8}, {"channel_vectors", 2}}),
      row(F::X86Avx2,   C::Elementwise, {{"vector_lanes", 8}}),
      row(F::Generic,   C::Dense,      {{"channels_outer_kb", 128}, {"pack_weights_kb", 320}, {"channel_tasks_rows", 16}, {"vector_lanes", 4}, {"channel_vectors", 2}, {"unroll_taps", 4}, {"unroll_taps_outer", 4}, {"fit_tiles", 1}}),
      row(F::Generic,   C::Stem,       {{"vector_lanes", 4}, {"channel_vectors", 2}, {"unroll_taps", 3}, {"unroll_channels", 3}, {"fit_tiles", 1}, {"taps_inner", 1}}),
      row(F::Generic,   C::Pointwise,  {{"vector_lanes", 4}, {"channel_vectors", 2}, {"channels_outer_kb", 128}, {"pack_weights_kb", 320}, {"fit_tiles", 1}, {"parallel_channels", 1}, {"fused_strips", 4}}),
      row(F::Generic,   C::Depthwise,  {{"vector_lanes", 4}, {"tile_y", 2}, {"unroll_taps", 5}, {"unroll_taps_outer", 5}, {"unroll_taps_rows", 8}, {"fit_tiles", 1}}),
      row(F::Generic,   C::Pooling,    {{"vector_lanes", 4}, {"unroll_taps", 3}, {"fused_strips", 4}}),
      row(F::Generic,   C::Transposed, {{"vector_lanes", 4}}),
      row(F::Generic,   C::Elementwise, {{"vector_lanes", 4}}),
      row(F::ArmNeon,   C::Dense,      {{"vector_lanes", 4}, {"channel_vectors", 4}, {"unroll_taps", 3}}),
      row(F::ArmNeon,   C::Stem,       {{"vector_lanes", 4}, {"channel_vectors", 4}, {"unroll_taps", 7}}),
      row(F::ArmNeon,   C::Pointwise,  {{"vector_lanes", 4}, {"channel_vectors", 4}}),
      row(F::ArmNeon,   C::Depthwise,  {{"vector_lanes", 4}, {"channel_vectors", 2}, {"tile_y", 2}, {"unroll_taps", 5}}),
      row(F::ArmNeon,   C::Pooling,    {{"vector_lanes", 4}, {"channel_vectors", 2}, {"unroll_taps", 3}}),
      row(F::ArmNeon,   C::Transposed, {{"vector_lanes", 4}, {"channel_vectors", 2}}),
      row(F::ArmNeon,   C::Elementwise, {{"vector_lanes", 4}}),
  };
  // clang-format on
}

}  // namespace

std::vector<StrategyRow> strategy_rows() {
  std::vector<StrategyRow> rows = x86_and_generic_rows();
  // RISC-V: the generic rows, scalar. Halide 21's RVV code generation hits an LLVM assertion on
  // vectorized depthwise and pooling kernels (tests/kernels/kernels_compile_test.cpp compiles
  // every case).
  for (const StrategyRow& g : x86_and_generic_rows()) {
    if (g.family != F::Generic) continue;
    StrategyRow r = g;
    r.family = F::RiscV;
    r.defaults.vector_lanes = 1;
    r.defaults.name = to_string(F::RiscV) + "." + to_string(g.op_class);
    rows.push_back(r);
  }
  return rows;
}

}  // namespace padfold::cpu
