// What one kernel computes: a single layer, or a fused block of layers (a chain in which each
// layer reads only the previous one's output, which nothing else reads). A block's intermediates
// never reach memory beyond a tile of the consumer.
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
  std::string kind() const;   // "conv2d", or the ops joined by "->": "dw->pw", "conv2d->max_pool"
  std::string names() const;  // the layer names joined by "+"
};

// The kernel's buffers in manifest order: the first layer's inputs, every layer's weights and bias
// (named "<layer>_weights", "<layer>_bias" in a fused block), the last layer's output.
std::vector<BufferInfo> block_buffers(const Block& block);

}  // namespace padfold
