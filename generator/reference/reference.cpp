#include "reference/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "reference/indexing.h"

namespace padfold::ref {
namespace {

using detail::floor_div;
using detail::next_index;
using detail::per_axis;
using detail::strides_of;

void require(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument("reference: " + msg);
}

// Per-axis window geometry shared by conv and pooling, with defaults filled in and the output size
// derived from the pads when not given.
struct Window {
  size_t dims;
  std::vector<int64_t> in, k, s, d, pb, pa, out;
};

Window make_window(const Tensor& x, const std::vector<int64_t>& kernel,
                   const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
                   const std::vector<int64_t>& pad_before, const std::vector<int64_t>& pad_after,
                   std::vector<int64_t> out_spatial) {
  require(x.rank() >= 3, "input must be N, C and at least one spatial dim");
  Window w;
  w.dims = static_cast<size_t>(x.spatial_dims());
  w.in.assign(x.shape.begin() + 2, x.shape.end());
  w.k = per_axis(kernel, w.dims, 1, "kernel");
  w.s = per_axis(stride, w.dims, 1, "stride");
  w.d = per_axis(dilation, w.dims, 1, "dilation");
  w.pb = per_axis(pad_before, w.dims, 0, "pad_before");
  w.pa = per_axis(pad_after, w.dims, 0, "pad_after");
  if (out_spatial.empty()) {
    for (size_t a = 0; a < w.dims; ++a) {
      const int64_t ke = (w.k[a] - 1) * w.d[a] + 1;
      out_spatial.push_back(floor_div(w.in[a] + w.pb[a] + w.pa[a] - ke, w.s[a]) + 1);
    }
  }
  require(out_spatial.size() == w.dims, "out_spatial has the wrong number of dims");
  for (size_t a = 0; a < w.dims; ++a) {
    require(w.k[a] > 0 && w.s[a] > 0 && w.d[a] > 0, "kernel, stride, dilation must be positive");
    require(out_spatial[a] > 0, "output size along spatial axis " + std::to_string(a) + " is " +
                                    std::to_string(out_spatial[a]));
  }
  w.out = out_spatial;
  return w;
}

}  // namespace

Tensor::Tensor(std::vector<int64_t> shape_, float fill)
    : shape(std::move(shape_)), data(static_cast<size_t>(ref::numel(shape)), fill) {}

Tensor::Tensor(std::vector<int64_t> shape_, std::vector<float> data_)
    : shape(std::move(shape_)), data(std::move(data_)) {
  require(static_cast<int64_t>(data.size()) == ref::numel(shape),
          "data size " + std::to_string(data.size()) + " does not match the shape");
}

int64_t Tensor::numel() const {
  return ref::numel(shape);
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t v : shape) n *= v;
  return n;
}

int64_t border_index(int64_t i, int64_t n, BorderKind kind) {
  if (i >= 0 && i < n) return i;
  const auto fail = [&](const char* mode) -> int64_t {
    throw std::out_of_range(std::string("reference: ") + mode + " border cannot produce index " +
                            std::to_string(i) + " of an axis of length " + std::to_string(n));
  };
  switch (kind) {
    case BorderKind::Zeros:
    case BorderKind::Constant:
      return -1;
    case BorderKind::Replicate:
      return i < 0 ? 0 : n - 1;
    case BorderKind::Reflect: {
      // Mirror about the first/last element, which itself is not repeated:
      // ... x2 x1 | x0 x1 ... x(n-1) | x(n-2) ...
      const int64_t j = i < 0 ? -i : 2 * (n - 1) - i;
      return (j >= 0 && j < n && n > 1) ? j : fail("reflect");
    }
    case BorderKind::Symmetric: {
      // Mirror about the edge between elements, so the edge element repeats:
      // ... x1 x0 | x0 x1 ... x(n-1) | x(n-1) x(n-2) ...
      const int64_t j = i < 0 ? -i - 1 : 2 * n - 1 - i;
      return (j >= 0 && j < n) ? j : fail("symmetric");
    }
    case BorderKind::Circular: {
      const int64_t j = i < 0 ? i + n : i - n;
      return (j >= 0 && j < n) ? j : fail("circular");
    }
  }
  return fail("unknown");
}

