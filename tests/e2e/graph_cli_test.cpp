// `padfold check` and `padfold compile` on a model graph with weight files: the files are checked
// against the layers' buffers, copied into the bundle or embedded, and the manifest and registry
// describe the graph.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/npy.h"
#include "bundle_util.h"
#include "spec_snippets.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using padfold::testing::contains;
using Result = padfold::testing::CommandResult;

Result run(const std::string& args) {
  return padfold::testing::run_command(std::string(PADFOLD_BIN) + " " + args);
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class GraphCli : public ::testing::Test {
 protected:
  fs::path dir = fs::path(testing::TempDir()) / ("padfold_graph_" + std::to_string(getpid()));
  std::vector<float> conv_w, conv_b, pw_w;

  void SetUp() override {
    fs::remove_all(dir);
    fs::create_directories(dir / "w");
    for (int i = 0; i < 4 * 3 * 3 * 3; ++i) conv_w.push_back(0.01f * static_cast<float>(i) - 0.5f);
    for (int i = 0; i < 4; ++i) conv_b.push_back(0.25f * static_cast<float>(i));
    for (int i = 0; i < 4 * 4; ++i) pw_w.push_back(1.f / static_cast<float>(i + 1));
    padfold::write_npy_f32((dir / "w/conv_w.npy").string(), {4, 3, 3, 3}, conv_w.data());
    padfold::write_npy_f32((dir / "w/conv_b.npy").string(), {4}, conv_b.data());
    padfold::write_npy_f32((dir / "w/pw_w.npy").string(), {4, 4, 1, 1}, pw_w.data());
    write_spec(spec());
  }
  void TearDown() override { fs::remove_all(dir); }

  static json spec() {
    return {{"model", "g"},
            {"defaults", {{"layout", "NCHW"}}},
            {"inputs", {{{"name", "x"}, {"shape", {1, 3, 6, 6}}}}},
            {"layers",
             {{{"name", "conv"},
               {"op", "conv2d"},
               {"input", "x"},
               {"out_channels", 4},
               {"kernel", 3},
               {"stride", 2},
               {"padding", "same"},
               {"bias", true},
               {"weight_files", {{"weights", "w/conv_w.npy"}, {"bias", "w/conv_b.npy"}}}},
              {{"name", "pw"},
               {"op", "conv2d"},
               {"out_channels", 4},
               {"kernel", 1},
               {"weight_files", {{"weights", "w/pw_w.npy"}}}},
              {{"name", "sum"}, {"op", "add"}, {"input", {"conv", "pw"}}, {"activation", "relu"}},
              {{"name", "cat"}, {"op", "concat"}, {"input", {"sum", "conv"}}}}}};
  }
  void write_spec(const json& j) { std::ofstream(dir / "g.json") << j.dump(1); }
  std::string spec_path() const { return (dir / "g.json").string(); }
};

TEST_F(GraphCli, CheckShowsTheGraph) {
  const Result r = run("check " + spec_path());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "sum    add")) << r.output;
  EXPECT_TRUE(contains(r.output, "conv,pw")) << r.output;
  EXPECT_TRUE(contains(r.output, "outputs: cat")) << r.output;
  EXPECT_TRUE(contains(r.output, "whole-model run: yes")) << r.output;
  const Result j = run("check --json " + spec_path());
  ASSERT_EQ(j.status, 0) << j.output;
  const json c = json::parse(j.output);
  EXPECT_EQ(c.at("layers")[3].at("inputs"), json({"sum", "conv"}));
  EXPECT_EQ(c.at("layers")[3].at("output_shape"), json({1, 8, 3, 3}));
  EXPECT_EQ(c.at("inputs")[0].at("name"), "x");
}

