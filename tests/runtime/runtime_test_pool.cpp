// padfold's worker pool (runtime/pool.c): each index of a loop runs once, on several threads;
// failures, nested loops and loops from several threads at once; the spin window and park really
// let the workers sleep; bad options. Loops run through pf_pool_do_par_for (internal.h), the
// function a bundle's kernels reach through pf_bundle_use_pool; the fake bundle's scale kernel
// runs its channels on the pool.
#include <HalideRuntime.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime_test_util.h"

extern "C" {
#include "internal.h"
}

namespace {

struct PoolDeleter {
  void operator()(pf_pool* p) const { pf_pool_destroy(p); }
};
using PoolPtr = std::unique_ptr<pf_pool, PoolDeleter>;

PoolPtr MakePool(int threads, int spin_us) {
  char err[PF_ERRLEN] = "";
  pf_pool_options o{threads, spin_us};
  pf_pool* p = nullptr;
  EXPECT_EQ(pf_pool_create(&o, &p, err, sizeof err), PF_OK) << err;
  return PoolPtr(p);
}

// A loop's state: how often each index ran and on which threads; `fail_at` returns -5 there.
struct Loop {
  std::vector<std::atomic<int>> runs;
  std::mutex mu;
  std::set<std::thread::id> threads;
  int min = 0, fail_at = -1000000;
  std::function<void(int)> body;  // run for each index, if set
  explicit Loop(int size, int min_ = 0) : runs(static_cast<size_t>(size)), min(min_) {}

  static int Task(void* uc, int i, uint8_t* closure) {
    auto* l = reinterpret_cast<Loop*>(closure);
    (void)uc;
    l->runs[static_cast<size_t>(i - l->min)]++;
    {
      std::lock_guard<std::mutex> lock(l->mu);
      l->threads.insert(std::this_thread::get_id());
    }
    if (l->body) l->body(i);
    return i == l->fail_at ? -5 : 0;
  }
  int Run(pf_pool* p) {
    return pf_pool_do_par_for(p, nullptr, Task, min, static_cast<int>(runs.size()),
                              reinterpret_cast<uint8_t*>(this));
  }
  bool EachOnce() const {
    return std::all_of(runs.begin(), runs.end(), [](const std::atomic<int>& n) { return n == 1; });
  }
};

// Waits (up to 5 s) until all but the caller's thread of p sleep.
bool AllAsleep(pf_pool* p) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (pf_pool_sleeping(p) != pf_pool_threads(p) - 1) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

int NeverCalled(void*, pf_task_fn, int, int, uint8_t*) {
  ADD_FAILURE() << "the probe do_par_for ran";
  return -1;
}

// The bundle's do_par_for now (swapped out and back).
pf_do_par_for_fn CurrentParFor(pf_bundle* b) {
  pf_do_par_for_fn now = nullptr;
  EXPECT_EQ(pf_bundle_set_do_par_for(b, NeverCalled, &now, nullptr, 0), PF_OK);
  EXPECT_EQ(pf_bundle_set_do_par_for(b, now, nullptr, nullptr, 0), PF_OK);
  return now;
}

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

TEST(Pool, EveryIndexRunsOnce) {
  PoolPtr p = MakePool(3, -1);
  ASSERT_TRUE(p);
  EXPECT_EQ(pf_pool_threads(p.get()), 3);
  for (int size : {0, 1, 2, 3, 7, 1000}) {
    for (int min : {0, -5, 40}) {
      Loop l(size, min);
      EXPECT_EQ(l.Run(p.get()), 0);
      EXPECT_TRUE(l.EachOnce()) << size << " from " << min;
    }
  }
}

// Two indices that each wait for the other to start: they can only finish on two threads at once.
TEST(Pool, IndicesRunOnSeveralThreadsAtOnce) {
  PoolPtr p = MakePool(2, -1);
  ASSERT_TRUE(p);
  for (int round = 0; round < 20; round++) {
    Loop l(2);
    std::atomic<int> started{0};
    std::atomic<bool> alone{false};
    l.body = [&](int) {
      started++;
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (started < 2)
        if (std::chrono::steady_clock::now() > end) return void(alone = true);
    };
    EXPECT_EQ(l.Run(p.get()), 0);
    EXPECT_FALSE(alone) << "round " << round << ": an index waited 10 s for the other";
    EXPECT_EQ(l.threads.size(), 2u);
    EXPECT_TRUE(l.EachOnce());
  }
}

TEST(Pool, OneThreadRunsOnTheCaller) {
  PoolPtr p = MakePool(1, -1);
  ASSERT_TRUE(p);
  Loop l(100);
  EXPECT_EQ(l.Run(p.get()), 0);
  EXPECT_TRUE(l.EachOnce());
  EXPECT_EQ(l.threads, std::set<std::thread::id>{std::this_thread::get_id()});
}

// A failing index: the loop returns its error, the pool runs the next loop whole.
TEST(Pool, AFailingTaskFailsTheLoopAndThePoolGoesOn) {
  PoolPtr p = MakePool(2, -1);
  ASSERT_TRUE(p);
  for (int fail_at : {0, 17, 99}) {
    Loop bad(100);
    bad.fail_at = fail_at;
    EXPECT_EQ(bad.Run(p.get()), -5) << fail_at;
    for (const std::atomic<int>& n : bad.runs) EXPECT_LE(n, 1);
    Loop good(100);
    EXPECT_EQ(good.Run(p.get()), 0);
    EXPECT_TRUE(good.EachOnce());
  }
}

// A loop inside a task runs whole (on the task's thread).
TEST(Pool, NestedLoopsRunWhole) {
  PoolPtr p = MakePool(2, -1);
  ASSERT_TRUE(p);
  Loop outer(8);
  std::vector<std::unique_ptr<Loop>> inner;
  for (int i = 0; i < 8; i++) inner.push_back(std::make_unique<Loop>(50));
  outer.body = [&](int i) { EXPECT_EQ(inner[static_cast<size_t>(i)]->Run(p.get()), 0); };
  EXPECT_EQ(outer.Run(p.get()), 0);
  EXPECT_TRUE(outer.EachOnce());
  for (const auto& l : inner) {
    EXPECT_TRUE(l->EachOnce());
    EXPECT_EQ(l->threads.size(), 1u);
  }
}

// Four threads run loops on one pool at once: every loop whole, each index once.
TEST(Pool, LoopsFromSeveralThreadsAtOnce) {
  PoolPtr p = MakePool(2, -1);
  ASSERT_TRUE(p);
  constexpr int kCallers = 4, kLoops = 300;
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; t++) {
    callers.emplace_back([&, t] {
      for (int n = 0; n < kLoops; n++) {
        Loop l(1 + (n * 7 + t) % 64);
        if (l.Run(p.get()) != 0 || !l.EachOnce()) bad++;
      }
    });
  }
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(bad, 0);
}