std::vector<float> pad1d(const std::vector<float>& v, int64_t before, int64_t after,
                         BorderKind kind, float value) {
  const int64_t n = static_cast<int64_t>(v.size());
  std::vector<float> out;
  for (int64_t i = -before; i < n + after; ++i) {
    const int64_t j = border_index(i, n, kind);
    out.push_back(j < 0 ? (kind == BorderKind::Constant ? value : 0.f) : v[static_cast<size_t>(j)]);
  }
  return out;
}

Tensor conv(const Tensor& x, const Tensor& w, const Tensor* bias, const ConvParams& p,
            std::vector<int64_t> out_spatial) {
  require(x.rank() >= 3, "conv input must be N, C and at least one spatial dim");
  require(w.rank() == x.rank(), "conv weights must have the same rank as the input");
  const size_t dims = static_cast<size_t>(x.spatial_dims());
  const int64_t N = x.shape[0], C = x.shape[1], O = w.shape[0], Cg = w.shape[1], G = p.groups;
  require(G > 0 && C == Cg * G && O % G == 0, "conv channels/groups mismatch");
  const std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  const Window win = make_window(x, kernel, p.stride, p.dilation, p.pad_before, p.pad_after,
                                 std::move(out_spatial));
  require(!bias || bias->numel() == O, "bias must have one value per output channel");

  std::vector<int64_t> yshape = {N, O};
  yshape.insert(yshape.end(), win.out.begin(), win.out.end());
  Tensor y(yshape);
  const auto xs = strides_of(x.shape), ws = strides_of(w.shape);
  const int64_t Og = O / G;
  int64_t yi = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / Og;
      std::vector<int64_t> oi(dims, 0);
      do {
        double acc = bias ? bias->data[static_cast<size_t>(o)] : 0.0;
        for (int64_t c = 0; c < Cg; ++c) {
          const int64_t ic = g * Cg + c;
          std::vector<int64_t> ki(dims, 0);
          do {
            int64_t xoff = n * xs[0] + ic * xs[1];
            int64_t woff = o * ws[0] + c * ws[1];
            bool skip = false, constant = false;
            for (size_t a = 0; a < dims; ++a) {
              const int64_t pos = oi[a] * win.s[a] + ki[a] * win.d[a] - win.pb[a];
              if (pos < -win.pb[a] || pos >= win.in[a] + win.pa[a]) {
                skip = true;
                break;
              }
              const int64_t src = border_index(pos, win.in[a], p.border);
              if (src < 0) constant = true;
              xoff += src * xs[a + 2];
              woff += ki[a] * ws[a + 2];
            }
            if (skip) continue;
            const double xv = constant ? (p.border == BorderKind::Constant ? p.border_value : 0.0)
                                       : x.data[static_cast<size_t>(xoff)];
            acc += xv * static_cast<double>(w.data[static_cast<size_t>(woff)]);
          } while (next_index(ki, kernel));
        }
        y.data[static_cast<size_t>(yi++)] = static_cast<float>(acc);
      } while (next_index(oi, win.out));
    }
  }
  return y;
}

