// How an algorithm reads its tensors and walks its windows, shared by the algorithms
// (algorithm.cpp, winograd.cpp).
#pragma once

#include <Halide.h>

#include <vector>

#include "algorithm/algorithm.h"

namespace padfold {

// Arguments in a tensor's Halide dimension order from logical channel, spatial (innermost first)
// and batch expressions.
std::vector<Halide::Expr> tensor_args(const TensorLayout& layout, Halide::Expr ch,
                                      const std::vector<Halide::Expr>& sp, Halide::Expr batch);

// Arguments in the weight buffer's Halide order (reverse of the layout letters) from the output
// channel, the input channel and the kernel taps (innermost axis first).
std::vector<Halide::Expr> weight_args(const WeightLayout& layout, int dims, Halide::Expr o,
                                      Halide::Expr i, const std::vector<Halide::Expr>& k);

// The layer's input seen through `border`, infinite along spatial axes: its buffer, or in a fused
// block the producer's Func over the producer's output extent.
// `value` (the input's type) fills the padding of the zeros and constant borders.
Halide::Func apply_border(const Algorithm& a, const Layer& L, Border border, Halide::Expr value);

// What the layer's own border fills its padding with where that is a value: float zero or the
// constant; for a quantized layer the input's zero point (the integer meaning 0.0) or the constant
// quantized.
Halide::Expr border_fill(const Layer& L);

}  // namespace padfold
