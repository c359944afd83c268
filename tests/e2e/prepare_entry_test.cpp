// Weights the caller passes, prepared once by the bundle's prepare kernels (padfold compile
// --prepare-entry, pf_bundle_prepare_kernel): each writes what the compile stores for the same
// values from a weight file, and the kernel reading it computes what the kernel transforming the
// caller's weights on every call computes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/npy.h"
#include "bundle_util.h"
#include "padfold_runtime.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using padfold::testing::contains;
using padfold::testing::run_command;
using padfold::testing::shell_quote;
using Bytes = std::vector<unsigned char>;

const fs::path kWork = PF_WORK_DIR;

// wg: a 3x3 conv computed as Winograd F(4,3); blk: a pointwise conv reading 16-channel blocks; q:
// an int8 pointwise conv (a dot-product table on x86); dw: a depthwise conv (its weights as they
// are). `files`: wg, blk and q read their weights from files.
json Spec(const std::string& model, bool files) {
  json spec = json::parse(R"({"model": ")" + model + R"(",
    "defaults": {"layout": "NHWC", "weight_layout": "HWIO"},
    "layers": [
      {"name": "wg", "op": "conv2d", "input_shape": [1, 12, 10, 8], "out_channels": 16,
       "kernel": 3, "padding": "same", "border": "reflect", "bias": true},
      {"name": "blk", "op": "conv2d", "input": "wg", "out_channels": 64, "kernel": 1},
      {"name": "dw", "op": "conv2d", "input": "blk", "out_channels": 64, "groups": 64,
       "kernel": 3, "padding": "same"},
      {"name": "q", "op": "conv2d", "input_shape": [1, 6, 6, 64], "out_channels": 32,
       "kernel": 1, "dtype": "int8", "bias": true, "padding": "valid",
       "quant": {"requantize": "tflite", "input": {"scale": 0.02, "zero_point": 5},
                 "weight_scale": 0.004, "output": {"scale": 0.05, "zero_point": -3}}}]})");
  if (files)
    for (json& L : spec.at("layers"))
      if (L.at("name") != "dw") {
        const std::string name = L.at("name");
        L["weight_files"] = {{"weights", "w/" + name + ".npy"}};
        if (L.value("bias", false)) L["weight_files"]["bias"] = "w/" + name + "_bias.npy";
      }
  return spec;
}

// Random bytes of a buffer: floats in [-1, 1], int32 in [-1000, 1000], any int8/uint8.
Bytes Random(const pf_buffer_desc& d, unsigned seed) {
  std::mt19937 gen(seed);
  const size_t n = pf_buffer_bytes(&d) / pf_dtype_size(d.dtype);
  Bytes out(pf_buffer_bytes(&d));
  for (size_t i = 0; i < n; ++i) {
    if (d.dtype == PF_F32) {
      const float v = std::uniform_real_distribution<float>(-1, 1)(gen);
      std::memcpy(out.data() + i * 4, &v, 4);
    } else if (d.dtype == PF_I32) {
      const int32_t v = std::uniform_int_distribution<int32_t>(-1000, 1000)(gen);
      std::memcpy(out.data() + i * 4, &v, 4);
    } else {
      out[i] = static_cast<unsigned char>(gen());
    }
  }
  return out;
}

struct Bundle {
  pf_bundle* b = nullptr;
  char err[PF_ERRLEN] = "";
  explicit Bundle(const fs::path& dir) {
    EXPECT_EQ(pf_bundle_open(dir.c_str(), nullptr, &b, err, sizeof err), PF_OK) << err;
  }
  ~Bundle() { pf_bundle_close(b); }
  const pf_kernel_desc* kernel(const std::string& layer) {
    const pf_kernel_desc* k = nullptr;
    EXPECT_EQ(pf_bundle_find(b, layer.c_str(), &k, err, sizeof err), PF_OK) << err;
    return k;
  }
};

