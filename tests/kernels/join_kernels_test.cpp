// add, mul, concat and softmax kernels against a naive reference: random shapes (1-3 spatial dims,
// both layouts, 2-4 inputs, activations; mul's second input of one shape or one value per
// channel; softmax over up to 40 channels) on every CPU target family this machine runs, and
// compiled for the others.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "compile/lower.h"
#include "compile/target.h"
#include "kernel_runner.h"

namespace padfold::testing {
namespace {

using json = nlohmann::json;

struct JoinCase {
  Model model;  // its last layer is the join
  const Layer& join() const { return model.layers.back(); }
};

// Inputs are model inputs (one per join input) of random sizes.
JoinCase random_case(std::mt19937& rng, Op op) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const bool concat = op == Op::Concat, mul = op == Op::Mul, softmax = op == Op::Softmax;
  // A concat of more inputs than the runtime took before (16) one time in four.
  const int dims = pick(1, 3), many = concat && pick(0, 3) == 0 ? pick(16, 24) : 0;
  const int n_inputs = softmax ? 1 : mul ? 2 : many ? many : pick(2, 4);
  const bool per_channel = mul && pick(0, 3) != 0;
  const bool channels_last = pick(0, 1);
  std::vector<int64_t> spatial;
  for (int d = 0; d < dims; ++d) spatial.push_back(pick(1, dims == 3 ? 5 : 11));
  const int64_t batch = pick(1, 2), channels = pick(1, softmax ? 40 : 19);
  const std::string letters = spatial_letters(dims);
  json inputs = json::array(), names = json::array();
  for (int i = 0; i < n_inputs; ++i) {
    const int64_t c = concat ? pick(1, 19) : channels;
    std::vector<int64_t> shape{batch};
    if (!channels_last) shape.push_back(c);
    if (per_channel && i == 1)
      shape.insert(shape.end(), spatial.size(), 1);
    else
      shape.insert(shape.end(), spatial.begin(), spatial.end());
    if (channels_last) shape.push_back(c);
    const std::string name = "in" + std::to_string(i);
    inputs.push_back({{"name", name}, {"shape", shape}});
    names.push_back(name);
  }
  json layer = {{"name", "j"}, {"op", to_string(op)}, {"input", softmax ? names[0] : names}};
  const char* activations[] = {"none", "relu", "relu6", "leaky_relu", "sigmoid", "hard_swish"};
  if (!concat && !softmax) layer["activation"] = activations[pick(0, 5)];
  const json spec = {
      {"model", "m"},
      {"defaults", {{"layout", channels_last ? "N" + letters + "C" : "NC" + letters}}},
      {"inputs", inputs},
      {"layers", {layer}}};
  return {parse_spec(spec.dump(), "join.json")};
}

std::vector<ref::Tensor> random_inputs(const Layer& L, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  std::vector<ref::Tensor> in;
  for (size_t i = 0; i < L.inputs.size(); ++i) {
    in.emplace_back(L.input_shape(i));
    for (float& v : in.back().data) v = dist(rng);
  }
  return in;
}

float activate(float v, const Layer& L) {
  switch (L.activation) {
    case Activation::Relu:
      return v > 0 ? v : 0;
    case Activation::Relu6:
      return v < 0 ? 0 : v > 6 ? 6 : v;
    case Activation::LeakyRelu:
      return v > 0 ? v : v * L.activation_alpha;
    case Activation::Sigmoid:
      return static_cast<float>(1 / (1 + std::exp(-static_cast<double>(v))));
    case Activation::HardSwish:
      return static_cast<float>(v * std::clamp(v / 6.0 + 0.5, 0.0, 1.0));
    default:
      return v;
  }
}

// Add sums element by element; mul multiplies, by input 1's value for the element's batch and
// channel when it has one per channel; concat lays each input's channel block after the previous
// ones: for every index of the axes before the channel axis, the inputs' [channels x inner] blocks
// follow one another.
ref::Tensor reference(const Layer& L, const std::vector<ref::Tensor>& in) {
  ref::Tensor out(L.output_shape_full());
  if (L.op == Op::Add) {
    for (size_t k = 0; k < out.data.size(); ++k) {
      float s = 0;
      for (const ref::Tensor& t : in) s += t.data[k];
      out.data[k] = activate(s, L);
    }
    return out;
  }
  const size_t ch = L.layout.channels_last ? out.shape.size() - 1 : 1;
  const int64_t channels = out.shape[ch];
  int64_t spatial = 1;
  for (size_t d = 1; d < out.shape.size(); ++d)
    if (d != ch) spatial *= out.shape[d];
  // Element (n, c, pixel p) of the flat data.
  auto flat = [&](int64_t n, int64_t c, int64_t p) {
    return static_cast<size_t>(L.layout.channels_last ? (n * spatial + p) * channels + c
                                                      : (n * channels + c) * spatial + p);
  };
  if (L.op == Op::Softmax) {  // over channels, pixel by pixel, in double
    for (int64_t n = 0; n < out.shape[0]; ++n)
      for (int64_t p = 0; p < spatial; ++p) {
        double peak = -INFINITY, total = 0;
        for (int64_t c = 0; c < channels; ++c)
          peak = std::max<double>(peak, in[0].data[flat(n, c, p)]);
        for (int64_t c = 0; c < channels; ++c) total += std::exp(in[0].data[flat(n, c, p)] - peak);
        for (int64_t c = 0; c < channels; ++c)
          out.data[flat(n, c, p)] =
              static_cast<float>(std::exp(in[0].data[flat(n, c, p)] - peak) / total);
      }
    return out;
  }
  if (L.op == Op::Mul) {
    const bool per_channel = in[1].data.size() != out.data.size();
    for (int64_t n = 0; n < out.shape[0]; ++n)
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t p = 0; p < spatial; ++p) {
          const size_t k = flat(n, c, p);
          const float s = in[1].data[per_channel ? static_cast<size_t>(n * channels + c) : k];
          out.data[k] = activate(in[0].data[k] * s, L);
        }
    return out;
  }
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < ch; ++d) outer *= out.shape[d];
  for (size_t d = ch + 1; d < out.shape.size(); ++d) inner *= out.shape[d];
  size_t pos = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const ref::Tensor& t : in) {
      const int64_t block = t.shape[ch] * inner;
      for (int64_t e = 0; e < block; ++e) out.data[pos++] = t.data[o * block + e];
    }
  return out;
}