Tensor conv_transpose(const Tensor& x, const Tensor& w, const Tensor* bias,
                      const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
                      const std::vector<int64_t>& crop_before,
                      const std::vector<int64_t>& crop_after, int64_t groups,
                      std::vector<int64_t> out_spatial) {
  require(x.rank() >= 3, "conv_transpose input must be N, C and at least one spatial dim");
  require(w.rank() == x.rank(), "conv_transpose weights must have the same rank as the input");
  const size_t dims = static_cast<size_t>(x.spatial_dims());
  const int64_t N = x.shape[0], Cin = x.shape[1], Cog = w.shape[1], G = groups;
  require(G > 0 && w.shape[0] == Cin && Cin % G == 0, "conv_transpose channels/groups mismatch");
  const int64_t Cig = Cin / G, O = Cog * G;
  require(!bias || bias->numel() == O, "bias must have one value per output channel");
  const std::vector<int64_t> in(x.shape.begin() + 2, x.shape.end());
  const std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  const auto s = per_axis(stride, dims, 1, "stride");
  const auto d = per_axis(dilation, dims, 1, "dilation");
  const auto cb = per_axis(crop_before, dims, 0, "crop_before");
  const auto ca = per_axis(crop_after, dims, 0, "crop_after");
  if (out_spatial.empty())
    for (size_t a = 0; a < dims; ++a)
      out_spatial.push_back(s[a] * (in[a] - 1) + (kernel[a] - 1) * d[a] + 1 - cb[a] - ca[a]);
  require(out_spatial.size() == dims, "out_spatial has the wrong number of dims");
  for (int64_t v : out_spatial) require(v > 0, "conv_transpose output size must be positive");

  std::vector<int64_t> yshape = {N, O};
  yshape.insert(yshape.end(), out_spatial.begin(), out_spatial.end());
  const auto xs = strides_of(x.shape), ws = strides_of(w.shape), ys = strides_of(yshape);
  std::vector<double> acc(static_cast<size_t>(numel(yshape)), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t ic = 0; ic < Cin; ++ic) {
      const int64_t g = ic / Cig;
      std::vector<int64_t> ii(dims, 0);
      do {
        int64_t xoff = n * xs[0] + ic * xs[1];
        for (size_t a = 0; a < dims; ++a) xoff += ii[a] * xs[a + 2];
        const double xv = x.data[static_cast<size_t>(xoff)];
        for (int64_t oc = 0; oc < Cog; ++oc) {
          std::vector<int64_t> ki(dims, 0);
          do {
            int64_t yoff = n * ys[0] + (g * Cog + oc) * ys[1];
            int64_t woff = ic * ws[0] + oc * ws[1];
            bool inside = true;
            for (size_t a = 0; a < dims && inside; ++a) {
              const int64_t j = ii[a] * s[a] + ki[a] * d[a] - cb[a];
              inside = j >= 0 && j < out_spatial[a];
              yoff += j * ys[a + 2];
              woff += ki[a] * ws[a + 2];
            }
            if (inside) acc[static_cast<size_t>(yoff)] += xv * w.data[static_cast<size_t>(woff)];
          } while (next_index(ki, kernel));
        }
      } while (next_index(ii, in));
    }
  }
  Tensor y(yshape);
  const int64_t per_channel = numel(out_spatial);
  for (size_t i = 0; i < acc.size(); ++i) {
    const int64_t o = (static_cast<int64_t>(i) / per_channel) % O;
    y.data[i] = static_cast<float>(acc[i] + (bias ? bias->data[static_cast<size_t>(o)] : 0.0));
  }
  return y;
}

namespace {

// One tap of a pooling window that lies inside [-pad_before, in + pad_after).
struct Tap {
  double value;
  bool inside_input;   // the tap reads a real input element
  bool from_constant;  // Zeros/Constant border value
};

// Pooling skeleton: for every output element collects the taps of its window and stores f(taps).
template <typename F>
Tensor pool(const Tensor& x, const PoolParams& p, std::vector<int64_t> out_spatial, F f) {
  const Window win = make_window(x, p.kernel, p.stride, p.dilation, p.pad_before, p.pad_after,
                                 std::move(out_spatial));
  const size_t dims = win.dims;
  const int64_t N = x.shape[0], C = x.shape[1];
  std::vector<int64_t> yshape = {N, C};
  yshape.insert(yshape.end(), win.out.begin(), win.out.end());
  Tensor y(yshape);
  const auto xs = strides_of(x.shape);
  int64_t yi = 0;
  std::vector<Tap> taps;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      std::vector<int64_t> oi(dims, 0);
      do {
        taps.clear();
        std::vector<int64_t> ki(dims, 0);
        do {
          int64_t xoff = n * xs[0] + c * xs[1];
          bool skip = false, constant = false, inside = true;
          for (size_t a = 0; a < dims; ++a) {
            const int64_t pos = oi[a] * win.s[a] + ki[a] * win.d[a] - win.pb[a];
            if (pos < -win.pb[a] || pos >= win.in[a] + win.pa[a]) {
              skip = true;  // ceil_mode overhang: not part of any convention's window
              break;
            }
            if (pos < 0 || pos >= win.in[a]) inside = false;
            const int64_t src = border_index(pos, win.in[a], p.border);
            if (src < 0) constant = true;
            xoff += src * xs[a + 2];
          }
          if (skip) continue;
          const double v = constant ? (p.border == BorderKind::Constant ? p.border_value : 0.0)
                                    : x.data[static_cast<size_t>(xoff)];
          taps.push_back({v, inside, constant});
        } while (next_index(ki, win.k));
        y.data[static_cast<size_t>(yi++)] = f(taps);
      } while (next_index(oi, win.out));
    }
  }
  return y;
}

}  // namespace

