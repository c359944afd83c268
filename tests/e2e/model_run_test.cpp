// Whole-model runs of real bundles: a spec whose layers branch and join and name their weight
// files (written here with generator/base/npy.h), compiled by `padfold compile` (weights copied
// into the bundle, or embedded with --embed-weights), run with pf_model_run and compared with
// running each kernel with pf_run by hand, and run with `padfold run --model`; plus the graphs
// that cannot run whole.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
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
#include "compile/stmt_check.h"
#include "padfold_runtime.h"

// While g_no_allocation is set, every allocation aborts the test: the C library's malloc, calloc,
// realloc and free as the objects linked into this program call them (the padfold runtime among
// them: the test links with -Wl,--wrap for each), the model's pf_model_options hooks and the
// bundle's Halide runtime allocator (pf_bundle_set_allocator).
std::atomic<bool> g_no_allocation{false};

[[noreturn]] void AllocationWhereNoneIsAllowed(const char* what) {
  const char head[] = "allocation during a run that must not allocate: ";
  (void)!write(2, head, sizeof head - 1);
  (void)!write(2, what, std::strlen(what));
  (void)!write(2, "\n", 1);
  std::abort();
}

extern "C" {
void* __real_malloc(size_t n);
void* __real_calloc(size_t n, size_t size);
void* __real_realloc(void* p, size_t n);
void __real_free(void* p);
void* __wrap_malloc(size_t n) {
  if (g_no_allocation) AllocationWhereNoneIsAllowed("malloc");
  return __real_malloc(n);
}
void* __wrap_calloc(size_t n, size_t size) {
  if (g_no_allocation) AllocationWhereNoneIsAllowed("calloc");
  return __real_calloc(n, size);
}
void* __wrap_realloc(void* p, size_t n) {
  if (g_no_allocation) AllocationWhereNoneIsAllowed("realloc");
  return __real_realloc(p, n);
}
void __wrap_free(void* p) {
  if (g_no_allocation) AllocationWhereNoneIsAllowed("free");
  __real_free(p);
}
}

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using padfold::testing::contains;
using padfold::testing::run_command;
using padfold::testing::shell_quote;

const fs::path kWork = PF_WORK_DIR;

std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

