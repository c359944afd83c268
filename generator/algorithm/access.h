// How an algorithm reads its tensors and walks its windows, shared by the op families' builders
// (builders.h) and Winograd (winograd.cpp). Defined in access.cpp.
#pragma once

#include <Halide.h>

#include <string>
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

// Fixes a buffer's bounds and dense row-major strides (shape is outermost first).
void fix_shape(Halide::OutputImageParam param, const std::vector<int64_t>& shape);

// Spatial index j of Halide (innermost first) is axis dims-1-j of the layer (outermost first).
size_t axis_of(size_t j, size_t dims);

// Reduction domain: input channels of a group (when more than one), then kernel taps, innermost
// spatial axis first; split_rdom names its channel (0 when there is one) and tap variables.
Halide::RDom make_rdom(const Layer& L, int64_t channels, const std::string& suffix = "_r");
void split_rdom(const Halide::RDom& r, int64_t channels, Halide::Expr& rc,
                std::vector<Halide::Expr>& rk);

// The input positions of the window's taps rk (innermost spatial axis first).
std::vector<Halide::Expr> tap_positions(const Algorithm& a, const Layer& L,
                                        const std::vector<Halide::Expr>& rk);

// Whether taps at `pos` lie before the end of the padded input (ceil_mode's last window may
// reach past it: those taps are left out).
Halide::Expr inside_padding(const Layer& L, const std::vector<Halide::Expr>& pos);

}  // namespace padfold