Tensor max_pool(const Tensor& x, const PoolParams& p, std::vector<int64_t> out_spatial) {
  const bool zeros = p.border == BorderKind::Zeros;
  return pool(x, p, std::move(out_spatial), [&](const std::vector<Tap>& taps) {
    double m = -std::numeric_limits<double>::infinity();
    for (const Tap& t : taps)
      if (!(zeros && t.from_constant)) m = std::max(m, t.value);
    return static_cast<float>(m);
  });
}

Tensor avg_pool(const Tensor& x, const PoolParams& p, std::vector<int64_t> out_spatial) {
  for (int64_t d : p.dilation) require(d == 1, "avg_pool has no dilation");
  return pool(x, p, std::move(out_spatial), [&](const std::vector<Tap>& taps) {
    double sum = 0;
    int64_t count = 0;
    for (const Tap& t : taps) {
      if (!p.count_include_pad && !t.inside_input) continue;
      sum += t.value;
      ++count;
    }
    return count ? static_cast<float>(sum / static_cast<double>(count))
                 : std::numeric_limits<float>::quiet_NaN();
  });
}

float activation(float v, Activation kind, float alpha, float beta) {
  const double x = v;
  switch (kind) {
    case Activation::None:
      return v;
    case Activation::Relu:
      return v > 0.f ? v : 0.f;
    case Activation::Relu6:
      return std::min(std::max(v, 0.f), 6.f);
    case Activation::LeakyRelu:
      return v >= 0.f ? v : alpha * v;
    case Activation::Sigmoid:
      return static_cast<float>(1 / (1 + std::exp(-x)));
    case Activation::Tanh:
      return static_cast<float>(std::tanh(x));
    case Activation::HardSigmoid:
      return static_cast<float>(std::clamp(alpha * x + beta, 0.0, 1.0));
    case Activation::HardSwish:
      return static_cast<float>(x * std::clamp(x / 6 + 0.5, 0.0, 1.0));
    case Activation::Silu:
      return static_cast<float>(x / (1 + std::exp(-x)));
    case Activation::Gelu:
      return static_cast<float>(0.5 * x * (1 + std::erf(x / std::sqrt(2.0))));
    case Activation::GeluTanh:
      return static_cast<float>(
          0.5 * x * (1 + std::tanh(std::sqrt(2 / std::acos(-1.0)) * (x + 0.044715 * x * x * x))));
  }
  return v;
}

Tensor activation(const Tensor& t, Activation kind, float alpha, float beta) {
  Tensor y = t;
  for (float& v : y.data) v = activation(v, kind, alpha, beta);
  return y;
}

namespace {

// x with `f` applied to the channel values (axis 1 of N C s...) of each pixel, in double.
template <typename F>
Tensor map_pixel_channels(const Tensor& x, const std::string& op, F f) {
  require(x.shape.size() >= 2, op + " over channels needs N and C");
  const size_t n = static_cast<size_t>(x.shape[0]), c = static_cast<size_t>(x.shape[1]);
  const size_t pixels = n * c == 0 ? 0 : x.data.size() / (n * c);
  Tensor y = x;
  std::vector<double> v(c);
  for (size_t b = 0; b < n; ++b)
    for (size_t p = 0; p < pixels; ++p) {
      auto at = [&](size_t ch) { return (b * c + ch) * pixels + p; };
      for (size_t ch = 0; ch < c; ++ch) v[ch] = x.data[at(ch)];
      f(v);
      for (size_t ch = 0; ch < c; ++ch) y.data[at(ch)] = static_cast<float>(v[ch]);
    }
  return y;
}

}  // namespace

Tensor softmax_channels(const Tensor& x) {
  return map_pixel_channels(x, "softmax", [](std::vector<double>& v) {
    double peak = -std::numeric_limits<double>::infinity(), total = 0;
    for (double e : v) peak = std::max(peak, e);
    for (double e : v) total += std::exp(e - peak);
    for (double& e : v) e = std::exp(e - peak) / total;
  });
}

Tensor layer_norm_channels(const Tensor& x, double epsilon) {
  return map_pixel_channels(x, "layer norm", [&](std::vector<double>& v) {
    double mean = 0, var = 0;
    for (double e : v) mean += e;
    mean /= static_cast<double>(v.size());
    for (double e : v) var += (e - mean) * (e - mean);
    const double dev = std::sqrt(var / static_cast<double>(v.size()) + epsilon);
    for (double& e : v) e = (e - mean) / dev;
  });
}