std::string ReadText(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

size_t Elements(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

// stem (conv, weights and bias from files) feeds dw (depthwise conv, from files) and pool (max
// pool); join adds them: a branch and a join. NHWC, weights HWIO.
json GraphSpec(const std::string& model) {
  return json::parse(R"({
    "model": ")" + model +
                     R"(",
    "defaults": {"layout": "NHWC", "weight_layout": "HWIO", "dtype": "float32", "border": "zeros"},
    "layers": [
      {"name": "stem", "op": "conv2d", "input_shape": [1, 7, 7, 3], "out_channels": 8,
       "kernel": [4, 4], "stride": 2, "padding": "same", "convention": "tensorflow",
       "bias": true, "activation": "relu",
       "weight_files": {"weights": "w/stem_w.npy", "bias": "w/stem_b.npy"}},
      {"name": "dw", "op": "conv2d", "input": "stem", "kernel": 3, "groups": 8, "out_channels": 8,
       "padding": "same", "bias": true,
       "weight_files": {"weights": "w/dw_w.npy", "bias": "w/dw_b.npy"}},
      {"name": "pool", "op": "max_pool", "input": "stem", "kernel": 3, "stride": 1,
       "padding": "same"},
      {"name": "join", "op": "add", "input": ["dw", "pool"]}
    ]})");
}

const std::map<std::string, std::vector<int64_t>> kWeightFiles = {{"w/stem_w.npy", {4, 4, 3, 8}},
                                                                  {"w/stem_b.npy", {8}},
                                                                  {"w/dw_w.npy", {3, 3, 1, 8}},
                                                                  {"w/dw_b.npy", {8}}};

struct Compiled {
  fs::path spec, bundle;
  std::string output;  // what padfold compile printed
};

// The line padfold compile prints of the weights: every file's float32 values.
std::string WeightsLine(const char* where) {
  size_t bytes = 0;
  for (const auto& [file, shape] : kWeightFiles) bytes += Elements(shape) * sizeof(float);
  return ", weights " + std::to_string(bytes) + " bytes (" + std::to_string(kWeightFiles.size()) +
         " buffers, " + where + "), arena ";
}

// Writes the spec and its weight files under kWork/name and compiles it (each test its own name:
// ctest runs them in parallel processes).
Compiled Compile(const std::string& name, const json& spec, const std::string& flags = "",
                 const std::map<std::string, std::vector<int64_t>>& weight_files = kWeightFiles) {
  const fs::path dir = kWork / name;
  fs::remove_all(dir);
  fs::create_directories(dir / "w");
  unsigned seed = 1;
  for (const auto& [file, shape] : weight_files)
    padfold::write_npy_f32((dir / file).string(), shape, Random(Elements(shape), seed++).data());
  Compiled c{dir / (name + ".json"), dir / "bundle", ""};
  std::ofstream(c.spec) << spec.dump(2);
  const auto r = run_command(std::string(PADFOLD_BIN) + " compile " + shell_quote(c.spec.string()) +
                             " -o " + shell_quote(c.bundle.string()) + " --target host " + flags);
  EXPECT_EQ(r.status, 0) << r.output;
  c.output = r.output;
  return c;
}

struct Bundle {
  pf_bundle* b = nullptr;
  pf_model* m = nullptr;
  char err[PF_ERRLEN] = "";
  ~Bundle() {
    pf_model_close(m);
    pf_bundle_close(b);
  }
};

using Tensors = std::map<std::string, std::vector<float>>;

// The model run by hand: every kernel with pf_run, inputs from `inputs` and earlier outputs by
// each buffer's source, weights read from the spec's own files.
Tensors ByHand(const pf_bundle* b, const Compiled& c, const Tensors& inputs) {
  Tensors t = inputs;
  const json spec = json::parse(std::ifstream(c.spec));
  for (int i = 0; i < pf_bundle_num_kernels(b); i++) {
    const pf_kernel_desc* k = pf_bundle_kernel(b, i);
    std::vector<std::vector<float>> weights;
    std::vector<pf_tensor> ts;
    weights.reserve(static_cast<size_t>(k->num_buffers));
    for (int j = 0; j < k->num_buffers; j++) {
      const pf_buffer_desc& d = k->buffers[j];
      std::vector<float>* data = nullptr;
      if (d.role == PF_ROLE_INPUT) {
        data = &t.at(d.source);
      } else if (d.role == PF_ROLE_OUTPUT) {
        data = &t[k->layer];
        data->assign(pf_buffer_bytes(&d) / sizeof(float), 0.0f);
      } else {
        std::string file;  // a fused block names its buffers "<layer>_weights", "<layer>_bias"
        for (const json& L : spec["layers"])
          for (const char* role : {"weights", "bias"})
            if ((L["name"] == k->layer && d.name == std::string(role)) ||
                d.name == L["name"].get<std::string>() + "_" + role)
              file = L["weight_files"][role];
        weights.push_back(padfold::read_npy_f32((c.spec.parent_path() / file).string()).data);
        data = &weights.back();
      }
      ts.push_back(pf_tensor_of(&d, data->data(), data->size() * sizeof(float)));
    }
    char err[PF_ERRLEN];
    EXPECT_EQ(pf_run(k, ts.data(), static_cast<int>(ts.size()), err, sizeof err), PF_OK) << err;
  }
  return t;
}

// pf_model_run equals the kernels run by hand, bit for bit.
void ExpectModelMatchesKernels(const Compiled& c) {
  Bundle h;
  ASSERT_EQ(pf_bundle_open(c.bundle.c_str(), nullptr, &h.b, h.err, sizeof h.err), PF_OK) << h.err;
  ASSERT_EQ(pf_model_open(h.b, nullptr, &h.m, h.err, sizeof h.err), PF_OK) << h.err;
  ASSERT_EQ(pf_model_num_inputs(h.m), 1);
  ASSERT_EQ(pf_model_num_outputs(h.m), 1);
  const pf_buffer_desc* in = pf_model_input(h.m, 0);
  const pf_buffer_desc* out = pf_model_output(h.m, 0);
  EXPECT_STREQ(in->name, "stem.input");
  EXPECT_STREQ(out->name, "join");
  Tensors inputs = {{in->name, Random(pf_buffer_bytes(in) / sizeof(float), 42)}};
  std::vector<float> y(pf_buffer_bytes(out) / sizeof(float), -1.0f);
  pf_tensor ti = pf_tensor_of(in, inputs.begin()->second.data(), pf_buffer_bytes(in));
  pf_tensor to = pf_tensor_of(out, y.data(), y.size() * sizeof(float));
  ASSERT_EQ(pf_model_run(h.m, &ti, 1, &to, 1, h.err, sizeof h.err), PF_OK) << h.err;
  const Tensors want = ByHand(h.b, c, inputs);
  ASSERT_EQ(want.at("join").size(), y.size());
  EXPECT_EQ(std::memcmp(want.at("join").data(), y.data(), y.size() * sizeof(float)), 0);
  float max_abs = 0;
  for (float v : y) max_abs = std::max(max_abs, std::abs(v));
  EXPECT_GT(max_abs, 0.0f);  // not all zeros
}

void* GuardedMalloc(void* uc, size_t n) {
  if (g_no_allocation)
    AllocationWhereNoneIsAllowed(uc ? "pf_model_options malloc_fn" : "halide_malloc");
  return std::malloc(n);
}
void GuardedFree(void* uc, void* p) {
  if (g_no_allocation)
    AllocationWhereNoneIsAllowed(uc ? "pf_model_options free_fn" : "halide_free");
  std::free(p);
}

// An arena of n bytes at a PF_ARENA_ALIGNMENT boundary (plus `misalign` bytes), filled with a
// pattern so that a kernel reading a place no kernel wrote reads garbage.
struct Arena {
  explicit Arena(size_t n) : bytes(n), mem(n + 2 * PF_ARENA_ALIGNMENT, 0xA5) {}
  void* At(size_t misalign = 0) {
    uintptr_t p = reinterpret_cast<uintptr_t>(mem.data());
    p = (p + PF_ARENA_ALIGNMENT - 1) / PF_ARENA_ALIGNMENT * PF_ARENA_ALIGNMENT;
    return reinterpret_cast<void*>(p + misalign);
  }
  size_t bytes;
  std::vector<unsigned char> mem;
};

// Three ways to run the bundle's model give the same output bit for bit: pf_model_run allocating
// its intermediates per run (per_run_allocation) with its weight files read (read_weights), not
// mapped as in the others, pf_model_run in the model's own arena (whose
// second run allocates nothing: any allocation aborts, g_no_allocation), and pf_model_run_static,
// allocating nothing, in an arena of exactly the size the header states; an arena one byte too
// small or misaligned is refused before any kernel runs.
void ExpectRunsWithoutAllocationMatch(const Compiled& c) {
  Bundle h;
  int hooks_context = 0;  // non-null: tells the model's hooks from Halide's in messages
  const pf_model_options opts = {GuardedMalloc, GuardedFree, &hooks_context, 0, 0};
  const pf_model_options per_run = {GuardedMalloc, GuardedFree, &hooks_context, 1, 1};
  ASSERT_EQ(pf_bundle_open(c.bundle.c_str(), nullptr, &h.b, h.err, sizeof h.err), PF_OK) << h.err;
  pf_malloc_fn old_malloc;
  pf_free_fn old_free;
  ASSERT_EQ(pf_bundle_set_allocator(h.b, GuardedMalloc, GuardedFree, &old_malloc, &old_free, h.err,
                                    sizeof h.err),
            PF_OK)
      << h.err;
  ASSERT_EQ(pf_model_open(h.b, &opts, &h.m, h.err, sizeof h.err), PF_OK) << h.err;
  const json manifest = json::parse(std::ifstream(c.bundle / "manifest.json"));
  const size_t need = pf_model_arena_bytes(h.m);
  EXPECT_EQ(need, manifest.at("memory_plan").at("arena_bytes").get<size_t>());
  const std::string header = ReadText(
      c.bundle / "include" / ("padfold_" + manifest.at("model").get<std::string>() + ".h"));
  EXPECT_TRUE(contains(header, "_ARENA_BYTES " + std::to_string(need) + "u")) << header;

  const pf_buffer_desc* in = pf_model_input(h.m, 0);
  const pf_buffer_desc* out = pf_model_output(h.m, 0);
  std::vector<float> x = Random(pf_buffer_bytes(in) / sizeof(float), 9);
  std::vector<float> want(pf_buffer_bytes(out) / sizeof(float), -1.0f), got(want.size(), -2.0f);
  pf_tensor ti = pf_tensor_of(in, x.data(), pf_buffer_bytes(in));
  pf_tensor to = pf_tensor_of(out, want.data(), want.size() * sizeof(float));
  pf_model* allocating = nullptr;
  ASSERT_EQ(pf_model_open(h.b, &per_run, &allocating, h.err, sizeof h.err), PF_OK) << h.err;
  const pf_status per_run_status = pf_model_run(allocating, &ti, 1, &to, 1, h.err, sizeof h.err);
  pf_model_close(allocating);
  ASSERT_EQ(per_run_status, PF_OK) << h.err;

  to = pf_tensor_of(out, got.data(), got.size() * sizeof(float));
  for (int run = 0; run < 2; run++) {  // the first allocates the model's arena, the second nothing
    std::fill(got.begin(), got.end(), -2.0f);
    g_no_allocation = run == 1;
    const pf_status s = pf_model_run(h.m, &ti, 1, &to, 1, h.err, sizeof h.err);
    g_no_allocation = false;
    ASSERT_EQ(s, PF_OK) << h.err;
    EXPECT_EQ(std::memcmp(want.data(), got.data(), got.size() * sizeof(float)), 0) << run;
  }

  std::fill(got.begin(), got.end(), -2.0f);
  Arena arena(need);
  to = pf_tensor_of(out, got.data(), got.size() * sizeof(float));
  EXPECT_EQ(pf_model_run_static(h.m, arena.At(), need - 1, &ti, 1, &to, 1, h.err, sizeof h.err),
            PF_ERR_SIZE);
  EXPECT_TRUE(contains(h.err, "arena of " + std::to_string(need - 1) +
                                  " bytes, the memory plan needs " + std::to_string(need)))
      << h.err;
  EXPECT_EQ(pf_model_run_static(h.m, arena.At(8), need, &ti, 1, &to, 1, h.err, sizeof h.err),
            PF_ERR_ALIGNMENT);
  EXPECT_TRUE(contains(h.err, "is not aligned to 64 bytes")) << h.err;
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return v == -2.0f; }))
      << "a refused run wrote the output";

  g_no_allocation = true;
  const pf_status s =
      pf_model_run_static(h.m, arena.At(), need, &ti, 1, &to, 1, h.err, sizeof h.err);
  g_no_allocation = false;
  ASSERT_EQ(s, PF_OK) << h.err;
  EXPECT_EQ(std::memcmp(want.data(), got.data(), got.size() * sizeof(float)), 0);
  pf_model_close(h.m);
  h.m = nullptr;
  ASSERT_EQ(
      pf_bundle_set_allocator(h.b, old_malloc, old_free, nullptr, nullptr, h.err, sizeof h.err),
      PF_OK)
      << h.err;
}

