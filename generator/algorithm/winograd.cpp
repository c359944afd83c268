#include "algorithm/winograd.h"

#include <functional>
#include <stdexcept>

#include "algorithm/access.h"
#include "algorithm/algorithm.h"

namespace padfold {

using namespace Halide;

const WinogradMatrices& winograd_matrices(int m) {
  // Interpolation points 0, 1, -1 (m = 2) and 0, 1, -1, 2, -2 (m = 4), plus infinity.
  static const WinogradMatrices f2{2,
                                   4,
                                   {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
                                   {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
                                   {{1, 1, 1, 0}, {0, 1, -1, -1}}};
  static const WinogradMatrices f4{
      4,
      6,
      {{4, 0, -5, 0, 1, 0},
       {0, -4, -4, 1, 1, 0},
       {0, 4, -4, -1, 1, 0},
       {0, -2, -1, 2, 1, 0},
       {0, 2, -1, -2, 1, 0},
       {0, 4, 0, -5, 0, 1}},
      {{1.0 / 4, 0, 0},
       {-1.0 / 6, -1.0 / 6, -1.0 / 6},
       {-1.0 / 6, 1.0 / 6, -1.0 / 6},
       {1.0 / 24, 1.0 / 12, 1.0 / 6},
       {1.0 / 24, -1.0 / 12, 1.0 / 6},
       {0, 0, 1}},
      {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}};
  if (m == 2) return f2;
  if (m == 4) return f4;
  throw std::invalid_argument("Winograd F(" + std::to_string(m) + ", 3): only m = 2 and 4");
}

bool winograd_applies(const Layer& L) {
  if (L.op != Op::Conv || L.spatial_dims != 2 || L.groups != 1 || L.quantized()) return false;
  for (size_t i = 0; i < 2; ++i)
    if (L.kernel[i] != 3 || L.stride[i] != 1 || L.dilation[i] != 1) return false;
  return true;
}

int winograd_outputs(int knob) {
  return knob == 1 ? 2 : knob == 2 ? 4 : 0;
}

int winograd_knob(int m) {
  return m == 2 ? 1 : m == 4 ? 2 : 0;
}

namespace {

// sum_i coefficients[i] * term(i) over the nonzero coefficients, with no multiply by +-1.
Expr combine(const std::vector<double>& coefficients, const std::function<Expr(int)>& term) {
  Expr sum;
  for (size_t i = 0; i < coefficients.size(); ++i) {
    const double w = coefficients[i];
    if (w == 0) continue;
    const Expr e = term(static_cast<int>(i));
    const Expr scaled = w == 1 || w == -1 ? e : static_cast<float>(std::abs(w)) * e;
    sum = !sum.defined() ? (w < 0 ? -scaled : scaled) : w < 0 ? sum - scaled : sum + scaled;
  }
  return sum;
}

// One expression per row of `matrix`, chosen by `index` (a variable a schedule unrolls, so the
// choice folds to a constant).
Expr by_row(const Expr& index, const std::vector<std::vector<double>>& matrix,
            const std::function<Expr(int)>& term) {
  std::vector<Expr> rows;
  for (const std::vector<double>& row : matrix) rows.push_back(combine(row, term));
  return mux(index, rows);
}

}  // namespace

void define_winograd_weights(WinogradStages& s, const Layer& L, int m, const Func& raw) {
  const WinogradMatrices& W = winograd_matrices(m);
  const std::string name = L.name + "_wg_";
  s.weights = Func(name + "weights");
  s.weights_rows = Func(L.name + kWinogradWeightRowsStage);
  const Var &k = s.k, &c = s.c, &av = s.a, &bv = s.b, &sv = s.s;
  // G along the kernel rows (r), then along the columns (s). The weight buffer's taps are
  // innermost first: column, row.
  s.weights_rows(k, c, av, sv) = by_row(av, W.G, [&](int r) {
    return raw(weight_args(L.weight_layout, 2, k, c, {sv, Expr(r)}));
  });
  s.weights(k, c, av, bv) = by_row(bv, W.G, [&](int col) { return s.weights_rows(k, c, av, col); });
}

void build_winograd_conv(Algorithm& a, const Layer& L, int m, bool prepared) {
  if (!winograd_applies(L))
    throw std::logic_error("layer '" + L.name + "': Winograd needs a 3x3 stride-1 2D conv");
  const WinogradMatrices& W = winograd_matrices(m);
  a.bordered = apply_border(a, L, L.border, border_fill(L));
  WinogradStages& s = a.winograd;
  s.m = m;
  s.t = W.t;
  const std::string name = L.name + "_wg_";
  s.input = Func(name + "input");
  s.input_rows = Func(name + "input_rows");
  s.product = Func(name + "product");
  s.products = Func(name + "products");
  s.output_rows = Func(name + "output_rows");
  const Var &k = s.k, &c = s.c, &av = s.a, &bv = s.b, &j = s.j, &xi = s.xi, &tx = s.tx, &ty = s.ty,
            &n = a.n;

  if (prepared) {
    s.weights = Func(name + "weights");
    s.weights(k, c, av, bv) = a.weights(k, c, av, bv);
  } else {
    define_winograd_weights(s, L, m, a.weights);
  }

  // Inputs: a tile's t x t window, BT along its rows (i), then along its columns (j).
  const int pad_y = static_cast<int>(L.pads.axes[0].before);
  const int pad_x = static_cast<int>(L.pads.axes[1].before);
  s.input_rows(c, av, j, tx, ty, n) = by_row(av, W.BT, [&](int i) {
    return a.bordered(tensor_args(L.layout, c, {tx * m + j - pad_x, ty * m + i - pad_y}, n));
  });
  s.input(c, av, bv, tx, ty, n) =
      by_row(bv, W.BT, [&](int col) { return s.input_rows(c, av, col, tx, ty, n); });

  // The t*t matrix products over the input channels.
  s.rc = RDom(0, static_cast<int>(L.in_channels), name + "rc");
  s.product(k, av, bv, tx, ty, n) = 0.f;
  s.product(k, av, bv, tx, ty, n) += s.weights(k, s.rc, av, bv) * s.input(s.rc, av, bv, tx, ty, n);
  s.products(k, av, bv, tx, ty, n) = s.product(k, av, bv, tx, ty, n);

  // Outputs: AT along the columns (b), then along the rows (a) at the output's own position.
  s.output_rows(k, av, xi, tx, ty, n) =
      by_row(xi, W.AT, [&](int col) { return s.products(k, av, col, tx, ty, n); });
  const Expr x = a.spatial[0], y = a.spatial[1];
  a.reduce(a.vars) = by_row(
      y % m, W.AT, [&](int row) { return s.output_rows(a.c, row, x % m, x / m, y / m, a.n); });
}

}  // namespace padfold
