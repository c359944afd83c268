// GPU kernels over a subset of the op x convention x border x layout matrix where every op,
// convention, border mode and layout appears: OpenCL kernels run on PoCL through the C runtime
// and are compared element-wise with the naive reference; the CUDA kernels of the same matrix are
// compiled and their PTX assembled with ptxas for the default capability (sm_86) and for sm_90
// (an H200). PADFOLD_GPU_FULL_MATRIX=1 takes every case of the matrix (the gpu_full test).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "bundle_util.h"
#include "gpu_cases.h"
#include "gpu_util.h"

namespace padfold::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Every layer of the set, compiled for OpenCL with its knob overrides, run on PoCL on random data
// and compared element-wise with the reference. Returns how many ran.
int run_every_layer_on_pocl(const CaseSet& set) {
  const Model model = parse_spec(set.spec, set.name + ".json");
  const fs::path dir =
      compile_test_bundle(set.name, set.spec, {"host-opencl"}, false, set.overrides);
  char err[PF_ERRLEN] = "";
  pf_bundle* bundle = nullptr;
  EXPECT_EQ(pf_bundle_open(dir.c_str(), nullptr, &bundle, err, sizeof err), PF_OK) << err;
  if (!bundle) return 0;
  EXPECT_TRUE(contains(pf_bundle_target(bundle), "opencl")) << pf_bundle_target(bundle);
  unsigned seed = 1;
  int ran = 0;
  for (const Layer& L : model.layers) {
    const pf_kernel_desc* k = nullptr;
    EXPECT_EQ(pf_bundle_find(bundle, L.name.c_str(), &k, err, sizeof err), PF_OK) << err;
    if (!k) break;
    EXPECT_NE(k->device, nullptr) << L.name;
    const LayerCase c = make_layer_case(L, seed++);
    std::vector<float> out;
    std::string msg;
    EXPECT_EQ(run_case(k, c, out, msg), PF_OK) << L.name << ": " << msg;
    EXPECT_TRUE(matches_reference(c.reference, out.data(), out.size(), L.name)) << set.describe(L);
    ++ran;
  }
  pf_bundle_close(bundle);
  return ran;
}

TEST(GpuMatrix, OpenClKernelsOnPoclMatchTheReference) {
  const CaseSet& set = matrix_cases();
  std::cout << set.layers << " layers (matrix cases, tile tails, joins) on host-opencl\n";
  EXPECT_EQ(run_every_layer_on_pocl(set), set.layers);
}

TEST(GpuMatrix, WindowsWiderThanTheInputOnPoclMatchTheReference) {
  const CaseSet set = wide_window_cases(48, 2026);
  EXPECT_EQ(run_every_layer_on_pocl(set), set.layers);
}

TEST(GpuMatrix, RandomInRangeKnobsOnPoclMatchTheReference) {
  const CaseSet set = random_knob_cases(99);
  EXPECT_EQ(run_every_layer_on_pocl(set), set.layers);
}

#ifdef PADFOLD_PTXAS
TEST(GpuMatrix, CudaKernelsPtxAssemblesForSm86AndSm90) {
  const CaseSet& set = matrix_cases();
  const Model model = parse_spec(set.spec, "gpu_matrix.json");
  const fs::path dir = compile_test_bundle("cuda", set.spec, {"host-cuda"}, true, set.overrides);
  std::ifstream f(dir / "manifest.json");
  const json manifest = json::parse(f);
  const json& target = manifest["targets"][0];
  EXPECT_EQ(target["device_api"], "cuda");
  EXPECT_EQ(target["cuda_arch"], "sm_86");
  EXPECT_EQ(target["cuda_jit_max_registers"], 128);
  const fs::path tdir = dir / target["dir"].get<std::string>();
  int assembled = 0;
  for (const Layer& L : model.layers) {
    const fs::path ptx = tdir / (L.name + ".ptx");
    ASSERT_TRUE(fs::is_regular_file(ptx)) << ptx;
    for (const char* arch : {"sm_86", "sm_90"}) {
      const CommandResult r =
          run_command(std::string(PADFOLD_PTXAS) + " -arch=" + arch + " " + shell_quote(ptx) +
                      " -o " + shell_quote((tdir / (L.name + "." + arch + ".cubin")).string()));
      EXPECT_EQ(r.status, 0) << L.name << " " << arch << ":\n" << r.output;
      assembled += r.status == 0;
    }
  }
  EXPECT_EQ(assembled, 2 * set.layers);
  // The bordered input is staged in shared memory, except where the tile is too large.
  auto ptx_text = [&](const std::string& layer) {
    std::ifstream in(tdir / (layer + ".ptx"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_TRUE(contains(ptx_text("tail0"), ".shared")) << "tail0: nothing staged";
  EXPECT_TRUE(contains(ptx_text("c0"), ".shared")) << "c0: nothing staged";
  EXPECT_FALSE(contains(ptx_text("tail7"), ".shared")) << "tail7: a 110 KiB tile staged";
}
#endif

}  // namespace
}  // namespace padfold::testing
