// `padfold bench`: what it measures and reports (not how fast): the whole model and every kernel
// at each thread count, GFLOP/s and peak shares consistent with the manifest's flops and the
// measured FMA peak, bytes per second and bandwidth shares consistent with the manifest's buffers
// and the measured bandwidth, one kernel with --layer, and clear errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "bundle_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using padfold::testing::contains;
using padfold::testing::run_command;
using padfold::testing::shell_quote;

// One folder per process: ctest runs each test of this suite as a process of its own, two at a
// time, and each compiles the bundle in SetUpTestSuite; a shared folder was removed under the
// other.
const fs::path kWork = fs::path(PF_WORK_DIR) / std::to_string(getpid());

std::string padfold_cmd(const std::string& args) {
  return shell_quote(PADFOLD_BIN) + " " + args;
}

// A manifest kernel's buffers' bytes, from their shapes and dtypes.
double manifest_bytes(const json& kernel) {
  const std::map<std::string, double> size{
      {"float32", 4}, {"float16", 2}, {"int8", 1}, {"uint8", 1}, {"int32", 4}};
  double bytes = 0;
  for (const json& b : kernel["buffers"]) {
    double n = size.at(b["dtype"].get<std::string>());
    for (const json& d : b["shape"]) n *= d.get<double>();
    bytes += n;
  }
  return bytes;
}

class BenchCli : public ::testing::Test {
 protected:
  // A Keras model as tf2onnx converts it (weights in files): imported and compiled once.
  static void SetUpTestSuite() {
    fs::remove_all(kWork);
    fs::create_directories(kWork);
    const std::string onnx = std::string(PADFOLD_REPO_DIR) + "/tests/data/keras/conv_pool.onnx";
    auto r = run_command(padfold_cmd("import " + shell_quote(onnx) + " -o " +
                                     shell_quote((kWork / "imported").string())));
    ASSERT_EQ(r.status, 0) << r.output;
    r = run_command(padfold_cmd("compile " +
                                shell_quote((kWork / "imported/conv_pool.json").string()) + " -o " +
                                shell_quote(bundle())));
    ASSERT_EQ(r.status, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(kWork); }
  static std::string bundle() { return (kWork / "bundle").string(); }

  static json bench_json(const std::string& args) {
    const auto r =
        run_command(padfold_cmd("bench " + shell_quote(bundle()) +
                                " --min-time 0.01 --retries 0 --json " + args + " 2>/dev/null"));
    EXPECT_EQ(r.status, 0) << r.output;
    return json::parse(r.output);
  }
  static json manifest() {
    std::ifstream f(bundle() + "/manifest.json");
    return json::parse(f);
  }
};

// Thread counts are timed in increasing order, whatever order they are given in: Halide's thread
// pool keeps the workers it has started.
TEST_F(BenchCli, TimesTheModelAndEveryKernelAtEachThreadCount) {
  const json j = bench_json("--threads 2,1,2");
  const json m = manifest();
  const double peak = j["fma_peak"]["gflops_per_core"].get<double>();
  EXPECT_GT(peak, 0);
  EXPECT_FALSE(j["fma_peak"]["isa"].get<std::string>().empty());
  EXPECT_FALSE(j["cpu"].get<std::string>().empty());
  ASSERT_EQ(j["runs"].size(), 2u);
  for (size_t t = 0; t < 2; ++t) {
    const json& run = j["runs"][t];
    EXPECT_EQ(run["threads"], static_cast<int>(t + 1));
    EXPECT_GT(run["model_median_ms"].get<double>(), 0);
    EXPECT_GT(run["model_per_run_allocation_median_ms"].get<double>(), 0);
    ASSERT_EQ(run["kernels"].size(), m["kernels"].size());
    for (size_t i = 0; i < m["kernels"].size(); ++i) {
      const json& k = run["kernels"][i];
      const json& mk = m["kernels"][i];
      EXPECT_EQ(k["layer"], mk["layer"]);
      EXPECT_EQ(k["op"], mk["op"]);
      EXPECT_DOUBLE_EQ(k["mflops"].get<double>(), mk["flops"].get<double>() / 1e6);
      const double ms = k["median_ms"].get<double>();
      ASSERT_GT(ms, 0);
      // MFLOP per ms is GFLOP/s; the share is of the peak of as many cores as threads.
      EXPECT_NEAR(k["gflops"].get<double>(), k["mflops"].get<double>() / ms, 1e-9);
      EXPECT_NEAR(k["peak_share"].get<double>(),
                  k["gflops"].get<double>() / (peak * static_cast<double>(t + 1)), 1e-9);
      // Bytes: every buffer of the manifest once; their rate a share of the measured bandwidth.
      EXPECT_DOUBLE_EQ(k["mbytes"].get<double>(), manifest_bytes(mk) / 1e6) << mk;
      EXPECT_NEAR(k["gbps"].get<double>(), k["mbytes"].get<double>() / ms, 1e-9);
      const double bandwidth = run["memory_bandwidth_gbps"].get<double>();
      ASSERT_GT(bandwidth, 0);
      EXPECT_NEAR(k["bandwidth_share"].get<double>(), k["gbps"].get<double>() / bandwidth, 1e-9);
      // The roofline: fewer flops per byte than the peak's per byte of bandwidth is memory-bound.
      const double balance = peak * static_cast<double>(t + 1) / bandwidth;
      EXPECT_EQ(k["bound"], k["mflops"].get<double>() / k["mbytes"].get<double>() < balance
                                ? "memory"
                                : "compute")
          << k;
    }
  }
}

TEST_F(BenchCli, LayerTimesOneKernelAndNotTheModel) {
  const std::string layer = manifest()["kernels"][0]["layer"];
  const json j = bench_json("--layer " + layer);
  ASSERT_EQ(j["runs"].size(), 1u);
  ASSERT_EQ(j["runs"][0]["kernels"].size(), 1u);
  EXPECT_EQ(j["runs"][0]["kernels"][0]["layer"], layer);
  EXPECT_TRUE(j["runs"][0]["model_median_ms"].is_null());
  EXPECT_TRUE(j["runs"][0]["model_per_run_allocation_median_ms"].is_null());
}

TEST_F(BenchCli, TheTableNamesEveryKernelAndThePeak) {
  const auto r = run_command(
      padfold_cmd("bench " + shell_quote(bundle()) + " --min-time 0.01 --retries 0 2>/dev/null"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "FMA peak")) << r.output;
  EXPECT_TRUE(contains(r.output, "memory bandwidth (1 thread(s) copying)")) << r.output;
  EXPECT_TRUE(contains(r.output, "model: median")) << r.output;
  for (const json& k : manifest()["kernels"])
    EXPECT_TRUE(contains(r.output, k["layer"].get<std::string>())) << r.output;
}

// --model-only times the whole model and no kernel; a bundle that cannot run whole is an error.
TEST_F(BenchCli, ModelOnlyTimesTheModelAlone) {
  const json j = bench_json("--model-only --threads 1");
  EXPECT_GT(j["runs"][0]["model_median_ms"].get<double>(), 0);
  EXPECT_TRUE(j["runs"][0]["kernels"].empty());
  const std::string tiny = (kWork / "tiny_model_only").string();
  auto r = run_command(
      padfold_cmd("compile " + shell_quote(std::string(PADFOLD_REPO_DIR) + "/examples/tiny.json") +
                  " -o " + shell_quote(tiny)));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(padfold_cmd("bench " + shell_quote(tiny) + " --model-only 2>&1"));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "--model-only: bundle " + tiny + " does not run whole"))
      << r.output;
}