TEST(ModelRun, WeightFilesCopiedIntoTheBundle) {
  const Compiled c = Compile("files", GraphSpec("graph"));
  for (const auto& [layer, buffer] : std::vector<std::pair<std::string, std::string>>{
           {"stem", "weights"}, {"stem", "bias"}, {"dw", "weights"}, {"dw", "bias"}})
    EXPECT_TRUE(fs::is_regular_file(c.bundle / "weights" / (layer + "_" + buffer + ".npy")));
  EXPECT_TRUE(contains(c.output, WeightsLine("files in weights/"))) << c.output;
  ExpectModelMatchesKernels(c);
  ExpectRunsWithoutAllocationMatch(c);
}

TEST(ModelRun, EmbeddedWeights) {
  const Compiled c = Compile("embedded", GraphSpec("graph_embedded"), "--embed-weights");
  EXPECT_FALSE(fs::exists(c.bundle / "weights"));
  EXPECT_TRUE(contains(c.output, WeightsLine("embedded: read-only data of registry.c")))
      << c.output;
  Bundle h;
  ASSERT_EQ(pf_bundle_open(c.bundle.c_str(), nullptr, &h.b, h.err, sizeof h.err), PF_OK) << h.err;
  int embedded = 0;
  for (int i = 0; i < pf_bundle_num_kernels(h.b); ++i) {
    const pf_kernel_desc* k = pf_bundle_kernel(h.b, i);
    for (int j = 0; j < k->num_buffers; ++j) {
      if (!k->buffers[j].data) continue;
      ++embedded;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(k->buffers[j].data) % PF_ARENA_ALIGNMENT, 0u)
          << k->layer << " " << k->buffers[j].name;
    }
  }
  EXPECT_EQ(embedded, 4);  // stem and dw: weights and bias
  ExpectModelMatchesKernels(c);
  ExpectRunsWithoutAllocationMatch(c);
}

