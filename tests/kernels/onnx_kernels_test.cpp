// The ONNX backend node tests for Conv, ConvTranspose, MaxPool and AveragePool (Debian's
// libonnx-testdata), each imported by the ONNX importer (padfold import's library, with the
// test's W and B as initializers, as in a deployed model), compiled ahead of time by padfold into
// one bundle, loaded through the C runtime and run on the test's own input with the weights the
// importer extracted. Outputs must equal the expected outputs within 1e-4 * max(|expected|, 1)
// element-wise.
//
// Not covered: test_maxpool_2d_uint8 (padfold generates float32 kernels; the importer refuses it,
// see onnx_import_test), and the Indices output of MaxPool-with-argmax (padfold does not produce
// indices: the test removes that output from the model before importing; output 0 is checked).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "emit/bundle.h"
#include "frontend/onnx/import.h"
#include "onnx_util.h"
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

// The node test through the importer: its one layer (as a standalone spec layer: graph fields
// dropped, named after the test) and the weights it extracted.
nlohmann::json import_node_test(const std::string& test,
                                std::vector<onnx_import::WeightFile>& weights) {
  const std::string dir = node_test_root() + "/" + test;
  onnx::ModelProto model = node_test_model_with_weights(dir);
  onnx::GraphProto& g = *model.mutable_graph();
  if (g.node(0).op_type() == "MaxPool" && g.node(0).output_size() > 1) {  // drop Indices
    g.mutable_node(0)->mutable_output()->RemoveLast();
    g.mutable_output()->DeleteSubrange(1, g.output_size() - 1);
  }
  const auto prepared = onnx_import::prepare_model(model, {}, dir + "/model.onnx");
  onnx_import::ImportOptions options;  // one layer, in the test data's layout (channels first)
  options.layout = onnx_import::ImportLayout::ChannelsFirst;
  const onnx_import::ImportResult r = onnx_import::import_model(prepared, options);
  if (r.spec["layers"].size() != 1 || !r.left_to_caller.empty())
    throw std::runtime_error(test + ": expected one layer and nothing left to the caller:\n" +
                             onnx_import::summary_text(r));
  nlohmann::json layer = nlohmann::json::parse(r.spec["layers"][0].dump());
  layer.erase("input");
  layer.erase("weight_files");
  layer["name"] = layer_name(test);
  weights = r.weights;
  return layer;
}

class OnnxKernels : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    Model model;
    nlohmann::json layers = nlohmann::json::array();
    for (const std::string& n : float_node_tests())
      layers.push_back(import_node_test(n, weights_[n]));
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
  static std::map<std::string, std::vector<onnx_import::WeightFile>> weights_;
};
pf_bundle* OnnxKernels::bundle_ = nullptr;
std::string OnnxKernels::dir_;
std::map<std::string, std::vector<onnx_import::WeightFile>> OnnxKernels::weights_;

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
  // The kernel's buffers are input, weights?, bias?, output: the node's input, then the weights
  // the importer extracted, which must be the node's W and B.
  std::vector<onnx_import::WeightFile>& w = weights_.at(GetParam());
  ASSERT_EQ(static_cast<size_t>(k->num_buffers), w.size() + 2);
  ASSERT_EQ(t.inputs.size(), w.size() + 1);
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(w[i].shape, t.inputs[i + 1].shape) << w[i].path;
    EXPECT_EQ(w[i].data, t.inputs[i + 1].data) << w[i].path;
  }
  const FloatTensor& expected = t.outputs.at(0);
  std::vector<float> out(expected.data.size(), std::nanf(""));
  std::vector<pf_tensor> tensors;
  std::vector<float>& x = t.inputs[0].data;
  tensors.push_back(pf_tensor_of(&k->buffers[0], x.data(), x.size() * sizeof(float)));
  for (size_t i = 0; i < w.size(); ++i)
    tensors.push_back(
        pf_tensor_of(&k->buffers[i + 1], w[i].data.data(), w[i].data.size() * sizeof(float)));
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
