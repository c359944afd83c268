// `padfold run` end to end on a real bundle (examples/tiny.json for "host,x86-64-linux-avx2-fma",
// compiled at test time by a ctest fixture): .npy inputs written here, y.npy read back and
// compared element-wise with the naive reference (tolerance: bundle_util.h); and its error paths.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

#include "bundle_util.h"
#include "frontend/spec.h"
#include "kernel_runner.h"

namespace {

namespace fs = std::filesystem;
using padfold::testing::contains;
using padfold::testing::run_command;
using padfold::testing::shell_quote;

fs::path work_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir =
      fs::path(PF_WORK_DIR) / (std::string(info->test_suite_name()) + "." + info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

template <typename T = float>
std::string write_npy(const fs::path& path, const padfold::ref::Tensor& t) {
  std::vector<size_t> shape(t.shape.begin(), t.shape.end());
  xt::xarray<T> a = xt::adapt(t.data, shape);
  xt::dump_npy(path.string(), a);
  return path.string();
}

padfold::testing::CommandResult run_padfold(const std::string& args) {
  return run_command(shell_quote(PADFOLD_BIN) + " run " + shell_quote(PF_TINY_BUNDLE) + " " + args);
}

const padfold::Layer& tiny_layer(const std::string& name) {
  static const padfold::Model model = padfold::load_spec(PF_TINY_SPEC);
  for (const auto& L : model.layers)
    if (L.name == name) return L;
  throw std::runtime_error("no layer " + name);
}

// Every layer: inputs as .npy, `padfold run`, y.npy against the reference.
TEST(PadfoldRun, EveryLayerMatchesReference) {
  const fs::path dir = work_dir();
  const padfold::Model model = padfold::load_spec(PF_TINY_SPEC);
  unsigned seed = 100;
  for (const padfold::Layer& L : model.layers) {
    SCOPED_TRACE("layer " + L.name);
    const auto data = padfold::testing::random_data(L, seed++);
    std::string args = "--layer " + L.name + " --input " +
                       shell_quote(write_npy(dir / (L.name + "_x.npy"), data.input));
    if (L.has_weights())
      args += " --weights " + shell_quote(write_npy(dir / (L.name + "_w.npy"), data.weights));
    if (L.bias) args += " --bias " + shell_quote(write_npy(dir / (L.name + "_b.npy"), data.bias));
    const fs::path y = dir / (L.name + "_y.npy");
    const auto r = run_padfold(args + " --output " + shell_quote(y.string()));
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "ran " + L.name + " (" + L.op_name + ") on target "))
        << r.output;
    const xt::xarray<float> got = xt::load_npy<float>(y.string());
    const std::vector<int64_t> got_shape(got.shape().begin(), got.shape().end());
    EXPECT_EQ(got_shape, L.output_shape_full());
    EXPECT_TRUE(padfold::testing::matches_reference(padfold::testing::reference_output(L, data),
                                                    got.data(), got.size(), L.name));
  }
}

class PadfoldRunErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = work_dir();
    const padfold::Layer& L = tiny_layer("stem");  // input 1x7x7x3, weights 4x4x3x8, bias 8
    data = padfold::testing::random_data(L, 7);
    x = write_npy(dir / "x.npy", data.input);
    w = write_npy(dir / "w.npy", data.weights);
    b = write_npy(dir / "b.npy", data.bias);
    y = (dir / "y.npy").string();
  }
  // Expects a nonzero exit, a message containing every part, and no output file.
  void expect_error(const std::string& args, const std::vector<std::string>& parts) {
    const auto r = run_padfold(args);
    EXPECT_NE(r.status, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "padfold: error: ")) << r.output;
    for (const auto& p : parts)
      EXPECT_TRUE(contains(r.output, p)) << "no '" << p << "' in:\n" << r.output;
    EXPECT_FALSE(fs::exists(y)) << "wrote " << y << " anyway";
  }
  fs::path dir;
  padfold::testing::LayerData data;
  std::string x, w, b, y;
};

TEST_F(PadfoldRunErrors, WrongShapeNamesFlagFileAndBuffer) {
  padfold::ref::Tensor bad({1, 7, 8, 3}, 0.5f);
  const std::string bad_x = write_npy(dir / "x_wrong_shape.npy", bad);
  expect_error("--layer stem --input " + shell_quote(bad_x) + " --weights " + shell_quote(w) +
                   " --bias " + shell_quote(b) + " --output " + shell_quote(y),
               {"--input", bad_x, "shape 1x7x8x3", "buffer 'input'", "NHWC 1x7x7x3"});
}

TEST_F(PadfoldRunErrors, Float64NpyNamesFlagAndFile) {
  const std::string w64 = write_npy<double>(dir / "w_float64.npy", data.weights);
  expect_error("--layer stem --input " + shell_quote(x) + " --weights " + shell_quote(w64) +
                   " --bias " + shell_quote(b) + " --output " + shell_quote(y),
               {"--weights", w64, "float32"});
}

TEST_F(PadfoldRunErrors, MissingWeightsNamesFlag) {
  expect_error("--layer stem --input " + shell_quote(x) + " --bias " + shell_quote(b) +
                   " --output " + shell_quote(y),
               {"layer 'stem' needs --weights", "buffer 'weights'", "HWIO 4x4x3x8"});
}

TEST_F(PadfoldRunErrors, UnknownLayerNamesItAndListsLayers) {
  expect_error("--layer nope --input " + shell_quote(x) + " --output " + shell_quote(y),
               {"'nope'", "stem, dw, pool, avg"});
}

TEST_F(PadfoldRunErrors, WeightsForPoolingLayer) {
  padfold::ref::Tensor px(tiny_layer("pool").input_shape(), 0.25f);
  expect_error("--layer pool --input " + shell_quote(write_npy(dir / "px.npy", px)) +
                   " --weights " + shell_quote(w) + " --output " + shell_quote(y),
               {"layer 'pool' takes no --weights"});
}

TEST_F(PadfoldRunErrors, MissingFileNamesIt) {
  const std::string missing = (dir / "does_not_exist.npy").string();
  expect_error("--layer stem --input " + shell_quote(missing) + " --weights " + shell_quote(w) +
                   " --bias " + shell_quote(b) + " --output " + shell_quote(y),
               {"--input", missing});
}

}  // namespace