// examples/inverted_residual_blocks.json's b2a block (1x1 expand, 3x3 depthwise stride 2, 1x1
// project) and its ResNet-50 stem (7x7 conv, 3x3 max pool), with weight files, as two models,
// each block's output doubled by an add (so that it is an intermediate in the arena). --fuse auto
// fuses each block into one kernel whose producer window (344064 and 229376 bytes: more
// than Halide's 16 KB stack limit for its own choice) the schedule keeps on the stack: the static
// run allocates nothing in Halide either.
json FusedSpec(const std::string& model) {
  const bool stem = model == "fused_stem";
  json spec = json::parse(R"({
    "defaults": {"layout": "NHWC", "weight_layout": "HWIO", "dtype": "float32", "border": "zeros"},
    "layers": []})");
  spec["model"] = model;
  const auto files = [](const std::string& layer) {
    return json{{"weights", "w/" + layer + "_w.npy"}, {"bias", "w/" + layer + "_b.npy"}};
  };
  if (stem) {
    spec["inputs"] = json::parse(R"([{"name": "stem_in", "shape": [1, 224, 224, 3]}])");
    spec["layers"] = json::parse(R"([
      {"name": "stem_conv", "op": "conv2d", "input": "stem_in", "out_channels": 64, "kernel": 7,
       "stride": 2, "padding": 3, "bias": true, "activation": "relu"},
      {"name": "stem_pool", "op": "max_pool", "kernel": 3, "stride": 2, "padding": 1},
      {"name": "twice", "op": "add", "input": ["stem_pool", "stem_pool"]}])");
    spec["layers"][0]["weight_files"] = files("stem_conv");
  } else {
    spec["inputs"] = json::parse(R"([{"name": "b2a_in", "shape": [1, 112, 112, 16]}])");
    spec["layers"] = json::parse(R"([
      {"name": "b2a_expand", "op": "conv2d", "input": "b2a_in", "out_channels": 96, "kernel": 1,
       "bias": true, "activation": "relu6"},
      {"name": "b2a_dw", "op": "conv2d", "depth_multiplier": 1, "kernel": 3, "stride": 2,
       "padding": "same_upper", "bias": true, "activation": "relu6"},
      {"name": "b2a_project", "op": "conv2d", "out_channels": 24, "kernel": 1, "bias": true},
      {"name": "twice", "op": "add", "input": ["b2a_project", "b2a_project"]}])");
    for (int i = 0; i < 3; ++i)
      spec["layers"][i]["weight_files"] = files(spec["layers"][i]["name"]);
  }
  return spec;
}

const std::map<std::string, std::vector<int64_t>> kFusedWeightFiles = {
    {"w/stem_conv_w.npy", {7, 7, 3, 64}},    {"w/stem_conv_b.npy", {64}},
    {"w/b2a_expand_w.npy", {1, 1, 16, 96}},  {"w/b2a_expand_b.npy", {96}},
    {"w/b2a_dw_w.npy", {3, 3, 1, 96}},       {"w/b2a_dw_b.npy", {96}},
    {"w/b2a_project_w.npy", {1, 1, 96, 24}}, {"w/b2a_project_b.npy", {24}}};

// The fused kernel's Halide scratch as the manifest states it: on the stack, none on the heap.
void ExpectScratchOnTheStack(const Compiled& c, const std::string& layer, const std::string& op) {
  const json m = json::parse(std::ifstream(c.bundle / "manifest.json"));
  ASSERT_EQ(m.at("kernels").size(), 2u);
  EXPECT_EQ(m["kernels"][0]["layer"], layer);
  EXPECT_EQ(m["kernels"][1]["layer"], "twice");
  EXPECT_EQ(m["kernels"][0]["op"], op);
  const json& t = m.at("targets").at(0);
  EXPECT_EQ(t.at("halide_scratch").at("heap_kernels"), json::array());
  const json& k = t.at("schedules").at(layer).at("halide_scratch");
  EXPECT_EQ(k.at("heap_bytes"), 0);
  EXPECT_EQ(k.at("heap_buffers"), json::array());
  EXPECT_GT(k.at("stack_bytes").get<int64_t>(), 16 * 1024);  // the window is on the stack
  EXPECT_GE(t.at("halide_scratch").at("stack_bytes"), k.at("stack_bytes"));
  EXPECT_TRUE(contains(
      c.output, "stack up to " + std::to_string(t["halide_scratch"]["stack_bytes"].get<int64_t>()) +
                    " bytes per thread, no heap"))
      << c.output;
}

TEST(ModelRun, FusedInvertedResidualRunsStaticWithoutAllocation) {
  const Compiled c = Compile("fused_ir", FusedSpec("fused_ir"), "--fuse auto", kFusedWeightFiles);
  ExpectScratchOnTheStack(c, "b2a_project", "pw->dw->pw");
  ExpectRunsWithoutAllocationMatch(c);
}

TEST(ModelRun, FusedStemRunsStaticWithoutAllocation) {
  const Compiled c =
      Compile("fused_stem", FusedSpec("fused_stem"), "--fuse auto", kFusedWeightFiles);
  ExpectScratchOnTheStack(c, "stem_pool", "conv2d->max_pool");
  ExpectRunsWithoutAllocationMatch(c);
}

// The graph's arena, unfused: stem, dw and pool are [1, 4, 4, 8] float32 (512 bytes each), and all
// three are live while pool runs (stem is read by dw and pool, dw by join), so the plan needs them
// side by side: 1536 bytes, the lower bound; join is the model output, the caller's. (Fused, join
// is dw's epilogue and the arena holds stem and pool.)
TEST(ModelRun, ArenaOfTheGraphIsThreeTensors) {
  const Compiled c = Compile("arena", GraphSpec("graph_arena"), "--fuse none");
  const json m = json::parse(std::ifstream(c.bundle / "manifest.json"));
  EXPECT_EQ(m.at("format_version"), PF_FORMAT_VERSION);
  EXPECT_EQ(m.at("memory_plan"), json({{"alignment", 64},
                                       {"arena_bytes", 1536},
                                       {"lower_bound", 1536},
                                       {"intermediates_bytes", 1536}}));
  std::vector<int64_t> offsets;
  for (const json& k : m.at("kernels"))
    offsets.push_back(k.at("arena_offset").is_null() ? -1 : k.at("arena_offset").get<int64_t>());
  std::vector<int64_t> placed(offsets.begin(), offsets.end() - 1);
  std::sort(placed.begin(), placed.end());
  EXPECT_EQ(placed, (std::vector<int64_t>{0, 512, 1024}));
  EXPECT_EQ(offsets.back(), -1);
  EXPECT_TRUE(contains(ReadText(c.bundle / "include" / "padfold_graph_arena.h"),
                       "#define PADFOLD_GRAPH_ARENA_ARENA_BYTES 1536u"));
}