// Runs k on `given` (by buffer name), its output(s) allocated: every buffer by name.
std::map<std::string, Bytes> RunKernel(const pf_kernel_desc* k, std::map<std::string, Bytes> given,
                                       pf_status want = PF_OK) {
  std::vector<pf_tensor> tensors;
  for (int i = 0; i < k->num_buffers; ++i) {
    const pf_buffer_desc& d = k->buffers[i];
    if (d.role == PF_ROLE_OUTPUT) given[d.name] = Bytes(pf_buffer_bytes(&d), 0xAB);
  }
  for (int i = 0; i < k->num_buffers; ++i) {
    const pf_buffer_desc& d = k->buffers[i];
    Bytes& data = given.at(d.name);
    pf_tensor t = pf_tensor_of(&d, data.data(), data.size());
    tensors.push_back(t);
  }
  char err[PF_ERRLEN] = "";
  EXPECT_EQ(pf_run(k, tensors.data(), static_cast<int>(tensors.size()), err, sizeof err), want)
      << k->layer << ": " << err;
  return given;
}

// The compile's output for the spec `files` says, written under kWork/name with its weight files
// (the values of `weights`, by file name: the layer's weights, <layer>_bias its bias).
fs::path Compile(const std::string& name, bool files, const std::string& flags,
                 const std::map<std::string, padfold::NpyData>& weights) {
  const fs::path dir = kWork / name;
  fs::remove_all(dir);
  fs::create_directories(dir / "w");
  for (const auto& [layer, data] : weights)
    padfold::write_npy((dir / "w" / (layer + ".npy")).string(), data.shape, data.dtype,
                       data.bytes.data());
  const fs::path knobs = dir / "knobs.json";
  std::ofstream(knobs) << json{
      {"wg", {{"winograd", 2}, {"winograd_min_tiles", 0}}},
      {"blk",
       {{"channels_outer_kb", 1},
        {"winograd", 0},
        {"gemm_pixels", 0},
        {"vector_lanes", 8},
        {"channel_vectors",
         2}}}}.dump();
  std::ofstream(dir / "spec.json") << Spec(name, files).dump(2);
  const auto r = run_command(
      std::string(PADFOLD_BIN) + " compile " + shell_quote((dir / "spec.json").string()) + " -o " +
      shell_quote((dir / "bundle").string()) + " --target host --fuse none --schedules " +
      shell_quote(knobs.string()) + " " + flags);
  EXPECT_EQ(r.status, 0) << r.output;
  if (flags.find("--prepare-entry") != std::string::npos && !files) {
    EXPECT_TRUE(contains(r.output,
                         "prepare kernels: 3 kernel(s) (HWIO4i 1, Ohwi16o 1, "
                         "winograd_f4_u 1)"))
        << r.output;
  }
  return dir / "bundle";
}

float Largest(const Bytes& b) {
  float m = 0;
  for (size_t i = 0; i + 4 <= b.size(); i += 4) {
    float v;
    std::memcpy(&v, b.data() + i, 4);
    m = std::max(m, std::abs(v));
  }
  return m;
}

// Element i of float32 bytes.
float F32(const Bytes& b, size_t i) {
  float v;
  std::memcpy(&v, b.data() + i * 4, 4);
  return v;
}

