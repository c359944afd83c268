// What one kernel computes: a single layer, or a fused block of layers (a chain in which each
// layer reads only the previous one's output, which nothing else reads). A block's intermediates
// never reach memory beyond a tile of the consumer. A block may end in a residual add: an add of
// the previous layer (a conv) and another tensor, computed in the conv's epilogue.
#pragma once

#include <string>
#include <vector>

#include "algorithm/algorithm.h"
#include "frontend/spec.h"

namespace padfold {

struct Block {
  std::vector<const Layer*> layers;  // producers first; the last layer's output is the block's
  std::string reason;                // why these layers are fused (empty for one layer)

  const Layer& first() const { return *layers.front(); }
  const Layer& last() const { return *layers.back(); }
  bool fused() const { return layers.size() > 1; }
  // The add the block ends in, or nullptr.
  const Layer* residual() const;
  // The layer whose loops the kernel runs in (and whose knobs it takes): the last, or the conv
  // before a residual add.
  const Layer& consumer() const { return residual() ? *layers[layers.size() - 2] : last(); }
  // The layers computed as producers and consumer (every layer but a residual add).
  std::vector<const Layer*> chain() const;
  // The tensor a residual add sums with the conv's output.
  const std::string& residual_source() const;
  std::string kind() const;   // "conv2d", or the ops joined by "->": "dw->pw", "conv2d->max_pool"
  std::string names() const;  // the layer names joined by "+"
};

// The kernel's buffers in manifest order: the first layer's inputs, every layer's weights and bias
// (named "<layer>_weights", "<layer>_bias" in a fused block), a residual add's other input
// ("residual"), the last layer's output. The consumer's weights in `weights`' form.
std::vector<BufferInfo> block_buffers(const Block& block, const WeightForm& weights = {});
// The tensor feeding each input buffer of block_buffers, in order.
std::vector<std::string> block_input_sources(const Block& block);

}  // namespace padfold