// The model's output on x (pf_model_run).
std::vector<float> RunModel(const Compiled& c, const std::vector<float>& x) {
  Bundle h;
  EXPECT_EQ(pf_bundle_open(c.bundle.c_str(), nullptr, &h.b, h.err, sizeof h.err), PF_OK) << h.err;
  EXPECT_EQ(pf_model_open(h.b, nullptr, &h.m, h.err, sizeof h.err), PF_OK) << h.err;
  if (!h.m) return {};
  const pf_buffer_desc* in = pf_model_input(h.m, 0);
  const pf_buffer_desc* out = pf_model_output(h.m, 0);
  std::vector<float> y(pf_buffer_bytes(out) / sizeof(float), -1.0f);
  pf_tensor ti = pf_tensor_of(in, const_cast<float*>(x.data()), x.size() * sizeof(float));
  pf_tensor to = pf_tensor_of(out, y.data(), y.size() * sizeof(float));
  EXPECT_EQ(pf_model_run(h.m, &ti, 1, &to, 1, h.err, sizeof h.err), PF_OK) << h.err;
  return y;
}

// The lowered statement of every kernel of a bundle compiled with --emit-stmt, by file.
std::map<fs::path, std::string> Statements(const fs::path& bundle) {
  std::map<fs::path, std::string> out;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(bundle))
    if (e.path().extension() == ".stmt") out[e.path()] = ReadText(e.path());
  return out;
}

// A 3x3 conv and a pointwise conv whose kernels run their channel blocks outermost and copy each
// block's weights (channels_outer_kb 1; 16-channel blocks on every CPU) read them blocked by the
// compile instead ("Ohwi16o"): the manifest and the file state the form, no kernel statement
// copies weights, and the model equals the same model computing from the file's weights in their
// own layout (channels_outer_kb 0), with the weights in files or embedded alike.
TEST(ModelRun, BlockedWeightsArePreparedAtCompile) {
  const auto compile = [](const std::string& name, int outer_kb, const std::string& flags) {
    const json spec = json::parse(R"({"model": ")" + name + R"(",
      "defaults": {"layout": "NHWC", "weight_layout": "HWIO"},
      "layers": [
        {"name": "c1", "op": "conv2d", "input_shape": [1, 6, 5, 32], "out_channels": 64,
         "kernel": 3, "padding": "same", "bias": true, "activation": "relu",
         "weight_files": {"weights": "w/c1_w.npy", "bias": "w/c1_b.npy"}},
        {"name": "c2", "op": "conv2d", "input": "c1", "out_channels": 48, "kernel": 1,
         "weight_files": {"weights": "w/c2_w.npy"}}]})");
    const json tile = {{"channels_outer_kb", outer_kb},
                       {"winograd", 0},
                       {"gemm_pixels", 0},  // the direct loops
                       {"vector_lanes", 8},
                       {"channel_vectors", 2}};
    const fs::path knobs = kWork / (name + "_knobs.json");
    fs::create_directories(kWork);
    std::ofstream(knobs) << json{{"c1", tile}, {"c2", tile}}.dump();
    return Compile(
        name, spec, "--fuse none --schedules " + knobs.string() + " " + flags,
        {{"w/c1_w.npy", {3, 3, 32, 64}}, {"w/c1_b.npy", {64}}, {"w/c2_w.npy", {1, 1, 64, 48}}});
  };
  const Compiled blocked = compile("blocked", 1, "--emit-stmt");
  const Compiled embedded = compile("blocked_embedded", 1, "--embed-weights");
  const Compiled plain = compile("blocked_plain", 0, "");
  EXPECT_TRUE(contains(blocked.output, "prepared weights: 2 kernel(s) (Ohwi16o 2)"))
      << blocked.output;
  EXPECT_FALSE(contains(plain.output, "prepared weights")) << plain.output;
  const json m = json::parse(std::ifstream(blocked.bundle / "manifest.json"));
  ASSERT_EQ(m.at("kernels").size(), 2u);
  const json& c1 = m.at("kernels")[0].at("buffers")[1];
  EXPECT_EQ(c1.at("layout"), "Ohwi16o");
  EXPECT_EQ(c1.at("shape"), json({4, 3, 3, 32, 16}));
  const json& c2 = m.at("kernels")[1].at("buffers")[1];
  EXPECT_EQ(c2.at("layout"), "Ohwi16o");
  EXPECT_EQ(c2.at("shape"), json({3, 1, 1, 64, 16}));
  EXPECT_EQ(padfold::read_npy((blocked.bundle / c2.at("source").get<std::string>()).string()).shape,
            (std::vector<int64_t>{3, 1, 1, 64, 16}));
  const json p = json::parse(std::ifstream(plain.bundle / "manifest.json"));
  EXPECT_EQ(p.at("kernels")[0].at("buffers")[1].at("layout"), "HWIO");

  // No kernel copies weight blocks in its loops (as c1_weights_im_in_c1_reduce would).
  const std::map<fs::path, std::string> statements = Statements(blocked.bundle);
  EXPECT_EQ(statements.size(), 2u);
  for (const auto& [path, stmt] : statements)
    EXPECT_EQ(padfold::per_call_weight_stages(stmt), std::vector<std::string>{}) << path;

  const std::vector<float> x = Random(6 * 5 * 32, 5);
  const std::vector<float> a = RunModel(blocked, x), b = RunModel(plain, x),
                           e = RunModel(embedded, x);
  ASSERT_EQ(a.size(), 6u * 5 * 48);
  ASSERT_EQ(b.size(), a.size());
  float largest = 0;
  for (float v : b) largest = std::max(largest, std::abs(v));
  ASSERT_GT(largest, 0.0f);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f * largest) << "element " << i;
  EXPECT_EQ(std::memcmp(a.data(), e.data(), a.size() * sizeof(float)), 0);
}