TEST_F(GraphCli, CompileCopiesWeightsAndDescribesTheGraph) {
  const fs::path out = dir / "bundle";
  const Result r = run("compile " + spec_path() + " -o " + out.string() + " --target host");
  ASSERT_EQ(r.status, 0) << r.output;
  const json m = json::parse(read(out / "manifest.json"));
  EXPECT_EQ(m.at("embedded_weights"), false);
  EXPECT_EQ(m.at("graph").at("inputs")[0].at("name"), "x");
  EXPECT_EQ(m.at("graph").at("inputs")[0].at("produced_by"), nullptr);
  EXPECT_EQ(m.at("graph").at("outputs"), json({"cat"}));
  const json& conv = m.at("kernels")[0].at("buffers");
  EXPECT_EQ(conv[0].at("source"), "x");
  EXPECT_EQ(conv[1].at("source"), "weights/conv_weights.npy");
  EXPECT_EQ(conv[2].at("source"), "weights/conv_bias.npy");
  EXPECT_EQ(conv[3].at("source"), nullptr);
  // pw's only reader is sum: one kernel, the add in pw's epilogue, its residual conv's output.
  ASSERT_EQ(m.at("kernels").size(), 3u);
  EXPECT_EQ(m.at("kernels")[1].at("layer"), "sum");
  EXPECT_EQ(m.at("kernels")[1].at("op"), "pw->add");
  const json& sum = m.at("kernels")[1].at("buffers");
  EXPECT_EQ(sum[0].at("name"), "input");
  EXPECT_EQ(sum[0].at("source"), "conv");
  EXPECT_EQ(sum[1].at("name"), "pw_weights");
  EXPECT_EQ(sum[2].at("name"), "residual");
  EXPECT_EQ(sum[2].at("source"), "conv");
  const json& cat = m.at("kernels")[2].at("buffers");
  EXPECT_EQ(cat[0].at("name"), "input0");
  EXPECT_EQ(cat[0].at("source"), "sum");
  EXPECT_EQ(cat[1].at("source"), "conv");
  // The copies hold the spec's values.
  const padfold::NpyArray w = padfold::read_npy_f32((out / "weights/conv_weights.npy").string());
  EXPECT_EQ(w.shape, (std::vector<int64_t>{4, 3, 3, 3}));
  EXPECT_EQ(w.data, conv_w);
  EXPECT_EQ(padfold::read_npy_f32((out / "weights/pw_weights.npy").string()).data, pw_w);
  EXPECT_FALSE(fs::exists(out / "weights/pw_bias.npy"));
}

TEST_F(GraphCli, EmbedWeightsBakesTheValuesIntoTheRegistry) {
  const fs::path out = dir / "bundle";
  const Result r =
      run("compile " + spec_path() + " -o " + out.string() + " --target host --embed-weights");
  ASSERT_EQ(r.status, 0) << r.output;
  const json m = json::parse(read(out / "manifest.json"));
  EXPECT_EQ(m.at("embedded_weights"), true);
  EXPECT_EQ(m.at("kernels")[0].at("buffers")[1].at("source"), nullptr);
  EXPECT_FALSE(fs::exists(out / "weights"));
  const std::string target = m.at("targets")[0].at("dir");
  const std::string registry = read(out / target / "registry.c");
  // conv_b[1] = 0.25f = 0x3e800000; the buffer points at its array.
  EXPECT_TRUE(contains(registry, "static const uint32_t pf_1_g_conv_bias_data[4]"))
      << registry.substr(0, 400);
  EXPECT_TRUE(contains(registry, "0x00000000u, 0x3e800000u, 0x3f000000u, 0x3f400000u"));
  EXPECT_TRUE(contains(registry, "\"weights\", PF_ROLE_WEIGHTS"));
  EXPECT_TRUE(contains(registry, "pf_1_g_conv_weights_data}"));
  EXPECT_TRUE(contains(registry, "model_inputs[] = {"));
}

