// The form a kernel reads a layer's weights in. Most kernels read them as the spec's files hold
// them (the layer's weight_layout), and a Winograd kernel called with those transforms them on
// every call. Where the values are known when the bundle is compiled (its weight files), the
// compile prepares them once into the form the kernel computes with, and the kernel reads that
// form as it is (docs/prepared-weights.md).
#pragma once

#include <Halide.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/npy.h"
#include "frontend/spec.h"

namespace padfold {

struct WeightForm {
  // > 0: U = G g GT of Winograd F(m, 3) (algorithm/winograd.h), U(k, c, a, b) with the output
  // channel innermost: shape (t, t, in_channels, out_channels), t = m + 2.
  int winograd_m = 0;
  // > 0: a channels-last conv's weights (HWIO) in blocks of this many output channels, each
  // block's taps and input channels outside its channels: shape (out_channels / block, taps...,
  // in_channels, block), "Ohwi<block>o" as oneDNN names it. A block of output channels, what a
  // kernel whose channel blocks are its outermost loop reads in its inner loops, is then one
  // contiguous run instead of a strip of every row of taps (a stride of a whole row apart).
  int block_channels = 0;
  // A quantized conv's dot-product table (quantized_dot_product, algorithm.h): the weights of 4
  // consecutive input channels innermost, output channels next, input channels padded with zeros
  // to reduction_channels: shape (taps..., reduction_channels / 4, out_channels, 4), "HWIO4i".
  bool dot_table = false;

  bool prepared() const { return winograd_m > 0 || block_channels > 0 || dot_table; }
  bool operator==(const WeightForm& o) const {
    return winograd_m == o.winograd_m && block_channels == o.block_channels &&
           dot_table == o.dot_table;
  }
  bool operator!=(const WeightForm& o) const { return !(*this == o); }
};

// Whether the layer's weights can take block_channels = block: a float32 conv of one group,
// channels last, weights HWIO (output channels innermost), whose output channels the block
// divides.
bool blocked_weights_apply(const Layer& layer, int block);

// The layer's weights as its weight_layout indexes them (a Func of its weights' dimensions),
// read from `blocked`, a buffer of the form block_channels = block.
Halide::Func blocked_weights_view(const Layer& layer, int block, const Halide::Func& blocked);

// A quantized dot-product conv's table (dot_table) from `weights`, its weights as their
// weight_layout indexes them: args (i4, o, io, taps...) innermost first, the weight of input
// channel io * 4 + i4, 0 past the layer's input channels per group. What a kernel passed the
// file's weights builds per call, and the compile once (prepare_weights).
Halide::Func define_dot_table(const Layer& layer, const Halide::Func& weights);

// The weights buffer in that form: its layout as the manifest states it (the layer's
// weight_layout, or "winograd_f<m>_u"), and its shape, outermost first.
std::string weight_form_layout(const Layer& layer, const WeightForm& form);
std::vector<int64_t> weight_form_shape(const Layer& layer, const WeightForm& form);

// The prepared values of `file`, the layer's weights as its weight file holds them, computed by
// the same Halide definition a kernel that is passed raw weights runs per call (JIT on the host).
// An unprepared form returns `file` as it is.
NpyData prepare_weights(const Layer& layer, const WeightForm& form, const NpyData& file);

}  // namespace padfold
