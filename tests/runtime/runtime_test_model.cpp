// Whole-model runs (pf_model_*): graphs hand-written as registries (kernels below, opened with
// pf_registry_open, weights embedded), allocation hooks that count, fail and log, unrunnable
// graphs, tensor binding errors, threads; and the fake bundle's model with its weights file
// (pf_bundle_open), with broken .npy files.
#include <HalideRuntime.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/npy.h"
#include "padfold_runtime.hpp"
#include "runtime_test_util.h"

extern "C" {
#include "internal.h"
}

namespace {

// ---- kernels on float32 [4] (layout "C"), in Halide's argv form ----

thread_local std::vector<std::string>* g_calls = nullptr;  // the running test's kernel calls

float* Host(void* arg) {
  return reinterpret_cast<float*>(static_cast<halide_buffer_t*>(arg)->host);
}
void Called(const char* what) {
  if (g_calls) g_calls->push_back(std::string("run ") + what);
}

int Scale(void** a) {  // input, output
  Called("scale");
  for (int i = 0; i < 4; i++) Host(a[1])[i] = 2 * Host(a[0])[i];
  return 0;
}
int Bias(void** a) {  // input, bias [1], output
  Called("bias");
  for (int i = 0; i < 4; i++) Host(a[2])[i] = Host(a[0])[i] + Host(a[1])[0];
  return 0;
}
int Add(void** a) {  // input0, input1, output
  Called("add");
  for (int i = 0; i < 4; i++) Host(a[2])[i] = Host(a[0])[i] + Host(a[1])[i];
  return 0;
}
int Fail(void** a) {
  Called("fail");
  (void)a;
  return -7;
}
thread_local std::function<void()> g_inside;  // what "reenter" does (once) before it scales
int Reenter(void** a) {                       // input, output
  Called("reenter");
  if (std::function<void()> inside = std::exchange(g_inside, nullptr)) inside();
  for (int i = 0; i < 4; i++) Host(a[1])[i] = 2 * Host(a[0])[i];
  return 0;
}

// ---- a registry built in the test ----

class Graph {
 public:
  explicit Graph(const char* model = "g") : model_(model) {}

  // A model input x of shape [n] (produced_by: its source).
  Graph& Input(const char* name, int64_t n = 4, const char* produced_by = nullptr) {
    inputs_.push_back(Desc(name, PF_ROLE_INPUT, n, produced_by));
    return *this;
  }
  // A kernel reading the named tensors; weights: the bias buffer (embedded data or a file).
  Graph& Kernel(const char* layer, const char* op, std::vector<const char*> sources,
                const float* bias_data = nullptr, const char* bias_file = nullptr) {
    std::vector<pf_buffer_desc> b;
    pf_argv_fn fn = op == std::string("scale")     ? Scale
                    : op == std::string("bias")    ? Bias
                    : op == std::string("add")     ? Add
                    : op == std::string("reenter") ? Reenter
                                                   : Fail;
    for (size_t i = 0; i < sources.size(); i++) {
      b.push_back(Desc(sources.size() == 1 ? "input" : Str("input" + std::to_string(i)),
                       PF_ROLE_INPUT, 4, sources[i]));
    }
    if (op == std::string("bias")) {
      b.push_back(Desc("bias", PF_ROLE_BIAS, 1, bias_file));
      b.back().data = bias_data;
    }
    b.push_back(Desc("output", PF_ROLE_OUTPUT, 4, nullptr));
    bufs_.push_back(b);
    kernels_.push_back(
        pf_kernel_desc{layer, Str(std::string("pf_") + layer), op, fn, 0, nullptr, nullptr});
    return *this;
  }
  Graph& Outputs(std::vector<const char*> names) {
    outputs_ = names;
    return *this;
  }
  std::vector<pf_buffer_desc>& Buffers(int kernel) { return bufs_[static_cast<size_t>(kernel)]; }

  const pf_registry* Registry() {
    for (size_t i = 0; i < kernels_.size(); i++) {
      kernels_[i].num_buffers = static_cast<int>(bufs_[i].size());
      kernels_[i].buffers = bufs_[i].data();
    }
    int64_t arena = plan_arena_;
    if (plan_arena_ < 0) {  // no plan given: each intermediate in an aligned place of its own
      arena = 0;
      arena_offsets_.clear();
      for (const pf_kernel_desc& k : kernels_) {
        const bool output = std::any_of(outputs_.begin(), outputs_.end(), [&](const char* o) {
          return std::strcmp(o, k.layer) == 0;
        });
        arena_offsets_.push_back(output ? -1 : arena);
        if (!output) arena += PF_ARENA_ALIGNMENT;  // every output here is float32 [4] or less
      }
    }
    reg_ = pf_registry{format_,
                       model_,
                       FAKE_TARGET,
                       static_cast<int>(kernels_.size()),
                       kernels_.data(),
                       {},
                       static_cast<int>(inputs_.size()),
                       inputs_.data(),
                       static_cast<int>(outputs_.size()),
                       outputs_.data(),
                       {arena, PF_ARENA_ALIGNMENT, arena_offsets_.data(), heap_kernel_},
                       0,
                       nullptr};
    return &reg_;
  }
  // The registry's format (PF_FORMAT_VERSION_MIN: no memory plan).
  Graph& Format(int version) {
    format_ = version;
    return *this;
  }
  // A kernel whose Halide scratch is on the heap (the registry's heap_scratch_kernel).
  Graph& HeapScratch(const char* kernel) {
    heap_kernel_ = kernel;
    return *this;
  }
  // The memory plan: per kernel its output's offset (-1: a model output), and the arena's size.
  Graph& Plan(std::vector<int64_t> offsets, int64_t arena) {
    arena_offsets_ = std::move(offsets);
    plan_arena_ = arena;
    return *this;
  }

 private:
  pf_buffer_desc Desc(const char* name, pf_role role, int64_t n, const char* source) {
    pf_buffer_desc d{};
    d.name = name;
    d.role = role;
    d.dtype = PF_F32;
    d.layout = "C";
    d.rank = 1;
    d.shape[0] = n;
    d.strides[0] = 1;
    d.source = source;
    return d;
  }
  const char* Str(std::string s) { return strings_.emplace_back(std::move(s)).c_str(); }

  const char* model_;
  std::deque<std::string> strings_;
  std::vector<pf_buffer_desc> inputs_;
  std::vector<std::vector<pf_buffer_desc>> bufs_;
  std::vector<pf_kernel_desc> kernels_;
  std::vector<const char*> outputs_;
  std::vector<int64_t> arena_offsets_;
  int64_t plan_arena_ = -1;  // -1: no plan given
  int format_ = PF_FORMAT_VERSION;
  const char* heap_kernel_ = nullptr;
  pf_registry reg_{};
};

// Allocation hooks that count, log ("alloc #n", "free #n" in the order of allocation) and fail
// the fail_at-th allocation (0-based; -1: none).
struct Hooks {
  std::mutex mu;
  int allocs = 0, frees = 0, live = 0, peak = 0, fail_at = -1;
  std::map<void*, int> ids;
  std::vector<size_t> sizes;  // of every allocation since Reset
  std::vector<std::string>* log = nullptr;

  static void* Malloc(void* uc, size_t n) {
    auto* h = static_cast<Hooks*>(uc);
    std::lock_guard<std::mutex> lock(h->mu);
    h->sizes.push_back(n);
    if (h->allocs++ == h->fail_at) return nullptr;
    void* p = std::malloc(n);
    h->ids[p] = h->allocs;
    h->peak = std::max(h->peak, ++h->live);
    if (h->log) h->log->push_back("alloc #" + std::to_string(h->allocs));
    return p;
  }
  static void Free(void* uc, void* p) {
    auto* h = static_cast<Hooks*>(uc);
    std::lock_guard<std::mutex> lock(h->mu);
    h->frees++;
    h->live--;
    if (h->log) h->log->push_back("free #" + std::to_string(h->ids[p]));
    h->ids.erase(p);
    std::free(p);
  }
  pf_model_options Options() { return pf_model_options{Malloc, Free, this, 0, 0}; }
  // Without the model's arena: each run allocates its intermediates.
  pf_model_options PerRun() { return pf_model_options{Malloc, Free, this, 1, 0}; }
  void Reset() {
    sizes.clear();
    allocs = frees = peak = 0;
    peak = live;
    fail_at = -1;
  }
};

pf_tensor T(const char* name, float* data, size_t n = 4) {
  static const int64_t kShapes[] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  return pf_tensor{name, data, PF_F32, 1, &kShapes[n], nullptr, n * sizeof(float)};
}

class Model : public testing::Test {
 protected:
  void TearDown() override {
    hooks_.log = nullptr;
    pf_model_close(model_);
    pf_bundle_close(bundle_);
  }
  pf_status Open(Graph& g, const pf_model_options* opts = nullptr) {
    pf_model_close(model_);
    model_ = nullptr;
    pf_bundle_close(bundle_);
    bundle_ = nullptr;
    pf_status s = pf_registry_open(g.Registry(), nullptr, &bundle_, err_, sizeof err_);
    if (s != PF_OK) return s;
    return pf_model_open(bundle_, opts, &model_, err_, sizeof err_);
  }
  pf_status Run(std::vector<pf_tensor> in, std::vector<pf_tensor> out) {
    return pf_model_run(model_, in.data(), static_cast<int>(in.size()), out.data(),
                        static_cast<int>(out.size()), err_, sizeof err_);
  }

