// `padfold import`: what it writes (the spec, the weights as .npy, the report, the printed list of
// nodes left to the caller), --emit-onnx, and bad models: a clear error and nothing written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/npy.h"
#include "bundle_util.h"
#include "frontend/onnx/import.h"
#include "frontend/onnx/onnx_model.h"
#include "onnx_build.h"

namespace padfold::onnx_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using padfold::testing::contains;
using padfold::testing::run_command;
using padfold::testing::shell_quote;

class ImportCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    work_ = fs::path(PF_WORK_DIR) / info->name();
    fs::remove_all(work_);
    fs::create_directories(work_);
  }

  padfold::testing::CommandResult import(const ModelBuilder& b, const std::string& args,
                                         const std::string& file = "model.onnx") {
    b.save((work_ / file).string());
    return run_command(shell_quote(PADFOLD_BIN) + " import " +
                       shell_quote((work_ / file).string()) + " " + args);
  }

  std::string out(const std::string& name = "out") const { return (work_ / name).string(); }

  // Nothing but the model files is left in the work directory (no staging directory, lock, temp).
  void expect_nothing_written() const {
    for (const auto& e : fs::directory_iterator(work_))
      EXPECT_EQ(e.path().extension(), ".onnx") << "left behind: " << e.path();
  }

  fs::path work_;
};

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

// x -> Pad(reflect) -> Conv(3x3, bias) -> Relu -> Erf -> Conv(SAME_UPPER, s2) -> y
ModelBuilder small_model() {
  ModelBuilder b;
  b.input("x", {1, 2, 8, 8}).output("y");
  b.int_initializer("pads", {0, 0, 1, 1, 0, 0, 1, 1});
  b.node("Pad", {"x", "pads"}, {"xp"}, "pad").str("mode", "reflect");
  b.initializer("w1", {4, 2, 3, 3}).initializer("b1", {4});
  b.node("Conv", {"xp", "w1", "b1"}, {"t1"}, "conv1");
  b.node("Relu", {"t1"}, {"r1"}, "relu1");
  b.node("Erf", {"r1"}, {"h"}, "hs");
  b.initializer("w2", {4, 4, 4, 4});
  b.node("Conv", {"h", "w2"}, {"y"}, "conv2").ints("strides", {2, 2}).str("auto_pad", "SAME_UPPER");
  return b;
}

TEST_F(ImportCli, WritesSpecWeightsAndReport) {
  const auto r = import(small_model(), "-o " + shell_quote(out()) + " --layout nchw");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "model.onnx: ONNX opset 13, 5 node(s) -> model 'model': 2 "
                       "layer(s), 1 node(s) left to the caller"))
      << r.output;
  EXPECT_TRUE(contains(r.output,
                       "nodes left to the caller (node name, op type, why):\n  'hs' "
                       "(Erf): padfold does not generate Erf"))
      << r.output;
  EXPECT_TRUE(contains(r.output,
                       "spec input 'h' is computed by the caller: tensor 'h' of node "
                       "'hs' (Erf)"))
      << r.output;
  const json spec = read_json(fs::path(out()) / "model.json");
  EXPECT_EQ(spec["model"], "model");
  ASSERT_EQ(spec["layers"].size(), 2u);
  EXPECT_EQ(spec["layers"][0]["border"], "reflect");
  EXPECT_EQ(spec["layers"][0]["activation"], "relu");
  EXPECT_EQ(spec["layers"][1]["input"], "h");
  EXPECT_EQ(spec["outputs"], json::parse(R"(["conv1", "y"])"));
  const json report = read_json(fs::path(out()) / "import-report.json");
  EXPECT_EQ(report["format"], "padfold-import");
  const json left = {{{"name", "hs"},
                      {"op_type", "Erf"},
                      {"index", 3},
                      {"reason", onnx_import::not_generated_reason("Erf")}}};
  EXPECT_EQ(report["left_to_caller"], left);
  const NpyArray w1 = read_npy_f32(out() + "/weights/conv1_weights.npy");
  EXPECT_EQ(w1.shape, (std::vector<int64_t>{4, 2, 3, 3}));
  EXPECT_EQ(w1.data, test_values(4 * 2 * 3 * 3));
  const NpyArray b1 = read_npy_f32(out() + "/weights/conv1_bias.npy");
  EXPECT_EQ(b1.shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(read_npy_f32(out() + "/weights/y_weights.npy").shape,
            (std::vector<int64_t>{4, 4, 4, 4}));
  EXPECT_FALSE(fs::exists(out() + "/weights/y_bias.npy"));
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(out()))
    files.push_back(fs::relative(e.path(), out()).string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"import-report.json", "model.json", "weights",
                                             "weights/conv1_bias.npy", "weights/conv1_weights.npy",
                                             "weights/y_weights.npy"}));
}

