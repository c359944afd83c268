// The form a kernel reads a layer's weights in. Most kernels read them as the spec's files hold
// them (the layer's weight_layout), and a Winograd kernel called with those transforms them on
// every call. Where the values are known when the bundle is compiled (its weight files), the
// compile prepares them once into the form the kernel computes with, and the kernel reads that
// form as it is (docs/prepared-weights.md).
#pragma once

#include <Halide.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/npy.h"
#include "frontend/spec.h"

namespace padfold {

// The stages of a kernel that put its weights in another form on each call, by the names (after
// the layer's) its algorithm and schedule give them: the statement check finds them so
// (per_call_weight_stages). The first pass of a Winograd U, a dot-product table, an int8 conv's
// weight sums, and weights copied per call (Halide's name for a wrapper of the weights staged for
// one consumer, <layer>_weights_im_in_<consumer>: pack_block_weights' channel blocks,
// schedule_dot_weights' registers).
inline constexpr const char* kWinogradWeightRowsStage = "_wg_weights_rows";
inline constexpr const char* kDotTableStage = "_dot_weights";
inline constexpr const char* kWeightSumStage = "_weight_sum";
inline constexpr const char* kCopiedWeightsStage = "_weights_im_in_";
inline constexpr const char* kPerCallWeightStages[] = {kWinogradWeightRowsStage, kDotTableStage,
                                                       kWeightSumStage, kCopiedWeightsStage};

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
  // A quantized conv's bias with the input zero point's term folded in: bias - z * (the sum of
  // the output channel's weights), z the zero point as the kernel's products see it
  // (dot_zero_point: offset by 128 where the input is flipped to the target's operand type). The
  // kernel then sums no weights per call. Set with the bias's file (bundle_plan); the weights
  // buffer keeps the form above.
  bool zero_point_in_bias = false;
  int32_t folded_zero_point = 0;  // z, where zero_point_in_bias

  // Whether the weights buffer is in another form than the file's.
  bool prepared() const { return winograd_m > 0 || block_channels > 0 || dot_table; }
  bool operator==(const WeightForm& o) const {
    return winograd_m == o.winograd_m && block_channels == o.block_channels &&
           dot_table == o.dot_table && zero_point_in_bias == o.zero_point_in_bias &&
           folded_zero_point == o.folded_zero_point;
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

// The zero point a quantized conv with a bias can fold into it on `target`
// (WeightForm::zero_point_in_bias); none for other layers.
std::optional<int32_t> foldable_zero_point(const Layer& layer, const Halide::Target& target);

// The bias buffer's layout as the manifest states it: "O", or "O_zero_point_folded".
std::string bias_form_layout(const WeightForm& form);

// The bias the bundle stores: `bias` as its file holds it, or with form.zero_point_in_bias folded
// in from `weights` (the weights file's values, the layer's weight_layout). Computed in int64 and
// wrapped to int32 as the kernel's own int32 sum would wrap.
NpyData prepare_bias(const Layer& layer, const WeightForm& form, const NpyData& weights,
                     const NpyData& bias);

// The prepared form (form.prepared()) of `weights`, the layer's weights as their weight_layout
// indexes them, as a Halide definition: what the compile realizes (prepare_weights) and what a
// bundle's prepare kernel computes from the caller's weights (compile_weight_preparation).
Halide::Func define_prepared_weights(const Layer& layer, const WeightForm& form,
                                     const Halide::Func& weights);

// The prepared values of `file`, the layer's weights as its weight file holds them, computed by
// the same Halide definition a kernel that is passed raw weights runs per call (JIT on the host).
// An unprepared form returns `file` as it is.
NpyData prepare_weights(const Layer& layer, const WeightForm& form, const NpyData& file);

}  // namespace padfold
