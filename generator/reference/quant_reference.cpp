#include "reference/quant_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "frontend/quant_arithmetic.h"
#include "reference/indexing.h"

namespace padfold::ref {
namespace {

using detail::floor_div;
using detail::next_index;
using detail::per_axis;
using detail::strides_of;

constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

void require(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument("quant reference: " + msg);
}

// Two's-complement int32 arithmetic, as the peers' compiled kernels do it (the C++ they are written
// in leaves signed overflow undefined; the hardware wraps).
int32_t wrapping_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
int32_t wrapping_mul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}

int32_t saturate(double v, int32_t lo, int32_t hi) {
  return static_cast<int32_t>(std::clamp(v, static_cast<double>(lo), static_cast<double>(hi)));
}

// Per-axis window geometry with defaults filled in and the output size derived when not given.
struct Window {
  std::vector<int64_t> in, k, s, d, pb, pa, out;
  size_t dims() const { return in.size(); }
};

Window make_window(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& kernel,
                   const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
                   const std::vector<int64_t>& pad_before, const std::vector<int64_t>& pad_after,
                   std::vector<int64_t> out_spatial) {
  require(x_shape.size() >= 3 && x_shape.size() <= 5, "input must be N, C and 1-3 spatial dims");
  Window w;
  w.in.assign(x_shape.begin() + 2, x_shape.end());
  const size_t dims = w.dims();
  w.k = per_axis(kernel, dims, 1, "kernel");
  w.s = per_axis(stride, dims, 1, "stride");
  w.d = per_axis(dilation, dims, 1, "dilation");
  w.pb = per_axis(pad_before, dims, 0, "pad_before");
  w.pa = per_axis(pad_after, dims, 0, "pad_after");
  if (out_spatial.empty())
    for (size_t a = 0; a < dims; ++a) {
      const int64_t extent = (w.k[a] - 1) * w.d[a] + 1;
      out_spatial.push_back(floor_div(w.in[a] + w.pb[a] + w.pa[a] - extent, w.s[a]) + 1);
    }
  require(out_spatial.size() == dims, "out_spatial has the wrong number of dims");
  for (size_t a = 0; a < dims; ++a) {
    require(w.k[a] > 0 && w.s[a] > 0 && w.d[a] > 0, "kernel, stride, dilation must be positive");
    require(out_spatial[a] > 0, "empty output along spatial axis " + std::to_string(a));
  }
  w.out = std::move(out_spatial);
  return w;
}

// One tap of a window that lies inside [-pad_before, in + pad_after).
struct Tap {
  int64_t source;        // offset in one channel's spatial plane; -1: the border constant
  int64_t kernel_index;  // row-major position in the kernel
  bool inside;           // reads a real input element, not the padding
};

std::vector<Tap> taps_of_window(const Window& w, const std::vector<int64_t>& out_index,
                                BorderKind border) {
  const std::vector<int64_t> plane_strides = strides_of(w.in);
  std::vector<Tap> taps;
  std::vector<int64_t> ki(w.dims(), 0);
  int64_t kernel_index = 0;
  do {
    Tap tap{0, kernel_index++, true};
    bool in_window = true;
    for (size_t a = 0; a < w.dims() && in_window; ++a) {
      const int64_t pos = out_index[a] * w.s[a] + ki[a] * w.d[a] - w.pb[a];
      in_window = pos >= -w.pb[a] && pos < w.in[a] + w.pa[a];
      if (!in_window) break;
      tap.inside = tap.inside && pos >= 0 && pos < w.in[a];
      const int64_t src = border_index(pos, w.in[a], border);
      tap.source = (src < 0 || tap.source < 0) ? -1 : tap.source + src * plane_strides[a];
    }
    if (in_window) taps.push_back(tap);
  } while (next_index(ki, w.k));
  return taps;
}

// The taps of every output position, in row-major output order.
std::vector<std::vector<Tap>> all_windows(const Window& w, BorderKind border) {
  std::vector<std::vector<Tap>> windows;
  std::vector<int64_t> oi(w.dims(), 0);
  do windows.push_back(taps_of_window(w, oi, border));
  while (next_index(oi, w.out));
  return windows;
}

// The integer a border tap reads when the border is a constant.
int32_t border_constant(BorderKind kind, float border_value, int32_t zero_point) {
  if (kind != BorderKind::Constant) return zero_point;
  const float integral = std::round(border_value);
  require(integral == border_value,
          "a constant border must hold the integer to read, got " + std::to_string(border_value));
  return static_cast<int32_t>(integral);
}

int32_t tap_value(const Tap& tap, const int32_t* plane, int32_t border) {
  return tap.source < 0 ? border : plane[tap.source];
}

std::vector<int64_t> output_shape(int64_t n, int64_t c, const Window& w) {
  std::vector<int64_t> shape = {n, c};
  shape.insert(shape.end(), w.out.begin(), w.out.end());
  return shape;
}

void require_range(const QTensor& t, int32_t qmin, int32_t qmax, const char* what) {
  for (int32_t v : t.data)
    require(v >= qmin && v <= qmax, std::string(what) + " holds " + std::to_string(v) +
                                        " outside [" + std::to_string(qmin) + ", " +
                                        std::to_string(qmax) + "]");
}

float scale_for_channel(const std::vector<float>& w_scales, int64_t o) {
  return w_scales.size() == 1 ? w_scales[0] : w_scales[static_cast<size_t>(o)];
}

// One output channel's requantization of an int32 accumulator, as the mode's peer does it.
struct ChannelRequantizer {
  QuantizedMultiplier multiplier;  // Tflite
  float scale = 0.f;               // Onnx
};

// TFLite's PopulateConvolutionQuantizationParams (the effective scale in double) and ORT's
// QLinearConv::ComputeOutputScale (in float, left to right).
std::vector<ChannelRequantizer> conv_requantizers(QParams in, const std::vector<float>& w_scales,
                                                  QParams out, int64_t channels) {
  std::vector<ChannelRequantizer> r(static_cast<size_t>(channels));
  for (int64_t o = 0; o < channels; ++o) {
    const float sw = scale_for_channel(w_scales, o);
    r[static_cast<size_t>(o)].multiplier = quantize_multiplier(
        static_cast<double>(in.scale) * static_cast<double>(sw) / static_cast<double>(out.scale));
    r[static_cast<size_t>(o)].scale = in.scale * sw / out.scale;
  }
  return r;
}

int32_t requantize_accumulator(int32_t acc, const ChannelRequantizer& r, QParams out,
                               int32_t act_min, int32_t act_max, int32_t qmin, int32_t qmax,
                               QMode mode) {
  const int32_t y =
      mode == QMode::Tflite
          ? wrapping_add(multiply_by_quantized_multiplier(acc, r.multiplier), out.zero_point)
          : mlas_requantize_output(acc, r.scale, out.zero_point, qmin, qmax);
  return std::clamp(y, act_min, act_max);
}

void check_conv_args(const QTensor& x, const QTensor& w, const std::vector<int32_t>& bias,
                     const ConvParams& p, const std::vector<float>& w_scales) {
  require(w.rank() == x.rank(), "conv weights must have the input's rank");
  const int64_t C = x.shape[1], O = w.shape[0], G = p.groups;
  require(G > 0 && C == w.shape[1] * G && O % G == 0, "conv channels/groups mismatch");
  require(bias.empty() || static_cast<int64_t>(bias.size()) == O,
          "bias must be empty or hold one value per output channel");
  require(w_scales.size() == 1 || static_cast<int64_t>(w_scales.size()) == O,
          "w_scales must hold 1 or O values");
  require_range(w, -128, 127, "the int8 weights");
}

// Pooling skeleton: for every (n, c, output position) stores f(channel plane, taps).
template <typename F>
QTensor pool(const QTensor& x, const PoolParams& p, std::vector<int64_t> out_spatial, F f) {
  const Window win = make_window(x.shape, p.kernel, p.stride, p.dilation, p.pad_before, p.pad_after,
                                 std::move(out_spatial));
  const std::vector<std::vector<Tap>> windows = all_windows(win, p.border);
  const int64_t planes = x.shape[0] * x.shape[1], plane_size = numel(win.in);
  QTensor y(output_shape(x.shape[0], x.shape[1], win));
  size_t yi = 0;
  for (int64_t plane = 0; plane < planes; ++plane)
    for (const std::vector<Tap>& taps : windows)
      y.data[yi++] = f(x.data.data() + plane * plane_size, taps);
  return y;
}

bool tap_counts(const Tap& tap, bool count_include_pad) {
  return count_include_pad || tap.inside;
}

// reference_integer_ops::AveragePool: the integers summed (TFLite needs out == in, so no
// rescaling), rounded half away from zero by C integer division.
int32_t tflite_average(const int32_t* plane, const std::vector<Tap>& taps, const PoolParams& p,
                       int32_t border) {
  int32_t sum = 0, n = 0;
  for (const Tap& tap : taps)
    if (tap_counts(tap, p.count_include_pad)) {
      sum += tap_value(tap, plane, border);
      ++n;
    }
  require(n > 0, "an average-pool window has no tap that counts");
  return sum > 0 ? (sum + n / 2) / n : (sum - n / 2) / n;
}

// QLinearAveragePool's float path: dequantize, sum in window order, divide, requantize.
int32_t onnx_average(const int32_t* plane, const std::vector<Tap>& taps, const PoolParams& p,
                     int32_t border, QParams in, QParams out, int32_t qmin, int32_t qmax) {
  float sum = 0.f;
  int64_t n = 0;
  for (const Tap& tap : taps)
    if (tap_counts(tap, p.count_include_pad)) {
      sum += in.scale * static_cast<float>(tap_value(tap, plane, border) - in.zero_point);
      ++n;
    }
  require(n > 0, "an average-pool window has no tap that counts");
  const float average = sum / static_cast<float>(n);
  return saturate(round_half_even(average / out.scale + static_cast<float>(out.zero_point)), qmin,
                  qmax);
}

// ORT routes an average pool whose kernel is the whole input, with no pads, to
// MlasQLinearGlobalAveragePoolNchw: an integer sum requantized by MlasRequantizeOutput.
bool onnx_takes_global_path(const Window& w) {
  for (size_t a = 0; a < w.dims(); ++a)
    if (w.k[a] != w.in[a] || w.pb[a] != 0 || w.pa[a] != 0 || w.out[a] != 1) return false;
  return true;
}

QTensor onnx_global_average(const QTensor& x, QParams in, QParams out, int32_t qmin, int32_t qmax) {
  const int64_t planes = x.shape[0] * x.shape[1], n = x.numel() / planes;
  require(n < (int64_t{1} << 24), "ORT's global average pool refuses 2^24 or more taps");
  const float scale = in.scale / (out.scale * static_cast<float>(n));
  require(scale >= std::ldexp(1.f, -32) && scale < 256.f,
          "ORT's global average pool refuses this scale ratio");
  std::vector<int64_t> shape(x.shape.size(), 1);
  shape[0] = x.shape[0];
  shape[1] = x.shape[1];
  QTensor y(shape);
  for (int64_t plane = 0; plane < planes; ++plane) {
    int32_t acc = -in.zero_point * static_cast<int32_t>(n);
    for (int64_t i = 0; i < n; ++i) acc += x.data[static_cast<size_t>(plane * n + i)];
    y.data[static_cast<size_t>(plane)] =
        mlas_requantize_output(acc, scale, out.zero_point, qmin, qmax);
  }
  return y;
}

// TFLite's int8 Add parameters (kernels/add.cc Prepare, 8-bit path).
struct TfliteAddMultipliers {
  QuantizedMultiplier a, b, out;
};
constexpr int kTfliteAddLeftShift = 20;

TfliteAddMultipliers tflite_add_multipliers(QParams a_q, QParams b_q, QParams out) {
  const double twice_max = 2.0 * static_cast<double>(std::max(a_q.scale, b_q.scale));
  const double out_real =
      twice_max / (static_cast<double>(1 << kTfliteAddLeftShift) * static_cast<double>(out.scale));
  require(out_real < 1.0, "TFLite add needs 2 * max(input scales) < 2^20 * output scale");
  return {quantize_multiplier_smaller_than_one(a_q.scale / twice_max),
          quantize_multiplier_smaller_than_one(b_q.scale / twice_max),
          quantize_multiplier_smaller_than_one(out_real)};
}

int32_t tflite_add(int32_t a, int32_t b, QParams a_q, QParams b_q, QParams out,
                   const TfliteAddMultipliers& m) {
  const int32_t scaled_a =
      multiply_by_quantized_multiplier((a - a_q.zero_point) * (1 << kTfliteAddLeftShift), m.a);
  const int32_t scaled_b =
      multiply_by_quantized_multiplier((b - b_q.zero_point) * (1 << kTfliteAddLeftShift), m.b);
  return wrapping_add(multiply_by_quantized_multiplier(scaled_a + scaled_b, m.out), out.zero_point);
}

// _mm256_cvtps_epi32: round half to even; out of range or NaN gives INT32_MIN.
int32_t convert_like_cvtps2dq(float v) {
  const float rounded = round_half_even(v);
  if (std::isnan(rounded) || rounded >= 2147483648.f || rounded < -2147483648.f) return kInt32Min;
  return static_cast<int32_t>(rounded);
}

// MLAS's QLinearAdd AVX2 kernel (qladd_avx2.cpp), non-broadcast case. The fixed part is the C++
// expression float(zc) - (ra * za + rb * zb), which GCC and Clang contract to one FMA.
struct OnnxAddConstants {
  float ratio_a, ratio_b, fixed;
};

OnnxAddConstants onnx_add_constants(QParams a_q, QParams b_q, QParams out) {
  const float ra = a_q.scale / out.scale, rb = b_q.scale / out.scale;
  const float za = static_cast<float>(a_q.zero_point), zb = static_cast<float>(b_q.zero_point);
  return {ra, rb, static_cast<float>(out.zero_point) - std::fma(ra, za, rb * zb)};
}

int32_t onnx_add(int32_t a, int32_t b, const OnnxAddConstants& k, int32_t qmin, int32_t qmax) {
  const float with_b = std::fma(static_cast<float>(b), k.ratio_b, k.fixed);
  const float sum = std::fma(static_cast<float>(a), k.ratio_a, with_b);
  return std::clamp(convert_like_cvtps2dq(sum), qmin, qmax);  // packs + packs/packus saturate
}

}  // namespace