TEST_F(ImportCli, SpecPassesPadfoldCheck) {
  ASSERT_EQ(import(small_model(), "-o " + shell_quote(out())).status, 0);
  // The graph spec it writes (docs/model-graph.md), weight files included, passes padfold check.
  const auto check =
      run_command(shell_quote(PADFOLD_BIN) + " check " + shell_quote(out() + "/model.json"));
  EXPECT_EQ(check.status, 0) << check.output;
  // Its Erf is left to the caller: the kernels check, the whole model cannot run.
  EXPECT_TRUE(
      contains(check.output, "whole-model run: no: input 'h' comes from ONNX node 'hs' (Erf)"))
      << check.output;
}

// x -> Conv -> Erf -> y: the conv's output is a model output only because the Erf, left to
// the caller, reads it. The spec marks it read_by; `run --model` refuses, naming the node, and
// writes the conv's tensor with --partial (it once ran with rc 0 as if that were the model's y).
TEST_F(ImportCli, TailLeftToTheCallerRunsWholeOnlyWithPartial) {
  ModelBuilder b;
  b.input("x", {1, 2, 6, 6}).output("y");
  b.initializer("w", {3, 2, 3, 3}).initializer("bias", {3});
  b.node("Conv", {"x", "w", "bias"}, {"t"}, "conv").ints("pads", {1, 1, 1, 1});
  b.node("Erf", {"t"}, {"y"}, "sig");
  ASSERT_EQ(import(b, "-o " + shell_quote(out())).status, 0);
  const json spec = read_json(fs::path(out()) / "model.json");
  EXPECT_EQ(spec["outputs"], json::parse(R"(["conv"])"));
  // The conv computes channels last; the output the caller's node reads is its NCHW transpose.
  const json& tail = spec["layers"].back();
  EXPECT_EQ(tail["name"], "conv");
  EXPECT_EQ(tail["op"], "transpose");
  EXPECT_EQ(tail["read_by"], "ONNX node 'sig' (Erf)");
  const auto check =
      run_command(shell_quote(PADFOLD_BIN) + " check " + shell_quote(out() + "/model.json"));
  EXPECT_TRUE(contains(check.output,
                       "whole-model run: only in part (--partial): output 'conv' is read by ONNX "
                       "node 'sig' (Erf)"))
      << check.output;

  const std::string bundle = out("bundle");
  const auto c =
      run_command(shell_quote(PADFOLD_BIN) + " compile " + shell_quote(out() + "/model.json") +
                  " -o " + shell_quote(bundle) + " --target host");
  ASSERT_EQ(c.status, 0) << c.output;
  const fs::path x = work_ / "x.npy", y = work_ / "y.npy";
  write_npy_f32(x.string(), {1, 2, 6, 6}, test_values(2 * 6 * 6).data());
  const std::string run = shell_quote(PADFOLD_BIN) + " run " + shell_quote(bundle) +
                          " --model --input " + shell_quote(x.string()) + " --output " +
                          shell_quote(y.string());
  auto r = run_command(run);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output,
                       "--model: output 'conv' is read by ONNX node 'sig' (Erf), which "
                       "padfold does not generate: the model's result comes from there, not from "
                       "'conv'; give --partial to write the tensors padfold computes"))
      << r.output;
  EXPECT_FALSE(fs::exists(y));
  r = run_command(run + " --partial");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "partial: output 'conv' still has to go through ONNX node 'sig' "
                       "(Erf)"))
      << r.output;
  EXPECT_EQ(read_npy_f32(y.string()).shape, (std::vector<int64_t>{1, 3, 6, 6}));
}

TEST_F(ImportCli, ReplacesAnEarlierImportOnly) {
  ASSERT_EQ(import(small_model(), "-o " + shell_quote(out()) + " --name first").status, 0);
  const auto again = import(small_model(), "-o " + shell_quote(out()) + " --name second");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_TRUE(fs::exists(out() + "/second.json"));
  EXPECT_FALSE(fs::exists(out() + "/first.json"));
  fs::create_directories(out("other"));
  std::ofstream(out("other") + "/keep.txt") << "mine";
  const auto refused = import(small_model(), "-o " + shell_quote(out("other")));
  EXPECT_NE(refused.status, 0);
  EXPECT_TRUE(contains(refused.output,
                       "exists and is not a padfold import (no import-report.json "
                       "of format padfold-import)"))
      << refused.output;
  EXPECT_TRUE(fs::exists(out("other") + "/keep.txt"));
  const auto bad_name = import(small_model(), "-o " + shell_quote(out("n")) + " --name 1x");
  EXPECT_NE(bad_name.status, 0);
  EXPECT_TRUE(contains(bad_name.output, "--name '1x': expected a C identifier")) << bad_name.output;
  EXPECT_FALSE(fs::exists(out("n")));
}