TEST_F(GraphCli, BadWeightFilesAreNamedAndNothingIsWritten) {
  const fs::path out = dir / "bundle";
  padfold::write_npy_f32((dir / "w/pw_w.npy").string(), {4, 4, 3, 1},
                         std::vector<float>(48).data());
  for (const std::string& cmd :
       {"check " + spec_path(), "compile " + spec_path() + " -o " + out.string()}) {
    const Result r = run(cmd);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_TRUE(contains(r.output, "g.json: layer 'pw': field 'weight_files.weights': "));
    EXPECT_TRUE(contains(r.output,
                         "holds an array of shape (4, 4, 3, 1); expected (4, 4, 1, 1), the "
                         "layer's weights buffer in weight_layout OIHW"))
        << r.output;
  }
  EXPECT_FALSE(fs::exists(out));
  fs::remove(dir / "w/conv_b.npy");
  const Result missing = run("compile " + spec_path() + " -o " + out.string());
  EXPECT_EQ(missing.status, 1);
  EXPECT_TRUE(contains(missing.output, "layer 'conv': field 'weight_files.bias': "))
      << missing.output;
  EXPECT_TRUE(contains(missing.output, "conv_b.npy")) << missing.output;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(GraphCli, ProducedByInputsCompileButCannotRunWhole) {
  json s = spec();
  s["inputs"][0]["produced_by"] = "ONNX node 'resize' (Resize)";
  write_spec(s);
  const Result c = run("check " + spec_path());
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_TRUE(
      contains(c.output, "whole-model run: no: input 'x' comes from ONNX node 'resize' (Resize)"))
      << c.output;
  const fs::path out = dir / "bundle";
  const Result r = run("compile " + spec_path() + " -o " + out.string() + " --target host");
  ASSERT_EQ(r.status, 0) << r.output;
  const json m = json::parse(read(out / "manifest.json"));
  EXPECT_EQ(m.at("graph").at("inputs")[0].at("produced_by"), "ONNX node 'resize' (Resize)");
  const std::string registry = read(out / std::string(m.at("targets")[0].at("dir")) / "registry.c");
  EXPECT_TRUE(contains(registry, "\"ONNX node 'resize' (Resize)\"")) << registry;
}

// A chain padfold fuses: dw -> pw (auto) and conv -> max_pool (listed), with weight files. The
// whole-model run of each bundle equals the unfused one.
TEST_F(GraphCli, FusedBlocksRunLikeTheLayersOneByOne) {
  std::vector<float> dw(3 * 3 * 32), pw(32 * 16), conv(3 * 3 * 16 * 16), bias(16);
  for (size_t i = 0; i < dw.size(); ++i) dw[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  for (size_t i = 0; i < pw.size(); ++i) pw[i] = 0.05f * static_cast<float>(i % 11) - 0.25f;
  for (size_t i = 0; i < conv.size(); ++i) conv[i] = 0.02f * static_cast<float>(i % 13) - 0.1f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.1f * static_cast<float>(i);
  padfold::write_npy_f32((dir / "w/dw.npy").string(), {3, 3, 1, 32}, dw.data());
  padfold::write_npy_f32((dir / "w/pw.npy").string(), {1, 1, 32, 16}, pw.data());
  padfold::write_npy_f32((dir / "w/conv.npy").string(), {3, 3, 16, 16}, conv.data());
  padfold::write_npy_f32((dir / "w/bias.npy").string(), {16}, bias.data());
  const json spec = {
      {"model", "fz"},
      {"defaults", {{"layout", "NHWC"}, {"weight_layout", "HWIO"}}},
      {"inputs", {{{"name", "x"}, {"shape", {1, 96, 95, 32}}}}},
      {"layers",
       {{{"name", "dw"},
         {"op", "conv2d"},
         {"input", "x"},
         {"depth_multiplier", 1},
         {"kernel", 3},
         {"stride", 1},
         {"padding", "same"},
         {"border", "reflect"},
         {"activation", "relu6"},
         {"weight_files", {{"weights", "w/dw.npy"}}}},
        {{"name", "pw"},
         {"op", "conv2d"},
         {"out_channels", 16},
         {"kernel", 1},
         {"weight_files", {{"weights", "w/pw.npy"}}}},
        {{"name", "c"},
         {"op", "conv2d"},
         {"out_channels", 16},
         {"kernel", 3},
         {"padding", "same"},
         {"bias", true},
         {"activation", "relu"},
         {"weight_files", {{"weights", "w/conv.npy"}, {"bias", "w/bias.npy"}}}},
        {{"name", "mp"}, {"op", "max_pool"}, {"kernel", 3}, {"stride", 2}, {"padding", "same"}}}}};
  write_spec(spec);
  std::vector<float> x(96 * 95 * 32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 50.f - 1.f;
  padfold::write_npy_f32((dir / "x.npy").string(), {1, 96, 95, 32}, x.data());

  const Result check = run("check " + spec_path());
  ASSERT_EQ(check.status, 0) << check.output;
  EXPECT_TRUE(contains(check.output, "fused (--fuse auto): dw+pw: dw->pw: saves")) << check.output;

  std::vector<std::vector<float>> outputs;
  const std::vector<std::string> modes = {"none", "auto", "dw+pw,c+mp"};
  for (const std::string& fuse : modes) {
    const fs::path out = dir / ("bundle_" + std::to_string(outputs.size()));
    const Result r = run("compile " + spec_path() + " -o " + out.string() + " --fuse " + fuse);
    ASSERT_EQ(r.status, 0) << r.output;
    const json m = json::parse(read(out / "manifest.json"));
    const size_t kernels = fuse == "none" ? 4 : fuse == "auto" ? 3 : 2;
    ASSERT_EQ(m.at("kernels").size(), kernels) << fuse;
    if (fuse != "none") {
      const json& k = m.at("kernels")[0];
      EXPECT_EQ(k.at("layer"), "pw");
      EXPECT_EQ(k.at("op"), "dw->pw");
      EXPECT_EQ(k.at("fused").at("layers")[0].at("border"), "reflect");
      EXPECT_EQ(k.at("buffers")[1].at("name"), "dw_weights");
      EXPECT_EQ(k.at("buffers")[1].at("source"), "weights/dw_weights.npy");
      EXPECT_EQ(k.at("buffers")[2].at("name"), "pw_weights");
    }
    const std::string y = (dir / ("y" + std::to_string(outputs.size()) + ".npy")).string();
    const Result run_model = run("run " + out.string() + " --model --input " +
                                 (dir / "x.npy").string() + " --output " + y);
    ASSERT_EQ(run_model.status, 0) << run_model.output;
    const padfold::NpyArray a = padfold::read_npy_f32(y);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{1, 48, 48, 16}));
    outputs.push_back(a.data);
  }
  for (size_t v = 1; v < outputs.size(); ++v)
    for (size_t i = 0; i < outputs[0].size(); ++i)
      ASSERT_NEAR(outputs[v][i], outputs[0][i], 1e-5f * (1 + std::abs(outputs[0][i])))
          << "bundle " << v << ", element " << i;
}

// `padfold run --layer` on a fused block (its layers' weights from the bundle) and on an add
// kernel (one --input per input) gives what the layers give one by one.
TEST_F(GraphCli, RunLayerRunsBlocksAndJoins) {
  // The fixture's graph, one kernel per layer: conv and pw take their weights from the bundle.
  const fs::path plain = dir / "plain";
  ASSERT_EQ(run("compile " + spec_path() + " -o " + plain.string() + " --fuse none").status, 0);
  std::vector<float> x(3 * 6 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 9) / 4.f - 1.f;
  padfold::write_npy_f32((dir / "x.npy").string(), {1, 3, 6, 6}, x.data());
  const std::string conv_y = (dir / "conv.npy").string(), pw_y = (dir / "pw.npy").string(),
                    sum_y = (dir / "sum.npy").string();
  Result r = run("run " + plain.string() + " --layer conv --input " + (dir / "x.npy").string() +
                 " --output " + conv_y);  // weights and bias from the bundle's files
  ASSERT_EQ(r.status, 0) << r.output;
  r = run("run " + plain.string() + " --layer pw --input " + conv_y + " --output " + pw_y);
  ASSERT_EQ(r.status, 0) << r.output;
  r = run("run " + plain.string() + " --layer sum --input " + conv_y + " --output " + sum_y);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.output, "kernel 'sum' (add) reads 2 input(s) (input0, input1)"))
      << r.output;
  r = run("run " + plain.string() + " --layer sum --input " + conv_y + " --input " + pw_y +
          " --output " + sum_y);
  ASSERT_EQ(r.status, 0) << r.output;
  const padfold::NpyArray c = padfold::read_npy_f32(conv_y), p = padfold::read_npy_f32(pw_y),
                          s = padfold::read_npy_f32(sum_y);
  ASSERT_EQ(s.data.size(), c.data.size());
  for (size_t i = 0; i < s.data.size(); ++i)
    ASSERT_NEAR(s.data[i], std::max(0.f, c.data[i] + p.data[i]), 1e-6f) << i;

  // conv made depthwise, so conv -> pw is a dw->pw block: run whole with --layer pw, it equals
  // conv then pw run one by one.
  json s2 = spec();
  s2["layers"][0].erase("out_channels");
  s2["layers"][0]["depth_multiplier"] = 1;
  s2["layers"][0]["bias"] = false;
  s2["layers"][1]["weight_files"] = {{"weights", "w/pw3.npy"}};
  s2["layers"][2]["input"] = {"pw", "pw"};
  std::vector<float> dw(3 * 3 * 3), pw3(4 * 3);
  for (size_t i = 0; i < dw.size(); ++i) dw[i] = 0.1f * static_cast<float>(i % 5);
  for (size_t i = 0; i < pw3.size(); ++i) pw3[i] = 0.2f * static_cast<float>(i % 3) - 0.2f;
  padfold::write_npy_f32((dir / "w/dw.npy").string(), {3, 1, 3, 3}, dw.data());
  padfold::write_npy_f32((dir / "w/pw3.npy").string(), {4, 3, 1, 1}, pw3.data());
  s2["layers"][0]["weight_files"] = {{"weights", "w/dw.npy"}};
  s2["layers"].erase(3);  // no concat of sum and conv (conv is fused away)
  write_spec(s2);
  const fs::path unfused = dir / "unfused", fused = dir / "fused";
  ASSERT_EQ(run("compile " + spec_path() + " -o " + unfused.string() + " --fuse none").status, 0);
  r = run("compile " + spec_path() + " -o " + fused.string() + " --fuse conv+pw");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string a1 = (dir / "a1.npy").string(), a2 = (dir / "a2.npy").string(),
                    b = (dir / "b.npy").string();
  ASSERT_EQ(run("run " + unfused.string() + " --layer conv --input " + (dir / "x.npy").string() +
                " --output " + a1)
                .status,
            0);
  ASSERT_EQ(run("run " + unfused.string() + " --layer pw --input " + a1 + " --output " + a2).status,
            0);
  r = run("run " + fused.string() + " --layer pw --input " + (dir / "x.npy").string() +
          " --output " + b);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "ran pw (dw->pw)")) << r.output;
  const padfold::NpyArray want = padfold::read_npy_f32(a2), got = padfold::read_npy_f32(b);
  ASSERT_EQ(got.shape, want.shape);
  for (size_t i = 0; i < want.data.size(); ++i)
    ASSERT_NEAR(got.data[i], want.data[i], 1e-5f * (1 + std::abs(want.data[i]))) << i;
}