Tensor permute(const Tensor& t, const std::string& from, const std::string& to) {
  require(from.size() == t.shape.size(),
          "layout '" + from + "' does not match the tensor rank " + std::to_string(t.shape.size()));
  require(to.size() == from.size() && std::is_permutation(from.begin(), from.end(), to.begin()),
          "layout '" + to + "' is not a permutation of '" + from + "'");
  const size_t r = from.size();
  std::vector<size_t> src_axis(r);  // output axis i is input axis src_axis[i]
  std::vector<int64_t> shape(r);
  for (size_t i = 0; i < r; ++i) {
    src_axis[i] = from.find(to[i]);
    require(from.find(to[i], src_axis[i] + 1) == std::string::npos,
            "layout '" + from + "' repeats a letter");
    shape[i] = t.shape[src_axis[i]];
  }
  const auto in_strides = strides_of(t.shape);
  Tensor y(shape);
  if (y.data.empty()) return y;
  std::vector<int64_t> idx(r, 0);
  size_t k = 0;
  do {
    int64_t off = 0;
    for (size_t i = 0; i < r; ++i) off += idx[i] * in_strides[src_axis[i]];
    y.data[k++] = t.data[static_cast<size_t>(off)];
  } while (next_index(idx, shape));
  return y;
}

namespace {

float resize_coordinate(int64_t x, int64_t in, int64_t out, float scale, const std::string& mode,
                        std::pair<float, float> roi) {
  const float xf = static_cast<float>(x);
  if (scale == 1.f) return xf;  // ONNX Runtime's rule, whatever the mode
  if (mode == "tf_crop_and_resize") {
    // ONNX's formula, in float32 as ONNX Runtime evaluates it (double for one output).
    const float span = static_cast<float>(in - 1), start = roi.first, end = roi.second;
    if (out == 1) return static_cast<float>(static_cast<double>(start + end) / 2 * span);
    const float step = xf * (end - start) * span;
    return start * span + step / static_cast<float>(out - 1);
  }
  if (mode == "half_pixel") return (xf + 0.5f) / scale - 0.5f;
  if (mode == "pytorch_half_pixel") return out > 1 ? (xf + 0.5f) / scale - 0.5f : 0.f;
  if (mode == "align_corners")
    return out > 1 ? xf * static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.f;
  if (mode == "asymmetric") return xf / scale;
  if (mode == "tf_half_pixel_for_nn") return (xf + 0.5f) / scale;
  throw std::invalid_argument("reference: coordinate mode '" + mode + "'");
}

int64_t nearest_pixel(float v, const std::string& rounding, int64_t in) {
  double r;
  const double f = std::floor(static_cast<double>(v)), frac = static_cast<double>(v) - f;
  if (rounding == "floor")
    r = f;
  else if (rounding == "ceil")
    r = std::ceil(static_cast<double>(v));
  else if (rounding == "round_prefer_floor")  // within 1e-6 of a half is a half (ONNX Runtime)
    r = frac <= 0.5 + 1e-6 ? f : f + 1;
  else if (rounding == "round_prefer_ceil")
    r = frac < 0.5 - 1e-6 ? f : f + 1;
  else
    throw std::invalid_argument("reference: nearest_mode '" + rounding + "'");
  return std::clamp<int64_t>(static_cast<int64_t>(r), 0, in - 1);
}

}  // namespace

