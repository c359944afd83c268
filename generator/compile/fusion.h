// Which layers become one kernel. A fused block is a chain in which each layer reads only the
// previous one, whose output nothing else reads and which is no model output; the kinds are
// dw -> pw, pw -> dw -> pw and conv -> max_pool / avg_pool, and a conv, dw -> pw or pw -> dw -> pw
// followed by a residual add (the conv's output plus another tensor, in the conv's epilogue).
// `auto` fuses a chain when the memory traffic of its intermediates saved outweighs the producer
// rows each row strip recomputes, and the block keeps at least two strips (threads); a residual
// add whenever the chain before it is fused (or is a single conv).
#pragma once

#include <string>
#include <vector>

#include "compile/block.h"
#include "frontend/spec.h"

namespace padfold {

struct FuseOptions {
  enum class Mode { Auto, None, Listed } mode = Mode::Auto;
  std::vector<std::vector<std::string>> listed;  // Listed: the blocks, as layer names
};

// "auto", "none", or blocks "a+b,c+d+e" (layer names in order). Throws std::invalid_argument.
FuseOptions parse_fuse_option(const std::string& text);

// The cost model's view of a candidate chain.
struct FusionEstimate {
  std::string kind;               // "dw->pw", ...
  double intermediate_bytes = 0;  // written and read back once each when not fused
  double recompute_flops = 0;     // extra producer work: the rows above each row strip
  bool pays = false;
  std::string reason;  // the numbers, in words
};

// Recomputed flops one byte of intermediate traffic is worth: about a core's FMA rate over its
// share of memory bandwidth (~100 GFLOP/s over ~10 GB/s); an intermediate that fits in L2 is
// worth a quarter of that per byte.
inline constexpr double kFlopsPerByte = 10;
inline constexpr double kCachedIntermediateBytes = 512 * 1024;
// The row strips the cost model assumes a block's rows are split into (the CPU rows'
// fused_strips), fewer where a window needs taller strips (max_block_strips).
inline constexpr int kNominalStrips = 4;
// Intermediates smaller than this stay in L2 between two kernels: fusing them saves too little
// to give up a kernel per layer (bench/results-blocks.md: b6's dw->pw, a 527 KB intermediate,
// ran 0.8x as fast fused as unfused at 1 thread on a 2 MiB-L2 Sapphire Rapids; every chain whose
// intermediates were 1.5 MB or more gained 1.02-1.6x). 1 MiB: the L2 of Zen 4.
inline constexpr double kMinFusedIntermediateBytes = 1024 * 1024;

struct FusionPlan {
  std::vector<Block> blocks;       // every layer in exactly one block, in model order
  std::vector<std::string> notes;  // candidates not fused, and why
};

// The blocks for `options`. Listed blocks must be fusible chains (throws std::invalid_argument
// naming the block and the reason otherwise).
FusionPlan plan_fusion(const Model& model, const FuseOptions& options);

// The estimate for a chain of layers (a fusible kind), on a nominal consumer tile.
FusionEstimate estimate_fusion(const std::vector<const Layer*>& chain);

}  // namespace padfold
