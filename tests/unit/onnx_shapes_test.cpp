// Every ONNX backend node test of Conv, ConvTranspose, MaxPool and AveragePool (Debian's
// libonnx-testdata, data/node, plus the single-node models of data/pytorch-converted): padfold's
// resolved spatial output shape must equal the expected output's shape, and the naive reference
// run with the resolved pads must reproduce the expected values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "onnx_util.h"
#include "padding/padding.h"
#include "reference/reference.h"

namespace padfold {
namespace {

using onnx_test::FloatTensor;
using onnx_test::NodeTest;

const std::vector<std::string> kOps = {"Conv", "ConvTranspose", "MaxPool", "AveragePool"};

// Full paths of the single-node tests of kOps under `root`.
std::vector<std::string> tests_under(const std::string& root) {
  std::vector<std::string> dirs;
  for (const std::string& n : onnx_test::find_node_tests(root, kOps))
    dirs.push_back(root + "/" + n);
  return dirs;
}

const std::vector<std::string>& node_tests() {
  static const std::vector<std::string> dirs = tests_under(onnx_test::node_test_root());
  return dirs;
}

// The same package's data/pytorch-converted: single-node models exported by PyTorch, with the
// weights as initializers (groups, depthwise, 3-D dilated/strided cases the node tests lack).
const std::vector<std::string>& pytorch_converted_tests() {
  static const std::vector<std::string> dirs =
      tests_under(std::filesystem::path(onnx_test::node_test_root()).parent_path().string() +
                  "/pytorch-converted");
  return dirs;
}

ref::Tensor to_ref(const FloatTensor& t) {
  return ref::Tensor(t.shape, t.data);
}

std::string join(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// ONNX auto_pad / pads -> PaddingSpec.
PaddingSpec padding_of(const NodeTest& t, size_t dims) {
  const std::string auto_pad = t.get_string("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET" || auto_pad.empty())
    return explicit_padding(t.get_ints("pads", std::vector<int64_t>(2 * dims, 0)),
                            static_cast<int>(dims));
  if (auto_pad == "VALID") return parse_padding_name("valid");
  if (auto_pad == "SAME_UPPER") return parse_padding_name("same_upper");
  if (auto_pad == "SAME_LOWER") return parse_padding_name("same_lower");
  throw std::runtime_error(t.name + ": unknown auto_pad '" + auto_pad + "'");
}

TEST(OnnxNodeTests, DataInstalled) {
  // libonnx-testdata 1.12 has 4 Conv (plus 2 basic), 10 ConvTranspose, 14 MaxPool and 13
  // AveragePool single-node tests; fewer means the package is missing or the path is wrong.
  EXPECT_GE(node_tests().size(), 40u)
      << "ONNX node tests not found under " << onnx_test::node_test_root()
      << " (install libonnx-testdata or set PADFOLD_ONNX_NODE_DIR)";
  std::vector<std::string> ops;
  for (const std::string& dir : node_tests()) ops.push_back(onnx_test::single_node_op(dir));
  for (const std::string& op : kOps)
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << "no node test for " << op;
}

class OnnxNode : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxNode, ShapeAndValues) {
  const NodeTest t = onnx_test::load_node_test(GetParam());
  ASSERT_FALSE(t.inputs.empty());
  const FloatTensor& X = t.inputs[0];
  const FloatTensor& Y = t.outputs[0];
  ASSERT_GE(X.shape.size(), 3u) << "input must be N, C, spatial...";
  const size_t dims = X.shape.size() - 2;
  ASSERT_EQ(Y.shape.size(), X.shape.size());
  const std::vector<int64_t> expected_spatial(Y.shape.begin() + 2, Y.shape.end());