TEST(PrepareEntry, PrepareKernelsWriteWhatTheCompileStoresAndKernelsComputeTheSame) {
  // The layers' raw weights, drawn from the kernel descriptions of a bundle without prepares.
  std::map<std::string, padfold::NpyData> weights;
  const fs::path per_call = Compile("per_call", false, "", {});
  Bundle c(per_call);
  ASSERT_NE(c.b, nullptr);
  unsigned seed = 1;
  for (const char* layer : {"wg", "blk", "q"}) {
    const pf_kernel_desc* k = c.kernel(layer);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(pf_bundle_prepare_kernel(c.b, k), nullptr) << layer;  // not asked for
    ASSERT_STREQ(k->buffers[1].name, "weights");
    for (int i = 1; i < k->num_buffers && k->buffers[i].role != PF_ROLE_OUTPUT; ++i) {
      const pf_buffer_desc& b = k->buffers[i];
      padfold::NpyData& d = weights[std::string(layer) + (i == 1 ? "" : "_bias")];
      d.shape.assign(b.shape, b.shape + b.rank);
      d.dtype = b.dtype == PF_I8    ? padfold::NpyDType::I8
                : b.dtype == PF_I32 ? padfold::NpyDType::I32
                                    : padfold::NpyDType::F32;
      d.bytes = Random(b, seed++);
    }
  }
  const fs::path stored = Compile("stored", true, "--prepare-entry", weights);
  const fs::path entry = Compile("entry", false, "--prepare-entry", {});
  Bundle s(stored), e(entry);
  ASSERT_NE(s.b, nullptr);
  ASSERT_NE(e.b, nullptr);

  const json m = json::parse(std::ifstream(entry / "manifest.json"));
  const json ms = json::parse(std::ifstream(stored / "manifest.json"));
  for (size_t i = 0; i < m.at("kernels").size(); ++i) {
    const json& k = m.at("kernels")[i];
    EXPECT_EQ(k.contains("prepare"), k.at("layer") != "dw") << k.dump();
    EXPECT_FALSE(ms.at("kernels")[i].contains("prepare")) << "weights from a file";
  }
  EXPECT_EQ(pf_bundle_prepare_kernel(e.b, e.kernel("dw")), nullptr);

  for (const char* layer : {"wg", "blk", "q"}) {
    SCOPED_TRACE(layer);
    const pf_kernel_desc* k = e.kernel(layer);
    const pf_kernel_desc* p = pf_bundle_prepare_kernel(e.b, k);
    ASSERT_NE(p, nullptr);
    EXPECT_STREQ(p->op, "prepare_weights");
    const pf_buffer_desc& form = k->buffers[1];
    EXPECT_STREQ(p->buffers[1].layout, form.layout);
    const Bytes prepared = RunKernel(p, {{"weights", weights.at(layer).bytes}}).at("prepared");

    // What the compile stores from the file holds the same values.
    const pf_kernel_desc* ks = s.kernel(layer);
    ASSERT_STREQ(ks->buffers[1].layout, form.layout);
    const padfold::NpyData file = padfold::read_npy((stored / ks->buffers[1].source).string());
    ASSERT_EQ(file.bytes.size(), prepared.size());
    if (std::string(layer) == "wg") {  // G g GT in float: JIT here, the target's code there
      const float largest = Largest(prepared);
      for (size_t i = 0; i < prepared.size() / 4; ++i)
        ASSERT_NEAR(F32(prepared, i), F32(file.bytes, i), 1e-6f * largest) << "element " << i;
    } else {  // moved values
      EXPECT_EQ(std::memcmp(prepared.data(), file.bytes.data(), prepared.size()), 0);
    }

    // The kernel reading the prepared weights computes what the per-call one does.
    std::map<std::string, Bytes> given;
    const pf_kernel_desc* kc = c.kernel(layer);
    for (int i = 0; i < kc->num_buffers; ++i)
      if (kc->buffers[i].role == PF_ROLE_INPUT || kc->buffers[i].role == PF_ROLE_BIAS)
        given[kc->buffers[i].name] = Random(kc->buffers[i], 100 + static_cast<unsigned>(i));
    given["weights"] = weights.at(layer).bytes;
    const Bytes want = RunKernel(kc, given).at("output");
    given["weights"] = prepared;
    const Bytes got = RunKernel(k, given).at("output");
    ASSERT_EQ(got.size(), want.size());
    if (std::string(layer) == "wg") {
      const float largest = Largest(want);
      ASSERT_GT(largest, 0.0f);
      for (size_t i = 0; i < want.size() / 4; ++i)
        ASSERT_NEAR(F32(got, i), F32(want, i), 1e-5f * largest) << "element " << i;
    } else {
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0);
    }

    // The raw weights are refused by the kernel reading prepared ones, not misread.
    pf_tensor t[8];
    std::vector<Bytes> keep;
    int n = 0;
    for (int i = 0; i < kc->num_buffers; ++i) {
      keep.push_back(i == 1 ? weights.at(layer).bytes : Bytes(pf_buffer_bytes(&kc->buffers[i])));
      t[n++] = pf_tensor_of(&kc->buffers[i], keep.back().data(), keep.back().size());
    }
    char err[PF_ERRLEN] = "";
    const pf_status st = pf_run(k, t, n, err, sizeof err);
    EXPECT_TRUE(st == PF_ERR_RANK || st == PF_ERR_SHAPE || st == PF_ERR_STRIDES) << err;
  }
}

