// The ONNX backend node tests for Conv, ConvTranspose, MaxPool and AveragePool (Debian's
// libonnx-testdata), compiled ahead of time by padfold into one bundle, loaded through the C
// runtime and run on each test's own input data. Outputs must equal the expected outputs within
// 1e-4 * max(|expected|, 1) element-wise.
//
// Not covered: test_maxpool_2d_uint8 (padfold generates float32 kernels; the spec parser rejects
// other dtypes, see spec_test), and the Indices output of MaxPool-with-argmax (padfold does not
// produce indices; output 0 is checked).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "emit/bundle.h"
#include "onnx_spec.h"
#include "padfold_runtime.h"
#include "reference/reference.h"

namespace padfold::onnx_test {
namespace {

namespace fs = std::filesystem;

const char* const kOps[] = {"Conv", "ConvTranspose", "MaxPool", "AveragePool"};

std::vector<std::string> float_node_tests() {
  std::vector<std::string> names;
  for (const std::string& n : find_node_tests(node_test_root(), {std::begin(kOps), std::end(kOps)}))
    if (n != "test_maxpool_2d_uint8") names.push_back(n);
  return names;
}

std::string layer_name(const std::string& test) {
  return test.substr(5);
}  // drop "test_"

class OnnxKernels : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    Model model;
    nlohmann::json layers = nlohmann::json::array();
    for (const std::string& n : float_node_tests())
      layers.push_back(layer_spec(load_node_test(node_test_root() + "/" + n), layer_name(n)));
    const nlohmann::json spec = {{"model", "onnx_nodes"}, {"layers", layers}};
    model = parse_spec(spec.dump(), "onnx node tests");
    CompileOptions opt;
    opt.out_dir =
        (fs::temp_directory_path() / ("padfold_onnx_bundle_" + std::to_string(getpid()))).string();
    fs::remove_all(opt.out_dir);
    dir_ = opt.out_dir;
    opt.targets = {"host"};
    compile_bundle(model, opt);
    char err[PF_ERRLEN];
    ASSERT_EQ(pf_bundle_open(opt.out_dir.c_str(), nullptr, &bundle_, err, sizeof err), PF_OK)
        << err;
  }
  static void TearDownTestSuite() {
    pf_bundle_close(bundle_);
    fs::remove_all(dir_);
  }
  static pf_bundle* bundle_;
  static std::string dir_;
};
pf_bundle* OnnxKernels::bundle_ = nullptr;
std::string OnnxKernels::dir_;

TEST(OnnxKernelsData, Installed) {
  EXPECT_GE(float_node_tests().size(), 40u)
      << "ONNX node tests missing under " << node_test_root() << ": install libonnx-testdata";
}

TEST_P(OnnxKernels, OutputMatchesExpected) {
  ASSERT_NE(bundle_, nullptr);
  NodeTest t = load_node_test(node_test_root() + "/" + GetParam());
  const pf_kernel_desc* k = nullptr;
  char err[PF_ERRLEN];
  ASSERT_EQ(pf_bundle_find(bundle_, layer_name(GetParam()).c_str(), &k, err, sizeof err), PF_OK)
      << err;
  // The kernel's buffers are input, weights?, bias?, output: the node's inputs in order.
  ASSERT_EQ(static_cast<size_t>(k->num_buffers), t.inputs.size() + 1);
  const FloatTensor& expected = t.outputs.at(0);
  std::vector<float> out(expected.data.size(), std::nanf(""));
  std::vector<pf_tensor> tensors;
  for (int i = 0; i + 1 < k->num_buffers; ++i) {
    std::vector<float>& d = t.inputs[static_cast<size_t>(i)].data;
    tensors.push_back(pf_tensor_of(&k->buffers[i], d.data(), d.size() * sizeof(float)));
  }
  tensors.push_back(
      pf_tensor_of(&k->buffers[k->num_buffers - 1], out.data(), out.size() * sizeof(float)));
  ASSERT_EQ(pf_run(k, tensors.data(), k->num_buffers, err, sizeof err), PF_OK) << err;

  const ref::Tensor want(expected.shape, expected.data);
  const double tol = 1e-4 * std::max(ref::max_abs(want), 1.0);
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_NEAR(out[i], expected.data[i], tol) << GetParam() << " element " << i;
}

INSTANTIATE_TEST_SUITE_P(Node, OnnxKernels, ::testing::ValuesIn(float_node_tests()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace padfold::onnx_test