// c1 and c2 are 3x3 stride-1 convs with weight files, c2 fused with join as a residual block.
json WinogradSpec(const std::string& model) {
  return json::parse(R"({"model": ")" + model + R"(",
    "defaults": {"layout": "NHWC", "weight_layout": "HWIO"},
    "layers": [
      {"name": "c1", "op": "conv2d", "input_shape": [1, 12, 10, 8], "out_channels": 16,
       "kernel": 3, "padding": "same", "border": "reflect", "bias": true, "activation": "relu",
       "weight_files": {"weights": "w/c1_w.npy", "bias": "w/c1_b.npy"}},
      {"name": "c2", "op": "conv2d", "input": "c1", "out_channels": 16, "kernel": 3,
       "padding": "same", "weight_files": {"weights": "w/c2_w.npy"}},
      {"name": "join", "op": "add", "input": ["c2", "c1"], "activation": "relu"}]})");
}

// Compiles WinogradSpec with c1 as F(4,3) and c2 as F(2,3) (winograd 0: both direct).
Compiled CompileWinograd(const std::string& name, int c1, int c2, const std::string& flags) {
  const fs::path knobs = kWork / (name + "_knobs.json");
  fs::create_directories(kWork);
  std::ofstream(knobs) << json{{"c1", {{"winograd", c1}, {"winograd_min_tiles", 0}}},
                               {"join", {{"winograd", c2}, {"winograd_min_tiles", 0}}}}
                              .dump();
  return Compile(
      name, WinogradSpec(name), "--schedules " + knobs.string() + " " + flags,
      {{"w/c1_w.npy", {3, 3, 8, 16}}, {"w/c1_b.npy", {16}}, {"w/c2_w.npy", {3, 3, 16, 16}}});
}

// A Winograd kernel whose weights come from a file reads them prepared (U = G g GT, computed once
// by the compile): the manifest and the bundle's file state the form and shape, the kernel's
// statement holds no weight transform, and the model equals the same model computed directly
// (within Winograd's bound), with the weights in files or embedded alike.
TEST(ModelRun, WinogradWeightsArePreparedAtCompile) {
  const Compiled wg = CompileWinograd("wg_prepared", 2, 1, "--emit-stmt");
  const Compiled embedded = CompileWinograd("wg_embedded", 2, 1, "--embed-weights");
  const Compiled direct = CompileWinograd("wg_direct", 0, 0, "--emit-stmt");
  EXPECT_TRUE(
      contains(wg.output, "prepared weights: 2 kernel(s) (winograd_f2_u 1, winograd_f4_u 1)"))
      << wg.output;
  EXPECT_FALSE(contains(direct.output, "prepared weights")) << direct.output;
  const json m = json::parse(std::ifstream(wg.bundle / "manifest.json"));
  ASSERT_EQ(m.at("kernels").size(), 2u);
  const json& c1 = m.at("kernels")[0].at("buffers")[1];
  EXPECT_EQ(c1.at("name"), "weights");
  EXPECT_EQ(c1.at("layout"), "winograd_f4_u");
  EXPECT_EQ(c1.at("shape"), json({6, 6, 8, 16}));
  const json& c2 = m.at("kernels")[1].at("buffers")[1];
  EXPECT_EQ(c2.at("name"), "c2_weights");
  EXPECT_EQ(c2.at("layout"), "winograd_f2_u");
  EXPECT_EQ(c2.at("shape"), json({4, 4, 16, 16}));
  EXPECT_EQ(padfold::read_npy((wg.bundle / c2.at("source").get<std::string>()).string()).shape,
            (std::vector<int64_t>{4, 4, 16, 16}));
  const json d = json::parse(std::ifstream(direct.bundle / "manifest.json"));
  EXPECT_EQ(d.at("kernels")[0].at("buffers")[1].at("layout"), "HWIO");

  // Winograd kernels both, with no stage computing U (per call, c1_wg_weights_rows applies G
  // along the kernel rows).
  const std::map<fs::path, std::string> statements = Statements(wg.bundle);
  EXPECT_EQ(statements.size(), 2u);
  for (const auto& [path, stmt] : statements) {
    EXPECT_TRUE(contains(stmt, "_wg_product")) << path;
    EXPECT_EQ(padfold::per_call_weight_stages(stmt), std::vector<std::string>{}) << path;
  }

  const std::vector<float> x = Random(12 * 10 * 8, 7);
  const std::vector<float> a = RunModel(wg, x), b = RunModel(direct, x), e = RunModel(embedded, x);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  float largest = 0;
  for (float v : b) largest = std::max(largest, std::abs(v));
  ASSERT_GT(largest, 0.0f);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4f * largest) << "element " << i;
  EXPECT_EQ(std::memcmp(a.data(), e.data(), a.size() * sizeof(float)), 0);
}

