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
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "algorithm/algorithm.h"
#include "base/npy.h"
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

padfold::ref::LayerData lcg_data(const padfold::Layer& L) {
  auto filled = [&](std::vector<int64_t> shape, const char* buffer) {
    padfold::ref::Tensor t(std::move(shape));
    pf_lcg_fill(t.data.data(), t.data.size(), pf_lcg_seed(L.name.c_str(), buffer));
    return t;
  };
  padfold::ref::LayerData d;
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

// The cross compiler, qemu and the target's C library are installed.
void require_tools(const CrossArch& a) {
  const std::string gcc = std::string(a.triple) + "-gcc";
  ASSERT_TRUE(have_program(gcc)) << gcc << " not found: install the Debian package "
                                 << a.compiler_package << " (scripts/setup-debian.sh installs it)";
  ASSERT_TRUE(have_program(a.qemu)) << a.qemu << " not found: install the Debian package qemu-user"
                                    << " (scripts/setup-debian.sh installs it)";
  const fs::path sysroot = fs::path("/usr") / a.triple;
  ASSERT_TRUE(fs::exists(sysroot / "lib"))
      << sysroot << "/lib (the target's C library) not found: reinstall " << a.compiler_package;
}

// Configures examples/embedded for the bundle with the arch's toolchain and builds `program`.
bool build_example(const CrossArch& a, const fs::path& bundle, const fs::path& build,
                   const std::string& model, const std::string& program) {
  const fs::path example = PF_EXAMPLE_DIR;
  const std::string toolchain =
      (example / ("toolchain-" + std::string(a.triple) + ".cmake")).string();
  return step("configuring examples/embedded",
              shell_quote(PF_CMAKE) + " -S " + shell_quote(example.string()) + " -B " +
                  shell_quote(build.string()) + " -G " + shell_quote(PF_CMAKE_GENERATOR) +
                  " -DCMAKE_MAKE_PROGRAM=" + shell_quote(PF_CMAKE_MAKE_PROGRAM) +
                  " -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=" + shell_quote(toolchain) +
                  " -DPADFOLD_BUNDLE=" + shell_quote(bundle.string()) + " -DPADFOLD_MODEL=" +
                  model + " -DPADFOLD_EXAMPLE_STATIC=" + (a.link_static ? "ON" : "OFF")) &&
         step("building examples/embedded", shell_quote(PF_CMAKE) + " --build " +
                                                shell_quote(build.string()) + " --target " +
                                                program);
}

// No Halide, LLVM, cJSON or padfold shared library at run time; nothing at all when static.
void expect_self_contained(const CrossArch& a, const fs::path& app) {
  std::string dyn;
  ASSERT_TRUE(
      step("readelf", std::string(a.triple) + "-readelf -d " + shell_quote(app.string()), &dyn));
  for (const char* lib : {"Halide", "LLVM", "cjson", "padfold"})
    EXPECT_FALSE(contains(dyn, lib)) << app << " needs a " << lib << " library:\n" << dyn;
  if (a.link_static) {
    EXPECT_FALSE(contains(dyn, "NEEDED")) << dyn;
  }
}

// qemu-user for the arch, with a sysroot for dynamic programs.
std::string qemu_command(const CrossArch& a) {
  return std::string(a.qemu) + (*a.qemu_cpu ? std::string(" -cpu ") + a.qemu_cpu : "") +
         (a.link_static ? "" : " -L " + shell_quote((fs::path("/usr") / a.triple).string()));
}

class EmbeddedCross : public ::testing::TestWithParam<CrossArch> {};

TEST_P(EmbeddedCross, StaticRegistryUnderQemuMatchesReference) {
  const CrossArch& a = GetParam();
  ASSERT_NO_FATAL_FAILURE(require_tools(a));
  const fs::path example = PF_EXAMPLE_DIR;
  const fs::path work = fs::path(PF_WORK_DIR) / a.name;
  const fs::path bundle = work / "bundle", build = work / "build", out = work / "out";
  fs::remove_all(work);
  fs::create_directories(out);

  ASSERT_TRUE(step("padfold compile", std::string(PADFOLD_BIN) + " compile " +
                                          shell_quote((example / "model.json").string()) + " -o " +
                                          shell_quote(bundle.string()) + " --target " +
                                          a.halide_target));
  ASSERT_TRUE(build_example(a, bundle, build, "embedded", "app"));
  const fs::path app = build / "app";
  ASSERT_NO_FATAL_FAILURE(expect_self_contained(a, app));

  std::string printed;
  ASSERT_TRUE(
      step("running the example under qemu",
           qemu_command(a) + " " + shell_quote(app.string()) + " " + shell_quote(out.string()),
           &printed));
  std::cout << printed;
  EXPECT_TRUE(contains(printed, "model embedded, target " + std::string(a.halide_target) + ","))
      << printed;
  EXPECT_TRUE(contains(printed, "\nok\n")) << printed;

  const padfold::Model model = padfold::load_spec((example / "model.json").string());
  ASSERT_EQ(model.layers.size(), 5u);
  for (const padfold::Layer& L : model.layers) {
    SCOPED_TRACE("layer " + L.name);
    const padfold::ref::Tensor want = padfold::ref::reference_output(L, lcg_data(L));
    const std::vector<float> got = read_floats(out / (L.name + ".bin"));
    ASSERT_FALSE(got.empty()) << "no output " << out / (L.name + ".bin");
    EXPECT_TRUE(padfold::testing::matches_reference(want, got.data(), got.size(),
                                                    std::string(a.halide_target) + " " + L.name));
  }
}

// ---- the whole model with embedded weights (model_graph.json, model_main.c) ----

// lcg.h's data for a tensor of `shape`, from the seed of "<a>/<b>".
padfold::ref::Tensor lcg_tensor(std::vector<int64_t> shape, const std::string& a,
                                const std::string& b) {
  padfold::ref::Tensor t(std::move(shape));
  pf_lcg_fill(t.data.data(), t.data.size(), pf_lcg_seed(a.c_str(), b.c_str()));
  return t;
}

// Copies model_graph.json into dir and writes the weight files it names there, filled from lcg.h
// ("<layer>/weights", "<layer>/bias"), as make_weights.py does. Returns the spec's path.
fs::path write_graph_spec(const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path spec = dir / "model_graph.json";
  fs::copy_file(fs::path(PF_EXAMPLE_DIR) / "model_graph.json", spec,
                fs::copy_options::overwrite_existing);
  for (const padfold::Layer& L : padfold::load_spec(spec.string()).layers) {
    if (L.weights_file.empty()) continue;
    fs::create_directories(fs::path(L.weights_file).parent_path());
    const auto w = lcg_tensor(L.weight_shape(), L.name, "weights");
    padfold::write_npy_f32(L.weights_file, w.shape, w.data.data());
    if (L.bias) {
      const auto b = lcg_tensor({L.out_channels}, L.name, "bias");
      padfold::write_npy_f32(L.bias_file, b.shape, b.data.data());
    }
  }
  return spec;
}

// The model computed layer by layer with the naive reference (add and concat here), NHWC, on the
// same data as model_main.c: inputs from "<input>/input", weights from "<layer>/weights|bias".
std::map<std::string, padfold::ref::Tensor> graph_reference(const padfold::Model& model) {
  std::map<std::string, padfold::ref::Tensor> t;
  for (const padfold::ModelInput& x : model.inputs)
    t[x.name] = lcg_tensor(x.shape, x.name, "input");
  for (const padfold::Layer& L : model.layers) {
    EXPECT_TRUE(L.layout.channels_last) << L.name;  // the joins below index NHWC
    padfold::ref::Tensor y(L.output_shape_full());
    if (L.op == padfold::Op::Add) {
      for (const std::string& in : L.inputs)
        for (size_t i = 0; i < y.data.size(); i++) y.data[i] += t.at(in).data.at(i);
      EXPECT_EQ(L.activation, padfold::Activation::None) << L.name;
    } else if (L.op == padfold::Op::Concat) {  // along C, the innermost axis of NHWC
      const int64_t c_out = y.shape.back(), pixels = y.numel() / c_out;
      int64_t c0 = 0;
      for (const std::string& in : L.inputs) {
        const padfold::ref::Tensor& x = t.at(in);
        const int64_t c = x.shape.back();
        for (int64_t p = 0; p < pixels; p++)
          for (int64_t k = 0; k < c; k++) y.data[p * c_out + c0 + k] = x.data[p * c + k];
        c0 += c;
      }
    } else {
      padfold::ref::LayerData d;
      d.input = t.at(L.inputs.at(0));
      if (L.has_weights()) d.weights = lcg_tensor(L.weight_shape(), L.name, "weights");
      if (L.bias) d.bias = lcg_tensor({L.out_channels}, L.name, "bias");
      y = padfold::ref::reference_output(L, d);
    }
    t[L.name] = std::move(y);
  }
  return t;
}

// The number in "<prefix><number>" in text, or -1.
long number_after(const std::string& text, const std::string& prefix) {
  const size_t at = text.find(prefix);
  return at == std::string::npos ? -1 : std::stol(text.substr(at + prefix.size()));
}

// What a qemu -strace log says the program asked of the filesystem and the kernel: every path it
// opened (open, openat, openat2, creat) and whether it created a thread (clone, clone3).
struct Syscalls {
  std::vector<std::string> opened;
  bool cloned = false;
};

Syscalls read_strace(const fs::path& log) {
  static const std::regex line(R"(^\d+ (\w+)\((.*)$)"), path(R"re("([^"]*)")re");
  Syscalls s;
  std::ifstream f(log);
  for (std::string l; std::getline(f, l);) {
    std::smatch m, p;
    if (!std::regex_match(l, m, line)) continue;
    const std::string name = m[1], args = m[2];
    if (name == "clone" || name == "clone3") s.cloned = true;
    if (name != "open" && name != "openat" && name != "openat2" && name != "creat") continue;
    const std::string rest = args;  // regex_search needs an lvalue that outlives p
    s.opened.push_back(std::regex_search(rest, p, path) ? p[1].str() : "?" + rest);
  }
  return s;
}

// What the dynamic loader opens to start a program: its cache and the shared libraries it
// searches for (libc.so.6, libm.so.6, ... in each library directory).
bool loader_file(const std::string& path) {
  static const std::regex lib(R"(^/.*/lib[^/]*\.so(\.[0-9]+)*$)");
  return path == "/etc/ld.so.cache" || std::regex_match(path, lib);
}

TEST_P(EmbeddedCross, WholeModelWithEmbeddedWeightsUnderQemuMatchesReference) {
  const CrossArch& a = GetParam();
  ASSERT_NO_FATAL_FAILURE(require_tools(a));
  const fs::path work = fs::path(PF_WORK_DIR) / (std::string(a.name) + "_model");
  const fs::path bundle = work / "bundle", build = work / "build", out = work / "out";
  fs::remove_all(work);
  fs::create_directories(out);
  const fs::path spec = write_graph_spec(work / "spec");

  ASSERT_TRUE(step("padfold compile --embed-weights",
                   std::string(PADFOLD_BIN) + " compile " + shell_quote(spec.string()) + " -o " +
                       shell_quote(bundle.string()) + " --target " + a.halide_target +
                       " --embed-weights"));
  EXPECT_FALSE(fs::exists(bundle / "weights")) << "weights copied into the bundle";
  // The weights are baked in: the spec's .npy files are gone before the program runs.
  fs::remove_all(work / "spec" / "weights");
  ASSERT_TRUE(build_example(a, bundle, build, "embedded_graph", "model_app"));
  const fs::path app = build / "model_app";
  ASSERT_NO_FATAL_FAILURE(expect_self_contained(a, app));

  // qemu -strace writes one line per system call of the program to stderr, kept apart from what
  // the program prints (stdout).
  const fs::path log = work / "strace.log";
  std::string printed;
  ASSERT_TRUE(step("running model_app under qemu -strace",
                   "{ " + qemu_command(a) + " -strace " + shell_quote(app.string()) + " " +
                       shell_quote(out.string()) + " 2>" + shell_quote(log.string()) + "; }",
                   &printed))
      << "strace:\n"
      << std::ifstream(log).rdbuf();
  std::cout << printed;
  EXPECT_TRUE(contains(printed, "model embedded_graph, target " + std::string(a.halide_target) +
                                    ", 5 kernels, 1 inputs, 1 outputs\n"))
      << printed;
  EXPECT_TRUE(contains(printed, "\nok\n")) << printed;

  // The static run: the intermediates in an array of the size the bundle's header states, which
  // is the manifest's plan; not one allocation through the model's or Halide's hooks during it,
  // and the output equal to pf_model_run's bit for bit.
  const nlohmann::json manifest = nlohmann::json::parse(std::ifstream(bundle / "manifest.json"));
  const long arena_bytes = manifest.at("memory_plan").at("arena_bytes").get<long>();
  // stem, pool and join are [1, 8, 7, 8] float32 (1792 bytes each), cat [1, 8, 7, 16] (3584); dw
  // and join are one kernel (the add in dw's epilogue, so dw's output is never stored): while it
  // runs, stem (read again by cat), pool and join are live, and while cat runs stem, join and
  // cat: 7168 bytes, the lower bound, which the plan reaches.
  EXPECT_EQ(arena_bytes, 7168);
  EXPECT_EQ(manifest.at("memory_plan").at("lower_bound"), 7168);
  EXPECT_EQ(number_after(printed, "memory static arena: "), arena_bytes) << printed;
  EXPECT_TRUE(contains(printed, "memory static run: 0 model allocs, 0 halide allocs\n")) << printed;
  EXPECT_TRUE(contains(printed, "static run equals pf_model_run: yes\n")) << printed;

  // Allocations: every one through the arena's hooks, each freed. pf_model_open allocates the
  // model and its plan (6 blocks) and no weights (embedded: used in place); pf_model_run the
  // model's arena, one block holding the 4 intermediates (stem, pool, join, cat; head is the
  // output) as planned.
  const long model_allocs = number_after(printed, "memory model: ");
  EXPECT_EQ(model_allocs, 6 + 1) << printed;
  EXPECT_EQ(number_after(printed, "memory model: " + std::to_string(model_allocs) + " allocs, "),
            model_allocs)
      << printed;
  const long halide_allocs = number_after(printed, "memory halide: ");
  EXPECT_GE(halide_allocs, 0) << printed;
  EXPECT_EQ(number_after(printed, "memory halide: " + std::to_string(halide_allocs) + " allocs, "),
            halide_allocs)
      << printed;

  // Files: the only file the program opens is the output it writes after closing the model. A
  // dynamic program also has the loader open ld.so.cache and search for its shared libraries
  // (before main); the static one (armhf) opens nothing else at all. No threads: the program runs
  // parallel loops serially (serial_par_for), so no thread pool asks the OS for the CPU count.
  const Syscalls sys = read_strace(log);
  const std::string written = (out / "head.bin").string();
  int outputs_opened = 0;
  for (const std::string& path : sys.opened) {
    if (path == written) {
      outputs_opened++;
    } else {
      EXPECT_TRUE(!a.link_static && loader_file(path))
          << "model_app opened " << path << (a.link_static ? " (static: nothing expected)" : "");
    }
  }
  EXPECT_EQ(outputs_opened, 1) << "the output " << written << " was not written";
  EXPECT_FALSE(sys.cloned) << "model_app created a thread";
  {
    std::stringstream all;
    all << std::ifstream(log).rdbuf();
    for (const char* what : {".npy", "manifest.json", "/proc/cpuinfo", "/sys/"})
      EXPECT_FALSE(contains(all.str(), what)) << "a system call names " << what << ":\n"
                                              << all.str();
  }

  // The output, element by element, against the reference applied layer by layer.
  const padfold::Model model = padfold::load_spec(spec.string());
  ASSERT_EQ(model.outputs, std::vector<std::string>{"head"});
  const auto want = graph_reference(model);
  const std::vector<float> got = read_floats(out / "head.bin");
  ASSERT_FALSE(got.empty()) << "no output " << out / "head.bin";
  EXPECT_TRUE(padfold::testing::matches_reference(want.at("head"), got.data(), got.size(),
                                                  std::string(a.halide_target) + " head"));
}

// make_weights.py, the example's way for a user to make the weight files, writes byte for byte
// the files the test writes from lcg.h.
// ---- quantized layers on arm64 (model_int8.json): sdot, integer buffers ----

// lcg.h's integers for a buffer of `shape` and dtype, as the example fills it (pf_lcg_fill_int).
padfold::ref::QTensor lcg_ints(std::vector<int64_t> shape, padfold::DType dtype, int bytes,
                               const std::string& layer, const char* buffer) {
  padfold::ref::QTensor t(std::move(shape));
  const uint32_t seed = pf_lcg_seed(layer.c_str(), buffer);
  std::vector<int32_t> i32(t.data.size());
  std::vector<int8_t> i8(t.data.size());
  std::vector<uint8_t> u8(t.data.size());
  if (bytes == 4) {
    pf_lcg_fill_int(i32.data(), i32.size(), 4, 1, seed);
    t.data = i32;
  } else if (dtype == padfold::DType::U8) {
    pf_lcg_fill_int(u8.data(), u8.size(), 1, 0, seed);
    t.data.assign(u8.begin(), u8.end());
  } else {
    pf_lcg_fill_int(i8.data(), i8.size(), 1, 1, seed);
    t.data.assign(i8.begin(), i8.end());
  }
  return t;
}

// The int8 example layers built for arm64 with the dot-product extension (qemu's "max" CPU has
// it), run by the same program through the static registry: every output bit-exact with the
// integer reference on the same lcg.h data. The int8 conv's code uses sdot.
TEST(EmbeddedCrossInt8, Arm64DotProductUnderQemuIsBitExact) {
  const CrossArch a{"aarch64_int8", "arm-64-linux-arm_dot_prod", "aarch64-linux-gnu",
                    "qemu-aarch64", "g++-aarch64-linux-gnu",     false,
                    "max"};
  ASSERT_NO_FATAL_FAILURE(require_tools(a));
  const fs::path spec = fs::path(PF_EXAMPLE_DIR) / "model_int8.json";
  const fs::path work = fs::path(PF_WORK_DIR) / a.name;
  const fs::path bundle = work / "bundle", build = work / "build", out = work / "out";
  fs::remove_all(work);
  fs::create_directories(out);
  ASSERT_TRUE(step("padfold compile",
                   std::string(PADFOLD_BIN) + " compile " + shell_quote(spec.string()) + " -o " +
                       shell_quote(bundle.string()) + " --target " + a.halide_target));
  ASSERT_TRUE(build_example(a, bundle, build, "embedded_int8", "app"));
  std::string printed;
  ASSERT_TRUE(step("running the int8 example under qemu",
                   qemu_command(a) + " " + shell_quote((build / "app").string()) + " " +
                       shell_quote(out.string()),
                   &printed));
  EXPECT_TRUE(contains(printed, "\nok\n")) << printed;

  const padfold::Model model = padfold::load_spec(spec.string());
  ASSERT_EQ(model.layers.size(), 5u);
  for (const padfold::Layer& L : model.layers) {
    SCOPED_TRACE("layer " + L.name);
    ASSERT_TRUE(L.quantized());
    padfold::ref::QLayerData d;
    d.inputs.push_back(lcg_ints(L.input_shape(), L.dtype, 1, L.name, "input"));
    if (L.has_weights())
      d.weights = lcg_ints(L.weight_shape(), padfold::DType::I8, 1, L.name, "weights");
    if (L.bias) d.bias = lcg_ints({L.out_channels}, padfold::DType::I8, 4, L.name, "bias").data;
    const padfold::ref::QTensor want = padfold::ref::quant_reference_output(L, d);
    std::ifstream f(out / (L.name + ".bin"), std::ios::binary);
    const std::vector<char> raw((std::istreambuf_iterator<char>(f)), {});
    ASSERT_EQ(raw.size(), want.data.size()) << out / (L.name + ".bin");
    size_t wrong = 0;
    for (size_t i = 0; i < raw.size(); ++i) {
      const int32_t got = L.dtype == padfold::DType::U8 ? static_cast<uint8_t>(raw[i])
                                                        : static_cast<int8_t>(raw[i]);
      wrong += got != want.data[i];
    }
    EXPECT_EQ(wrong, 0u) << "of " << raw.size();
  }
  const padfold::Layer& conv = model.layers.at(0);
  EXPECT_TRUE(padfold::quantized_dot_product(conv));
  EXPECT_TRUE(contains(padfold::testing::compiled_assembly(conv, a.halide_target), "sdot"));
}

TEST(EmbeddedExample, MakeWeightsScriptWritesTheLcgWeights) {
  const fs::path work = fs::path(PF_WORK_DIR) / "make_weights";
  fs::remove_all(work);
  const fs::path spec = write_graph_spec(work / "test");
  fs::create_directories(work / "script");
  fs::copy_file(spec, work / "script" / "model_graph.json");
  ASSERT_TRUE(step("make_weights.py",
                   shell_quote(PF_PYTHON) + " " +
                       shell_quote((fs::path(PF_EXAMPLE_DIR) / "make_weights.py").string()) + " " +
                       shell_quote((work / "script" / "model_graph.json").string())));
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(work / "test" / "weights")) {
    const fs::path other = work / "script" / "weights" / e.path().filename();
    std::stringstream want, got;
    want << std::ifstream(e.path(), std::ios::binary).rdbuf();
    got << std::ifstream(other, std::ios::binary).rdbuf();
    EXPECT_TRUE(want.str() == got.str()) << other << " differs from " << e.path();
    files++;
  }
  EXPECT_EQ(files, 6);  // weights and bias of stem, dw and head
}

INSTANTIATE_TEST_SUITE_P(Targets, EmbeddedCross, ::testing::ValuesIn(kArchs), name_of);

}  // namespace