TEST_F(ImportCli, EmitOnnxRewritesAutoPad) {
  const std::string normalized = (work_ / "normalized.onnx").string();
  ModelBuilder b;
  b.input("x", {-1, 1, -1, -1}).output("y").output("u");
  b.initializer("w", {1, 1, 4, 4});
  b.node("Conv", {"x", "w"}, {"y"}, "conv").ints("strides", {2, 2}).str("auto_pad", "SAME_UPPER");
  b.initializer("wt", {1, 1, 3, 3});
  b.node("ConvTranspose", {"x", "wt"}, {"u"}, "up")
      .ints("strides", {2, 2})
      .str("auto_pad", "SAME_UPPER");
  const auto r = import(
      b, "-o " + shell_quote(out()) + " --input x=1x1x7x7 --emit-onnx " + shell_quote(normalized));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "normalized node 'conv' (Conv, #0): auto_pad SAME_UPPER -> pads "
                       "[1, 1, 2, 2]"))
      << r.output;
  EXPECT_TRUE(contains(r.output,
                       "normalized node 'up' (ConvTranspose, #1): auto_pad SAME_UPPER "
                       "-> pads [0, 0, 1, 1]"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "ONNX Runtime before 1.13 swapped SAME_UPPER and SAME_LOWER"))
      << r.output;
  std::ifstream f(normalized, std::ios::binary);
  std::stringstream bytes;
  bytes << f.rdbuf();
  const onnx::ModelProto m = onnx_import::parse_model(bytes.str(), normalized);
  const onnx_import::NodeAttributes conv(m.graph().node(0));
  EXPECT_FALSE(conv.has("auto_pad"));
  EXPECT_EQ(conv.get_ints("pads"), (std::vector<int64_t>{1, 1, 2, 2}));
  // The pads hold for the --input size only, which the normalized model states.
  EXPECT_EQ(m.graph().input(0).type().tensor_type().shape().dim(2).dim_value(), 7);

  // A failing import writes neither the directory nor the normalized model.
  fs::remove(normalized);
  const auto bad =
      import(b, "-o " + shell_quote(out("o2")) + " --emit-onnx " + shell_quote(normalized));
  EXPECT_NE(bad.status, 0);
  EXPECT_FALSE(fs::exists(normalized));
  EXPECT_FALSE(fs::exists(out("o2")));
  const auto inside = import(b, "-o " + shell_quote(out("o3")) + " --input x=1x1x7x7 --emit-onnx " +
                                    shell_quote(out("o3") + "/n.onnx"));
  EXPECT_NE(inside.status, 0);
  EXPECT_TRUE(contains(inside.output, "inside -o")) << inside.output;
}

// The old directory is removed once the model is read: a model inside -o is refused and kept.
TEST_F(ImportCli, ModelInsideTheOutputIsRefusedAndKept) {
  ASSERT_EQ(import(small_model(), "-o " + shell_quote(out())).status, 0);
  const auto r = import(small_model(), "-o " + shell_quote(out()), "out/mymodel.onnx");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "model " + out() + "/mymodel.onnx: inside -o " + out()))
      << r.output;
  EXPECT_TRUE(fs::exists(work_ / "out" / "mymodel.onnx"));
  EXPECT_TRUE(fs::exists(work_ / "out" / "model.json"));
}