QTensor::QTensor(std::vector<int64_t> shape_, int32_t fill)
    : shape(std::move(shape_)), data(static_cast<size_t>(ref::numel(shape)), fill) {}

QTensor::QTensor(std::vector<int64_t> shape_, std::vector<int32_t> data_)
    : shape(std::move(shape_)), data(std::move(data_)) {
  require(static_cast<int64_t>(data.size()) == ref::numel(shape),
          "data size " + std::to_string(data.size()) + " does not match the shape");
}

int64_t QTensor::numel() const {
  return ref::numel(shape);
}

int32_t saturating_rounding_doubling_high_mul(int32_t a, int32_t b) {
  if (a == kInt32Min && b == kInt32Min) return kInt32Max;
  const int64_t ab = int64_t{a} * int64_t{b};
  const int64_t nudge = ab >= 0 ? (int64_t{1} << 30) : 1 - (int64_t{1} << 30);
  return static_cast<int32_t>((ab + nudge) / (int64_t{1} << 31));  // '/' truncates toward zero
}

int32_t rounding_divide_by_pot(int32_t x, int exponent) {
  require(exponent >= 0 && exponent <= 31, "rounding_divide_by_pot exponent out of [0, 31]");
  const int32_t mask = static_cast<int32_t>((int64_t{1} << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

QuantizedMultiplier quantize_multiplier(double real) {
  if (real == 0.) return {};
  int shift = 0;
  const double fraction = std::frexp(real, &shift);
  int64_t fixed =
      static_cast<int64_t>(std::round(fraction * static_cast<double>(int64_t{1} << 31)));
  if (fixed == (int64_t{1} << 31)) {
    fixed /= 2;
    ++shift;
  }
  if (shift < -31) return {};  // TFLite flushes multipliers below ~2^-32 to zero
  return {static_cast<int32_t>(fixed), shift};
}

QuantizedMultiplier quantize_multiplier_smaller_than_one(double real) {
  require(real > 0. && real < 1.,
          "quantize_multiplier_smaller_than_one needs 0 < real < 1, got " + std::to_string(real));
  return quantize_multiplier(real);
}

int32_t multiply_by_quantized_multiplier(int32_t x, QuantizedMultiplier m) {
  require(m.shift <= 30, "multiplier shift " + std::to_string(m.shift) + " is above 30");
  const int left = std::max(m.shift, 0), right = std::max(-m.shift, 0);
  return rounding_divide_by_pot(
      saturating_rounding_doubling_high_mul(wrapping_mul(x, int32_t{1} << left), m.multiplier),
      right);
}

float round_half_even(float v) {
  // In double, v - floor(v) is exact wherever it is near one half.
  const double down = std::floor(static_cast<double>(v));
  const double fraction = static_cast<double>(v) - down;
  if (fraction > 0.5) return static_cast<float>(down + 1);
  if (fraction < 0.5) return static_cast<float>(down);
  return static_cast<float>(std::fmod(down, 2.0) == 0.0 ? down : down + 1);
}

int32_t mlas_requantize_output(int32_t acc, float scale, int32_t zero_point, int32_t qmin,
                               int32_t qmax) {
  float v = static_cast<float>(acc) * scale;
  v = std::max(v, static_cast<float>(qmin - zero_point));
  v = std::min(v, static_cast<float>(qmax - zero_point));
  return static_cast<int32_t>(round_half_even(v)) + zero_point;
}

int32_t qround_quantize(float v, QParams q, int32_t qmin, int32_t qmax, QMode mode) {
  const float scaled = v / q.scale;
  const float rounded = mode == QMode::Tflite ? std::round(scaled) : round_half_even(scaled);
  return saturate(static_cast<double>(rounded) + q.zero_point, qmin, qmax);
}

std::pair<int32_t, int32_t> qactivation_range(int activation, QParams out, int32_t qmin,
                                              int32_t qmax, QMode mode) {
  require(activation >= 0 && activation <= 2,
          "activation must be 0 (none), 1 (relu) or 2 (relu6), got " + std::to_string(activation));
  if (activation == 0) return {qmin, qmax};
  const int32_t low = std::max(qmin, out.zero_point);
  if (activation == 1) return {low, qmax};
  const float six = 6.f / out.scale;
  const float rounded = mode == QMode::Tflite ? std::round(six) : round_half_even(six);
  const double high = static_cast<double>(out.zero_point) + rounded;
  return {low, static_cast<int32_t>(std::min(static_cast<double>(qmax), high))};
}

QTensor quantize(const Tensor& real, QParams q, int32_t qmin, int32_t qmax, QMode mode) {
  QTensor t(real.shape);
  for (size_t i = 0; i < real.data.size(); ++i)
    t.data[i] = qround_quantize(real.data[i], q, qmin, qmax, mode);
  return t;
}

Tensor dequantize(const QTensor& q, QParams p) {
  Tensor t(q.shape);
  for (size_t i = 0; i < q.data.size(); ++i)
    t.data[i] = static_cast<float>(static_cast<double>(p.scale) *
                                   (static_cast<double>(q.data[i]) - p.zero_point));
  return t;
}

QTensor qpad(const QTensor& x, const std::vector<int64_t>& pad_before,
             const std::vector<int64_t>& pad_after, int32_t value) {
  require(x.rank() >= 3, "qpad needs N, C and spatial dims");
  const size_t dims = static_cast<size_t>(x.spatial_dims());
  const auto pb = per_axis(pad_before, dims, 0, "pad_before");
  const auto pa = per_axis(pad_after, dims, 0, "pad_after");
  std::vector<int64_t> shape = x.shape;
  for (size_t a = 0; a < dims; ++a) shape[a + 2] += pb[a] + pa[a];
  QTensor y(shape, value);
  const auto xs = strides_of(x.shape), ys = strides_of(shape);
  std::vector<int64_t> idx(x.shape.size(), 0);
  if (x.data.empty()) return y;
  size_t xi = 0;
  do {
    int64_t yoff = idx[0] * ys[0] + idx[1] * ys[1];
    for (size_t a = 0; a < dims; ++a) yoff += (idx[a + 2] + pb[a]) * ys[a + 2];
    y.data[static_cast<size_t>(yoff)] = x.data[xi++];
  } while (next_index(idx, x.shape));
  return y;
}

QTensor qconv(const QTensor& x, const QTensor& w, const std::vector<int32_t>& bias,
              const ConvParams& p, QParams in, const std::vector<float>& w_scales, QParams out,
              int32_t act_min, int32_t act_max, int32_t qmin, int32_t qmax, QMode mode,
              std::vector<int64_t> out_spatial) {
  check_conv_args(x, w, bias, p, w_scales);
  require_range(x, qmin, qmax, "the input");
  const int64_t N = x.shape[0], C = x.shape[1], O = w.shape[0], G = p.groups;
  const int64_t Cg = C / G, Og = O / G;
  const std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  const Window win = make_window(x.shape, kernel, p.stride, p.dilation, p.pad_before, p.pad_after,
                                 std::move(out_spatial));
  const std::vector<std::vector<Tap>> windows = all_windows(win, p.border);
  const std::vector<ChannelRequantizer> requantizers = conv_requantizers(in, w_scales, out, O);
  const int32_t border = border_constant(p.border, p.border_value, in.zero_point);
  const int64_t plane_size = numel(win.in), K = numel(kernel);

  QTensor y(output_shape(N, O, win));
  size_t yi = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (const std::vector<Tap>& taps : windows) {
        int32_t acc = bias.empty() ? 0 : bias[static_cast<size_t>(o)];
        for (int64_t c = 0; c < Cg; ++c) {
          const int32_t* plane = x.data.data() + (n * C + (o / Og) * Cg + c) * plane_size;
          const int32_t* weights = w.data.data() + (o * Cg + c) * K;
          for (const Tap& tap : taps)
            acc = wrapping_add(
                acc, (tap_value(tap, plane, border) - in.zero_point) * weights[tap.kernel_index]);
        }
        y.data[yi++] = requantize_accumulator(acc, requantizers[static_cast<size_t>(o)], out,
                                              act_min, act_max, qmin, qmax, mode);
      }
  return y;
}

QTensor qmax_pool(const QTensor& x, const PoolParams& p, int32_t act_min, int32_t act_max,
                  std::vector<int64_t> out_spatial) {
  const int32_t border = border_constant(p.border, p.border_value, 0);
  const bool zeros = p.border == BorderKind::Zeros;
  return pool(x, p, std::move(out_spatial),
              [&](const int32_t* plane, const std::vector<Tap>& taps) {
                int32_t m = act_min;
                for (const Tap& tap : taps)
                  if (!(zeros && tap.source < 0)) m = std::max(m, tap_value(tap, plane, border));
                return std::min(m, act_max);
              });
}

QTensor qavg_pool(const QTensor& x, const PoolParams& p, QParams in, QParams out, int32_t act_min,
                  int32_t act_max, int32_t qmin, int32_t qmax, QMode mode,
                  std::vector<int64_t> out_spatial) {
  for (int64_t d : p.dilation) require(d == 1, "avg_pool has no dilation");
  require_range(x, qmin, qmax, "the input");
  const auto clamp_activation = [&](int32_t v) { return std::clamp(v, act_min, act_max); };
  const int32_t border = border_constant(p.border, p.border_value, in.zero_point);
  if (mode == QMode::Tflite) {
    require(in.scale == out.scale && in.zero_point == out.zero_point,
            "TFLite's average pool needs the output quantized as the input");
    return pool(x, p, std::move(out_spatial), [&](const int32_t* plane, const auto& taps) {
      return clamp_activation(tflite_average(plane, taps, p, border));
    });
  }
  const Window win =
      make_window(x.shape, p.kernel, p.stride, p.dilation, p.pad_before, p.pad_after, out_spatial);
  if (onnx_takes_global_path(win)) {
    QTensor y = onnx_global_average(x, in, out, qmin, qmax);
    for (int32_t& v : y.data) v = clamp_activation(v);
    return y;
  }
  return pool(x, p, std::move(out_spatial), [&](const int32_t* plane, const auto& taps) {
    return clamp_activation(onnx_average(plane, taps, p, border, in, out, qmin, qmax));
  });
}

QTensor qadd(const QTensor& a, const QTensor& b, QParams a_q, QParams b_q, QParams out,
             int32_t act_min, int32_t act_max, int32_t qmin, int32_t qmax, QMode mode) {
  require(a.shape == b.shape, "qadd needs inputs of the same shape");
  require_range(a, qmin, qmax, "the first input");
  require_range(b, qmin, qmax, "the second input");
  QTensor y(a.shape);
  if (mode == QMode::Tflite) {
    const TfliteAddMultipliers m = tflite_add_multipliers(a_q, b_q, out);
    for (size_t i = 0; i < y.data.size(); ++i)
      y.data[i] = std::clamp(tflite_add(a.data[i], b.data[i], a_q, b_q, out, m), act_min, act_max);
  } else {
    const OnnxAddConstants k = onnx_add_constants(a_q, b_q, out);
    for (size_t i = 0; i < y.data.size(); ++i)
      y.data[i] = std::clamp(onnx_add(a.data[i], b.data[i], k, qmin, qmax), act_min, act_max);
  }
  return y;
}

QTensor qmul(const QTensor& a, const QTensor& b, QParams a_q, QParams b_q, QParams out,
             int32_t act_min, int32_t act_max, int32_t qmin, int32_t qmax) {
  const bool per_channel = b.shape != a.shape;
  require(!per_channel || (b.rank() == a.rank() && b.shape[0] == a.shape[0] &&
                           b.shape[1] == a.shape[1] && b.numel() == a.shape[0] * a.shape[1]),
          "qmul needs b of a's shape or one value per channel");
  require_range(a, qmin, qmax, "the first input");
  require_range(b, qmin, qmax, "the second input");
  const float ratio = a_q.scale * b_q.scale / out.scale;
  const int64_t plane = a.numel() / (a.shape[0] * a.shape[1]);
  QTensor y(a.shape);
  for (size_t i = 0; i < y.data.size(); ++i) {
    const int32_t bv = b.data[per_channel ? i / static_cast<size_t>(plane) : i];
    const int32_t product = (a.data[i] - a_q.zero_point) * (bv - b_q.zero_point);
    const float v = static_cast<float>(product) * ratio + static_cast<float>(out.zero_point);
    y.data[i] = std::clamp(std::clamp(convert_like_cvtps2dq(v), qmin, qmax), act_min, act_max);
  }
  return y;
}

QTensor qsigmoid(const QTensor& x, QParams in, QParams out, int32_t qmin, int32_t qmax) {
  require_range(x, qmin, qmax, "the input");
  QTensor y(x.shape);
  for (size_t i = 0; i < y.data.size(); ++i) {
    const float real = in.scale * static_cast<float>(x.data[i] - in.zero_point);
    y.data[i] = qround_quantize(mlas_logistic(real), out, qmin, qmax, QMode::Onnx);
  }
  return y;
}

}  // namespace padfold::ref
