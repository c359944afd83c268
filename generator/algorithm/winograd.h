// Winograd's minimal filtering F(m, 3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2016) for 3x3 stride-1 convolutions: each tile of m x m outputs is computed from the
// t x t inputs around it (t = m + 2) as AT [(G g GT) .* (BT d B)] A, so over the input channels
// the t*t transformed positions are t*t independent matrix products, 2.25x (m = 2) or 4x (m = 4)
// fewer multiplies than direct convolution. The border is folded into the input transform: a
// tile's inputs are read through the bordered input like every other kernel's (no padded copy).
// The transformed weights U = G g GT are computed per call inside the kernel when it is passed the
// layer's own weights, or read as they are when the compile prepared them
// (algorithm/weight_form.h).
#pragma once

#include <Halide.h>

#include <vector>

#include "frontend/spec.h"

namespace padfold {

struct Algorithm;

struct WinogradMatrices {
  int m = 0, t = 0;                            // outputs and inputs per tile and axis
  std::vector<std::vector<double>> BT, G, AT;  // t x t, t x 3, m x t
};
// F(2, 3) or F(4, 3); throws std::invalid_argument for another m.
const WinogradMatrices& winograd_matrices(int m);

// Whether F(m, 3) computes the layer: a 2D convolution, 3x3, stride 1, dilation 1, one group.
bool winograd_applies(const Layer& layer);
// The outputs per tile and axis of the `winograd` schedule knob: 1 -> 2 (F(2,3)), 2 -> 4
// (F(4,3)), 0 -> 0 (direct convolution).
int winograd_outputs(int knob);
// Its inverse: the knob of F(m, 3) (2 -> 1, 4 -> 2, anything else -> 0).
int winograd_knob(int m);

// The stages of a Winograd convolution, for its schedule. Every Func is over fixed shapes;
// positions a (rows) and b (columns) of a transformed tile run over [0, t).
struct WinogradStages {
  int m = 0, t = 0;  // 0: the layer is not computed this way
  // U(k, c, a, b): the weights transformed (G g GT); rows(k, c, a, s): G along the kernel rows.
  // With prepared weights U reads the weights buffer and `weights_rows` is undefined.
  Halide::Func weights, weights_rows;
  // V(c, a, b, tx, ty, n): each tile's inputs transformed (BT d B); rows(c, a, j, tx, ty, n): BT
  // along the tile's rows. Tile (tx, ty) starts at output column m*tx, row m*ty.
  Halide::Func input, input_rows;
  // M(k, a, b, tx, ty, n) = sum over c of U(k, c, a, b) V(c, a, b, tx, ty, n): `product` the
  // reduction (over rc), `products` its pure copy (where a schedule keeps a row of tiles).
  Halide::Func product, products;
  // O(k, a, xi, tx, ty, n): AT along the columns of M; the convolution is AT along its rows.
  Halide::Func output_rows;
  Halide::RDom rc;  // the input channels
  Halide::Var k{"wk"}, c{"wc"}, a{"wa"}, b{"wb"}, j{"wj"}, s{"ws"}, xi{"wxi"}, tx{"wtx"}, ty{"wty"};
};

// Defines `weights` (U) and `weights_rows` of `s` over `raw`, the layer's weights in its
// weight_layout: the one definition of the weight transform, per call and prepared alike.
void define_winograd_weights(WinogradStages& s, const Layer& layer, int m, const Halide::Func& raw);

// Defines `a.bordered` and `a.reduce` (the convolution before bias, activation and residual) as
// F(m, 3) through the stages in `a.winograd`. With `prepared`, `a.weights` holds U already.
void build_winograd_conv(Algorithm& a, const Layer& layer, int m, bool prepared);

}  // namespace padfold