// A bundle's kernels are the same on every target, and the GPU family fuses nothing: with a GPU
// target every layer is a kernel of its own, on the CPU target beside it too, and the compile
// prints no "fused" line (it once printed the CPU plan's blocks, which the bundle did not have).
// GPU kernels compile ahead of time: no GPU is needed.
// Convs computed channels first cost whole models on CPUs (bench/results-models.md): compile says
// so, naming the layout and the depthwise ones, for CPU targets only, and not for the same spec in
// NHWC.
TEST_F(GraphCli, ChannelsFirstConvsWarnOfTheirCost) {
  const std::string warning = "2 of the 2 convolutions are computed channels first";
  json spec = padfold::testing::dw_pw_spec(12);
  write_spec(spec);
  const Result last = run("compile " + spec_path() + " -o " + (dir / "nhwc").string());
  ASSERT_EQ(last.status, 0) << last.output;
  EXPECT_FALSE(contains(last.output, "warning")) << last.output;

  spec["defaults"]["layout"] = "NCHW";
  spec["inputs"][0]["shape"] = {1, 32, 12, 12};
  write_spec(spec);
  const Result first = run("compile " + spec_path() + " -o " + (dir / "nchw").string());
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_TRUE(contains(first.output, "warning: " + warning + " (NCHW), 1 of them depthwise;"))
      << first.output;
  EXPECT_TRUE(contains(first.output, "write the layers in NHWC")) << first.output;
  const Result gpu =
      run("compile " + spec_path() + " -o " + (dir / "gpu").string() + " --target host-cuda");
  ASSERT_EQ(gpu.status, 0) << gpu.output;
  EXPECT_FALSE(contains(gpu.output, warning)) << gpu.output;
}