// The layers compute channels last by default and with --layout nhwc, the convs reading the NCHW
// input (and the caller's NCHW tensor) as it is, the change of layout folded into their kernels
// (the user's array keeps its layout); --io-layout nhwc makes the input channels last instead;
// --layout nchw computes channels first and warns of the cost. Bad values are errors naming the
// valid ones, and nothing is written.
TEST_F(ImportCli, LayoutChoosesTheLayersAndIoLayoutTheArrays) {
  ASSERT_EQ(import(small_model(), "-o " + shell_quote(out("plain")) + " --layout nchw").status, 0);
  auto r = import(small_model(), "-o " + shell_quote(out("plain")) + " --layout nchw");
  for (const char* layout : {"", " --layout nhwc"}) {
    SCOPED_TRACE(layout);
    fs::remove_all(work_ / "out");
    r = import(small_model(), "-o " + shell_quote(out()) + layout);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_FALSE(contains(r.output, "warning")) << r.output;
    const json spec = read_json(work_ / "out" / "model.json");
    EXPECT_EQ(spec["inputs"][0]["shape"], json({1, 2, 8, 8}));
    EXPECT_EQ(spec["inputs"][0]["layout"], "NCHW");
    std::map<std::string, json> by_name;
    for (const json& l : spec["layers"]) by_name[l["name"]] = l;
    EXPECT_FALSE(by_name.count("x_nhwc"));  // no transpose layer
    EXPECT_EQ(by_name["conv1_nhwc"]["input"], "x");
    EXPECT_EQ(by_name["conv1_nhwc"]["input_layout"], "NCHW");
    EXPECT_EQ(by_name["conv1_nhwc"]["layout"], "NHWC");
    EXPECT_EQ(by_name["y_nhwc"]["input"], "h");
    EXPECT_EQ(by_name["y_nhwc"]["input_layout"], "NCHW");
    // Channels last, the weights are spatial..., I, O: what the channels-last schedules read best.
    EXPECT_EQ(by_name["conv1_nhwc"]["weight_layout"], "HWIO");
    // The output keeps its name and the model's layout.
    EXPECT_EQ(by_name["conv1"]["op"], "transpose");
    EXPECT_EQ(by_name["conv1"]["layout"], "NCHW");
    EXPECT_EQ(spec["outputs"], json::parse(R"(["conv1", "y"])"));
  }
  const NpyArray plain = read_npy_f32(out("plain") + "/weights/conv1_weights.npy");
  const NpyArray hwio = read_npy_f32(out() + "/weights/conv1_weights.npy");
  ASSERT_EQ(hwio.shape, (std::vector<int64_t>{3, 3, 2, 4}));
  for (int o = 0; o < 4; ++o)
    for (int i = 0; i < 2; ++i)
      for (int t = 0; t < 9; ++t)
        EXPECT_EQ(hwio.data[static_cast<size_t>((t * 2 + i) * 4 + o)],
                  plain.data[static_cast<size_t>((o * 2 + i) * 9 + t)]);
  EXPECT_TRUE(contains(r.output, "model 'model': 4 layer(s)")) << r.output;

  r = import(small_model(), "-o " + shell_quote(out("io")) + " --io-layout nhwc");
  ASSERT_EQ(r.status, 0) << r.output;
  const json io = read_json(work_ / "io" / "model.json");
  EXPECT_EQ(io["inputs"][0]["shape"], json({1, 8, 8, 2}));
  EXPECT_EQ(io["inputs"][0]["layout"], "NHWC");
  EXPECT_NE(io["layers"][0]["op"], "transpose");

  r = import(small_model(), "-o " + shell_quote(out("slow")) + " --layout nchw");
  EXPECT_TRUE(contains(r.output, "computed channels first (NCHW)")) << r.output;

  for (const char* bad : {" --layout nwhc", " --io-layout nwhc"}) {
    r = import(small_model(), "-o " + shell_quote(out("other")) + bad);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_TRUE(contains(r.output, std::string(bad).substr(1, std::string(bad).find(' ', 1) - 1) +
                                       " 'nwhc': expected auto, nchw (channels_first) or nhwc"))
        << r.output;
    EXPECT_FALSE(fs::exists(work_ / "other"));
  }
}

// An import directory is replaced only when it holds nothing but what import writes.
TEST_F(ImportCli, FilesAddedToAnImportDirectoryAreKept) {
  ASSERT_EQ(import(small_model(), "-o " + shell_quote(out())).status, 0);
  std::ofstream(work_ / "out" / "notes.txt") << "keep me";
  const auto r = import(small_model(), "-o " + shell_quote(out()));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "files padfold import does not write: notes.txt;")) << r.output;
  EXPECT_TRUE(fs::exists(work_ / "out" / "notes.txt"));
  fs::remove(work_ / "out" / "notes.txt");
  EXPECT_EQ(import(small_model(), "-o " + shell_quote(out())).status, 0);
}

struct BadModel {
  const char* name;
  std::function<std::string(const fs::path&)> write;  // writes the model, returns extra args
  std::vector<std::string> message;                   // parts the error must contain
};

std::string save(const ModelBuilder& b, const fs::path& p) {
  b.save(p.string());
  return "";
}

