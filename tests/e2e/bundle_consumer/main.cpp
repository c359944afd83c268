// Links padfold::tiny from the bundle's generated CMake file: runs every kernel through the static
// registry (C++ wrapper padfold_runtime.hpp), and one kernel directly through its generated header
// (padfold_tiny.h) to check that the headers and the kernel library are usable as they are.
#include <cmath>
#include <cstdio>
#include <vector>

#include "HalideRuntime.h"  // the bundle's copy: halide_filter_metadata_t
#include "padfold_runtime.hpp"
#include "padfold_tiny.h"

extern "C" const pf_registry padfold_registry_tiny;

int main() {
  try {
    auto bundle = padfold::rt::Bundle::from_registry(&padfold_registry_tiny);
    int n = 0;
    for (const padfold::rt::Kernel& k : bundle.kernels()) {
      std::vector<std::vector<float>> mem(static_cast<size_t>(k.num_buffers()));
      std::vector<pf_tensor> t;
      for (int j = 0; j < k.num_buffers(); ++j) {
        auto& m = mem[static_cast<size_t>(j)];
        m.assign(pf_buffer_bytes(&k.buffer(j)) / sizeof(float), 0.5f);
        t.push_back(pf_tensor_of(&k.buffer(j), m.data(), m.size() * sizeof(float)));
      }
      k.run(t);  // throws padfold::rt::Error with the runtime's message
      for (float v : mem.back()) {
        if (!std::isfinite(v)) {
          std::fprintf(stderr, "%s: non-finite output\n", k.layer());
          return 1;
        }
      }
      ++n;
    }
    // The generated metadata of a kernel, straight from libpadfold_tiny.a.
    const halide_filter_metadata_t* md = pf_4_tiny_stem_metadata();
    if (!md || md->num_arguments != 4) {
      std::fprintf(stderr, "pf_4_tiny_stem_metadata: unexpected\n");
      return 1;
    }
    std::printf("consumer ok: %d kernels on target %s; pf_4_tiny_stem has %d arguments\n", n,
                bundle.target().c_str(), md->num_arguments);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