TEST_F(BenchCli, AModelWithoutWeightsIsTimedKernelByKernelAndSaysWhy) {
  const std::string tiny = (kWork / "tiny").string();
  auto r = run_command(
      padfold_cmd("compile " + shell_quote(std::string(PADFOLD_REPO_DIR) + "/examples/tiny.json") +
                  " -o " + shell_quote(tiny)));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(padfold_cmd("bench " + shell_quote(tiny) +
                              " --min-time 0.01 --retries 0 --json 2>/dev/null"));
  ASSERT_EQ(r.status, 0) << r.output;
  const json j = json::parse(r.output);
  EXPECT_TRUE(contains(j["model_not_timed"].get<std::string>(), "weights")) << j.dump();
  EXPECT_EQ(j["runs"][0]["kernels"].size(), 4u);
}

TEST_F(BenchCli, BadRequestsAreErrorsThatSayWhat) {
  struct Case {
    std::string args, message;
  } cases[] = {
      {shell_quote(bundle()) + " --layer nope", "has no kernel 'nope'; it has"},
      {shell_quote(bundle()) + " --threads 0", "--threads '0'"},
      {shell_quote(bundle()) + " --threads 1,,2", "--threads '1,,2'"},
      {shell_quote((kWork / "missing").string()), "cannot be opened"},
      {shell_quote(bundle()) + " --layer x --model", "excludes"},
  };
  for (const Case& c : cases) {
    const auto r = run_command(padfold_cmd("bench " + c.args + " 2>&1"));
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << "\n" << r.output;
  }
}

// --pool: padfold's pool by default, Halide's on request, and both side by side (the model timed on
// each); --spin-us tunes padfold's pool only.
TEST_F(BenchCli, PoolNamesTheThreadPoolTimed) {
  EXPECT_EQ(bench_json("--model-only --threads 2")["pool"], "padfold");
  EXPECT_EQ(bench_json("--model-only --threads 2 --pool halide")["pool"], "halide");
  const json both = bench_json("--model-only --threads 1,2 --pool both --spin-us 0");
  EXPECT_EQ(both["pool"], "both");
  for (const json& run : both["runs"]) {
    EXPECT_GT(run["model_median_ms"].get<double>(), 0) << run.dump();
    EXPECT_GT(run["model_halide_pool_median_ms"].get<double>(), 0) << run.dump();
  }
  const std::string b = shell_quote(bundle());
  const std::pair<std::string, std::string> bad[] = {
      {b + " --pool openmp", "--pool"},
      {b + " --spin-us -1", "--spin-us"},
      {b + " --spin-us 1000001", "--spin-us"},
      {b + " --pool halide --spin-us 10", "--spin-us sets padfold's pool, not Halide's"},
  };
  for (const auto& [args, message] : bad) {
    const auto r = run_command(padfold_cmd("bench " + args + " 2>&1"));
    EXPECT_NE(r.status, 0) << args;
    EXPECT_TRUE(contains(r.output, message)) << args << "\n" << r.output;
  }
}

