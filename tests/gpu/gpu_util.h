// Helpers of the GPU tests: bundles compiled once per process, kernels run through the C runtime
// on random data and compared with the naive reference.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frontend/spec.h"
#include "kernel_runner.h"
#include "padfold_runtime.h"

namespace padfold::testing {

// Compiles `spec_json` for `targets` (a fresh directory under the test's temporary folder, named
// `name`) with the knob overrides ({layer: {knob: value}}) and returns the bundle directory.
// Throws on failure.
std::filesystem::path compile_test_bundle(
    const std::string& name, const std::string& spec_json, const std::vector<std::string>& targets,
    bool device_code = false, const nlohmann::json& overrides = nlohmann::json::object());

// One layer's random data and reference output (conv/pool: random_data/reference_output; add and
// concat: their inputs and the sum or channel concatenation).
struct LayerCase {
  const Layer* layer = nullptr;
  std::vector<ref::Tensor> inputs;  // in buffer order: input(s), weights, bias
  ref::Tensor reference;
};
LayerCase make_layer_case(const Layer& layer, unsigned seed);

// Runs kernel k on the case's inputs into `out`; returns pf_run's status, its message in `message`.
pf_status run_case(const pf_kernel_desc* k, const LayerCase& c, std::vector<float>& out,
                   std::string& message);

// Makes the runtime's CUDA probe find no driver while it lives (PADFOLD_CUDA_DRIVER names a
// missing file), as on a machine without one, wherever the tests run.
struct NoCudaDriver {
  NoCudaDriver() { setenv("PADFOLD_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1); }
  ~NoCudaDriver() { unsetenv("PADFOLD_CUDA_DRIVER"); }
  NoCudaDriver(const NoCudaDriver&) = delete;
  NoCudaDriver& operator=(const NoCudaDriver&) = delete;
};

}  // namespace padfold::testing