  const bool is_conv = t.op_type == "Conv" || t.op_type == "ConvTranspose";
  std::vector<int64_t> kernel;
  if (is_conv) {
    ASSERT_GE(t.inputs.size(), 2u);
    const FloatTensor& W = t.inputs[1];
    kernel = t.get_ints("kernel_shape", std::vector<int64_t>(W.shape.begin() + 2, W.shape.end()));
  } else {
    kernel = t.get_ints("kernel_shape");
  }
  ASSERT_EQ(kernel.size(), dims);
  const std::vector<int64_t> strides = t.get_ints("strides", std::vector<int64_t>(dims, 1));
  const std::vector<int64_t> dilations = t.get_ints("dilations", std::vector<int64_t>(dims, 1));
  ASSERT_EQ(strides.size(), dims);
  ASSERT_EQ(dilations.size(), dims);

  std::vector<AxisParams> axes;
  for (size_t i = 0; i < dims; ++i) {
    AxisParams a;
    a.input = X.shape[i + 2];
    a.kernel = kernel[i];
    a.stride = strides[i];
    a.dilation = dilations[i];
    axes.push_back(a);
  }
  const PaddingSpec spec = padding_of(t, dims);
  const bool ceil_mode = t.get_int("ceil_mode", 0) != 0;

  Resolved r;
  if (t.op_type == "ConvTranspose") {
    const auto output_padding = t.get_ints("output_padding", {});
    r = resolve_transposed(spec, axes, output_padding, t.find_ints("output_shape"));
  } else {
    r = resolve_forward(spec, axes, ceil_mode);
  }
  ASSERT_EQ(r.axes.size(), dims);
  std::vector<int64_t> got, pb, pa;
  for (const AxisPads& p : r.axes) {
    got.push_back(p.output);
    pb.push_back(p.before);
    pa.push_back(p.after);
  }
  EXPECT_EQ(got, expected_spatial)
      << t.name << " (" << t.op_type << ", " << spec.written << "): padfold resolved pads before "
      << join(pb) << " after " << join(pa);
  for (size_t k = 1; k < t.outputs.size(); ++k)  // MaxPool's Indices output: same shape
    EXPECT_EQ(t.outputs[k].shape, Y.shape) << t.name << " output " << k;
  if (got != expected_spatial) return;

  // Values through the naive reference, with padfold's pads.
  const ref::Tensor x = to_ref(X);
  ref::Tensor y;
  if (t.op_type == "Conv") {
    ref::ConvParams p;
    p.stride = strides;
    p.dilation = dilations;
    p.pad_before = pb;
    p.pad_after = pa;
    p.groups = t.get_int("group", 1);
    const ref::Tensor w = to_ref(t.inputs[1]);
    const ref::Tensor b = t.inputs.size() > 2 ? to_ref(t.inputs[2]) : ref::Tensor();
    y = ref::conv(x, w, t.inputs.size() > 2 ? &b : nullptr, p, got);
  } else if (t.op_type == "ConvTranspose") {
    const ref::Tensor w = to_ref(t.inputs[1]);
    const ref::Tensor b = t.inputs.size() > 2 ? to_ref(t.inputs[2]) : ref::Tensor();
    y = ref::conv_transpose(x, w, t.inputs.size() > 2 ? &b : nullptr, strides, dilations, pb, pa,
                            t.get_int("group", 1), got);
  } else {
    ref::PoolParams p;
    p.kernel = kernel;
    p.stride = strides;
    p.dilation = dilations;
    p.pad_before = pb;
    p.pad_after = pa;
    p.count_include_pad = t.get_int("count_include_pad", 0) != 0;
    y = t.op_type == "MaxPool" ? ref::max_pool(x, p, got) : ref::avg_pool(x, p, got);
  }
  const ref::Tensor expected = to_ref(Y);
  ASSERT_EQ(y.shape, expected.shape) << t.name;
  const double tol = 1e-4 * std::max(ref::max_abs(expected), 1e-3);
  const double diff = ref::max_abs_diff(y, expected);
  EXPECT_LE(diff, tol) << t.name << ": reference differs from the ONNX expected output";
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = std::filesystem::path(info.param).filename().string();
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Node, OnnxNode, ::testing::ValuesIn(node_tests()), param_name);
INSTANTIATE_TEST_SUITE_P(PytorchConverted, OnnxNode, ::testing::ValuesIn(pytorch_converted_tests()),
                         param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OnnxNode);  // DataInstalled reports missing data

}  // namespace
}  // namespace padfold
