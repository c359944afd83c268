// The embedded example (examples/embedded) built with cross toolchains and run under qemu-user,
// compared element-wise with the naive reference on the same deterministic data (lcg.h).
//
// Per architecture, at test time: `padfold compile examples/embedded/model.json --target <t>`, then
// configure and build examples/embedded with its toolchain file (the bundle's generated
// padfold_embedded.cmake, static registry), run the program under qemu, read the outputs it writes
// (<layer>.bin) and compare them with the reference. A missing cross compiler or qemu fails the
// test with the Debian package to install (scripts/setup-debian.sh installs them).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bundle_util.h"
#include "frontend/spec.h"
#include "kernel_runner.h"
#include "lcg.h"  // examples/embedded/lcg.h

namespace {

namespace fs = std::filesystem;
using padfold::testing::contains;
using padfold::testing::have_program;
using padfold::testing::run_command;
using padfold::testing::shell_quote;

struct CrossArch {
  const char* name;           // test name
  const char* halide_target;  // padfold compile --target
  const char* triple;         // GNU triple: toolchain-<triple>.cmake, <triple>-gcc, /usr/<triple>
  const char* qemu;           // qemu-user binary
  const char* compiler_package;  // Debian package of <triple>-gcc
  bool link_static;              // PADFOLD_EXAMPLE_STATIC: run without qemu -L
  const char* qemu_cpu = "";     // qemu -cpu, when the default CPU lacks what the target needs
};

const CrossArch kArchs[] = {
    {"aarch64", "arm-64-linux", "aarch64-linux-gnu", "qemu-aarch64", "g++-aarch64-linux-gnu",
     false},
    // Halide's arm-32-linux is ARMv7-A + NEON (cortex-a9, VFPv3), hard-float ABI: Debian armhf.
    {"armhf", "arm-32-linux", "arm-linux-gnueabihf", "qemu-arm", "g++-arm-linux-gnueabihf", true},
    // RV64GCV, lp64d ABI: Halide 21 generates RISC-V code only with the vector extension, so
    // qemu emulates a CPU with 128-bit vectors.
    {"riscv64", "riscv-64-linux-rvv-vector_bits_128", "riscv64-linux-gnu", "qemu-riscv64",
     "g++-riscv64-linux-gnu", false, "rv64,v=true,vlen=128,vext_spec=v1.0"},
};

void PrintTo(const CrossArch& a, std::ostream* os) {
  *os << a.halide_target;
}

std::string name_of(const ::testing::TestParamInfo<CrossArch>& info) {
  return info.param.name;
}

padfold::testing::LayerData lcg_data(const padfold::Layer& L) {
  auto filled = [&](std::vector<int64_t> shape, const char* buffer) {
    padfold::ref::Tensor t(std::move(shape));
    pf_lcg_fill(t.data.data(), t.data.size(), pf_lcg_seed(L.name.c_str(), buffer));
    return t;
  };
  padfold::testing::LayerData d;
  d.input = filled(L.input_shape(), "input");
  if (L.has_weights()) d.weights = filled(L.weight_shape(), "weights");
  if (L.bias) d.bias = filled({L.out_channels}, "bias");
  return d;
}

std::vector<float> read_floats(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<float> v;
  if (!f) return v;
  f.seekg(0, std::ios::end);
  v.resize(static_cast<size_t>(f.tellg()) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

// Runs a step; on failure records its command and output and returns false.
bool step(const std::string& what, const std::string& cmd, std::string* output = nullptr) {
  const auto r = run_command(cmd);
  if (output) *output = r.output;
  if (r.status == 0) return true;
  ADD_FAILURE() << what << " failed (exit " << r.status << ")\ncommand: " << cmd << "\n"
                << r.output;
  return false;
}

class EmbeddedCross : public ::testing::TestWithParam<CrossArch> {};

TEST_P(EmbeddedCross, StaticRegistryUnderQemuMatchesReference) {
  const CrossArch& a = GetParam();
  const std::string gcc = std::string(a.triple) + "-gcc";
  ASSERT_TRUE(have_program(gcc)) << gcc << " not found: install the Debian package "
                                 << a.compiler_package << " (scripts/setup-debian.sh installs it)";
  ASSERT_TRUE(have_program(a.qemu)) << a.qemu << " not found: install the Debian package qemu-user"
                                    << " (scripts/setup-debian.sh installs it)";
  const fs::path sysroot = fs::path("/usr") / a.triple;
  ASSERT_TRUE(fs::exists(sysroot / "lib"))
      << sysroot << "/lib (the target's C library) not found: reinstall " << a.compiler_package;

  const fs::path example = PF_EXAMPLE_DIR;
  const fs::path work = fs::path(PF_WORK_DIR) / a.name;
  const fs::path bundle = work / "bundle", build = work / "build", out = work / "out";
  fs::remove_all(work);
  fs::create_directories(out);

  ASSERT_TRUE(step("padfold compile", std::string(PADFOLD_BIN) + " compile " +
                                          shell_quote((example / "model.json").string()) + " -o " +
                                          shell_quote(bundle.string()) + " --target " +
                                          a.halide_target));
  const std::string toolchain =
      (example / ("toolchain-" + std::string(a.triple) + ".cmake")).string();
  ASSERT_TRUE(
      step("configuring examples/embedded",
           shell_quote(PF_CMAKE) + " -S " + shell_quote(example.string()) + " -B " +
               shell_quote(build.string()) + " -G " + shell_quote(PF_CMAKE_GENERATOR) +
               " -DCMAKE_MAKE_PROGRAM=" + shell_quote(PF_CMAKE_MAKE_PROGRAM) +
               " -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=" + shell_quote(toolchain) +
               " -DPADFOLD_BUNDLE=" + shell_quote(bundle.string()) +
               " -DPADFOLD_EXAMPLE_STATIC=" + (a.link_static ? "ON" : "OFF")));
  ASSERT_TRUE(step("building examples/embedded",
                   shell_quote(PF_CMAKE) + " --build " + shell_quote(build.string())));
  const fs::path app = build / "app";

  // No Halide, LLVM, cJSON or padfold shared library at run time.
  std::string dyn;
  ASSERT_TRUE(
      step("readelf", std::string(a.triple) + "-readelf -d " + shell_quote(app.string()), &dyn));
  for (const char* lib : {"Halide", "LLVM", "cjson", "padfold"})
    EXPECT_FALSE(contains(dyn, lib)) << app << " needs a " << lib << " library:\n" << dyn;
  if (a.link_static) {
    EXPECT_FALSE(contains(dyn, "NEEDED")) << dyn;
  }

  const std::string qemu = std::string(a.qemu) +
                           (*a.qemu_cpu ? std::string(" -cpu ") + a.qemu_cpu : "") +
                           (a.link_static ? "" : " -L " + shell_quote(sysroot.string()));
  std::string printed;
  ASSERT_TRUE(step("running the example under qemu",
                   qemu + " " + shell_quote(app.string()) + " " + shell_quote(out.string()),
                   &printed));
  std::cout << printed;
  EXPECT_TRUE(contains(printed, "model embedded, target " + std::string(a.halide_target) + ","))
      << printed;
  EXPECT_TRUE(contains(printed, "\nok\n")) << printed;

  const padfold::Model model = padfold::load_spec((example / "model.json").string());
  ASSERT_EQ(model.layers.size(), 5u);
  for (const padfold::Layer& L : model.layers) {
    SCOPED_TRACE("layer " + L.name);
    const padfold::ref::Tensor want = padfold::testing::reference_output(L, lcg_data(L));
    const std::vector<float> got = read_floats(out / (L.name + ".bin"));
    ASSERT_FALSE(got.empty()) << "no output " << out / (L.name + ".bin");
    EXPECT_TRUE(padfold::testing::matches_reference(want, got.data(), got.size(),
                                                    std::string(a.halide_target) + " " + L.name));
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, EmbeddedCross, ::testing::ValuesIn(kArchs), name_of);

}  // namespace