  Hooks hooks_;  // outlives model_ (closed in TearDown)
  pf_bundle* bundle_ = nullptr;
  pf_model* model_ = nullptr;
  char err_[PF_ERRLEN] = "";
};

const float kOne[1] = {1.0f};

// x -> a = scale(x) -> b = bias(a) -> j = add(a, b): a branches to b and j, j joins them.
Graph BranchAndJoin() {
  Graph g;
  g.Input("x").Kernel("a", "scale", {"x"}).Kernel("b", "bias", {"a"}, kOne);
  g.Kernel("j", "add", {"a", "b"}).Outputs({"j"});
  return g;
}

TEST_F(Model, BranchAndJoin) {
  Graph g = BranchAndJoin();
  Hooks& h = hooks_;
  std::vector<std::string> log;
  pf_model_options opts = h.PerRun();
  ASSERT_EQ(Open(g, &opts), PF_OK) << err_;
  EXPECT_EQ(h.live, 6);  // the model and its plan (5 arrays); no weight files
  ASSERT_EQ(pf_model_num_inputs(model_), 1);
  EXPECT_STREQ(pf_model_input(model_, 0)->name, "x");
  EXPECT_EQ(pf_model_input(model_, 1), nullptr);
  ASSERT_EQ(pf_model_num_outputs(model_), 1);
  EXPECT_STREQ(pf_model_output_name(model_, 0), "j");
  EXPECT_STREQ(pf_model_output(model_, 0)->layout, "C");
  EXPECT_EQ(pf_model_output(model_, 0)->shape[0], 4);
  EXPECT_EQ(pf_model_output(model_, -1), nullptr);

  h.Reset();
  h.log = &log;
  g_calls = &log;
  float x[4] = {1, 2, 3, -4}, y[4] = {};
  ASSERT_EQ(Run({T("x", x)}, {T("j", y)}), PF_OK) << err_;
  g_calls = nullptr;
  for (int i = 0; i < 4; i++) EXPECT_EQ(y[i], 4 * x[i] + 1) << i;
  // The run's table, then a's output right before a, b's right before b, both freed after j.
  const std::vector<std::string> want = {"alloc #1", "alloc #2", "run scale",
                                         "alloc #3", "run bias", "run add",
                                         "free #2",  "free #3",  "free #1"};
  EXPECT_EQ(log, want);
  EXPECT_EQ(h.allocs, 3);
  EXPECT_EQ(h.frees, 3);
  EXPECT_EQ(h.peak, 6 + 3);

  pf_model_close(model_);
  model_ = nullptr;
  EXPECT_EQ(h.live, 0);
}

// Without the model's arena each intermediate is freed right after its last reader, not at the
// end: a chain keeps two.
TEST_F(Model, ChainFreesEachIntermediateAfterItsReader) {
  Graph g;
  g.Input("x").Kernel("s1", "scale", {"x"}).Kernel("s2", "scale", {"s1"});
  g.Kernel("s3", "scale", {"s2"}).Kernel("s4", "scale", {"s3"}).Outputs({"s4"});
  Hooks& h = hooks_;
  std::vector<std::string> log;
  pf_model_options opts = h.PerRun();
  ASSERT_EQ(Open(g, &opts), PF_OK) << err_;
  h.Reset();
  h.log = &log;
  g_calls = &log;
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  ASSERT_EQ(Run({T(nullptr, x)}, {T(nullptr, y)}), PF_OK) << err_;
  g_calls = nullptr;
  EXPECT_EQ(y[3], 64);
  const std::vector<std::string> want = {"alloc #1",  "alloc #2",  "run scale", "alloc #3",
                                         "run scale", "free #2",   "alloc #4",  "run scale",
                                         "free #3",   "run scale", "free #4",   "free #1"};
  EXPECT_EQ(log, want);
  EXPECT_EQ(h.peak - 6, 3);  // the table and two intermediates
}

// Outputs bound by name in any order or by position; an output read by a later kernel is read
// from the caller's memory; a kernel whose output nothing reads gets a buffer freed right away.
TEST_F(Model, OutputsByNameOrPositionAndDeadEnds) {
  Graph g;
  g.Input("x").Input("z").Kernel("a", "scale", {"x"}).Kernel("dead", "scale", {"z"});
  g.Kernel("b", "add", {"a", "z"}).Outputs({"b", "a"});
  Hooks& h = hooks_;
  std::vector<std::string> log;
  pf_model_options opts = h.PerRun();
  ASSERT_EQ(Open(g, &opts), PF_OK) << err_;
  EXPECT_STREQ(pf_model_output_name(model_, 0), "b");
  EXPECT_STREQ(pf_model_output_name(model_, 1), "a");
  h.Reset();
  h.log = &log;
  float x[4] = {1, 2, 3, 4}, z[4] = {10, 20, 30, 40}, a[4] = {}, b[4] = {};
  ASSERT_EQ(Run({T("z", z), T("x", x)}, {T("a", a), T("b", b)}), PF_OK) << err_;
  EXPECT_EQ(a[1], 4);
  EXPECT_EQ(b[1], 24);
  EXPECT_EQ(log, (std::vector<std::string>{"alloc #1", "alloc #2", "free #2", "free #1"}));
  std::fill(b, b + 4, 0.f);
  ASSERT_EQ(Run({T(nullptr, x), T(nullptr, z)}, {T(nullptr, b), T(nullptr, a)}), PF_OK) << err_;
  EXPECT_EQ(b[3], 48);
  // pf_tensor_of the descriptions binds by their names.
  std::fill(b, b + 4, 0.f);
  pf_tensor in[2] = {pf_tensor_of(pf_model_input(model_, 1), z, sizeof z),
                     pf_tensor_of(pf_model_input(model_, 0), x, sizeof x)};
  pf_tensor out[2] = {pf_tensor_of(pf_model_output(model_, 1), a, sizeof a),
                      pf_tensor_of(pf_model_output(model_, 0), b, sizeof b)};
  ASSERT_EQ(pf_model_run(model_, in, 2, out, 2, err_, sizeof err_), PF_OK) << err_;
  EXPECT_EQ(b[0], 12);
  EXPECT_EQ(h.live, 6);
}

// Every allocation of a run failing in turn: PF_ERR_NO_MEMORY naming what, nothing leaked, and
// the next run works. The same for every allocation of pf_model_open.
TEST_F(Model, MallocFailureAnywhereLeaksNothing) {
  Graph g = BranchAndJoin();
  Hooks& h = hooks_;
  pf_model_options opts = h.PerRun();
  ASSERT_EQ(Open(g, &opts), PF_OK) << err_;
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  for (int n = 0; n < 3; n++) {
    h.Reset();
    h.fail_at = n;
    EXPECT_EQ(Run({T("x", x)}, {T("j", y)}), PF_ERR_NO_MEMORY) << n;
    EXPECT_HAS(err_, n == 0   ? "model 'g': out of memory ("
                     : n == 1 ? "model 'g': out of memory for the output of kernel 'a' (16 bytes)"
                              : "out of memory for the output of kernel 'b'");
    EXPECT_EQ(h.live, 6) << n;
    EXPECT_EQ(h.frees, h.allocs - 1) << n;
  }
  h.Reset();
  ASSERT_EQ(Run({T("x", x)}, {T("j", y)}), PF_OK) << err_;
  EXPECT_EQ(y[0], 5);
  pf_model_close(model_);
  model_ = nullptr;
  EXPECT_EQ(h.live, 0);

  for (int n = 0; n < 6; n++) {
    h.Reset();
    h.fail_at = n;
    EXPECT_EQ(Open(g, &opts), PF_ERR_NO_MEMORY) << n;
    EXPECT_EQ(model_, nullptr);
    EXPECT_EQ(h.live, 0) << n;
  }
}

TEST_F(Model, KernelErrorFreesEverythingAndNamesTheKernel) {
  Graph g;
  g.Input("x").Kernel("a", "scale", {"x"}).Kernel("f", "fail", {"a"});
  g.Kernel("c", "scale", {"f"}).Outputs({"c"});
  Hooks& h = hooks_;
  std::vector<std::string> calls;
  pf_model_options opts = h.PerRun();
  ASSERT_EQ(Open(g, &opts), PF_OK) << err_;
  float x[4] = {}, y[4] = {-1, -1, -1, -1};
  g_calls = &calls;
  EXPECT_EQ(Run({T("x", x)}, {T("c", y)}), PF_ERR_KERNEL);
  g_calls = nullptr;
  EXPECT_STREQ(err_, "model 'g': kernel 'f' (pf_f) failed with Halide error -7");
  EXPECT_EQ(calls, (std::vector<std::string>{"run scale", "run fail"}));
  EXPECT_EQ(h.live, 6);
  EXPECT_EQ(y[0], -1);
}

// ---- pf_model_run in the model's own arena ----

// The first run allocates the arena (the plan's bytes and room to align them) and nothing else;
// later runs allocate nothing; each run computes its own inputs' outputs; close frees the arena.
TEST_F(Model, RunsReuseTheModelsArena) {
  Graph g = BranchAndJoin();
  Hooks& h = hooks_;
  std::vector<std::string> log;
  pf_model_options opts = h.Options();
  ASSERT_EQ(Open(g, &opts), PF_OK) << err_;
  ASSERT_EQ(pf_model_arena_bytes(model_), 2u * PF_ARENA_ALIGNMENT);  // a and b
  h.Reset();
  h.log = &log;
  g_calls = &log;
  for (int r = 0; r < 4; r++) {
    float x[4] = {1.f + r, -2, 3, 0.5f * r}, y[4] = {};
    ASSERT_EQ(Run({T("x", x)}, {T("j", y)}), PF_OK) << err_;
    for (int i = 0; i < 4; i++) EXPECT_EQ(y[i], 4 * x[i] + 1) << r << " " << i;
  }
  g_calls = nullptr;
  h.log = nullptr;
  std::vector<std::string> want = {"alloc #1"};
  for (int r = 0; r < 4; r++) want.insert(want.end(), {"run scale", "run bias", "run add"});
  EXPECT_EQ(log, want);
  EXPECT_EQ(h.sizes, (std::vector<size_t>{3 * PF_ARENA_ALIGNMENT - 1}));
  EXPECT_EQ(h.frees, 0);
  EXPECT_EQ(h.live, 7);
  pf_model_close(model_);
  model_ = nullptr;
  EXPECT_EQ(h.live, 0);
}

// Runs in the arena equal runs that allocate, bit for bit, run after run on new inputs: on a graph
// with a branch, a join, a dead end and an output read by a later kernel, and on a chain whose
// plan puts two intermediates at the same offset.
TEST_F(Model, ArenaRunsEqualPerRunAllocation) {
  Graph branchy;
  branchy.Input("x").Input("z").Kernel("a", "scale", {"x"}).Kernel("dead", "scale", {"z"});
  branchy.Kernel("b", "bias", {"a"}, kOne).Kernel("j", "add", {"a", "b"});
  branchy.Kernel("k", "add", {"j", "z"}).Outputs({"k", "j"});
  Graph chain;
  chain.Input("x").Input("z").Kernel("s1", "scale", {"x"}).Kernel("s2", "scale", {"s1"});
  chain.Kernel("s3", "add", {"s2", "z"}).Kernel("j", "scale", {"s3"});
  chain.Kernel("k", "add", {"j", "z"}).Outputs({"k", "j"});
  chain.Plan({0, 64, 0, -1, -1}, 128);  // s3 where s1 was
  for (Graph* g : {&branchy, &chain}) {
    Hooks& h = hooks_;
    pf_model_options opts = h.Options(), per_run = h.PerRun();
    ASSERT_EQ(Open(*g, &opts), PF_OK) << err_;
    pf_model* allocating = nullptr;
    ASSERT_EQ(pf_model_open(bundle_, &per_run, &allocating, err_, sizeof err_), PF_OK) << err_;
    for (int r = 0; r < 3; r++) {
      float x[4] = {1.5f * r, -2, 3, 0.25f}, z[4] = {10, 20.f * r, 30, 40};
      float k1[4] = {}, j1[4] = {}, k2[4] = {-1, -1, -1, -1}, j2[4] = {-1, -1, -1, -1};
      std::vector<pf_tensor> in = {T("x", x), T("z", z)}, out1 = {T("k", k1), T("j", j1)};
      std::vector<pf_tensor> out2 = {T("k", k2), T("j", j2)};
      ASSERT_EQ(pf_model_run(allocating, in.data(), 2, out1.data(), 2, err_, sizeof err_), PF_OK)
          << err_;
      ASSERT_EQ(Run(in, out2), PF_OK) << err_;
      EXPECT_EQ(std::memcmp(k1, k2, sizeof k1), 0) << r;
      EXPECT_EQ(std::memcmp(j1, j2, sizeof j1), 0) << r;
    }
    pf_model_close(allocating);
  }
}

// A run that finds the arena held (here: a run started by a kernel of another run of the same
// model, on this thread, so the test is deterministic) allocates its intermediates and frees them;
// both runs compute their own outputs, the outer one's intermediates in the arena untouched.
TEST_F(Model, RunFindingTheArenaHeldAllocatesPerRun) {
  Graph g;  // c = a + r = 2x + 4x
  g.Input("x").Kernel("a", "scale", {"x"}).Kernel("r", "reenter", {"a"});
  g.Kernel("c", "add", {"a", "r"}).Outputs({"c"});
  Hooks& h = hooks_;
  pf_model_options opts = h.Options();
  ASSERT_EQ(Open(g, &opts), PF_OK) << err_;
  float x[4] = {1, 2, 3, 4}, y[4] = {}, x2[4] = {-1, 0.5f, 7, 9}, y2[4] = {};
  ASSERT_EQ(Run({T("x", x)}, {T("c", y)}), PF_OK) << err_;  // the arena, allocated
  h.Reset();
  int inner_allocs = -1, inner_frees = -1;
  char inner_err[PF_ERRLEN] = "";
  pf_status inner = PF_ERR_ARGUMENT;
  g_inside = [&] {
    pf_tensor in = T("x", x2), out = T("c", y2);
    inner = pf_model_run(model_, &in, 1, &out, 1, inner_err, sizeof inner_err);
    inner_allocs = h.allocs;
    inner_frees = h.frees;
  };
  std::fill(y, y + 4, 0.f);
  ASSERT_EQ(Run({T("x", x)}, {T("c", y)}), PF_OK) << err_;
  g_inside = nullptr;
  ASSERT_EQ(inner, PF_OK) << inner_err;
  EXPECT_EQ(inner_allocs, 3);  // its table, a and r
  EXPECT_EQ(inner_frees, 3);
  EXPECT_EQ(h.allocs, 3);  // the outer run, in the arena, allocated nothing
  for (int i = 0; i < 4; i++) {
    EXPECT_EQ(y[i], 6 * x[i]) << i;
    EXPECT_EQ(y2[i], 6 * x2[i]) << i;
  }
  EXPECT_EQ(h.live, 7);
}

// The arena failing to allocate: PF_ERR_NO_MEMORY naming it, nothing leaked, the next run
// allocates it. A kernel failing in the arena keeps the arena for the next run.
TEST_F(Model, ArenaMallocFailureAndKernelErrors) {
  Graph g = BranchAndJoin();
  Hooks& h = hooks_;
  pf_model_options opts = h.Options();
  ASSERT_EQ(Open(g, &opts), PF_OK) << err_;
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  h.Reset();
  h.fail_at = 0;
  EXPECT_EQ(Run({T("x", x)}, {T("j", y)}), PF_ERR_NO_MEMORY);
  EXPECT_HAS(err_,
             "model 'g': out of memory for the model's arena (128 bytes, "
             "pf_model_arena_bytes; pf_model_options.per_run_allocation allocates per "
             "intermediate instead)");
  EXPECT_EQ(h.live, 6);
  EXPECT_EQ(y[0], 0);
  h.Reset();
  ASSERT_EQ(Run({T("x", x)}, {T("j", y)}), PF_OK) << err_;
  EXPECT_EQ(y[0], 5);
  EXPECT_EQ(h.allocs, 1);

  Graph bad;
  bad.Input("x").Kernel("a", "scale", {"x"}).Kernel("f", "fail", {"a"});
  bad.Kernel("c", "scale", {"f"}).Outputs({"c"});
  ASSERT_EQ(Open(bad, &opts), PF_OK) << err_;
  float out[4] = {-1, -1, -1, -1};
  for (int r = 0; r < 2; r++) {
    h.Reset();
    EXPECT_EQ(Run({T("x", x)}, {T("c", out)}), PF_ERR_KERNEL);
    EXPECT_STREQ(err_, "model 'g': kernel 'f' (pf_f) failed with Halide error -7");
    EXPECT_EQ(h.allocs, r == 0 ? 1 : 0) << r;
    EXPECT_EQ(h.frees, 0) << r;
    EXPECT_EQ(out[0], -1);
  }
}

// ---- pf_model_run_static ----

// An arena of PF_ARENA_ALIGNMENT-aligned memory, filled with a pattern before each run so that a
// kernel reading a place nobody wrote reads garbage rather than zeros.
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

// Both runs on the same inputs write the same outputs, bit for bit, and the static run allocates
// nothing through the hooks.
TEST_F(Model, StaticRunEqualsTheAllocatingRun) {
  Graph g;  // a branch, a join, a dead end, an output read by a later kernel
  g.Input("x").Input("z").Kernel("a", "scale", {"x"}).Kernel("dead", "scale", {"z"});
  g.Kernel("b", "bias", {"a"}, kOne).Kernel("j", "add", {"a", "b"});
  g.Kernel("k", "add", {"j", "z"}).Outputs({"k", "j"});
  Hooks& h = hooks_;
  pf_model_options opts = h.Options();
  ASSERT_EQ(Open(g, &opts), PF_OK) << err_;
  ASSERT_EQ(pf_model_arena_bytes(model_), 3u * PF_ARENA_ALIGNMENT);  // a, dead, b
  float x[4] = {1.5f, -2, 3, 0.25f}, z[4] = {10, 20, 30, 40};
  float k1[4] = {}, j1[4] = {}, k2[4] = {-1, -1, -1, -1}, j2[4] = {-1, -1, -1, -1};
  ASSERT_EQ(Run({T("x", x), T("z", z)}, {T("k", k1), T("j", j1)}), PF_OK) << err_;
  Arena arena(pf_model_arena_bytes(model_));
  h.Reset();
  std::vector<pf_tensor> in = {T("z", z), T("x", x)}, out = {T("j", j2), T("k", k2)};
  ASSERT_EQ(pf_model_run_static(model_, arena.At(), arena.bytes, in.data(), 2, out.data(), 2, err_,
                                sizeof err_),
            PF_OK)
      << err_;
  EXPECT_EQ(h.allocs, 0);
  EXPECT_EQ(h.frees, 0);
  EXPECT_EQ(std::memcmp(k1, k2, sizeof k1), 0);
  EXPECT_EQ(std::memcmp(j1, j2, sizeof j1), 0);
  for (int i = 0; i < 4; i++) EXPECT_EQ(k2[i], 4 * x[i] + 1 + z[i]) << i;
}

// A plan that reuses memory: s1 and s3 share offset 0, s2 is at 64; every run reads each
// intermediate before its place is written again.
TEST_F(Model, StaticRunReusesTheArenaAsPlanned) {
  Graph g;
  g.Input("x").Kernel("s1", "scale", {"x"}).Kernel("s2", "scale", {"s1"});
  g.Kernel("s3", "scale", {"s2"}).Kernel("s4", "scale", {"s3"}).Outputs({"s4"});
  g.Plan({0, 64, 0, -1}, 128);
  ASSERT_EQ(Open(g), PF_OK) << err_;
  Arena arena(128);
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  std::vector<pf_tensor> in = {T("x", x)}, out = {T("s4", y)};
  ASSERT_EQ(pf_model_run_static(model_, arena.At(), arena.bytes, in.data(), 1, out.data(), 1, err_,
                                sizeof err_),
            PF_OK)
      << err_;
  for (int i = 0; i < 4; i++) EXPECT_EQ(y[i], 16 * x[i]) << i;
}

// The arena is checked before any kernel runs: NULL, misaligned, one byte too small.
TEST_F(Model, StaticRunRefusesABadArenaBeforeRunning) {
  Graph g = BranchAndJoin();
  ASSERT_EQ(Open(g), PF_OK) << err_;
  const size_t need = pf_model_arena_bytes(model_);
  ASSERT_EQ(need, 2u * PF_ARENA_ALIGNMENT);
  Arena arena(need);
  float x[4] = {1, 2, 3, 4}, y[4] = {-1, -1, -1, -1};
  std::vector<pf_tensor> in = {T("x", x)}, out = {T("j", y)};
  std::vector<std::string> calls;
  g_calls = &calls;
  auto run = [&](void* at, size_t bytes) {
    return pf_model_run_static(model_, at, bytes, in.data(), 1, out.data(), 1, err_, sizeof err_);
  };
  EXPECT_EQ(run(arena.At(), need - 1), PF_ERR_SIZE);
  EXPECT_STREQ(err_,
               "model 'g': arena of 127 bytes, the memory plan needs 128 "
               "(PADFOLD_<MODEL>_ARENA_BYTES, pf_model_arena_bytes)");
  for (size_t misalign : {1, 4, 32}) {
    EXPECT_EQ(run(arena.At(misalign), need + PF_ARENA_ALIGNMENT), PF_ERR_ALIGNMENT) << misalign;
    EXPECT_HAS(err_, "is not aligned to 64 bytes (PF_ARENA_ALIGNMENT)");
  }
  EXPECT_EQ(run(nullptr, need), PF_ERR_NULL_DATA);
  EXPECT_STREQ(err_, "model 'g': arena is NULL");
  out[0].name = "nope";  // the tensors too
  EXPECT_EQ(run(arena.At(), need), PF_ERR_TENSOR_NAME);
  EXPECT_HAS(err_, "model 'g': tensor 0 is named 'nope', no output is");
  g_calls = nullptr;
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(y[0], -1);
  out[0].name = "j";
  ASSERT_EQ(run(arena.At(), need), PF_OK) << err_;
  EXPECT_EQ(y[0], 5);
}

// A model's output sharing memory with an input or another output, or a caller tensor inside
// the arena of a static run, is refused before anything runs.
TEST_F(Model, CallerTensorsThatOverlapAreRefused) {
  Graph g;
  g.Input("x").Kernel("a", "scale", {"x"}).Kernel("b", "bias", {"a"}, kOne);
  g.Kernel("j", "add", {"a", "b"}).Outputs({"j", "b"});
  ASSERT_EQ(Open(g), PF_OK) << err_;
  std::vector<std::string> calls;
  g_calls = &calls;
  float x[4] = {1, 2, 3, 4}, y[8] = {};
  EXPECT_EQ(Run({T("x", x)}, {T("j", x), T("b", y)}), PF_ERR_OVERLAP);
  EXPECT_HAS(err_, "model 'g': output 'j' (16 bytes at ");
  EXPECT_HAS(err_, "overlaps input 'x' (16 bytes at ");
  EXPECT_EQ(Run({T("x", x)}, {T("j", y), T("b", y + 2)}), PF_ERR_OVERLAP);
  EXPECT_HAS(err_, "output 'b' (16 bytes at ");
  EXPECT_HAS(err_, "overlaps output 'j'");
  const size_t need = pf_model_arena_bytes(model_);
  Arena arena(need);
  float* inside = static_cast<float*>(arena.At()) + 4;
  std::memcpy(inside, x, sizeof x);
  std::vector<pf_tensor> in = {T("x", inside)}, out = {T("j", y), T("b", y + 4)};
  EXPECT_EQ(
      pf_model_run_static(model_, arena.At(), need, in.data(), 1, out.data(), 2, err_, sizeof err_),
      PF_ERR_OVERLAP);
  EXPECT_HAS(err_, "model 'g': input 'x' (16 bytes at ");
  EXPECT_HAS(err_, "overlaps the arena (");
  g_calls = nullptr;
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(Run({T("x", x)}, {T("j", y), T("b", y + 4)}), PF_OK) << err_;
  EXPECT_EQ(y[0], 4 * x[0] + 1);
}

// A model without intermediates needs no arena: NULL and 0 run it.
TEST_F(Model, StaticRunWithoutIntermediatesTakesNoArena) {
  Graph g;
  g.Input("x").Kernel("a", "scale", {"x"}).Outputs({"a"});
  ASSERT_EQ(Open(g), PF_OK) << err_;
  EXPECT_EQ(pf_model_arena_bytes(model_), 0u);
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  std::vector<pf_tensor> in = {T("x", x)}, out = {T("a", y)};
  ASSERT_EQ(pf_model_run_static(model_, nullptr, 0, in.data(), 1, out.data(), 1, err_, sizeof err_),
            PF_OK)
      << err_;
  EXPECT_EQ(y[3], 8);
}

TEST_F(Model, StaticRunStopsAtAKernelError) {
  Graph g;
  g.Input("x").Kernel("a", "scale", {"x"}).Kernel("f", "fail", {"a"});
  g.Kernel("c", "scale", {"f"}).Outputs({"c"});
  ASSERT_EQ(Open(g), PF_OK) << err_;
  Arena arena(pf_model_arena_bytes(model_));
  float x[4] = {}, y[4] = {-1, -1, -1, -1};
  std::vector<pf_tensor> in = {T("x", x)}, out = {T("c", y)};
  EXPECT_EQ(pf_model_run_static(model_, arena.At(), arena.bytes, in.data(), 1, out.data(), 1, err_,
                                sizeof err_),
            PF_ERR_KERNEL);
  EXPECT_STREQ(err_, "model 'g': kernel 'f' (pf_f) failed with Halide error -7");
  EXPECT_EQ(y[0], -1);
}

// A registry of format 2 has no plan: it opens and runs with pf_model_run, not statically.
TEST_F(Model, FormatTwoRegistryRunsOnlyWithAllocation) {
  Graph g = BranchAndJoin();
  g.Format(PF_FORMAT_VERSION_MIN);
  ASSERT_EQ(PF_FORMAT_VERSION_MIN, 2);
  Hooks& h = hooks_;
  pf_model_options opts = h.Options();
  ASSERT_EQ(Open(g, &opts), PF_OK) << err_;
  EXPECT_EQ(pf_model_arena_bytes(model_), 0u);
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  for (int r = 0; r < 2; r++) {  // no arena to keep: every run allocates its table, a and b
    h.Reset();
    ASSERT_EQ(Run({T("x", x)}, {T("j", y)}), PF_OK) << err_;
    EXPECT_EQ(y[0], 5);
    EXPECT_EQ(h.allocs, 3) << r;
    EXPECT_EQ(h.frees, 3) << r;
  }
  Arena arena(1024);
  std::vector<pf_tensor> in = {T("x", x)}, out = {T("j", y)};
  EXPECT_EQ(pf_model_run_static(model_, arena.At(), arena.bytes, in.data(), 1, out.data(), 1, err_,
                                sizeof err_),
            PF_ERR_UNSUPPORTED);
  EXPECT_STREQ(err_,
               "model 'g': the bundle (format 2) has no memory plan: recompile it with this "
               "padfold (format 5), or run it with pf_model_run");
}

// A kernel keeping Halide scratch on the heap would allocate in a static run: refused before
// anything runs; pf_model_run still runs the model.
TEST_F(Model, StaticRunRefusesAKernelWithHeapScratch) {
  Graph g = BranchAndJoin();
  g.HeapScratch("j");
  ASSERT_EQ(Open(g), PF_OK) << err_;
  float x[4] = {1, 2, 3, 4}, y[4] = {-1, -1, -1, -1};
  Arena arena(1024);
  std::vector<pf_tensor> in = {T("x", x)}, out = {T("j", y)};
  EXPECT_EQ(pf_model_run_static(model_, arena.At(), arena.bytes, in.data(), 1, out.data(), 1, err_,
                                sizeof err_),
            PF_ERR_UNSUPPORTED);
  EXPECT_STREQ(err_,
               "model 'g': kernel 'j' keeps Halide scratch on the heap, so a static run would "
               "allocate (padfold compile's halide scratch line): run it with pf_model_run, or "
               "compile with --fuse none");
  EXPECT_EQ(y[0], -1);
  ASSERT_EQ(Run({T("x", x)}, {T("j", y)}), PF_OK) << err_;
  EXPECT_EQ(y[0], 5);
}

// pf_model_open checks the registry's plan against the graph.
TEST_F(Model, OpenRefusesAPlanThatDoesNotFit) {
  struct Case {
    std::vector<int64_t> offsets;
    int64_t arena;
    const char* message;
  };
  const Case cases[] = {
      {{0, 0, -1},
       128,  // a and b are live together (j reads both)
       "malformed registry: memory plan overlaps the outputs of kernels 'a' and 'b', which are "
       "live at the same time"},
      {{0, -1, -1},
       128,
       "malformed registry: memory plan puts kernel 'b' (an intermediate, 16 bytes) at offset -1 "
       "of an arena of 128 bytes"},
      {{0, 64, 64},
       128,
       "malformed registry: memory plan puts kernel 'j' (a model output, 16 bytes) at offset 64"},
      {{0, 128, -1},
       128,
       "malformed registry: memory plan puts kernel 'b' (an intermediate, 16 bytes) at offset 128 "
       "of an arena of 128 bytes"},
  };
  for (const Case& c : cases) {
    Graph g = BranchAndJoin();
    g.Plan(c.offsets, c.arena);
    EXPECT_EQ(Open(g), PF_ERR_MISMATCH) << c.message;
    EXPECT_HAS(err_, c.message);
    EXPECT_EQ(model_, nullptr);
  }
}

// Different arenas in different threads at once, each run's result right.
TEST_F(Model, StaticRunsInThreadsWithTheirOwnArenas) {
  Graph g = BranchAndJoin();
  ASSERT_EQ(Open(g), PF_OK) << err_;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([&, t] {
      Arena arena(pf_model_arena_bytes(model_));
      char err[PF_ERRLEN];
      for (int r = 0; r < 200; r++) {
        float x[4] = {float(t), float(r), 1, 2}, y[4] = {};
        std::vector<pf_tensor> in = {T("x", x)}, out = {T("j", y)};
        if (pf_model_run_static(model_, arena.At(), arena.bytes, in.data(), 1, out.data(), 1, err,
                                sizeof err) != PF_OK)
          wrong++;
        for (int i = 0; i < 4; i++) wrong += y[i] != 4 * x[i] + 1;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong, 0);
}

struct BadGraph {
  const char* name;
  std::function<void(Graph&)> build;
  const char* message;
};

void PrintTo(const BadGraph& b, std::ostream* os) {
  *os << b.name;
}

class Unrunnable : public Model, public testing::WithParamInterface<BadGraph> {};

TEST_P(Unrunnable, IsRefusedNamingWhy) {
  Graph g;
  GetParam().build(g);
  Hooks& h = hooks_;
  pf_model_options opts = h.Options();
  EXPECT_EQ(Open(g, &opts), PF_ERR_GRAPH);
  EXPECT_EQ(model_, nullptr);
  EXPECT_EQ(h.live, 0);
  EXPECT_HAS(err_, GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Graphs, Unrunnable,
    testing::Values(
        BadGraph{"input_produced_outside_padfold",
                 [](Graph& g) {
                   g.Input("x0").Input("x1", 4, "ONNX node 'resize_1' (Resize)");
                   g.Kernel("a", "add", {"x0", "x1"}).Outputs({"a"});
                 },
                 "model input 'x1' is produced by ONNX node 'resize_1' (Resize), which padfold "
                 "does not generate: run the kernels one by one"},
        BadGraph{"weights_without_values",
                 [](Graph& g) { g.Input("x").Kernel("b", "bias", {"x"}).Outputs({"b"}); },
                 "kernel 'b' buffer 'bias' has no values: the spec names no .npy file for it"},
        BadGraph{"weights_file_in_a_linked_registry",
                 [](Graph& g) {
                   g.Input("x").Kernel("b", "bias", {"x"}, nullptr, "weights/b_bias.npy");
                   g.Outputs({"b"});
                 },
                 "kernel 'b' buffer 'bias' is in the file 'weights/b_bias.npy', and a linked "
                 "registry has no files: compile with --embed-weights"},
        BadGraph{"input_without_source",
                 [](Graph& g) { g.Input("x").Kernel("a", "scale", {nullptr}).Outputs({"a"}); },
                 "kernel 'a' buffer 'input' has no source"},
        BadGraph{"source_names_nothing",
                 [](Graph& g) { g.Input("x").Kernel("a", "scale", {"y"}).Outputs({"a"}); },
                 "kernel 'a' buffer 'input' reads 'y', which is no model input and no layer"},
        BadGraph{"source_runs_later",
                 [](Graph& g) {
                   g.Input("x").Kernel("a", "scale", {"b"}).Kernel("b", "scale", {"x"});
                   g.Outputs({"a"});
                 },
                 "kernel 'a' buffer 'input' reads layer 'b', which does not run before it"},
        BadGraph{"source_is_itself",
                 [](Graph& g) { g.Input("x").Kernel("a", "scale", {"a"}).Outputs({"a"}); },
                 "reads layer 'a', which does not run before it"},
        BadGraph{"feed_shape_differs",
                 [](Graph& g) { g.Input("x", 5).Kernel("a", "scale", {"x"}).Outputs({"a"}); },
                 "kernel 'a' buffer 'input' shape[0] is 4, the tensor 'x' feeding it has 5"},
        BadGraph{"output_names_no_layer",
                 [](Graph& g) {
                   g.Input("x").Kernel("a", "scale", {"x"}).Outputs({"a", "q"});
                 },
                 "model output 'q' names no layer of model 'g'"},
        BadGraph{"no_outputs", [](Graph& g) { g.Input("x").Kernel("a", "scale", {"x"}); },
                 "model 'g' names no outputs"},
        BadGraph{"output_twice",
                 [](Graph& g) {
                   g.Input("x").Kernel("a", "scale", {"x"}).Outputs({"a", "a"});
                 },
                 "model output 'a' is listed twice"},
        BadGraph{"input_named_like_a_layer",
                 [](Graph& g) { g.Input("a").Kernel("a", "scale", {"a"}).Outputs({"a"}); },
                 "model input 'a' has the name of a layer"},
        BadGraph{"no_kernels", [](Graph& g) { g.Input("x"); }, "model 'g' has no kernels"},
        BadGraph{"two_output_buffers",
                 [](Graph& g) {
                   g.Input("x").Kernel("a", "scale", {"x"}).Outputs({"a"});
                   g.Buffers(0)[0].role = PF_ROLE_OUTPUT;
                   g.Buffers(0)[0].source = nullptr;
                 },
                 "kernel 'a' has 2 output buffers, a model run needs exactly one"}),
    [](const auto& info) { return std::string(info.param.name); });

struct BadBinding {
  const char* name;
  std::vector<const char*> in_names, out_names;
  size_t in_size, out_size;  // elements of the tensors
  pf_status status;
  const char* message;
};

void PrintTo(const BadBinding& b, std::ostream* os) {
  *os << b.name;
}

class Binding : public Model, public testing::WithParamInterface<BadBinding> {};

// Checked before anything is allocated or run (beyond the run's table, freed again).
TEST_P(Binding, IsRejectedBeforeAnythingRuns) {
  const BadBinding& p = GetParam();
  Graph g = BranchAndJoin();
  g.Input("w");
  Hooks& h = hooks_;
  std::vector<std::string> calls;
  pf_model_options opts = h.Options();
  ASSERT_EQ(Open(g, &opts), PF_OK) << err_;
  float data[8][8] = {};
  std::vector<pf_tensor> in, out;
  int k = 0;
  for (const char* n : p.in_names) in.push_back(T(n, data[k++], p.in_size));
  for (const char* n : p.out_names) out.push_back(T(n, data[k++], p.out_size));
  g_calls = &calls;
  EXPECT_EQ(Run(in, out), p.status);
  g_calls = nullptr;
  EXPECT_HAS(err_, p.message);
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(h.live, 6);
}

INSTANTIATE_TEST_SUITE_P(
    Tensors, Binding,
    testing::Values(BadBinding{"too_few_inputs",
                               {"x"},
                               {"j"},
                               4,
                               4,
                               PF_ERR_TENSOR_COUNT,
                               "model 'g': expected 2 input tensors, got 1 (x, w)"},
                    BadBinding{"too_many_outputs",
                               {"x", "w"},
                               {"j", "j2"},
                               4,
                               4,
                               PF_ERR_TENSOR_COUNT,
                               "model 'g': expected 1 output tensors, got 2 (j)"},
                    BadBinding{"unknown_input",
                               {"x", "v"},
                               {"j"},
                               4,
                               4,
                               PF_ERR_TENSOR_NAME,
                               "model 'g': tensor 1 is named 'v', no input is (x, w)"},
                    BadBinding{"kernel_output_name",
                               {"x", "w"},
                               {"output"},
                               4,
                               4,
                               PF_ERR_TENSOR_NAME,
                               "model 'g': tensor 0 is named 'output', no output is (j)"},
                    BadBinding{"input_twice",
                               {"w", "w"},
                               {"j"},
                               4,
                               4,
                               PF_ERR_TENSOR_NAME,
                               "model 'g': input 'w' is given twice (tensors 0 and 1)"},
                    BadBinding{"input_shape",
                               {"x", "w"},
                               {"j"},
                               5,
                               4,
                               PF_ERR_SHAPE,
                               "model 'g': input 'x' dim 0 (C): expected 4, got 5"},
                    BadBinding{"output_shape",
                               {"x", "w"},
                               {"j"},
                               4,
                               3,
                               PF_ERR_SHAPE,
                               "model 'g': output 'j' dim 0 (C): expected 4, got 3"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(Model, OtherTensorErrors) {
  Graph g = BranchAndJoin();
  ASSERT_EQ(Open(g), PF_OK) << err_;
  float x[4] = {}, y[4] = {};
  EXPECT_EQ(Run({T("x", nullptr)}, {T("j", y)}), PF_ERR_NULL_DATA);
  EXPECT_HAS(err_, "model 'g': input 'x': data pointer is NULL");
  pf_tensor small = T("j", y);
  small.bytes = 12;
  EXPECT_EQ(Run({T("x", x)}, {small}), PF_ERR_SIZE);
  EXPECT_HAS(err_, "model 'g': output 'j': the kernel accesses 16 bytes, the allocation has 12");
  pf_tensor f16 = T("x", x);
  f16.dtype = PF_F16;
  EXPECT_EQ(Run({f16}, {T("j", y)}), PF_ERR_DTYPE);
  EXPECT_HAS(err_, "model 'g': input 'x': expected dtype float32, got float16");
  EXPECT_EQ(pf_model_run(model_, nullptr, 1, nullptr, 0, err_, sizeof err_), PF_ERR_ARGUMENT);
  EXPECT_EQ(pf_model_run(nullptr, nullptr, 0, nullptr, 0, err_, sizeof err_), PF_ERR_ARGUMENT);
}

TEST_F(Model, OpenArguments) {
  Graph g = BranchAndJoin();
  ASSERT_EQ(pf_registry_open(g.Registry(), nullptr, &bundle_, err_, sizeof err_), PF_OK) << err_;
  pf_model_options half = {Hooks::Malloc, nullptr, nullptr, 0, 0};
  EXPECT_EQ(pf_model_open(bundle_, &half, &model_, err_, sizeof err_), PF_ERR_ARGUMENT);
  EXPECT_HAS(err_, "set both malloc_fn and free_fn, or neither");
  EXPECT_EQ(pf_model_open(nullptr, nullptr, &model_, err_, sizeof err_), PF_ERR_ARGUMENT);
  EXPECT_EQ(pf_model_open(bundle_, nullptr, nullptr, err_, sizeof err_), PF_ERR_ARGUMENT);
  pf_model_options none = {nullptr, nullptr, nullptr, 0, 0};
  EXPECT_EQ(pf_model_open(bundle_, &none, &model_, nullptr, 0), PF_OK);  // defaults, no err
  EXPECT_EQ(pf_model_num_inputs(nullptr), 0);
  EXPECT_EQ(pf_model_output_name(nullptr, 0), nullptr);
  pf_model_close(nullptr);
  EXPECT_STREQ(pf_status_name(PF_ERR_GRAPH), "PF_ERR_GRAPH");
}

TEST_F(Model, ConcurrentRunsMatchSerialRuns) {
  Graph g = BranchAndJoin();
  Hooks& h = hooks_;
  pf_model_options opts = h.Options();
  ASSERT_EQ(Open(g, &opts), PF_OK) << err_;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; t++) {
    threads.emplace_back([&, t] {
      char err[PF_ERRLEN];
      for (int r = 0; r < 200; r++) {
        float x[4] = {float(t), float(r), 1, 2}, y[4] = {};
        pf_tensor in = T("x", x), out = T("j", y);
        if (pf_model_run(model_, &in, 1, &out, 1, err, sizeof err) != PF_OK) wrong++;
        for (int i = 0; i < 4; i++) wrong += y[i] != 4 * x[i] + 1;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(h.live, 7);  // the plan and the model's arena; every per-run block freed
}

TEST_F(Model, CppWrapper) {
  Graph g = BranchAndJoin();
  auto bundle = padfold::rt::Bundle::from_registry(g.Registry());
  auto model = padfold::rt::Model::open(bundle);
  ASSERT_EQ(model.num_outputs(), 1);
  EXPECT_EQ(model.output_name(0), "j");
  EXPECT_STREQ(model.input(0).name, "x");
  float x[4] = {1, 1, 1, 1}, y[4] = {};
  model.run({pf_tensor_of(&model.input(0), x, sizeof x)},
            {pf_tensor_of(&model.output(0), y, sizeof y)});
  EXPECT_EQ(y[2], 5);
  ASSERT_EQ(model.arena_bytes(), 2u * PF_ARENA_ALIGNMENT);
  Arena arena(model.arena_bytes());
  float y2[4] = {};
  model.run_static(arena.At(), arena.bytes, {T("x", x)}, {T("j", y2)});
  EXPECT_EQ(std::memcmp(y, y2, sizeof y), 0);
  try {
    model.run_static(arena.At(), arena.bytes - 1, {T("x", x)}, {T("j", y2)});
    FAIL() << "no exception";
  } catch (const padfold::rt::Error& e) {
    EXPECT_EQ(e.status(), PF_ERR_SIZE);
  }
  try {
    model.run({T("nope", x)}, {T("j", y)});
    FAIL() << "no exception";
  } catch (const padfold::rt::Error& e) {
    EXPECT_EQ(e.status(), PF_ERR_TENSOR_NAME);
    EXPECT_HAS(e.what(), "tensor 0 is named 'nope'");
  }
  EXPECT_THROW(model.output(1), padfold::rt::Error);
  Graph bad;
  bad.Input("x").Kernel("b", "bias", {"x"}).Outputs({"b"});
  auto bad_bundle = padfold::rt::Bundle::from_registry(bad.Registry());
  try {
    padfold::rt::Model::open(bad_bundle);
    FAIL() << "no exception";
  } catch (const padfold::rt::Error& e) {
    EXPECT_EQ(e.status(), PF_ERR_GRAPH);
  }
}

// ---- the fake bundle's model: x -> scale -> add_bias (bias from weights/add_bias_bias.npy);
// c -> checked ----

std::string Zeros(size_t floats) {
  return std::string(floats * 4, '\0');
}

// The fake bundle model's inputs x (0.5 i) and c, and its outputs, as tensors; not copyable (the
// tensors point into it). add_bias is 2 x + 100 (1 + i / 20) where the bias file is 100, 200, 300.
struct ModelIo {
  float x[60], c[2] = {1.5f, 2.5f}, y[60] = {}, cy[2] = {};
  static constexpr int64_t kNCHW[4] = {1, 3, 4, 5}, kTwo[1] = {2};
  pf_tensor in[2] = {{"x", x, PF_F32, 4, kNCHW, nullptr, sizeof x},
                     {"c", c, PF_F32, 1, kTwo, nullptr, sizeof c}};
  pf_tensor out[2] = {{"checked", cy, PF_F32, 1, kTwo, nullptr, sizeof cy},
                      {"add_bias", y, PF_F32, 4, kNCHW, nullptr, sizeof y}};
  ModelIo() {
    for (int i = 0; i < 60; i++) x[i] = 0.5f * static_cast<float>(i);
  }
  ModelIo(const ModelIo&) = delete;
  ModelIo& operator=(const ModelIo&) = delete;
};

class BundleModel : public ScratchBundle {
 protected:
  void SetUp() override {
    ScratchBundle::SetUp();
    fs::create_directories(dir_ / "weights");
    WriteBias({3}, {100, 200, 300});
  }
  void TearDown() override {
    pf_model_close(model_);
    ScratchBundle::TearDown();
  }
  fs::path BiasFile() const { return dir_ / "weights" / "add_bias_bias.npy"; }
  void WriteBias(const std::vector<int64_t>& shape, const std::vector<float>& v) {
    padfold::write_npy_f32(BiasFile().string(), shape, v.data());
  }
  void WriteRaw(const std::string& bytes) {
    fs::remove(BiasFile());
    std::ofstream(BiasFile(), std::ios::binary) << bytes;
  }
  pf_status OpenModel(const pf_model_options* opts = nullptr) {
    if (!bundle_) {
      pf_status s = Open();
      if (s != PF_OK) return s;
    }
    pf_model_close(model_);
    model_ = nullptr;
    return pf_model_open(bundle_, opts, &model_, err_, sizeof err_);
  }
  Hooks hooks_;
  pf_model* model_ = nullptr;
};

// Mapped (the default) or read through the hooks (read_weights), the weights are the file's; a
// mapping allocates nothing from the hooks. Either way the file may go once the model is open.
TEST_F(BundleModel, RunsWithTheWeightsFile) {
  for (int read : {0, 1}) {
    SCOPED_TRACE(read ? "read" : "mapped");
    fs::create_directories(dir_ / "weights");
    WriteBias({3}, {100, 200, 300});
    Hooks& h = hooks_;
    h.Reset();
    pf_model_options opts = h.PerRun();
    opts.read_weights = read;
    ASSERT_EQ(OpenModel(&opts), PF_OK) << err_;
    // The plan (6) and the list of weight files; the bias from its file where it is read, in a
    // block with room to start it at a cache line.
    EXPECT_EQ(h.live, 7 + read);
    EXPECT_EQ(
        std::count(h.sizes.begin(), h.sizes.end(), 3 * sizeof(float) + PF_ARENA_ALIGNMENT - 1),
        read);
    ASSERT_EQ(pf_model_num_inputs(model_), 2);
    ASSERT_EQ(pf_model_num_outputs(model_), 2);
    EXPECT_STREQ(pf_model_output_name(model_, 0), "add_bias");
    EXPECT_STREQ(pf_model_output(model_, 0)->layout, "NCHW");
    ModelIo io;
    float *x = io.x, *y = io.y, *cy = io.cy;
    const pf_tensor *in = io.in, *out = io.out;
    const int live = h.live;
    ASSERT_EQ(pf_model_run(model_, in, 2, out, 2, err_, sizeof err_), PF_OK) << err_;
    for (int i = 0; i < 60; i++) EXPECT_EQ(y[i], 2 * x[i] + 100 * (1 + i / 20)) << i;
    EXPECT_EQ(cy[1], 2.5f);
    EXPECT_EQ(h.peak - live, 2);  // the run's table and scale's output
    fs::remove(BiasFile());
    std::fill(y, y + 60, 0.f);
    ASSERT_EQ(pf_model_run(model_, in, 2, out, 2, err_, sizeof err_), PF_OK) << err_;
    for (int i = 0; i < 60; i++) EXPECT_EQ(y[i], 2 * x[i] + 100 * (1 + i / 20)) << i;
    pf_model_close(model_);
    model_ = nullptr;
    EXPECT_EQ(h.live, 0);
  }
}

// Values at an offset of partial elements cannot be used where they lie: they are read instead.
TEST_F(BundleModel, UnalignedWeightsAreReadNotMapped) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  header.append(64 - (10 + header.size() + 1) % 64 + 2, ' ').push_back('\n');
  const std::string preamble = std::string("\x93NUMPY\1\0", 8) +
                               static_cast<char>(header.size() & 0xff) +
                               static_cast<char>(header.size() >> 8);
  ASSERT_EQ((preamble.size() + header.size()) % 4, 2u);
  const float v[3] = {100, 200, 300};
  WriteRaw(preamble + header + std::string(reinterpret_cast<const char*>(v), sizeof v));
  Hooks& h = hooks_;
  pf_model_options opts = h.PerRun();
  ASSERT_EQ(OpenModel(&opts), PF_OK) << err_;
  EXPECT_EQ(h.live, 8);  // the plan (6), the list of weight files and the bias, read
  ModelIo io;
  ASSERT_EQ(pf_model_run(model_, io.in, 2, io.out, 2, err_, sizeof err_), PF_OK) << err_;
  for (int i = 0; i < 60; i++) EXPECT_EQ(io.y[i], 2 * io.x[i] + 100 * (1 + i / 20)) << i;
}

// The bundle directory's plan (manifest and library: scale, the one intermediate, at 0 of 256
// bytes) runs statically, equal to the allocating run and allocating nothing.
TEST_F(BundleModel, RunsStaticallyInTheManifestsArena) {
  Hooks& h = hooks_;
  pf_model_options opts = h.Options();
  ASSERT_EQ(OpenModel(&opts), PF_OK) << err_;
  ASSERT_EQ(pf_model_arena_bytes(model_), 256u);
  float x[60], c[2] = {1.5f, 2.5f}, y[60] = {}, cy[2] = {}, y2[60] = {}, cy2[2] = {};
  for (int i = 0; i < 60; i++) x[i] = 0.25f * i - 3;
  static const int64_t kNCHW[4] = {1, 3, 4, 5}, kTwo[1] = {2};
  pf_tensor in[2] = {{"x", x, PF_F32, 4, kNCHW, nullptr, sizeof x},
                     {"c", c, PF_F32, 1, kTwo, nullptr, sizeof c}};
  pf_tensor out[2] = {{"checked", cy, PF_F32, 1, kTwo, nullptr, sizeof cy},
                      {"add_bias", y, PF_F32, 4, kNCHW, nullptr, sizeof y}};
  ASSERT_EQ(pf_model_run(model_, in, 2, out, 2, err_, sizeof err_), PF_OK) << err_;
  out[0].data = cy2;
  out[1].data = y2;
  Arena arena(256);
  h.Reset();
  ASSERT_EQ(pf_model_run_static(model_, arena.At(), arena.bytes, in, 2, out, 2, err_, sizeof err_),
            PF_OK)
      << err_;
  EXPECT_EQ(h.allocs, 0);
  EXPECT_EQ(std::memcmp(y, y2, sizeof y), 0);
  EXPECT_EQ(std::memcmp(cy, cy2, sizeof cy), 0);
}

// Runs on padfold's pool (scale's channels are a parallel loop) park its workers when they return,
// allocating or static: within a 1 s spin window they sleep at once, not a second later.
TEST_F(BundleModel, RunsParkThePoolsWorkers) {
  pf_model_options opts = hooks_.Options();
  ASSERT_EQ(OpenModel(&opts), PF_OK) << err_;
  const pf_pool_options po{3, 1000000};
  pf_pool* pool = nullptr;
  ASSERT_EQ(pf_pool_create(&po, &pool, err_, sizeof err_), PF_OK) << err_;
  std::unique_ptr<pf_pool, void (*)(pf_pool*)> owned(pool, pf_pool_destroy);
  ASSERT_EQ(pf_bundle_use_pool(bundle_, pool, err_, sizeof err_), PF_OK) << err_;
  ModelIo io;
  float *x = io.x, *y = io.y;
  const pf_tensor *in = io.in, *out = io.out;
  Arena arena(pf_model_arena_bytes(model_));
  for (bool as_static : {false, true, false}) {
    std::fill(y, y + 60, 0.f);
    ASSERT_EQ(as_static ? pf_model_run_static(model_, arena.At(), arena.bytes, in, 2, out, 2, err_,
                                              sizeof err_)
                        : pf_model_run(model_, in, 2, out, 2, err_, sizeof err_),
              PF_OK)
        << err_;
    const auto returned = std::chrono::steady_clock::now();
    for (int i = 0; i < 60; i++) ASSERT_EQ(y[i], 2 * x[i] + 100 * (1 + i / 20)) << i;
    while (pf_pool_sleeping(pool) != 2 &&
           std::chrono::steady_clock::now() - returned < std::chrono::seconds(5)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(pf_pool_sleeping(pool), 2) << as_static;
    EXPECT_LT(std::chrono::steady_clock::now() - returned, std::chrono::milliseconds(500))
        << as_static;
  }
  ASSERT_EQ(pf_bundle_use_pool(bundle_, nullptr, err_, sizeof err_), PF_OK) << err_;
}

TEST_F(BundleModel, NpyVersion2And3HeadersAreRead) {
  for (char version : {'\2', '\3'}) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
    header.append(64 - (12 + header.size() + 1) % 64, ' ').push_back('\n');
    std::string file = std::string("\x93NUMPY", 6) + version + '\0';
    const uint32_t n = static_cast<uint32_t>(header.size());
    for (int i = 0; i < 4; i++) file += static_cast<char>(n >> (8 * i) & 0xff);
    const float v[3] = {1, 2, 3};
    WriteRaw(file + header + std::string(reinterpret_cast<const char*>(v), sizeof v));
    EXPECT_EQ(OpenModel(), PF_OK) << err_;
  }
}

struct BadNpy {
  const char* name;
  std::function<std::string()> bytes;  // the file's contents; nullptr-returning: see the test
  const char* message;
};

void PrintTo(const BadNpy& b, std::ostream* os) {
  *os << b.name;
}

class BadWeightsFile : public BundleModel, public testing::WithParamInterface<BadNpy> {};

TEST_P(BadWeightsFile, IsRefusedNamingTheFile) {
  WriteRaw(GetParam().bytes());
  Hooks& h = hooks_;
  pf_model_options opts = h.Options();
  EXPECT_EQ(OpenModel(&opts), PF_ERR_IO);
  EXPECT_EQ(model_, nullptr);
  EXPECT_EQ(h.live, 0);
  EXPECT_HAS(err_, ("kernel 'add_bias' buffer 'bias': " + BiasFile().string() + ": ").c_str());
  EXPECT_HAS(err_, GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Files, BadWeightsFile,
    testing::Values(
        BadNpy{"empty", [] { return std::string(); },
               "truncated .npy file: 0 bytes, too short for the magic and version"},
        BadNpy{"not_npy", [] { return std::string("PK\3\4 a zip file"); },
               "not a .npy file: it does not start with"},
        BadNpy{"truncated_data", [] { return padfold::npy_preamble_f32({3}) + Zeros(2); },
               "file has 8 bytes of data, header promises 12 (truncated)"},
        BadNpy{"extra_data", [] { return padfold::npy_preamble_f32({3}) + Zeros(4); },
               "file has 16 bytes of data, header promises 12 (extra bytes at the end)"},
        BadNpy{"truncated_header", [] { return padfold::npy_preamble_f32({3}).substr(0, 40); },
               "truncated .npy file: the header length is 118 bytes but the file has only 30"},
        BadNpy{"wrong_shape", [] { return padfold::npy_preamble_f32({4}) + Zeros(4); },
               "shape (4,), the buffer is C (3,)"},
        BadNpy{"wrong_rank",
               [] {
                 return padfold::npy_preamble_f32({1, 3}) + Zeros(3);
               },
               "shape (1, 3), the buffer is C (3,)"},
        BadNpy{"float64",
               [] {
                 std::string p = padfold::npy_preamble_f32({3});
                 p.replace(p.find("<f4"), 3, "<f8");
                 return p + Zeros(6);
               },
               "dtype '<f8' is not supported, expected little-endian float32 ('<f4')"},
        BadNpy{"big_endian",
               [] {
                 std::string p = padfold::npy_preamble_f32({3});
                 p.replace(p.find("<f4"), 3, ">f4");
                 return p + Zeros(3);
               },
               "dtype '>f4' is not supported"},
        BadNpy{"fortran_order",
               [] {
                 std::string p = padfold::npy_preamble_f32({3});
                 p.replace(p.find("False"), 5, "True ");
                 return p + Zeros(3);
               },
               "fortran_order True (a Fortran-order array) is not supported; expected C order"},
        BadNpy{"version_4",
               [] {
                 std::string p = padfold::npy_preamble_f32({3});
                 p[6] = 4;
                 return p + Zeros(3);
               },
               "unsupported .npy version 4.0 (supported: 1.0, 2.0, 3.0)"},
        BadNpy{"extra_key",
               [] {
                 std::string p = padfold::npy_preamble_f32({3});
                 p.replace(p.find("}"), 9, "'x': 1, }");
                 return p + Zeros(3);
               },
               "unexpected key"},
        BadNpy{"shape_not_a_tuple",
               [] {
                 std::string p = padfold::npy_preamble_f32({3});
                 p.replace(p.find("(3,)"), 4, "(3) ");
                 return p + Zeros(3);
               },
               "'shape' (n) is not a tuple; expected (n,)"}),
    [](const auto& info) { return std::string(info.param.name); });

// The fake bundle's bias is float32: an int32 file (a quantized layer's bias) is refused at open,
// naming the file and both dtypes.
TEST_F(BundleModel, WeightsFileOfAnotherDtypeIsRefused) {
  padfold::write_npy(BiasFile().string(), {3}, padfold::NpyDType::I32,
                     std::vector<int32_t>{100, 200, 300}.data());
  Hooks& h = hooks_;
  pf_model_options opts = h.Options();
  EXPECT_EQ(OpenModel(&opts), PF_ERR_IO);
  EXPECT_EQ(model_, nullptr);
  EXPECT_EQ(h.live, 0);
  EXPECT_HAS(err_, ("kernel 'add_bias' buffer 'bias': " + BiasFile().string() +
                    ": dtype int32 ('<i4'), expected float32 ('<f4'), the buffer's dtype")
                       .c_str());
  padfold::write_npy(BiasFile().string(), {3}, padfold::NpyDType::I8,
                     std::vector<int8_t>{1, 2, 3}.data());
  EXPECT_EQ(OpenModel(&opts), PF_ERR_IO);
  EXPECT_HAS(err_, "dtype int8 ('|i1'), expected float32 ('<f4')");
}

TEST_F(BundleModel, MissingOrMisplacedWeightsFile) {
  fs::remove(BiasFile());
  EXPECT_EQ(OpenModel(), PF_ERR_IO);
  EXPECT_HAS(err_, (BiasFile().string() + ": No such file or directory").c_str());
  fs::create_directory(BiasFile());
  EXPECT_EQ(OpenModel(), PF_ERR_IO);
  EXPECT_HAS(
      err_,
      (BiasFile().string() + ": is a directory, not a regular file; expected a .npy file").c_str());
  fs::remove(BiasFile());
  ASSERT_EQ(::mkfifo(BiasFile().c_str(), 0600), 0);
  EXPECT_EQ(OpenModel(), PF_ERR_IO);
  EXPECT_HAS(err_, "is a FIFO, not a regular file");
  fs::remove(BiasFile());
  // A link leaving the bundle is refused, even to a good file.
  const fs::path outside = dir_.string() + "_outside.npy";
  padfold::write_npy_f32(outside.string(), {3}, std::vector<float>{1, 2, 3}.data());
  fs::create_symlink(outside, BiasFile());
  EXPECT_EQ(OpenModel(), PF_ERR_IO);
  EXPECT_HAS(err_,
             "leads out of the bundle through a symbolic link; expected a file inside the bundle "
             "(a link leaving it is refused)");
  fs::remove(outside);
  // A link inside the bundle is fine.
  fs::remove(BiasFile());
  padfold::write_npy_f32((dir_ / "b.npy").string(), {3}, std::vector<float>{1, 2, 3}.data());
  fs::create_symlink(dir_ / "b.npy", BiasFile());
  EXPECT_EQ(OpenModel(), PF_OK) << err_;
}

// The loader itself refuses paths leaving the bundle (the manifest check refuses them first).
TEST(NpyLoader, PathsMustStayInsideTheBundle) {
  char err[PF_ERRLEN];
  float dst[3];
  pf_buffer_desc b{};
  b.name = "bias";
  b.role = PF_ROLE_BIAS;
  b.layout = "C";
  b.rank = 1;
  b.shape[0] = 3;
  b.strides[0] = 1;
  for (const char* source : {"/etc/passwd", "../x.npy", "weights/../../x.npy", ""}) {
    b.source = source;
    EXPECT_EQ(pf_npy_load_weights("/tmp", "l", &b, dst, sizeof dst, err, sizeof err), PF_ERR_IO);
    EXPECT_HAS(err, "a weights file must be a relative path inside the bundle (no '..')");
  }
  b.source = "w.npy";
  b.dtype = PF_F16;
  EXPECT_EQ(pf_npy_load_weights("/tmp", "l", &b, dst, 6, err, sizeof err), PF_ERR_IO);
  EXPECT_HAS(err, "the runtime reads dense float32, int8, uint8 and int32 buffers only");
}

// The C header parser agrees with the C++ reader (generator/base/npy.h) on what it accepts (and
// runtime_test_dtypes.cpp on the files of other dtypes).
TEST(NpyLoader, HeaderParserAgreesWithTheCppReader) {
  std::vector<std::string> files;
  for (auto shape : std::vector<std::vector<int64_t>>{{}, {0}, {3}, {1, 3, 4, 5}, {2, 0, 7}}) {
    std::string p = padfold::npy_preamble_f32(shape);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    files.push_back(p + std::string(static_cast<size_t>(n) * 4, 'x'));
    files.push_back(p + std::string(static_cast<size_t>(n) * 4 + 1, 'x'));
  }
  std::string p = padfold::npy_preamble_f32({2, 2});
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{{"(2, 2)", "(2,2,)"},
                                                                          {"(2, 2)", "(02, 2)"},
                                                                          {"(2, 2)", "(2, -2)"},
                                                                          {"(2, 2)", "(2, 2.)"},
                                                                          {"'descr'", "\"descr\""},
                                                                          {"False", "false"},
                                                                          {", }", "}  "},
                                                                          {"{", "["},
                                                                          {"'<f4'", "'<f4\\'"}}) {
    std::string q = p;
    q.replace(q.find(from), from.size(), to);
    files.push_back(q + std::string(16, 'x'));
  }
  for (const std::string& f : files) {
    bool cpp_ok = true;
    std::vector<int64_t> cpp_shape;
    try {
      cpp_shape = padfold::parse_npy(f, "f").shape;
    } catch (const std::exception&) {
      cpp_ok = false;
    }
    pf_npy_header h;
    char err[PF_ERRLEN];
    const bool c_ok =
        pf_npy_parse_header(f.data(), f.size(), f.size(), "f", &h, err, sizeof err) == PF_OK;
    EXPECT_EQ(c_ok, cpp_ok) << f << ": " << err;
    if (c_ok && cpp_ok) {
      EXPECT_EQ(std::vector<int64_t>(h.shape, h.shape + h.rank), cpp_shape);
    }
  }
}

}  // namespace