// The runtime refuses a bundle whose manifest and library disagree about a prepare kernel.
TEST(PrepareEntry, ManifestAndLibraryMustAgree) {
  const fs::path entry = Compile("entry_mismatch", false, "--prepare-entry", {});
  json m = json::parse(std::ifstream(entry / "manifest.json"));
  m.at("kernels")[0].erase("prepare");
  std::ofstream(entry / "manifest.json") << m.dump(2);
  pf_bundle* b = nullptr;
  char err[PF_ERRLEN] = "";
  EXPECT_EQ(pf_bundle_open(entry.c_str(), nullptr, &b, err, sizeof err), PF_ERR_MISMATCH);
  EXPECT_TRUE(contains(err, "kernel 'wg' prepare: manifest has none, library has ")) << err;
  EXPECT_EQ(b, nullptr);
}

}  // namespace

namespace {

// padfold run --layer with the weights as the spec lays them out runs the layer's prepare kernel
// first, and says which shapes it takes when given neither.
TEST(PrepareEntry, RunLayerPreparesTheWeightsItIsGiven) {
  const fs::path entry = Compile("run_entry", false, "--prepare-entry", {});
  const fs::path per_call = Compile("run_per_call", false, "", {});
  const fs::path dir = kWork / "run_entry";
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  const auto write = [&](const std::string& name, const std::vector<int64_t>& shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float> v(n);
    for (float& f : v) f = dist(gen);
    padfold::write_npy_f32((dir / name).string(), shape, v.data());
    return shell_quote((dir / name).string());
  };
  const std::string args = " --layer wg --input " + write("x.npy", {1, 12, 10, 8}) + " --weights " +
                           write("w.npy", {3, 3, 8, 16}) + " --bias " + write("b.npy", {16}) +
                           " --output ";
  const std::string bin = std::string(PADFOLD_BIN) + " run ";
  auto r =
      run_command(bin + shell_quote(entry.string()) + args + shell_quote((dir / "y.npy").string()));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(bin + shell_quote(per_call.string()) + args +
                  shell_quote((dir / "y0.npy").string()));
  ASSERT_EQ(r.status, 0) << r.output;
  const padfold::NpyArray y = padfold::read_npy_f32((dir / "y.npy").string()),
                          y0 = padfold::read_npy_f32((dir / "y0.npy").string());
  ASSERT_EQ(y.data.size(), y0.data.size());
  float largest = 0;
  for (float v : y0.data) largest = std::max(largest, std::abs(v));
  ASSERT_GT(largest, 0.0f);
  for (size_t i = 0; i < y.data.size(); ++i)
    ASSERT_NEAR(y.data[i], y0.data[i], 1e-5f * largest) << "element " << i;

  r = run_command(bin + shell_quote(entry.string()) + " --layer wg --input " +
                  shell_quote((dir / "x.npy").string()) + " --weights " +
                  write("bad.npy", {3, 3, 8, 15}) + " --bias " +
                  shell_quote((dir / "b.npy").string()) + " --output " +
                  shell_quote((dir / "y2.npy").string()));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output,
                       "shape 3x3x8x15 does not match kernel 'wg' buffer 'weights' "
                       "(winograd_f4_u 6x6x8x16, or HWIO 3x3x8x16 to prepare)"))
      << r.output;
  EXPECT_FALSE(fs::exists(dir / "y2.npy"));
}

}  // namespace