// join adds dw (whose only reader it is) and pool: --fuse auto computes it in dw's epilogue, one
// kernel reading pool as its residual buffer, and the model gives what it gives unfused.
TEST(ModelRun, ResidualAddInTheConvsEpilogueEqualsUnfused) {
  const Compiled fused = Compile("residual", GraphSpec("graph_residual"));
  const Compiled unfused = Compile("residual_none", GraphSpec("graph_residual"), "--fuse none");
  EXPECT_TRUE(contains(fused.output, "fused dw+join: dw->add: the add in dw's epilogue saves"))
      << fused.output;
  const json m = json::parse(std::ifstream(fused.bundle / "manifest.json"));
  ASSERT_EQ(m.at("kernels").size(), 3u);
  const json& k = m.at("kernels")[2];  // where join is: after pool, which it reads
  EXPECT_EQ(k.at("layer"), "join");
  EXPECT_EQ(k.at("op"), "dw->add");
  std::vector<std::string> buffers;
  for (const json& b : k.at("buffers")) buffers.push_back(b.at("name"));
  EXPECT_EQ(buffers,
            (std::vector<std::string>{"input", "dw_weights", "dw_bias", "residual", "output"}));
  EXPECT_EQ(k.at("buffers")[3].at("source"), "pool");
  EXPECT_EQ(k.at("buffers")[0].at("source"), "stem");
  const std::vector<float> x = Random(7 * 7 * 3, 5);
  const std::vector<float> a = RunModel(fused, x), b = RunModel(unfused, x);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-5f * (1 + std::abs(b[i]))) << "element " << i;
}

TEST(ModelRun, CliRunsTheModel) {
  const Compiled c = Compile("cli", GraphSpec("graph"));
  const fs::path x = kWork / "cli" / "x.npy", y = kWork / "cli" / "y.npy",
                 y2 = kWork / "cli" / "y2.npy";
  const std::vector<float> xs = Random(7 * 7 * 3, 7);
  padfold::write_npy_f32(x.string(), {1, 7, 7, 3}, xs.data());
  fs::remove(y);
  auto r = run_command(std::string(PADFOLD_BIN) + " run " + shell_quote(c.bundle.string()) +
                       " --model --input " + shell_quote(x.string()) + " --output " +
                       shell_quote(y.string()));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "ran model graph (3 kernels) on target ")) << r.output;
  r = run_command(std::string(PADFOLD_BIN) + " run " + shell_quote(c.bundle.string()) +
                  " --model --input stem.input=" + shell_quote(x.string()) +
                  " --output join=" + shell_quote(y2.string()));
  ASSERT_EQ(r.status, 0) << r.output;
  const padfold::NpyArray got = padfold::read_npy_f32(y.string()),
                          got2 = padfold::read_npy_f32(y2.string());
  EXPECT_EQ(got.data, got2.data);

  Bundle h;
  ASSERT_EQ(pf_bundle_open(c.bundle.c_str(), nullptr, &h.b, h.err, sizeof h.err), PF_OK) << h.err;
  const Tensors want = ByHand(h.b, c, {{"stem.input", xs}});
  EXPECT_EQ(got.shape, (std::vector<int64_t>{1, 4, 4, 8}));
  EXPECT_EQ(got.data, want.at("join"));

  r = run_command(std::string(PADFOLD_BIN) + " run " + shell_quote(c.bundle.string()) +
                  " --model --input nope=" + shell_quote(x.string()) + " --output " +
                  shell_quote(y.string()));
  EXPECT_NE(r.status, 0);
  // One model input or output: NAME=FILE naming another is refused, not read or written as a file
  // named "NAME=FILE" (a path before the '=' is a file name).
  EXPECT_TRUE(contains(r.output, "--input nope=" + x.string() +
                                     ": 'nope' is not the model's input (it has one: stem.input); "
                                     "expected stem.input=FILE or a bare FILE"))
      << r.output;
  const fs::path scores = fs::current_path() / ("scores=" + y.filename().string());
  fs::remove(scores);
  r = run_command(std::string(PADFOLD_BIN) + " run " + shell_quote(c.bundle.string()) +
                  " --model --input " + shell_quote(x.string()) + " --output " +
                  shell_quote(scores.filename().string()));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "'scores' is not the model's output (it has one: join)"))
      << r.output;
  EXPECT_FALSE(fs::exists(scores));
  r = run_command(std::string(PADFOLD_BIN) + " run " + shell_quote(c.bundle.string()) +
                  " --model --input " + shell_quote(x.string()) + " --output " +
                  shell_quote((kWork / "cli" / "a=b.npy").string()));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(padfold::read_npy_f32((kWork / "cli" / "a=b.npy").string()).data, got.data);
  r = run_command(std::string(PADFOLD_BIN) + " run " + shell_quote(c.bundle.string()) +
                  " --model --input " + shell_quote(x.string()) +
                  " --output stem=" + shell_quote(y.string()));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "layer 'stem' is not a model output (the model's outputs: join)"))
      << r.output;
  r = run_command(std::string(PADFOLD_BIN) + " run " + shell_quote(c.bundle.string()) +
                  " --model --input " + shell_quote(x.string()) + " --output " +
                  shell_quote(y.string()) + " --weights " + shell_quote(x.string()));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "--model takes no --weights or --bias")) << r.output;
  // A quantized model's input (int8) for this float32 model input: refused naming both dtypes.
  const fs::path x8 = kWork / "cli" / "x_int8.npy";
  padfold::write_npy(x8.string(), {1, 7, 7, 3}, padfold::NpyDType::I8,
                     std::vector<int8_t>(7 * 7 * 3, 1).data());
  fs::remove(y);
  r = run_command(std::string(PADFOLD_BIN) + " run " + shell_quote(c.bundle.string()) +
                  " --model --input " + shell_quote(x8.string()) + " --output " +
                  shell_quote(y.string()));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "--input stem.input " + x8.string() +
                                     ": dtype int8 ('|i1') does not match model input "
                                     "'stem.input', which is float32: give a .npy file of "
                                     "float32 ('<f4')"))
      << r.output;
  EXPECT_FALSE(fs::exists(y));
}

