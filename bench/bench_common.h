// What the benchmarks share (bench_conv, bench_blocks): aligned buffers, the element-wise check,
// padfold kernels bound to buffers; the probes of a shared machine and the interleaved timing are
// generator/measure/timing.h. Header-only; each benchmark is one translation unit.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "measure/timing.h"
#include "padfold_runtime.h"

namespace bench {

using namespace padfold::measure;  // Clock, Method, median, time_while_quiet, ...

[[noreturn]] inline void fail(const std::string& msg) {
  std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, msg.c_str());
  std::exit(1);
}

// ---------------------------------------------------------------------------------------------
// Buffers

struct Buffer {
  float* data = nullptr;
  size_t count = 0;
  explicit Buffer(size_t n = 0) : count(n) {
    if (n) {
      data = static_cast<float*>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64));
      if (!data) fail("out of memory");
      std::memset(data, 0, n * 4);
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { std::free(data); }
  size_t bytes() const { return count * sizeof(float); }
};

inline void fill_random(Buffer& b, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (size_t i = 0; i < b.count; ++i) b.data[i] = dist(rng);
}

// max |a - b| / max |b|
inline double rel_diff(const float* a, const float* b, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// ---------------------------------------------------------------------------------------------
// padfold

struct PfKernel {
  const pf_kernel_desc* desc = nullptr;
  std::vector<pf_tensor> tensors;
  void bind(const std::map<std::string, Buffer*>& bufs) {
    tensors.clear();
    for (int i = 0; i < desc->num_buffers; ++i) {
      const pf_buffer_desc& b = desc->buffers[i];
      auto it = bufs.find(b.name);
      if (it == bufs.end()) fail(std::string("no buffer for ") + b.name);
      size_t elems = 1;
      for (int d = 0; d < b.rank; ++d) elems *= static_cast<size_t>(b.shape[d]);
      if (elems != it->second->count)
        fail(std::string(desc->layer) + ": buffer " + b.name + " has " + std::to_string(elems) +
             " elements, the benchmark allocated " + std::to_string(it->second->count));
      tensors.push_back(pf_tensor_of(&b, it->second->data, it->second->bytes()));
    }
  }
  void run() {
    char err[PF_ERRLEN];
    if (pf_run(desc, tensors.data(), static_cast<int>(tensors.size()), err, sizeof err) != PF_OK)
      fail(std::string("pf_run ") + desc->layer + ": " + err);
  }
};

// The weights kernel k reads where it reads them prepared (a bundle compiled with
// --prepare-entry): what its prepare kernel writes from `raw`, run once here, outside any timing,
// as oneDNN reorders its weights once when its primitive is created. nullptr: k reads `raw`.
inline std::unique_ptr<Buffer> prepared_weights(const pf_bundle* b, const pf_kernel_desc* k,
                                                Buffer& raw) {
  const pf_kernel_desc* p = pf_bundle_prepare_kernel(b, k);
  if (!p) return nullptr;
  size_t elems = 1;
  for (int d = 0; d < p->buffers[1].rank; ++d) elems *= static_cast<size_t>(p->buffers[1].shape[d]);
  auto out = std::make_unique<Buffer>(elems);
  PfKernel prepare;
  prepare.desc = p;
  prepare.bind({{"weights", &raw}, {"prepared", out.get()}});
  prepare.run();
  return out;
}

}  // namespace bench
