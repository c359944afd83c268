#include "measure/memory_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace padfold::measure {
namespace {

// Per thread, each of its two buffers: 8 times the 32 MiB L3 of the EPYC guests this runs on.
constexpr size_t kFloats = size_t{64} << 20 >> 2;
constexpr int kPasses = 5;

volatile float scale = 1.0f;  // read at run time: the copy cannot become a memcpy

// Every thread waits here until all have arrived (C++17 has no std::barrier).
class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n) {}
  void arrive_and_wait() {
    const int generation = generation_.load();
    if (arrived_.fetch_add(1) + 1 == n_) {
      arrived_.store(0);
      generation_.fetch_add(1);
      return;
    }
    while (generation_.load() == generation) std::this_thread::yield();
  }

 private:
  const int n_;
  std::atomic<int> arrived_{0}, generation_{0};
};

}  // namespace

double memory_bandwidth_gbps(int threads) {
  threads = std::max(threads, 1);
  std::vector<std::unique_ptr<float[]>> src(static_cast<size_t>(threads)),
      dst(static_cast<size_t>(threads));
  std::vector<double> seconds(static_cast<size_t>(threads) * kPasses);
  SpinBarrier sync(threads);
  auto work = [&](int t) {
    // First touched by the thread that copies them: on a NUMA machine, its own node's memory.
    src[static_cast<size_t>(t)] = std::make_unique<float[]>(kFloats);
    dst[static_cast<size_t>(t)] = std::make_unique<float[]>(kFloats);
    float* s = src[static_cast<size_t>(t)].get();
    float* d = dst[static_cast<size_t>(t)].get();
    std::fill(s, s + kFloats, 1.0f);
    std::fill(d, d + kFloats, 0.0f);
    const float k = scale;
    for (int p = 0; p < kPasses; ++p) {
      sync.arrive_and_wait();
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < kFloats; ++i) d[i] = s[i] * k;
      seconds[static_cast<size_t>(p * threads + t)] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& th : pool) th.join();
  double best = 0;
  for (int p = 0; p < kPasses; ++p) {
    // A pass lasts as long as its slowest thread.
    const auto first = seconds.begin() + p * threads;
    const double slowest = *std::max_element(first, first + threads);
    if (slowest > 0) best = std::max(best, 2.0 * sizeof(float) * kFloats * threads / slowest / 1e9);
  }
  return best;
}

}  // namespace padfold::measure