TEST_F(GraphCli, GpuTargetsFuseNothingAndReportNoFusedBlocks) {
  const json spec = padfold::testing::dw_pw_spec(96);
  write_spec(spec);
  const fs::path cpu = dir / "cpu", gpu = dir / "gpu";
  const Result host = run("compile " + spec_path() + " -o " + cpu.string() + " --target host");
  ASSERT_EQ(host.status, 0) << host.output;
  EXPECT_TRUE(contains(host.output, "fused dw+pw: dw->pw: saves")) << host.output;
  EXPECT_EQ(json::parse(read(cpu / "manifest.json")).at("kernels").size(), 1u);

  const Result cuda =
      run("compile " + spec_path() + " -o " + gpu.string() + " --target host-cuda,host");
  ASSERT_EQ(cuda.status, 0) << cuda.output;
  EXPECT_FALSE(contains(cuda.output, "fused")) << cuda.output;
  EXPECT_TRUE(contains(cuda.output, "4 kernels in")) << cuda.output;
  const json m = json::parse(read(gpu / "manifest.json"));
  ASSERT_EQ(m.at("kernels").size(), 2u);
  EXPECT_FALSE(m.at("kernels")[0].contains("fused"));
  EXPECT_EQ(m.at("targets").size(), 2u);

  const Result listed = run("compile " + spec_path() + " -o " + (dir / "listed").string() +
                            " --target host-cuda --fuse dw+pw");
  EXPECT_EQ(listed.status, 1);
  EXPECT_TRUE(contains(listed.output, "--fuse: fused blocks are not generated for GPU targets"))
      << listed.output;
  EXPECT_FALSE(fs::exists(dir / "listed"));
}

TEST_F(GraphCli, FuseErrors) {
  const fs::path out = dir / "bundle";
  const Result bad = run("compile " + spec_path() + " -o " + out.string() + " --fuse conv+nope");
  EXPECT_EQ(bad.status, 1);
  EXPECT_TRUE(contains(bad.output, "--fuse conv+nope: 'nope' is not a layer")) << bad.output;
  const Result kind = run("compile " + spec_path() + " -o " + out.string() + " --fuse conv+pw");
  EXPECT_EQ(kind.status, 1);
  EXPECT_TRUE(contains(kind.output, "'conv' is not read by 'pw' alone")) << kind.output;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
