// The runtime with GPU targets: the CPU fallback when no device is usable, the error when no
// target is, device memory freed after every run, and device errors named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/npy.h"
#include "bundle_util.h"
#include "compile/target.h"
#include "gpu_util.h"

namespace padfold::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string tiny_spec() {
  std::ifstream f(PADFOLD_TINY_SPEC);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Every kernel of the bundle against the reference.
void expect_kernels_match(pf_bundle* bundle, const Model& model) {
  char err[PF_ERRLEN] = "";
  unsigned seed = 7;
  for (const Layer& L : model.layers) {
    const pf_kernel_desc* k = nullptr;
    ASSERT_EQ(pf_bundle_find(bundle, L.name.c_str(), &k, err, sizeof err), PF_OK) << err;
    const LayerCase c = make_layer_case(L, seed++);
    std::vector<float> out;
    std::string msg;
    ASSERT_EQ(run_case(k, c, out, msg), PF_OK) << L.name << ": " << msg;
    EXPECT_TRUE(matches_reference(c.reference, out.data(), out.size(), L.name));
  }
}

TEST(GpuTargets, NamesResolveToCudaOrOpenClWithTheHostCpu) {
  using T = Halide::Target;
  const T cpu = host_target();
  const T cuda = resolve_target("host-cuda");
  EXPECT_TRUE(cuda.has_feature(T::CUDA));
  EXPECT_TRUE(cuda.has_feature(kDefaultCudaCapability));
  EXPECT_EQ(cuda_arch_name(cuda), "sm_86");
  EXPECT_EQ(device_api_name(cuda), "cuda");
  EXPECT_EQ(cpu_feature_names(cuda), cpu_feature_names(cpu));  // the device asks nothing of it
  const T cuda80 = resolve_target("host-cuda-cuda_capability_80");
  EXPECT_EQ(cuda_arch_name(cuda80), "sm_80");
  EXPECT_FALSE(cuda80.has_feature(T::CUDACapability86));
  const T ocl = resolve_target("host-opencl");
  EXPECT_EQ(device_api_name(ocl), "opencl");
  EXPECT_EQ(cuda_arch_name(ocl), "");
  EXPECT_EQ(device_api_name(cpu), "");
  EXPECT_EQ(cuda_arch_name(resolve_target("x86-64-linux-sse41-cuda")), "sm_86");
  for (const char* bad :
       {"host-metal", "host-vulkan", "host-cuda-opencl", "x86-64-linux-d3d12compute"}) {
    try {
      resolve_target(bad);
      ADD_FAILURE() << bad << " resolved";
    } catch (const std::exception& e) {
      EXPECT_TRUE(contains(e.what(), std::string("target '") + bad + "'")) << e.what();
    }
  }
}

TEST(GpuRuntime, CudaBundleFallsBackToTheCpuWithoutADevice) {
  const NoCudaDriver no_driver;
  const std::string spec = tiny_spec();
  const fs::path dir = compile_test_bundle("fallback", spec, {"host-cuda", "host"});
  char err[PF_ERRLEN] = "";
  pf_bundle* bundle = nullptr;
  ASSERT_EQ(pf_bundle_open(dir.c_str(), nullptr, &bundle, err, sizeof err), PF_OK) << err;
  const std::string chosen = pf_bundle_target(bundle);
  EXPECT_FALSE(contains(chosen, "cuda")) << chosen;
  expect_kernels_match(bundle, parse_spec(spec, "tiny.json"));
  pf_bundle_close(bundle);
}

TEST(GpuRuntime, NoUsableTargetNamesEachTargetAndWhy) {
  const NoCudaDriver no_driver;
  const fs::path dir = compile_test_bundle("cuda_only", tiny_spec(), {"host-cuda"});
  std::ifstream f(dir / "manifest.json");
  const std::string target = json::parse(f)["targets"][0]["target"];
  char err[PF_ERRLEN] = "";
  pf_bundle* bundle = nullptr;
  EXPECT_EQ(pf_bundle_open(dir.c_str(), nullptr, &bundle, err, sizeof err), PF_ERR_NO_TARGET);
  EXPECT_EQ(bundle, nullptr);
  const std::string msg = err;
  EXPECT_TRUE(contains(msg, "no target of bundle")) << msg;
  EXPECT_TRUE(contains(msg, "target " + target +
                                " needs a CUDA device: the CUDA driver cannot "
                                "be loaded"))
      << msg;
  EXPECT_TRUE(contains(msg, "--target host")) << msg;
}

// `padfold run` on an OpenCL bundle: the output file matches the reference.
TEST(GpuRuntime, PadfoldRunRunsAGpuBundleOnNpyFiles) {
  const std::string spec = tiny_spec();
  const fs::path dir = compile_test_bundle("cli", spec, {"host-opencl"});
  const Model model = parse_spec(spec, "tiny.json");
  const Layer& stem = model.layers[0];
  const LayerCase c = make_layer_case(stem, 5);
  const char* names[] = {"x.npy", "w.npy", "b.npy"};
  std::string cmd =
      std::string(PADFOLD_BIN) + " run " + shell_quote(dir.string()) + " --layer stem";
  const char* flags[] = {" --input ", " --weights ", " --bias "};
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const std::string path = (dir.parent_path() / names[i]).string();
    write_npy_f32(path, c.inputs[i].shape, c.inputs[i].data.data());
    cmd += flags[i] + shell_quote(path);
  }
  const std::string out = (dir.parent_path() / "y.npy").string();
  const CommandResult r = run_command(cmd + " --output " + shell_quote(out));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "opencl")) << r.output;
  const NpyArray y = read_npy_f32(out);
  EXPECT_EQ(y.shape, stem.output_shape_full());
  EXPECT_TRUE(matches_reference(c.reference, y.data.data(), y.data.size(), "padfold run stem"));
}