// After a loop, the workers spin for the window and then sleep: with no window at once, with a
// short one soon after it.
TEST(Pool, IdleWorkersSleepAfterTheSpinWindow) {
  for (int spin_us : {0, 20000}) {
    PoolPtr p = MakePool(3, spin_us);
    ASSERT_TRUE(p);
    Loop l(64);
    EXPECT_EQ(l.Run(p.get()), 0);
    EXPECT_TRUE(AllAsleep(p.get())) << spin_us;
  }
}

// Park: workers inside a 1 s spin window sleep at once and use no CPU after it.
TEST(Pool, ParkedWorkersUseNoCpu) {
  PoolPtr p = MakePool(3, 1000000);
  ASSERT_TRUE(p);
  Loop l(64);
  EXPECT_EQ(l.Run(p.get()), 0);
  const auto parked = std::chrono::steady_clock::now();
  pf_pool_park(p.get());
  ASSERT_TRUE(AllAsleep(p.get()));
  EXPECT_LT(std::chrono::steady_clock::now() - parked, std::chrono::milliseconds(500));
  const double before = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LT(ProcessCpuSeconds() - before, 0.05);
  Loop again(64);  // and they wake for the next loop
  EXPECT_EQ(again.Run(p.get()), 0);
  EXPECT_TRUE(again.EachOnce());
}

TEST(Pool, BadOptionsAreRefused) {
  char err[PF_ERRLEN] = "";
  pf_pool* p = nullptr;
  for (pf_pool_options o :
       {pf_pool_options{-1, 0}, pf_pool_options{257, 0}, pf_pool_options{2, 1000001}}) {
    EXPECT_EQ(pf_pool_create(&o, &p, err, sizeof err), PF_ERR_ARGUMENT);
    EXPECT_HAS(err, "expected 0 (the cores) to 256 threads");
    EXPECT_EQ(p, nullptr);
  }
  EXPECT_EQ(pf_pool_create(nullptr, nullptr, err, sizeof err), PF_ERR_ARGUMENT);
  ASSERT_EQ(pf_pool_create(nullptr, &p, err, sizeof err), PF_OK) << err;  // the cores
  EXPECT_GE(pf_pool_threads(p), 1);
  pf_pool_destroy(p);
  pf_pool_destroy(nullptr);
  pf_pool_park(nullptr);
}

// The fake bundle's scale kernel runs its channels through the installed pool; NULL gives them
// back to the bundle's own do_par_for; a destroyed pool leaves them serial.
TEST_F(ScratchBundle, ABundlesLoopsRunOnTheInstalledPool) {
  ASSERT_EQ(Open(), PF_OK) << err_;
  const pf_kernel_desc* k = Kernel("scale");
  ASSERT_TRUE(k);
  PoolPtr p = MakePool(2, -1);
  ASSERT_TRUE(p);
  const pf_do_par_for_fn own = CurrentParFor(bundle_);
  ASSERT_EQ(pf_bundle_use_pool(bundle_, p.get(), err_, sizeof err_), PF_OK) << err_;
  EXPECT_NE(CurrentParFor(bundle_), own);
  ASSERT_EQ(pf_bundle_use_pool(bundle_, p.get(), err_, sizeof err_), PF_OK) << err_;  // twice
  EXPECT_EQ(pf_bundle_use_pool(nullptr, p.get(), err_, sizeof err_), PF_ERR_ARGUMENT);
  std::vector<float> x(60), y(60);
  for (size_t i = 0; i < x.size(); i++) x[i] = static_cast<float>(i) - 7.5f;
  auto run = [&] {
    std::fill(y.begin(), y.end(), -1.f);
    pf_tensor t[2] = {pf_tensor_of(&k->buffers[0], x.data(), 240),
                      pf_tensor_of(&k->buffers[1], y.data(), 240)};
    EXPECT_EQ(pf_run(k, t, 2, err_, sizeof err_), PF_OK) << err_;
    for (size_t i = 0; i < x.size(); i++) EXPECT_EQ(y[i], 2 * x[i]) << i;
  };
  run();
  ASSERT_EQ(pf_bundle_use_pool(bundle_, nullptr, err_, sizeof err_), PF_OK) << err_;
  EXPECT_EQ(CurrentParFor(bundle_), own);
  run();
  ASSERT_EQ(pf_bundle_use_pool(bundle_, p.get(), err_, sizeof err_), PF_OK) << err_;
  p.reset();
  run();
}

}  // namespace