TEST_F(ImportCli, BadModelsWriteNothing) {
  const std::vector<BadModel> cases = {
      {"truncated",
       [](const fs::path& p) {
         const std::string bytes = small_model().bytes();
         std::ofstream(p, std::ios::binary) << bytes.substr(0, bytes.size() - 40);
         return std::string();
       },
       {"m.onnx: not a valid ONNX model: the protobuf does not parse"}},
      {"missing_initializer",
       [](const fs::path& p) {
         ModelBuilder b;
         b.input("x", {1, 2, 5, 5}).output("y");
         b.node("Conv", {"x", "w"}, {"y"}, "conv1");
         return save(b, p);
       },
       {"node 'conv1' (Conv, #0): input 1 'w' is not a graph input, an initializer or the output "
        "of any node"}},
      {"pads_and_auto_pad",
       [](const fs::path& p) {
         ModelBuilder b;
         b.input("x", {1, 2, 5, 5}).output("y").initializer("w", {2, 2, 3, 3});
         b.node("Conv", {"x", "w"}, {"y"}, "conv1")
             .ints("pads", {1, 1, 1, 1})
             .str("auto_pad", "SAME_LOWER");
         return save(b, p);
       },
       {"node 'conv1' (Conv, #0): attribute 'pads': [1, 1, 1, 1] together with auto_pad "
        "'SAME_LOWER'"}},
      {"dynamic_without_input",
       [](const fs::path& p) {
         ModelBuilder b;
         b.input("x", {-1, 2, -1, 5}).output("y").initializer("w", {2, 2, 3, 3});
         b.node("Conv", {"x", "w"}, {"y"}, "conv1");
         return save(b, p);
       },
       {"graph input 'x' [?, 2, ?, 5] (dims 0, 2 are dynamic: 'd0', 'd2'): give its size with "
        "--input x=..."}},
      {"opset_18",
       [](const fs::path& p) {
         ModelBuilder b(18);
         b.input("x", {1, 2, 5, 5}).output("y").initializer("w", {2, 2, 3, 3});
         b.node("Conv", {"x", "w"}, {"y"}, "conv1");
         return save(b, p);
       },
       {"field 'opset_import': opset 18 of the default domain; expected at most 17"}},
      {"bad_input_option",
       [](const fs::path& p) {
         save(small_model(), p);
         return std::string("--input x=1x2xeightx8");
       },
       {"--input 'x=1x2xeightx8': size 'eight' is not a positive integer"}},
      {"unknown_input_option",
       [](const fs::path& p) {
         save(small_model(), p);
         return std::string("--input images=1x2x8x8");
       },
       {"--input 'images' names no graph input (the graph inputs are 'x')"}},
  };
  for (const BadModel& c : cases) {
    const fs::path model = work_ / "m.onnx";
    const std::string extra = c.write(model);
    const std::string dir = out(c.name);
    const auto r = run_command(shell_quote(PADFOLD_BIN) + " import " + shell_quote(model.string()) +
                               " -o " + shell_quote(dir) + " " + extra);
    EXPECT_EQ(r.status, 1) << c.name << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "padfold: error: ")) << c.name << ": " << r.output;
    for (const std::string& part : c.message)
      EXPECT_TRUE(contains(r.output, part)) << c.name << ": " << r.output;
    EXPECT_FALSE(fs::exists(dir)) << c.name;
    expect_nothing_written();
  }
}

// libonnx's shape inference runs in a child process: its crash is an import error, and neither
// the output nor the child's temporary file is left behind (TMPDIR is the work directory).
TEST_F(ImportCli, ACrashInShapeInferenceIsAnErrorAndWritesNothing) {
  for (const std::string fault : {"sigsegv", "abort"}) {
    small_model().save((work_ / "m.onnx").string());
    const auto r =
        run_command("TMPDIR=" + shell_quote(work_.string()) +
                    " PADFOLD_INJECT_COMPILE_FAULT=onnx-shape-inference:" + fault + " " +
                    shell_quote(PADFOLD_BIN) + " import " +
                    shell_quote((work_ / "m.onnx").string()) + " -o " + shell_quote(out()));
    EXPECT_EQ(r.status, 1) << r.output;
    // Under ASan (scripts/sanitize.sh) its handler turns the SIGSEGV into an abort.
    EXPECT_TRUE(contains(r.output, "m.onnx: ONNX shape inference failed: crashed with SIG" +
                                       std::string(fault == "abort" ? "ABRT" : "")))
        << r.output;
    EXPECT_FALSE(fs::exists(out()));
    expect_nothing_written();
  }
  const auto r = run_command(
      "TMPDIR=" + shell_quote(work_.string()) + " " + shell_quote(PADFOLD_BIN) + " import " +
      shell_quote((work_ / "m.onnx").string()) + " -o " + shell_quote(out()));
  EXPECT_EQ(r.status, 0) << r.output;  // the same model without the fault
  EXPECT_TRUE(fs::exists(out() + "/m.json"));
}

}  // namespace
}  // namespace padfold::onnx_test