// Resident memory in bytes (Linux).
int64_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

const char* const kBigSpec = R"({"model": "big", "layers": [
  {"name": "conv", "op": "conv2d", "input_shape": [1, 128, 128, 16], "layout": "NHWC",
   "out_channels": 16, "kernel": 3, "padding": "same", "border": "reflect"}]})";

// 4 MiB of device buffers a run: kept after each run, 200 runs would hold 800 MiB more.
TEST(GpuRuntime, RunsFreeTheirDeviceMemory) {
  const fs::path dir = compile_test_bundle("big", kBigSpec, {"host-opencl"});
  const Model model = parse_spec(kBigSpec, "big.json");
  char err[PF_ERRLEN] = "";
  pf_bundle* bundle = nullptr;
  ASSERT_EQ(pf_bundle_open(dir.c_str(), nullptr, &bundle, err, sizeof err), PF_OK) << err;
  const pf_kernel_desc* k = pf_bundle_kernel(bundle, 0);
  const LayerCase c = make_layer_case(model.layers[0], 3);
  std::vector<float> out;
  std::string msg;
  for (int i = 0; i < 10; ++i) ASSERT_EQ(run_case(k, c, out, msg), PF_OK) << msg;
  const int64_t before = resident_bytes();
  for (int i = 0; i < 200; ++i) ASSERT_EQ(run_case(k, c, out, msg), PF_OK) << msg;
  const int64_t grown = resident_bytes() - before;
  EXPECT_LT(grown, int64_t{64} << 20) << "resident memory grew by " << (grown >> 20) << " MiB";
  EXPECT_TRUE(matches_reference(c.reference, out.data(), out.size(), "conv"));
  pf_bundle_close(bundle);
}

// Run with HL_OCL_DEVICE_TYPE=gpu (PoCL has CPU devices only): Halide's OpenCL runtime finds no
// device, and pf_run's message names the kernel and the OpenCL call that failed.
TEST(GpuRuntimeDeviceError, NamesTheKernelAndTheDeviceCall) {
  const char* type = std::getenv("HL_OCL_DEVICE_TYPE");
  ASSERT_TRUE(type && std::string(type) == "gpu") << "run with HL_OCL_DEVICE_TYPE=gpu";
  const fs::path dir = compile_test_bundle("device_error", tiny_spec(), {"host-opencl"});
  char err[PF_ERRLEN] = "";
  pf_bundle* bundle = nullptr;
  ASSERT_EQ(pf_bundle_open(dir.c_str(), nullptr, &bundle, err, sizeof err), PF_OK) << err;
  const Model model = parse_spec(tiny_spec(), "tiny.json");
  const pf_kernel_desc* k = nullptr;
  ASSERT_EQ(pf_bundle_find(bundle, "stem", &k, err, sizeof err), PF_OK) << err;
  const LayerCase c = make_layer_case(model.layers[0], 1);
  std::vector<float> out;
  std::string msg;
  EXPECT_EQ(run_case(k, c, out, msg), PF_ERR_KERNEL);
  EXPECT_TRUE(contains(msg, "kernel 'stem' (pf_4_tiny_stem)")) << msg;
  EXPECT_TRUE(contains(msg, "OpenCL error")) << msg;
  EXPECT_TRUE(contains(msg, "clGetDeviceIDs")) << msg;
  std::cout << msg << "\n";
  pf_bundle_close(bundle);
}

}  // namespace
}  // namespace padfold::testing