Tensor resize(const Tensor& x, const ResizeParams& p) {
  const size_t dims = static_cast<size_t>(x.spatial_dims());
  require(p.output.size() == dims && p.scales.size() == dims, "resize: one size per axis");
  if (std::equal(p.output.begin(), p.output.end(), x.shape.begin() + 2)) return x;
  // Per axis and output index: the neighbours read and their weights.
  std::vector<std::vector<std::vector<std::pair<int64_t, double>>>> taps(dims);
  std::vector<std::vector<bool>> outside(dims);  // per axis and output index
  for (size_t i = 0; i < dims; ++i) {
    const int64_t in = x.shape[2 + i];
    for (int64_t o = 0; o < p.output[i]; ++o) {
      const std::pair<float, float> roi = p.roi.empty() ? std::pair{0.f, 1.f} : p.roi.at(i);
      const float v = resize_coordinate(o, in, p.output[i], p.scales[i], p.coordinates, roi);
      outside[i].push_back(p.coordinates == "tf_crop_and_resize" &&
                           (v < 0.f || v > static_cast<float>(in - 1)));
      if (!p.linear) {
        taps[i].push_back({{nearest_pixel(v, p.rounding, in), 1.0}});
        continue;
      }
      const double c = std::clamp(static_cast<double>(v), 0.0, static_cast<double>(in - 1));
      const int64_t lo = static_cast<int64_t>(std::floor(c)), hi = std::min(lo + 1, in - 1);
      const double t = c - static_cast<double>(lo);
      taps[i].push_back({{lo, 1.0 - t}, {hi, t}});
    }
  }
  std::vector<int64_t> shape = {x.shape[0], x.shape[1]};
  for (int64_t o : p.output) shape.push_back(o);
  Tensor y(shape);
  const std::vector<int64_t> xs = detail::strides_of(x.shape);
  std::vector<int64_t> idx(shape.size(), 0);
  size_t flat = 0;
  do {
    // Every combination of one tap per axis.
    double acc = 0;
    std::vector<size_t> pick(dims, 0);
    while (true) {
      double w = 1;
      int64_t at = idx[0] * xs[0] + idx[1] * xs[1];
      for (size_t i = 0; i < dims; ++i) {
        const auto& tap = taps[i][static_cast<size_t>(idx[2 + i])][pick[i]];
        w *= tap.second;
        at += tap.first * xs[2 + i];
      }
      acc += w * static_cast<double>(x.data[static_cast<size_t>(at)]);
      size_t i = dims;
      while (i-- > 0) {
        if (++pick[i] < taps[i][static_cast<size_t>(idx[2 + i])].size()) break;
        pick[i] = 0;
      }
      if (i == static_cast<size_t>(-1)) break;
    }
    bool away = false;
    for (size_t i = 0; i < dims; ++i) away = away || outside[i][static_cast<size_t>(idx[2 + i])];
    y.data[flat++] = away ? p.extrapolation_value : static_cast<float>(acc);
  } while (detail::next_index(idx, shape));
  return y;
}

Tensor gather_channels(const Tensor& x, const std::vector<int64_t>& channels) {
  require(x.rank() >= 2, "gather_channels: a tensor of rank 2 or more");
  const int64_t n = x.shape[0], c = x.shape[1], inner = x.numel() / std::max<int64_t>(n * c, 1);
  std::vector<int64_t> shape = x.shape;
  shape[1] = static_cast<int64_t>(channels.size());
  Tensor y(shape);
  for (int64_t b = 0; b < n; ++b)
    for (size_t k = 0; k < channels.size(); ++k) {
      require(channels[k] >= 0 && channels[k] < c, "gather_channels: a channel outside the input");
      const float* from = &x.data[static_cast<size_t>((b * c + channels[k]) * inner)];
      float* to = &y.data[static_cast<size_t>((b * shape[1] + static_cast<int64_t>(k)) * inner)];
      std::copy(from, from + inner, to);
    }
  return y;
}

Tensor transpose(const Tensor& t, const std::vector<int64_t>& perm) {
  require(perm.size() == t.shape.size() && perm.size() <= 8, "perm does not match the rank");
  const std::string from = std::string("ABCDEFGH").substr(0, perm.size());
  std::string to;
  for (int64_t a : perm) {
    require(a >= 0 && a < static_cast<int64_t>(perm.size()), "perm names no axis");
    to += from[static_cast<size_t>(a)];
  }
  return permute(t, from, to);
}

std::string spatial_letters(int spatial_dims) {
  require(spatial_dims >= 1 && spatial_dims <= 3, "1-3 spatial dims supported");
  return std::string("DHW").substr(static_cast<size_t>(3 - spatial_dims));
}

Tensor to_channels_last(const Tensor& t) {
  const std::string sp = spatial_letters(t.spatial_dims());
  return permute(t, "NC" + sp, "N" + sp + "C");
}

Tensor from_channels_last(const Tensor& t) {
  const std::string sp = spatial_letters(t.spatial_dims());
  return permute(t, "N" + sp + "C", "NC" + sp);
}

Tensor weights_to(const Tensor& oi, const std::string& order) {
  return permute(oi, "OI" + spatial_letters(oi.spatial_dims()), order);
}

Tensor weights_from(const Tensor& t, const std::string& order) {
  return permute(t, order, "OI" + spatial_letters(t.spatial_dims()));
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  require(a.shape == b.shape, "max_abs_diff: shapes differ");
  double m = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a.data[i]) - b.data[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  }
  return m;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.data) m = std::max(m, std::fabs(static_cast<double>(v)));
  return m;
}

}  // namespace padfold::ref
