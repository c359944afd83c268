// Per-channel affine ops folded into the convolution next to them: BatchNormalization
// (inference), and Mul / Add / Sub / Div by a scalar or per-channel constant. After a conv they
// scale and shift its output channels (weights and bias); before a conv they scale its input
// channels and shift its bias, which is exact only where the conv never reads a padded value
// that the shift would have moved (see folds_before_exactly). Arithmetic in float64.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "frontend/layer.h"
#include "frontend/onnx/import_ops.h"

namespace padfold::onnx_import::detail {

// y = x * scale[c] + shift[c] per channel c.
struct Affine {
  std::vector<double> scale, shift;
  bool shifts() const;
  // this, then `next`.
  Affine then(const Affine& next) const;
};

// A node that is an affine op on one computed float32 tensor, per channel (ONNX axis 1, or the
// last axis with `channels_last`: a Keras model's input before tf2onnx's layout Transpose):
// the tensor it reads and the affine, or why it is not one.
struct AffineNode {
  std::string input;
  Affine affine;
};
std::variant<AffineNode, Left> affine_node(const Context& c, int node, bool channels_last = false);

// Why an affine on a conv's input cannot become part of it, or "": a shift is the bias only where
// no tap reads the padding, or where the border copies input values (replicate, reflect,
// symmetric, circular); zeros and constant borders pad with values the shift never moved.
std::string folds_before_exactly(const Layer& conv, const Affine& before);

// The conv's weights and bias (in the layer's weight layout; bias may be empty: zeros) with
// `before` on its input channels and `after` on its output channels folded in.
void fold_into_conv(const Layer& conv, const std::optional<Affine>& before,
                    const std::optional<Affine>& after, std::vector<float>& weights,
                    std::vector<float>& bias);

}  // namespace padfold::onnx_import::detail
