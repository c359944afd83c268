// Running kernels: results, zero copy, thread safety, tensor validation, kernel errors, hooks, and
// the C++ wrapper.
#include <HalideRuntime.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>
#include <type_traits>
#include <vector>

#include "padfold_runtime.hpp"
#include "runtime_test_util.h"

// The registry's hook types are Halide's, so registry.c assigns Halide's setters without casts.
static_assert(std::is_same_v<pf_malloc_fn, halide_malloc_t>);
static_assert(std::is_same_v<pf_free_fn, halide_free_t>);
static_assert(std::is_same_v<pf_task_fn, halide_task_t>);
static_assert(std::is_same_v<pf_do_par_for_fn, halide_do_par_for_t>);
static_assert(std::is_same_v<pf_error_handler_fn, halide_error_handler_t>);

namespace {

const int64_t kNCHW[4] = {1, 3, 4, 5};
const int64_t kC[1] = {3};

pf_tensor Tensor(const char* name, void* data, size_t bytes, const int64_t* shape, int rank) {
  return pf_tensor{name, data, PF_F32, rank, shape, nullptr, bytes};
}

struct Data {
  float in[60], bias[3], out[60];
  explicit Data(float seed = 1) {
    for (int i = 0; i < 60; i++) in[i] = seed * (i - 20) * 0.25f;
    for (int c = 0; c < 3; c++) bias[c] = seed + 10 * c;
    std::fill(std::begin(out), std::end(out), -999.f);
  }
  std::vector<pf_tensor> AddBias() {
    return {Tensor("input", in, sizeof in, kNCHW, 4), Tensor("bias", bias, sizeof bias, kC, 1),
            Tensor("output", out, sizeof out, kNCHW, 4)};
  }
  std::vector<pf_tensor> Scale() {
    return {Tensor(nullptr, in, sizeof in, kNCHW, 4), Tensor(nullptr, out, sizeof out, kNCHW, 4)};
  }
  bool Untouched() const {
    return std::all_of(std::begin(out), std::end(out), [](float v) { return v == -999.f; });
  }
};

class Run : public ScratchBundle {
 protected:
  void SetUp() override {
    ScratchBundle::SetUp();
    ASSERT_EQ(Open(), PF_OK) << err_;
  }
  pf_status Call(const char* layer, const std::vector<pf_tensor>& t) {
    return pf_run(Kernel(layer), t.data(), static_cast<int>(t.size()), err_, sizeof err_);
  }
};

TEST_F(Run, ScaleByPosition) {
  Data d;
  ASSERT_EQ(Call("scale", d.Scale()), PF_OK) << err_;
  for (int i = 0; i < 60; i++) EXPECT_EQ(d.out[i], 2 * d.in[i]) << i;
}

TEST_F(Run, AddBiasByNameInAnyOrder) {
  Data d;
  std::vector<pf_tensor> t = d.AddBias();
  std::swap(t[0], t[2]);  // output, bias, input
  ASSERT_EQ(Call("add_bias", t), PF_OK) << err_;
  for (int i = 0; i < 60; i++) EXPECT_EQ(d.out[i], d.in[i] + d.bias[i / 20]) << i;
}

TEST_F(Run, TensorsFromDescriptions) {
  Data d;
  const pf_kernel_desc* k = Kernel("scale");
  pf_tensor t[2] = {pf_tensor_of(&k->buffers[0], d.in, sizeof d.in),
                    pf_tensor_of(&k->buffers[1], d.out, sizeof d.out)};
  ASSERT_EQ(pf_check(k, t, 2, err_, sizeof err_), PF_OK) << err_;
  EXPECT_TRUE(d.Untouched());
  ASSERT_EQ(pf_run(k, t, 2, err_, sizeof err_), PF_OK) << err_;
  EXPECT_EQ(d.out[59], 2 * d.in[59]);
}

TEST_F(Run, StaticRegistry) {
  pf_bundle* b = nullptr;
  ASSERT_EQ(pf_registry_open(fake_static_registry(), nullptr, &b, err_, sizeof err_), PF_OK);
  const pf_kernel_desc* k = nullptr;
  ASSERT_EQ(pf_bundle_find(b, "add_bias", &k, err_, sizeof err_), PF_OK);
  Data d;
  std::vector<pf_tensor> t = d.AddBias();
  ASSERT_EQ(pf_run(k, t.data(), 3, err_, sizeof err_), PF_OK) << err_;
  EXPECT_EQ(d.out[45], d.in[45] + d.bias[2]);
  pf_bundle_close(b);
}

TEST_F(Run, ConcurrentCallsMatchSerialCalls) {
  const int kThreads = 8, kIters = 50;
  const pf_kernel_desc *scale = Kernel("scale"), *add_bias = Kernel("add_bias");
  const pf_kernel_desc* checked = Kernel("checked");
  auto work = [&](int iter, Data& d, char* err) {
    std::vector<pf_tensor> t = iter % 2 ? d.Scale() : d.AddBias();
    return pf_run(iter % 2 ? scale : add_bias, t.data(), static_cast<int>(t.size()), err,
                  PF_ERRLEN);
  };
  std::vector<Data> serial, parallel;
  for (int i = 0; i < kThreads * kIters; i++) {
    serial.emplace_back(1.f + i);
    parallel.emplace_back(1.f + i);
    ASSERT_EQ(work(i % kIters, serial.back(), err_), PF_OK) << err_;
  }
  std::atomic<int> failures{0}, wrong_messages{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      char err[PF_ERRLEN];
      for (int i = 0; i < kIters; i++) {
        if (work(i, parallel[t * kIters + i], err) != PF_OK) failures++;
        // A failing kernel on the side: its message must be this thread's.
        float in[2] = {-1.f - t, 0}, out[2];
        int64_t two[1] = {2};
        pf_tensor c[2] = {Tensor(nullptr, in, 8, two, 1), Tensor(nullptr, out, 8, two, 1)};
        std::string want = "input[0] is negative (" + std::to_string(-1 - t) + ")";
        if (pf_run(checked, c, 2, err, sizeof err) != PF_ERR_KERNEL ||
            std::string(err).find(want) == std::string::npos)
          wrong_messages++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(wrong_messages, 0);
  for (size_t i = 0; i < serial.size(); i++) {
    ASSERT_EQ(std::memcmp(serial[i].out, parallel[i].out, sizeof serial[i].out), 0) << i;
  }
}

struct BadCall {
  const char* what;
  std::function<void(std::vector<pf_tensor>&, Data&)> change;
  pf_status status;
  const char* message;
};

void PrintTo(const BadCall& c, std::ostream* os) {
  *os << c.what;
}

class BadTensors : public Run, public testing::WithParamInterface<BadCall> {};

TEST_P(BadTensors, AreRejectedBeforeTheKernelRuns) {
  Data d;
  std::vector<pf_tensor> t = d.AddBias();
  GetParam().change(t, d);
  EXPECT_EQ(Call("add_bias", t), GetParam().status) << err_;
  EXPECT_HAS(err_, GetParam().message);
  EXPECT_TRUE(d.Untouched());
}

const int64_t kNCHW_H5[4] = {1, 3, 5, 5};
const int64_t kStridesW2[4] = {60, 20, 5, 2};
const int64_t kStridesNHWC[4] = {60, 1, 15, 3};
const int64_t kStridesDense[4] = {60, 20, 5, 1};

INSTANTIATE_TEST_SUITE_P(
    Classes, BadTensors,
    testing::Values(
        BadCall{"count", [](auto& t, auto&) { t.pop_back(); }, PF_ERR_TENSOR_COUNT,
                "kernel 'add_bias': expected 3 tensors, got 2 (input, bias, output)"},
        BadCall{"unknown name", [](auto& t, auto&) { t[1].name = "bias2"; }, PF_ERR_TENSOR_NAME,
                "kernel 'add_bias': tensor 1 is named 'bias2', no buffer is (input, bias, output)"},
        BadCall{"twice", [](auto& t, auto&) { t[2].name = "input"; }, PF_ERR_TENSOR_NAME,
                "kernel 'add_bias': buffer 'input' is given twice (tensors 0 and 2)"},
        BadCall{"dtype", [](auto& t, auto&) { t[1].dtype = PF_F16; }, PF_ERR_DTYPE,
                "kernel 'add_bias': buffer 'bias': expected dtype float32, got float16"},
        BadCall{"rank", [](auto& t, auto&) { t[0].rank = 3; }, PF_ERR_RANK,
                "kernel 'add_bias': buffer 'input': expected rank 4 (NCHW), got 3"},
        BadCall{"shape", [](auto& t, auto&) { t[0].shape = kNCHW_H5; }, PF_ERR_SHAPE,
                "kernel 'add_bias': buffer 'input' dim 2 (H): expected 4, got 5"},
        BadCall{"strides", [](auto& t, auto&) { t[2].strides = kStridesW2; }, PF_ERR_STRIDES,
                "kernel 'add_bias': buffer 'output' dim 3 (W): expected stride 1, got 2"},
        BadCall{"layout", [](auto& t, auto&) { t[0].strides = kStridesNHWC; }, PF_ERR_STRIDES,
                "buffer 'input' dim 3 (W): expected stride 1, got 3"},
        BadCall{"misaligned",
                [](auto& t, auto& d) { t[0].data = reinterpret_cast<char*>(d.in) + 2; },
                PF_ERR_ALIGNMENT, "buffer 'input': data pointer 0x"},
        BadCall{"null", [](auto& t, auto&) { t[2].data = nullptr; }, PF_ERR_NULL_DATA,
                "kernel 'add_bias': buffer 'output': data pointer is NULL"},
        BadCall{"too small", [](auto& t, auto&) { t[2].bytes -= 4; }, PF_ERR_SIZE,
                "buffer 'output': the kernel accesses 240 bytes, the allocation has 236"},
        BadCall{"no shape", [](auto& t, auto&) { t[1].shape = nullptr; }, PF_ERR_ARGUMENT,
                "buffer 'bias': shape is NULL"}),
    [](const auto& info) {
      std::string name = info.param.what;
      std::replace(name.begin(), name.end(), ' ', '_');
      return name;
    });

TEST_F(Run, ExplicitDenseStridesAreAccepted) {
  Data d;
  std::vector<pf_tensor> t = d.AddBias();
  t[0].strides = kStridesDense;
  EXPECT_EQ(Call("add_bias", t), PF_OK) << err_;
}

TEST_F(Run, KernelErrorIsPropagated) {
  float in[2] = {-1.5f, 2}, out[2] = {0, 0};
  int64_t two[1] = {2};
  EXPECT_EQ(Call("checked", {Tensor(nullptr, in, 8, two, 1), Tensor(nullptr, out, 8, two, 1)}),
            PF_ERR_KERNEL);
  EXPECT_HAS(err_,
             "kernel 'checked' (pf_fake_checked) failed with Halide error -1: "
             "checked: input[0] is negative (-1.5)");
  // errlen 0 is legal: nothing is written to err, and nothing is read from it.
  const pf_kernel_desc* k = Kernel("checked");
  pf_tensor t[2] = {Tensor(nullptr, in, 8, two, 1), Tensor(nullptr, out, 8, two, 1)};
  char unterminated[4] = {'x', 'y', 'z', 'w'};
  EXPECT_EQ(pf_run(k, t, 2, unterminated, 0), PF_ERR_KERNEL);
  EXPECT_EQ(std::string(unterminated, 4), "xyzw");
  EXPECT_EQ(pf_run(k, t, 2, nullptr, 0), PF_ERR_KERNEL);
  in[0] = 1;
  EXPECT_EQ(Call("checked", {Tensor(nullptr, in, 8, two, 1), Tensor(nullptr, out, 8, two, 1)}),
            PF_OK);
  EXPECT_EQ(out[1], 2);
}

// Hooks, on a copy of the static registry whose setters record what they were given.
std::atomic<int> mallocs{0}, frees{0}, par_fors{0}, handlers_installed{0};
void* CountingMalloc(void*, size_t n) {
  return mallocs++, std::malloc(n);
}
void CountingFree(void*, void* p) {
  frees++, std::free(p);
}
int SerialParFor(void* uc, pf_task_fn f, int min, int size, uint8_t* closure) {
  par_fors++;
  for (int i = min; i < min + size; i++) {
    if (int rc = f(uc, i, closure)) return rc;
  }
  return 0;
}

TEST_F(Run, AllocatorAndThreadPoolHooksReachTheHalideRuntime) {
  pf_malloc_fn old_malloc = nullptr;
  pf_free_fn old_free = nullptr;
  pf_do_par_for_fn old_par_for = nullptr;
  ASSERT_EQ(pf_bundle_set_allocator(bundle_, CountingMalloc, CountingFree, &old_malloc, &old_free,
                                    err_, sizeof err_),
            PF_OK);
  ASSERT_EQ(pf_bundle_set_do_par_for(bundle_, SerialParFor, &old_par_for, err_, sizeof err_),
            PF_OK);
  mallocs = frees = par_fors = 0;
  Data d;
  ASSERT_EQ(Call("scale", d.Scale()), PF_OK) << err_;
  EXPECT_EQ(mallocs, 3);  // one scratch row per channel
  EXPECT_EQ(frees, 3);
  EXPECT_EQ(par_fors, 1);
  ASSERT_EQ(
      pf_bundle_set_allocator(bundle_, old_malloc, old_free, nullptr, nullptr, err_, sizeof err_),
      PF_OK);
  ASSERT_EQ(pf_bundle_set_do_par_for(bundle_, old_par_for, nullptr, err_, sizeof err_), PF_OK);
  ASSERT_EQ(Call("scale", d.Scale()), PF_OK) << err_;
  EXPECT_EQ(mallocs, 3);
  EXPECT_EQ(par_fors, 1);
  EXPECT_EQ(
      pf_bundle_set_allocator(bundle_, nullptr, CountingFree, nullptr, nullptr, err_, sizeof err_),
      PF_ERR_ARGUMENT);
}

TEST_F(Run, NumThreadsHook) {
  int old = -1;
  ASSERT_EQ(pf_bundle_set_num_threads(bundle_, 3, &old, err_, sizeof err_), PF_OK);
  EXPECT_EQ(old, 0);
  ASSERT_EQ(pf_bundle_set_num_threads(bundle_, 0, &old, err_, sizeof err_), PF_OK);
  EXPECT_EQ(old, 3);
  EXPECT_EQ(pf_bundle_set_num_threads(bundle_, -1, &old, err_, sizeof err_), PF_ERR_ARGUMENT);
}

pf_error_handler_fn RecordHandler(pf_error_handler_fn fn) {
  handlers_installed += fn != nullptr;
  return nullptr;
}

TEST(Hooks, MissingHooksAndErrorHandlerOption) {
  pf_registry reg = *fake_static_registry();
  reg.hooks = pf_runtime_hooks{};
  reg.hooks.set_error_handler = RecordHandler;
  char err[PF_ERRLEN];
  pf_bundle* b = nullptr;
  pf_open_options keep = {nullptr, 1};
  handlers_installed = 0;
  ASSERT_EQ(pf_registry_open(&reg, &keep, &b, err, sizeof err), PF_OK) << err;
  EXPECT_EQ(handlers_installed, 0);
  EXPECT_EQ(pf_bundle_set_num_threads(b, 2, nullptr, err, sizeof err), PF_ERR_UNSUPPORTED);
  EXPECT_HAS(err, "the registry of model 'fake' (" FAKE_TARGET ") has no set_num_threads hook");
  EXPECT_EQ(
      pf_bundle_set_allocator(b, CountingMalloc, CountingFree, nullptr, nullptr, err, sizeof err),
      PF_ERR_UNSUPPORTED);
  EXPECT_EQ(pf_bundle_set_do_par_for(b, SerialParFor, nullptr, err, sizeof err),
            PF_ERR_UNSUPPORTED);
  pf_bundle_close(b);
  ASSERT_EQ(pf_registry_open(&reg, nullptr, &b, err, sizeof err), PF_OK) << err;
  EXPECT_EQ(handlers_installed, 1);
  pf_bundle_close(b);
}

// An output sharing memory with another buffer of the call is refused before the kernel runs
// (the kernels read their inputs tile by tile while they write): the same array, a partial
// overlap, the output over the bias; arrays that only touch are apart.
TEST_F(Run, AnOutputOverlappingAnotherBufferIsRefused) {
  Data d;
  std::vector<float> mem(200, -999.f);
  auto run = [&](float* in, float* out) {
    return Call("add_bias", {Tensor("input", in, 60 * sizeof(float), kNCHW, 4),
                             Tensor("bias", d.bias, sizeof d.bias, kC, 1),
                             Tensor("output", out, 60 * sizeof(float), kNCHW, 4)});
  };
  EXPECT_EQ(run(mem.data(), mem.data()), PF_ERR_OVERLAP);
  EXPECT_HAS(err_, "kernel 'add_bias': buffer 'output' (240 bytes at ");
  EXPECT_HAS(err_, "overlaps buffer 'input' (240 bytes at ");
  EXPECT_EQ(run(mem.data(), mem.data() + 59), PF_ERR_OVERLAP);
  EXPECT_EQ(run(mem.data() + 59, mem.data()), PF_ERR_OVERLAP);
  EXPECT_TRUE(std::all_of(mem.begin(), mem.end(), [](float v) { return v == -999.f; }));
  std::vector<float> big(60);
  EXPECT_EQ(Call("add_bias", {Tensor("input", d.in, sizeof d.in, kNCHW, 4),
                              Tensor("bias", big.data() + 10, 3 * sizeof(float), kC, 1),
                              Tensor("output", big.data(), 60 * sizeof(float), kNCHW, 4)}),
            PF_ERR_OVERLAP);
  EXPECT_HAS(err_, "buffer 'output' (240 bytes at ");
  EXPECT_HAS(err_, "overlaps buffer 'bias'");
  for (int i = 0; i < 60; i++) mem[i] = d.in[i];
  ASSERT_EQ(run(mem.data(), mem.data() + 60), PF_OK) << err_;
  EXPECT_EQ(mem[60], d.in[0] + d.bias[0]);
  EXPECT_STREQ(pf_status_name(PF_ERR_OVERLAP), "PF_ERR_OVERLAP");
}

TEST(Names, StatusDtypeRole) {
  EXPECT_STREQ(pf_status_name(PF_OK), "PF_OK");
  EXPECT_STREQ(pf_status_name(PF_ERR_SHAPE), "PF_ERR_SHAPE");
  EXPECT_STREQ(pf_status_name(PF_ERR_KERNEL), "PF_ERR_KERNEL");
  EXPECT_STREQ(pf_status_name(static_cast<pf_status>(99)), "PF_UNKNOWN_STATUS");
  EXPECT_STREQ(pf_dtype_name(PF_I8), "int8");
  EXPECT_EQ(pf_dtype_size(PF_F16), 2u);
  EXPECT_STREQ(pf_role_name(PF_ROLE_WEIGHTS), "weights");
}

TEST_F(Run, CppWrapper) {
  using padfold::rt::Bundle;
  Bundle b = Bundle::open(dir_.string());
  EXPECT_EQ(b.model(), "fake");
  ASSERT_EQ(b.kernels().size(), 3u);
  Data d;
  b.kernel("scale").run(d.Scale());
  EXPECT_EQ(d.out[7], 2 * d.in[7]);
  try {
    b.kernel("nope");
    FAIL() << "no exception";
  } catch (const padfold::rt::Error& e) {
    EXPECT_EQ(e.status(), PF_ERR_NOT_FOUND);
    EXPECT_HAS(e.what(), "'nope'");
  }
  std::vector<pf_tensor> t = d.AddBias();
  t[0].shape = kNCHW_H5;
  try {
    b.kernel("add_bias").run(t);
    FAIL() << "no exception";
  } catch (const padfold::rt::Error& e) {
    EXPECT_EQ(e.status(), PF_ERR_SHAPE);
  }
  EXPECT_THROW(Bundle::open((dir_ / "gone").string()), padfold::rt::Error);
}

}  // namespace