// Outputs dw and join: when one cannot be written, the other is not written either (it keeps its
// old contents, or stays absent), whichever comes first, and no temporary file is left.
TEST(ModelRun, CliWritesSeveralOutputsAllOrNone) {
  json spec = GraphSpec("outs");
  spec["outputs"] = {"dw", "join"};
  const Compiled c = Compile("outs", spec);
  const fs::path dir = kWork / "outs", x = dir / "x.npy", kept = dir / "kept.npy";
  padfold::write_npy_f32(x.string(), {1, 7, 7, 3}, Random(7 * 7 * 3, 3).data());
  auto run = [&](const std::string& dw, const std::string& join) {
    return run_command(std::string(PADFOLD_BIN) + " run " + shell_quote(c.bundle.string()) +
                       " --model --input " + shell_quote(x.string()) +
                       " --output dw=" + shell_quote(dw) + " --output join=" + shell_quote(join));
  };
  auto files_in_dir = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  };
  std::ofstream(kept) << "old";
  const std::vector<std::string> before = files_in_dir();
  for (bool valid_first : {true, false}) {
    SCOPED_TRACE(valid_first ? "dw valid, join fails" : "dw fails, join valid");
    const auto r = valid_first ? run(kept.string(), "/nonexistent/y.npy")
                               : run("/nonexistent/y.npy", kept.string());
    EXPECT_NE(r.status, 0);
    EXPECT_TRUE(contains(r.output, "--output /nonexistent/y.npy: cannot create a temporary file"))
        << r.output;
    EXPECT_TRUE(ReadText(kept) == "old") << kept << " was written";
    EXPECT_EQ(files_in_dir(), before);
  }
  fs::remove(kept);
  const auto r = run(kept.string(), "/nonexistent/y.npy");
  EXPECT_NE(r.status, 0);
  EXPECT_FALSE(fs::exists(kept));

  const fs::path y_dw = dir / "y_dw.npy", y_join = dir / "y_join.npy";
  ASSERT_EQ(run(y_dw.string(), y_join.string()).status, 0);
  EXPECT_EQ(padfold::read_npy_f32(y_dw.string()).shape, (std::vector<int64_t>{1, 4, 4, 8}));
  EXPECT_EQ(padfold::read_npy_f32(y_join.string()).shape, (std::vector<int64_t>{1, 4, 4, 8}));
}

// The bundle's weight files are read only from inside the bundle, by --layer as by --model: a link
// to a file outside (or a weights/ directory linked outside) is refused, even to a good file; a
// directory in a weight file's place is called a directory.
TEST(ModelRun, CliReadsWeightFilesOnlyInsideTheBundle) {
  const Compiled c = Compile("links", GraphSpec("links"));
  const fs::path dir = kWork / "links", x = dir / "x.npy", y = dir / "y.npy";
  padfold::write_npy_f32(x.string(), {1, 7, 7, 3}, Random(7 * 7 * 3, 5).data());
  const fs::path weights = c.bundle / "weights", file = weights / "stem_weights.npy";
  auto run = [&](const std::string& how) {
    return run_command(std::string(PADFOLD_BIN) + " run " + shell_quote(c.bundle.string()) + " " +
                       how + " --input " + shell_quote(x.string()) + " --output " +
                       shell_quote(y.string()));
  };
  const std::string leaves = "leads out of the bundle through a symbolic link";
  fs::copy_file(file, dir / "outside_w.npy");
  fs::remove(file);
  fs::create_symlink(dir / "outside_w.npy", file);
  for (const char* how : {"--layer stem", "--model"}) {
    SCOPED_TRACE(how);
    const auto r = run(how);
    EXPECT_NE(r.status, 0);
    EXPECT_TRUE(contains(r.output, leaves)) << r.output;
    EXPECT_FALSE(fs::exists(y));
  }
  // The whole weights/ directory linked outside.
  fs::remove(file);
  fs::copy_file(dir / "outside_w.npy", file);
  fs::rename(weights, dir / "outside_weights");
  fs::create_directory_symlink(dir / "outside_weights", weights);
  for (const char* how : {"--layer stem", "--model"}) {
    SCOPED_TRACE(std::string(how) + ", weights/ linked");
    const auto r = run(how);
    EXPECT_NE(r.status, 0);
    EXPECT_TRUE(contains(r.output, leaves)) << r.output;
  }
  fs::remove(weights);
  fs::rename(dir / "outside_weights", weights);
  ASSERT_EQ(run("--layer stem").status, 0);  // back inside: runs
  fs::remove(file);
  fs::create_directory(file);
  const auto r = run("--model");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "stem_weights.npy: is a directory, not a regular file"))
      << r.output;
}

TEST(ModelRun, InputProducedOutsidePadfoldIsRefused) {
  json spec = GraphSpec("outside");
  spec["inputs"] = json::array(
      {{{"name", "x"}, {"shape", {1, 7, 7, 3}}, {"produced_by", "ONNX node 'resize_1' (Resize)"}}});
  spec["layers"][0].erase("input_shape");
  spec["layers"][0]["input"] = "x";
  const Compiled c = Compile("outside", spec);
  const auto r = run_command(std::string(PADFOLD_BIN) + " run " + shell_quote(c.bundle.string()) +
                             " --model --input x.npy --output y.npy");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output,
                       "model input 'x' is produced by ONNX node 'resize_1' (Resize), which "
                       "padfold does not generate: run the kernels one by one"))
      << r.output;
}

TEST(ModelRun, LayerWithoutWeightFilesIsRefused) {
  json spec = GraphSpec("noweights");
  spec["layers"][1].erase("weight_files");
  const Compiled c = Compile("noweights", spec);
  Bundle h;
  ASSERT_EQ(pf_bundle_open(c.bundle.c_str(), nullptr, &h.b, h.err, sizeof h.err), PF_OK) << h.err;
  EXPECT_EQ(pf_model_open(h.b, nullptr, &h.m, h.err, sizeof h.err), PF_ERR_GRAPH);
  // dw and join are one kernel (the add in dw's epilogue), named after join.
  EXPECT_TRUE(contains(h.err, "kernel 'join' buffer 'dw_weights' has no values")) << h.err;
}

}  // namespace
