// Checks of the naive reference (generator/reference) against cases small enough to work out
// by hand.
#include "reference/reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace padfold::ref {
namespace {

using V = std::vector<float>;

Tensor t1d(const V& v, int64_t channels = 1) {
  return Tensor({1, channels, static_cast<int64_t>(v.size()) / channels}, v);
}

// np.pad(np.array([1, 2, 3]), (before, after), mode) for each mode.
TEST(RefBorder, NumpyPadSemanticsOn123) {
  const V x = {1, 2, 3};
  EXPECT_EQ(pad1d(x, 2, 2, BorderKind::Zeros), (V{0, 0, 1, 2, 3, 0, 0}));
  EXPECT_EQ(pad1d(x, 2, 2, BorderKind::Constant, 7), (V{7, 7, 1, 2, 3, 7, 7}));
  EXPECT_EQ(pad1d(x, 2, 2, BorderKind::Reflect), (V{3, 2, 1, 2, 3, 2, 1}));
  EXPECT_EQ(pad1d(x, 2, 2, BorderKind::Symmetric), (V{2, 1, 1, 2, 3, 3, 2}));
  EXPECT_EQ(pad1d(x, 2, 2, BorderKind::Replicate), (V{1, 1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(pad1d(x, 2, 2, BorderKind::Circular), (V{2, 3, 1, 2, 3, 1, 2}));
  // Pads up to the limits each mode allows.
  EXPECT_EQ(pad1d(x, 3, 3, BorderKind::Symmetric), (V{3, 2, 1, 1, 2, 3, 3, 2, 1}));
  EXPECT_EQ(pad1d(x, 3, 3, BorderKind::Circular), (V{1, 2, 3, 1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(pad1d(x, 5, 1, BorderKind::Replicate), (V{1, 1, 1, 1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(pad1d(x, 1, 0, BorderKind::Reflect), (V{2, 1, 2, 3}));
  // Beyond them.
  EXPECT_THROW(pad1d(x, 3, 0, BorderKind::Reflect), std::out_of_range);
  EXPECT_THROW(pad1d(x, 0, 3, BorderKind::Reflect), std::out_of_range);
  EXPECT_THROW(pad1d(x, 4, 0, BorderKind::Symmetric), std::out_of_range);
  EXPECT_THROW(pad1d(x, 0, 4, BorderKind::Circular), std::out_of_range);
  EXPECT_THROW(pad1d({5}, 1, 0, BorderKind::Reflect), std::out_of_range);
  EXPECT_EQ(pad1d({5}, 1, 1, BorderKind::Symmetric), (V{5, 5, 5}));
}

TEST(RefConv, OneDimensional) {
  const Tensor x = t1d({1, 2, 3, 4, 5});
  const Tensor w = t1d({1, 0, -1});
  ConvParams p;
  EXPECT_EQ(conv(x, w, nullptr, p).data, (V{-2, -2, -2}));
  p.pad_before = {1};
  p.pad_after = {1};
  EXPECT_EQ(conv(x, w, nullptr, p).data, (V{-2, -2, -2, -2, 4}));
  p.stride = {2};
  EXPECT_EQ(conv(x, w, nullptr, p).data, (V{-2, -2, 4}));
  // dilation 2: x[i] + x[i+2]; stride 2 keeps i = 0, 2
  ConvParams d;
  d.dilation = {2};
  d.stride = {2};
  EXPECT_EQ(conv(x, t1d({1, 1}), nullptr, d).data, (V{4, 8}));
  // bias
  const Tensor b({1}, V{10});
  EXPECT_EQ(conv(x, w, &b, ConvParams{}).data, (V{8, 8, 8}));
}

TEST(RefConv, BorderModes) {
  const Tensor x = t1d({1, 2, 3});
  const Tensor w = t1d({1, 1, 1});
  ConvParams p;
  p.pad_before = p.pad_after = {1};
  EXPECT_EQ(conv(x, w, nullptr, p).data, (V{3, 6, 5}));
  p.border = BorderKind::Replicate;
  EXPECT_EQ(conv(x, w, nullptr, p).data, (V{4, 6, 8}));
  p.border = BorderKind::Reflect;
  EXPECT_EQ(conv(x, w, nullptr, p).data, (V{5, 6, 7}));
  p.border = BorderKind::Symmetric;
  EXPECT_EQ(conv(x, w, nullptr, p).data, (V{4, 6, 8}));
  p.border = BorderKind::Circular;
  EXPECT_EQ(conv(x, w, nullptr, p).data, (V{6, 6, 6}));
  p.border = BorderKind::Constant;
  p.border_value = 10;
  EXPECT_EQ(conv(x, w, nullptr, p).data, (V{13, 6, 15}));
}

TEST(RefConv, TwoDimensionalAndGroups) {
  const Tensor x({1, 1, 3, 3}, V(9, 1.f));
  const Tensor w({1, 1, 2, 2}, V(4, 1.f));
  const Tensor y = conv(x, w, nullptr, ConvParams{});
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(y.data, (V{4, 4, 4, 4}));
  ConvParams p;
  p.pad_before = {1, 0};
  p.pad_after = {0, 1};
  const Tensor z = conv(x, w, nullptr, p);
  EXPECT_EQ(z.shape, (std::vector<int64_t>{1, 1, 3, 3}));
  EXPECT_EQ(z.data, (V{2, 2, 1, 4, 4, 2, 4, 4, 2}));

  // Depthwise: two channels, each scaled by its own 1-tap kernel.
  const Tensor x2({1, 2, 2}, V{1, 2, 3, 4});
  const Tensor w2({2, 1, 1}, V{10, 100});
  ConvParams g;
  g.groups = 2;
  EXPECT_EQ(conv(x2, w2, nullptr, g).data, (V{10, 20, 300, 400}));
  // Dense: both output channels see both inputs.
  const Tensor w3({2, 2, 1}, V{1, 1, 1, -1});
  EXPECT_EQ(conv(x2, w3, nullptr, ConvParams{}).data, (V{4, 6, -2, -2}));
}

TEST(RefConvTranspose, OneDimensional) {
  const Tensor x = t1d({1, 2});
  const Tensor w = t1d({1, 1, 1});
  // full: positions i*2 + t: [1, 1, 1+2, 2, 2]
  EXPECT_EQ(conv_transpose(x, w, nullptr, {2}, {1}, {0}, {0}).data, (V{1, 1, 3, 2, 2}));
  EXPECT_EQ(conv_transpose(x, w, nullptr, {2}, {1}, {1}, {1}).data, (V{1, 3, 2}));
  // negative crop after: zero extension
  EXPECT_EQ(conv_transpose(x, w, nullptr, {2}, {1}, {0}, {-2}).data, (V{1, 1, 3, 2, 2, 0, 0}));
  // dilation 2, stride 1: x0 at 0,2,4; x1 at 1,3,5
  EXPECT_EQ(conv_transpose(x, w, nullptr, {1}, {2}, {0}, {0}).data, (V{1, 2, 1, 2, 1, 2}));
  const Tensor b({1}, V{0.5f});
  EXPECT_EQ(conv_transpose(x, w, &b, {2}, {1}, {0}, {0}, 1, {6}).data,
            (V{1.5f, 1.5f, 3.5f, 2.5f, 2.5f, 0.5f}));
  // groups: channel c of the input only reaches output channel c
  const Tensor x2({1, 2, 1}, V{1, 2});
  const Tensor w2({2, 1, 2}, V{1, 10, 100, 1000});
  EXPECT_EQ(conv_transpose(x2, w2, nullptr, {1}, {1}, {0}, {0}, 2).data, (V{1, 10, 200, 2000}));
}

TEST(RefMaxPool, Borders) {
  const Tensor x = t1d({1, -2, 3, -4});
  PoolParams p;
  p.kernel = {2};
  p.stride = {2};
  p.pad_before = p.pad_after = {1};
  EXPECT_EQ(max_pool(x, p).data, (V{1, 3, -4}));  // zero pads never win
  p.border = BorderKind::Constant;
  EXPECT_EQ(max_pool(x, p).data, (V{1, 3, 0}));  // the constant takes part
  p.border = BorderKind::Replicate;
  EXPECT_EQ(max_pool(x, p).data, (V{1, 3, -4}));
  p.border = BorderKind::Reflect;
  EXPECT_EQ(max_pool(x, p).data, (V{1, 3, 3}));
  p.border = BorderKind::Circular;
  EXPECT_EQ(max_pool(x, p).data, (V{1, 3, 1}));
  // dilation 2: max(x[i], x[i+2])
  PoolParams d;
  d.kernel = {2};
  d.dilation = {2};
  EXPECT_EQ(max_pool(x, d).data, (V{3, -2}));
  // ceil-mode overhang does not take part
  PoolParams c;
  c.kernel = {2};
  c.stride = {2};
  EXPECT_EQ(max_pool(t1d({-1, -2, -3, -4, -5}), c, {3}).data, (V{-1, -3, -5}));
}

TEST(RefAvgPool, CountIncludePadAndOverhang) {
  const Tensor x = t1d({1, 2, 3, 4});
  PoolParams p;
  p.kernel = {3};
  p.pad_before = p.pad_after = {1};
  EXPECT_EQ(avg_pool(x, p).data, (V{1.5f, 2, 3, 3.5f}));
  p.count_include_pad = true;
  const Tensor y = avg_pool(x, p);
  EXPECT_FLOAT_EQ(y.data[0], 1.f);
  EXPECT_FLOAT_EQ(y.data[3], 7.f / 3.f);
  // Replicate border with count_include_pad: pads hold edge values.
  p.border = BorderKind::Replicate;
  EXPECT_FLOAT_EQ(avg_pool(x, p).data[0], 4.f / 3.f);

  // ceil mode, in=6, k=3, s=2, pads (1,1): 4 windows; the last covers x5, one pad and one
  // overhang position. The pad counts only with count_include_pad; the overhang never does.
  const Tensor x6 = t1d({1, 2, 3, 4, 5, 6});
  PoolParams c;
  c.kernel = {3};
  c.stride = {2};
  c.pad_before = c.pad_after = {1};
  EXPECT_EQ(avg_pool(x6, c, {4}).data, (V{1.5f, 3, 5, 6}));
  c.count_include_pad = true;
  EXPECT_EQ(avg_pool(x6, c, {4}).data, (V{1, 3, 5, 3}));
}

TEST(RefPool, TwoDimensional) {
  const Tensor x({1, 1, 2, 2}, V{1, 2, 3, 4});
  PoolParams p;
  p.kernel = {2, 2};
  EXPECT_EQ(max_pool(x, p).data, (V{4}));
  EXPECT_EQ(avg_pool(x, p).data, (V{2.5f}));
  p.kernel = {1, 2};
  EXPECT_EQ(max_pool(x, p).data, (V{2, 4}));
  EXPECT_EQ(max_pool(x, p).shape, (std::vector<int64_t>{1, 1, 2, 1}));
}

TEST(RefActivation, Kinds) {
  EXPECT_EQ(activation(-2.f, Activation::None), -2.f);
  EXPECT_EQ(activation(-2.f, Activation::Relu), 0.f);
  EXPECT_EQ(activation(3.f, Activation::Relu), 3.f);
  EXPECT_EQ(activation(7.f, Activation::Relu6), 6.f);
  EXPECT_EQ(activation(-1.f, Activation::Relu6), 0.f);
  EXPECT_EQ(activation(5.f, Activation::Relu6), 5.f);
  EXPECT_EQ(activation(-2.f, Activation::LeakyRelu, 0.1f), -0.2f);
  EXPECT_EQ(activation(2.f, Activation::LeakyRelu, 0.1f), 2.f);
  EXPECT_EQ(activation(t1d({-1, 1}), Activation::Relu).data, (V{0, 1}));
}

TEST(RefLayout, Permutations) {
  const Tensor m({2, 3}, V{1, 2, 3, 4, 5, 6});
  const Tensor mt = permute(m, "AB", "BA");
  EXPECT_EQ(mt.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(mt.data, (V{1, 4, 2, 5, 3, 6}));
  EXPECT_THROW(permute(m, "AB", "AC"), std::invalid_argument);
  EXPECT_THROW(permute(m, "ABC", "CBA"), std::invalid_argument);

  // NCW (1, 2, 3) -> NWC (1, 3, 2)
  const Tensor x({1, 2, 3}, V{1, 2, 3, 10, 20, 30});
  const Tensor xl = to_channels_last(x);
  EXPECT_EQ(xl.shape, (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(xl.data, (V{1, 10, 2, 20, 3, 30}));
  EXPECT_EQ(from_channels_last(xl).data, x.data);
  EXPECT_EQ(spatial_letters(3), "DHW");

  // OIHW (2, 1, 1, 2) -> HWIO (1, 2, 1, 2): element [o, i, h, w] lands at [h, w, i, o].
  const Tensor w({2, 1, 1, 2}, V{1, 2, 3, 4});
  const Tensor hwio = weights_to(w, "HWIO");
  EXPECT_EQ(hwio.shape, (std::vector<int64_t>{1, 2, 1, 2}));
  EXPECT_EQ(hwio.data, (V{1, 3, 2, 4}));
  EXPECT_EQ(weights_from(hwio, "HWIO").data, w.data);
  // Transposed-conv weights IOHW -> HWOI
  const Tensor hwoi = permute(w, "IOHW", "HWOI");
  EXPECT_EQ(hwoi.shape, (std::vector<int64_t>{1, 2, 1, 2}));
  EXPECT_EQ(hwoi.data, (V{1, 3, 2, 4}));
}

// Conv on channels-last data is the same conv after converting layouts.
TEST(RefLayout, ConvCommutesWithLayoutChange) {
  Tensor x({1, 2, 3, 4});
  for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = static_cast<float>(i % 7) - 3.f;
  Tensor w({3, 2, 2, 2});
  for (size_t i = 0; i < w.data.size(); ++i) w.data[i] = static_cast<float>(i % 5) - 2.f;
  const Tensor y = conv(x, w, nullptr, ConvParams{});
  const Tensor back = from_channels_last(to_channels_last(y));
  EXPECT_EQ(back.data, y.data);
  const Tensor w2 = weights_from(weights_to(w, "HWIO"), "HWIO");
  EXPECT_EQ(conv(x, w2, nullptr, ConvParams{}).data, y.data);
}

TEST(RefErrors, BadArguments) {
  const Tensor x = t1d({1, 2, 3});
  EXPECT_THROW(conv(x, t1d({1, 1, 1, 1}), nullptr, ConvParams{}), std::invalid_argument);
  ConvParams g;
  g.groups = 2;
  EXPECT_THROW(conv(x, t1d({1}), nullptr, g), std::invalid_argument);
  ConvParams r;
  r.pad_before = r.pad_after = {3};
  r.border = BorderKind::Reflect;
  EXPECT_THROW(conv(x, t1d({1}), nullptr, r), std::out_of_range);
  PoolParams d;
  d.kernel = {2};
  d.dilation = {2};
  EXPECT_THROW(avg_pool(x, d), std::invalid_argument);
  EXPECT_THROW(Tensor({2, 2}, V{1, 2, 3}), std::invalid_argument);
}

}  // namespace
}  // namespace padfold::ref