// --min-time is seconds in (0, 60], as tune's: NaN never ended the timing loop and 1e300 ran until
// killed; 0 printed a 309-digit range.
TEST_F(BenchCli, MinTimeIsFiniteSecondsUpToAMinute) {
  for (const char* t : {"nan", "inf", "1e300", "0", "-1", "61", "x"}) {
    const auto r =
        run_command("timeout 30 " + padfold_cmd("bench " + shell_quote(bundle()) +
                                                " --retries 0 --min-time " + t + " 2>&1"));
    EXPECT_NE(r.status, 0) << t;
    EXPECT_NE(r.status, 124) << t << ": still timing after 30 s";
    EXPECT_TRUE(contains(r.output, "--min-time: '" + std::string(t) +
                                       "' is not a time to measure for; expected seconds, a "
                                       "number in (0, 60]"))
        << r.output;
    EXPECT_LT(r.output.size(), 300u) << r.output;
  }
}

// A copy of the bundle with its manifest changed by `edit` (the runtime accepts these changes).
std::string edited_copy(const std::string& bundle, const std::string& name,
                        const std::function<void(json&)>& edit) {
  const fs::path copy = kWork / name;
  fs::remove_all(copy);
  fs::copy(bundle, copy, fs::copy_options::recursive);
  json m;
  {
    std::ifstream f(copy / "manifest.json");
    m = json::parse(f);
  }
  edit(m);
  std::ofstream(copy / "manifest.json") << m.dump();
  return copy.string();
}

// Flops the runtime does not read are printed only where they are a count: a damaged manifest's
// huge, negative or non-numeric flops are n/a (null in JSON), never a negative GFLOP/s.
TEST_F(BenchCli, DamagedFlopsAreNotApplicable) {
  const std::string copy = edited_copy(bundle(), "flops", [](json& m) {
    m["kernels"][0]["flops"] = 1e300;
    m["kernels"][1]["flops"] = -5e9;
    m["kernels"][2]["flops"] = "many";
  });
  auto r = run_command(padfold_cmd("bench " + shell_quote(copy) +
                                   " --threads 1 --min-time 0.01 --retries 0 --json 2>/dev/null"));
  ASSERT_EQ(r.status, 0) << r.output;
  const json j = json::parse(r.output);
  for (size_t k = 0; k < 3; ++k) {
    const json& kernel = j["runs"][0]["kernels"][k];
    EXPECT_TRUE(kernel["mflops"].is_null()) << kernel;
    EXPECT_TRUE(kernel["gflops"].is_null()) << kernel;
    EXPECT_TRUE(kernel["peak_share"].is_null()) << kernel;
  }
  r = run_command(padfold_cmd("bench " + shell_quote(copy) +
                              " --threads 1 --min-time 0.01 --retries 0 2>/dev/null"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "n/a")) << r.output;
  EXPECT_FALSE(contains(r.output, " -")) << r.output;
  EXPECT_FALSE(contains(r.output, " inf")) << r.output;
}

// A model whose outputs ops left to the caller still read (graph.read_by) is timed as padfold's
// part of it, and said to be partial.
TEST_F(BenchCli, AModelWithOutputsLeftToTheCallerIsPartial) {
  const std::string output = manifest()["graph"]["outputs"][0];
  const std::string copy = edited_copy(bundle(), "partial", [&](json& m) {
    m["graph"]["read_by"] = {{output, "ONNX node 'sm' (Softmax)"}};
  });
  auto r = run_command(padfold_cmd("bench " + shell_quote(copy) +
                                   " --threads 1 --min-time 0.01 --retries 0 --json 2>/dev/null"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(json::parse(r.output)["model_partial"][output], "ONNX node 'sm' (Softmax)");
  r = run_command(padfold_cmd("bench " + shell_quote(copy) +
                              " --threads 1 --min-time 0.01 --retries 0 2>/dev/null"));
  EXPECT_TRUE(contains(r.output, "model (partial): median")) << r.output;
  EXPECT_TRUE(contains(r.output, "output '" + output + "' still goes through ONNX node 'sm'"))
      << r.output;
  EXPECT_FALSE(json::parse(run_command(padfold_cmd("bench " + shell_quote(bundle()) +
                                                   " --threads 1 --min-time 0.01 --retries 0 "
                                                   "--json 2>/dev/null"))
                               .output)
                   .contains("model_partial"));
}

}  // namespace
