// The C runtime on real bundles written by `padfold compile` at test time (ctest fixtures in
// embedded_tests.cmake): examples/tiny.json for "host,x86-64-linux-avx2-fma", and for
// "x86-64-linux-avx512_skylake" alone. Every kernel runs through pf_bundle_open/pf_run and is
// compared element-wise with the naive reference (tolerance: bundle_util.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bundle_util.h"
#include "frontend/spec.h"
#include "kernel_runner.h"
#include "padfold_runtime.h"

namespace {

namespace fs = std::filesystem;

using padfold::testing::contains;

// CPU flags of an AVX2 machine without AVX-512, named as pf_open_options.cpu_flags takes them.
constexpr const char* kAvx2Flags =
    "sse41,ssse3,sse4_2,popcnt,avx,avx2,fma,f16c,bmi1,bmi2,abm,movbe";

struct LayerRun {
  const pf_kernel_desc* kernel = nullptr;
  padfold::ref::LayerData data;
  padfold::ref::Tensor reference;
};

// Opens a bundle (nullptr flags: detect), failing the test with the runtime's message.
pf_bundle* open_bundle(const char* dir, const char* cpu_flags) {
  char err[PF_ERRLEN] = "";
  pf_open_options opts{};
  opts.cpu_flags = cpu_flags;
  pf_bundle* b = nullptr;
  const pf_status s = pf_bundle_open(dir, cpu_flags ? &opts : nullptr, &b, err, sizeof err);
  EXPECT_EQ(s, PF_OK) << pf_status_name(s) << ": " << err;
  return b;
}

struct BundleCloser {
  void operator()(pf_bundle* b) const { pf_bundle_close(b); }
};
using BundlePtr = std::unique_ptr<pf_bundle, BundleCloser>;

// Every layer of tiny.json with random data and its reference output, bound to bundle's kernels.
std::vector<LayerRun> tiny_layers(const pf_bundle* bundle) {
  std::vector<LayerRun> runs;
  const padfold::Model model = padfold::load_spec(PF_TINY_SPEC);
  EXPECT_EQ(pf_bundle_num_kernels(bundle), static_cast<int>(model.layers.size()));
  unsigned seed = 1;
  for (const padfold::Layer& L : model.layers) {
    LayerRun r;
    char err[PF_ERRLEN];
    EXPECT_EQ(pf_bundle_find(bundle, L.name.c_str(), &r.kernel, err, sizeof err), PF_OK) << err;
    if (!r.kernel) continue;
    r.data = padfold::ref::random_data(L, seed++);
    r.reference = padfold::ref::reference_output(L, r.data);
    runs.push_back(std::move(r));
  }
  return runs;
}

// Runs one kernel on its data, into `out` (resized to the output buffer).
pf_status run_layer(const LayerRun& r, std::vector<float>& out, std::string& message) {
  std::vector<pf_tensor> t;
  for (int i = 0; i < r.kernel->num_buffers; ++i) {
    const pf_buffer_desc* b = &r.kernel->buffers[i];
    const padfold::ref::Tensor* src = b->role == PF_ROLE_INPUT     ? &r.data.input
                                      : b->role == PF_ROLE_WEIGHTS ? &r.data.weights
                                      : b->role == PF_ROLE_BIAS    ? &r.data.bias
                                                                   : nullptr;
    if (src) {
      t.push_back(
          pf_tensor_of(b, const_cast<float*>(src->data.data()), src->data.size() * sizeof(float)));
    } else {
      out.assign(pf_buffer_bytes(b) / sizeof(float), -12345.f);
      t.push_back(pf_tensor_of(b, out.data(), out.size() * sizeof(float)));
    }
  }
  char err[PF_ERRLEN] = "";
  const pf_status s = pf_run(r.kernel, t.data(), static_cast<int>(t.size()), err, sizeof err);
  message = err;
  return s;
}

void expect_every_kernel_matches(const pf_bundle* bundle) {
  for (const LayerRun& r : tiny_layers(bundle)) {
    std::vector<float> out;
    std::string msg;
    ASSERT_EQ(run_layer(r, out, msg), PF_OK) << r.kernel->layer << ": " << msg;
    EXPECT_TRUE(padfold::testing::matches_reference(
        r.reference, out.data(), out.size(),
        std::string(pf_bundle_target(bundle)) + " " + r.kernel->layer));
  }
}

TEST(BundleRuntime, EveryKernelMatchesReference) {
  BundlePtr bundle(open_bundle(PF_TINY_BUNDLE, nullptr));
  ASSERT_TRUE(bundle);
  std::cout << "target: " << pf_bundle_target(bundle.get()) << "\n";
  EXPECT_STREQ(pf_bundle_model(bundle.get()), "tiny");
  EXPECT_STREQ(pf_bundle_dir(bundle.get()), PF_TINY_BUNDLE);
  expect_every_kernel_matches(bundle.get());
}

#if defined(__x86_64__)  // the bundles of these tests are x86-64 ones
// Forced CPU flags without AVX-512: the best (host) target is skipped when it needs AVX-512, and
// the x86-64-linux-avx2-fma fallback runs the same kernels correctly.
TEST(BundleRuntime, Avx2FallbackWhenAvx512Missing) {
  BundlePtr bundle(open_bundle(PF_TINY_BUNDLE, kAvx2Flags));
  ASSERT_TRUE(bundle);
  const std::string chosen = pf_bundle_target(bundle.get());
  EXPECT_FALSE(contains(chosen, "avx512")) << chosen;
  // When the bundle's first target ("host") needs AVX-512 (an AVX-512 machine, unless
  // PADFOLD_HOST_TARGET named another target), the second one must have been chosen.
  std::ifstream f(fs::path(PF_TINY_BUNDLE) / "manifest.json");
  const nlohmann::json manifest = nlohmann::json::parse(f);
  bool first_needs_avx512 = false;
  for (const auto& feature : manifest["targets"][0]["features"])
    first_needs_avx512 = first_needs_avx512 || contains(feature.get<std::string>(), "avx512");
  if (first_needs_avx512) {
    EXPECT_EQ(chosen, "x86-64-linux-avx2-fma");
  } else {
    EXPECT_EQ(chosen, manifest["targets"][0]["target"].get<std::string>());
  }
  expect_every_kernel_matches(bundle.get());
}

TEST(BundleRuntime, Avx512OnlyBundleWithoutAvx512IsNoTarget) {
  char err[PF_ERRLEN] = "";
  pf_open_options opts{};
  opts.cpu_flags = kAvx2Flags;
  pf_bundle* b = reinterpret_cast<pf_bundle*>(0x1);
  const pf_status s = pf_bundle_open(PF_AVX512_BUNDLE, &opts, &b, err, sizeof err);
  EXPECT_EQ(s, PF_ERR_NO_TARGET) << pf_status_name(s) << ": " << err;
  EXPECT_EQ(b, nullptr);
  const std::string msg = err;
  EXPECT_TRUE(contains(msg, "x86-64-linux-avx512_skylake")) << msg;  // the refused target
  EXPECT_TRUE(contains(msg, "avx512f")) << msg;                      // a flag it lacks
  EXPECT_TRUE(contains(msg, "avx512bw")) << msg;

  // Detected flags: opens and runs correctly on an AVX-512 (Skylake-X or later) machine, else the
  // same refusal; never an illegal instruction.
  char host[512];
  pf_host_describe(host, sizeof host);
  const bool skx = contains(host, " avx512f") && contains(host, " avx512bw") &&
                   contains(host, " avx512dq") && contains(host, " avx512vl") &&
                   contains(host, " avx512cd");
  pf_bundle* raw = nullptr;
  const pf_status detected = pf_bundle_open(PF_AVX512_BUNDLE, nullptr, &raw, err, sizeof err);
  BundlePtr bundle(raw);
  if (skx) {
    ASSERT_EQ(detected, PF_OK) << err;
    expect_every_kernel_matches(bundle.get());
  } else {
    EXPECT_EQ(detected, PF_ERR_NO_TARGET) << err;
  }
}
#endif  // __x86_64__

// 8 threads run every kernel repeatedly on shared inputs (own outputs); results equal serial runs
// exactly.
TEST(BundleRuntime, ConcurrentRunsEqualSerial) {
  BundlePtr bundle(open_bundle(PF_TINY_BUNDLE, nullptr));
  ASSERT_TRUE(bundle);
  const std::vector<LayerRun> layers = tiny_layers(bundle.get());
  std::vector<std::vector<float>> serial(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    std::string msg;
    ASSERT_EQ(run_layer(layers[i], serial[i], msg), PF_OK) << msg;
  }
  constexpr int kThreads = 8, kRounds = 25;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> out;
      std::string msg;
      for (int round = 0; round < kRounds && failures[t].empty(); ++round) {
        for (size_t i = 0; i < layers.size(); ++i) {
          // Different threads start on different kernels.
          const size_t k = (i + static_cast<size_t>(t)) % layers.size();
          if (run_layer(layers[k], out, msg) != PF_OK) {
            failures[t] = std::string(layers[k].kernel->layer) + ": " + msg;
          } else if (out != serial[k]) {
            failures[t] = std::string(layers[k].kernel->layer) + ": differs from the serial run";
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

// A wrong tensor names kernel, buffer and dimension (real kernel, real registry).
TEST(BundleRuntime, ShapeErrorNamesKernelBufferAndDim) {
  BundlePtr bundle(open_bundle(PF_TINY_BUNDLE, nullptr));
  ASSERT_TRUE(bundle);
  const std::vector<LayerRun> layers = tiny_layers(bundle.get());
  ASSERT_FALSE(layers.empty());
  const pf_kernel_desc* k = layers[0].kernel;  // stem: input 1x7x7x3 NHWC
  std::vector<pf_tensor> t;
  std::vector<std::vector<float>> mem(static_cast<size_t>(k->num_buffers));
  int64_t bad_shape[PF_MAX_RANK];
  for (int i = 0; i < k->num_buffers; ++i) {
    mem[static_cast<size_t>(i)].resize(pf_buffer_bytes(&k->buffers[i]) / sizeof(float) + 64);
    t.push_back(pf_tensor_of(&k->buffers[i], mem[static_cast<size_t>(i)].data(),
                             mem[static_cast<size_t>(i)].size() * sizeof(float)));
  }
  std::copy(k->buffers[0].shape, k->buffers[0].shape + k->buffers[0].rank, bad_shape);
  bad_shape[2] += 1;
  t[0].shape = bad_shape;
  t[0].strides = nullptr;
  char err[PF_ERRLEN] = "";
  EXPECT_EQ(pf_run(k, t.data(), static_cast<int>(t.size()), err, sizeof err), PF_ERR_SHAPE);
  EXPECT_TRUE(contains(err, "kernel 'stem'") && contains(err, "'input'") && contains(err, "dim 2"))
      << err;
}

// Fused blocks through the runtime (examples/inverted_residual_blocks.json): the bundle opens
// (its registry once wrote the op "dw->pw" HTML-escaped and every fused bundle was refused), and
// each block equals its layers' unfused kernels run one after another.
TEST(BundleRuntime, FusedBlocksEqualUnfusedKernels) {
  BundlePtr fused(open_bundle(PF_BLOCKS_FUSED, nullptr));
  BundlePtr unfused(open_bundle(PF_BLOCKS_UNFUSED, nullptr));
  ASSERT_TRUE(fused && unfused);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto random = [&](size_t bytes) {
    std::vector<float> v(bytes / sizeof(float));
    for (float& x : v) x = dist(rng);
    return v;
  };
  int blocks = 0;
  for (int i = 0; i < pf_bundle_num_kernels(fused.get()); ++i) {
    const pf_kernel_desc* k = pf_bundle_kernel(fused.get(), i);
    if (std::string(k->op).find("->") == std::string::npos) continue;
    ++blocks;
    SCOPED_TRACE(std::string(k->layer) + " (" + k->op + ")");
    // The block's buffers by name, and its layers in order (from "<layer>_weights").
    std::map<std::string, std::vector<float>> data;
    std::vector<std::string> layers;
    std::vector<pf_tensor> t;
    std::vector<float> out;
    for (int b = 0; b < k->num_buffers; ++b) {
      const pf_buffer_desc* d = &k->buffers[b];
      const std::string name = d->name;
      if (d->role == PF_ROLE_OUTPUT) {
        out.assign(pf_buffer_bytes(d) / sizeof(float), 0.f);
        t.push_back(pf_tensor_of(d, out.data(), out.size() * sizeof(float)));
        continue;
      }
      data[name] = random(pf_buffer_bytes(d));
      t.push_back(pf_tensor_of(d, data[name].data(), data[name].size() * sizeof(float)));
      if (d->role == PF_ROLE_WEIGHTS) layers.push_back(name.substr(0, name.size() - 8));
    }
    if (layers.empty() || layers.back() != k->layer) layers.push_back(k->layer);  // a pool
    char err[PF_ERRLEN] = "";
    ASSERT_EQ(pf_run(k, t.data(), static_cast<int>(t.size()), err, sizeof err), PF_OK) << err;
    // The same layers unfused, on the same data.
    std::vector<float> x = data.at("input");
    for (const std::string& layer : layers) {
      const pf_kernel_desc* u = nullptr;
      ASSERT_EQ(pf_bundle_find(unfused.get(), layer.c_str(), &u, err, sizeof err), PF_OK) << err;
      std::vector<pf_tensor> ut;
      std::vector<float> y;
      for (int b = 0; b < u->num_buffers; ++b) {
        const pf_buffer_desc* d = &u->buffers[b];
        std::vector<float>* src = d->role == PF_ROLE_INPUT     ? &x
                                  : d->role == PF_ROLE_WEIGHTS ? &data.at(layer + "_weights")
                                  : d->role == PF_ROLE_BIAS    ? &data.at(layer + "_bias")
                                                               : nullptr;
        if (!src) {
          y.assign(pf_buffer_bytes(d) / sizeof(float), 0.f);
          src = &y;
        }
        ut.push_back(pf_tensor_of(d, src->data(), src->size() * sizeof(float)));
      }
      ASSERT_EQ(pf_run(u, ut.data(), static_cast<int>(ut.size()), err, sizeof err), PF_OK) << err;
      x = std::move(y);
    }
    ASSERT_EQ(x.size(), out.size());
    float scale = 0, diff = 0;
    for (size_t e = 0; e < x.size(); ++e) {
      scale = std::max(scale, std::abs(x[e]));
      diff = std::max(diff, std::abs(x[e] - out[e]));
    }
    EXPECT_LE(diff, 1e-4f * std::max(scale, 1.f));
  }
  EXPECT_GE(blocks, 4);  // auto fuses the inverted-residual blocks and the ResNet stem
}

}  // namespace