Halide::Buffer<float> as_buffer(const ref::Tensor& t) {
  std::vector<int> sizes(t.shape.rbegin(), t.shape.rend());
  return Halide::Buffer<float>(const_cast<float*>(t.data.data()), sizes);
}

ref::Tensor run(const Layer& L, const std::vector<ref::Tensor>& in, const std::string& target) {
  const Halide::Target t = resolve_target(target);
  Kernel k = lower(L, t);
  for (size_t i = 0; i < in.size(); ++i)  // softmax's one input is "input"
    k.param(L.is_join() ? "input" + std::to_string(i) : "input").set(as_buffer(in[i]));
  ref::Tensor out(L.output_shape_full());
  Halide::Buffer<float> buf = as_buffer(out);
  k.pipeline.realize(buf, codegen_target(t));
  return out;
}

class JoinKernels : public ::testing::TestWithParam<TargetFamilyCase> {};

TEST_P(JoinKernels, MatchReference) {
  const TargetFamilyCase& family = GetParam();
  const bool runs = runs_here(family.target);
  std::mt19937 rng(family.seed);
  int ran = 0;
  for (int i = 0; i < 24; ++i) {
    const Op ops[] = {Op::Add, Op::Concat, Op::Mul, Op::Softmax};
    const JoinCase c = random_case(rng, ops[i % 4]);
    const Layer& L = c.join();
    SCOPED_TRACE(fmt::format("case {}: {} of {} inputs, {} {}", i, L.op_name, L.inputs.size(),
                             L.layout.name(), fmt::join(L.output_shape_full(), "x")));
    if (!runs) {
      EXPECT_GT(compile_only(L, family.target), 0);
      continue;
    }
    const std::vector<ref::Tensor> in = random_inputs(L, rng);
    const ref::Tensor want = reference(L, in), got = run(L, in, family.target);
    ASSERT_EQ(got.data.size(), want.data.size());
    for (size_t k = 0; k < want.data.size(); ++k)
      ASSERT_NEAR(got.data[k], want.data[k], 1e-5f * (1 + std::abs(want.data[k]))) << "at " << k;
    ++ran;
  }
  if (runs) {
    EXPECT_EQ(ran, 24);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, JoinKernels, ::testing::ValuesIn(cpu_target_families()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace padfold::testing
