// Runs one layer both ways, for tests: padfold's Halide kernel (JIT-compiled with the same
// algorithm and schedule that `padfold compile` emits) and the naive reference, on the same random
// data in [-1, 1].
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>

#include "algorithm/weight_form.h"
#include "compile/block.h"
#include "frontend/spec.h"
#include "reference/layer_reference.h"

namespace padfold::testing {

// padfold's output, JIT-compiled for `target` ("host" or a Halide target string) with the default
// schedule, overridden by `schedule` (ScheduleParams fields as JSON).
// A quantize layer's integers from real values x, and a dequantize layer's real values from
// integers q (the edges of a quantized model), JIT-compiled as kernel_output is.
ref::QTensor quantize_kernel_output(const Layer& layer, const ref::Tensor& x,
                                    const std::string& target = "host");
ref::Tensor dequantize_kernel_output(const Layer& layer, const ref::QTensor& q,
                                     const std::string& target = "host");

// With a prepared `form`, the kernel reads the weights as the compile prepares them
// (prepare_weights).
ref::Tensor kernel_output(const Layer& layer, const ref::LayerData& data,
                          const std::string& target = "host",
                          const nlohmann::json& schedule = nlohmann::json::object(),
                          const WeightForm& form = {});

// A conv ending in a residual add, from a model of the conv and then the add reading a second
// input and the conv's output: the block of both, the conv's random data, a residual input and
// the reference output of the add. `model` must outlive it.
struct ResidualCase {
  Block block;
  ref::LayerData data;
  ref::Tensor residual, want;
};
ResidualCase residual_case(const Model& model, unsigned seed);

// A conv ending in a residual add (`block`: the conv, then the add reading `residual` and the
// conv's output; one kernel, the add in its epilogue) on `data`, JIT-compiled as kernel_output is.
ref::Tensor residual_kernel_output(const Block& block, const ref::LayerData& data,
                                   const ref::Tensor& residual, const std::string& target,
                                   const nlohmann::json& schedule, const WeightForm& form = {});

// A quantized layer's output (docs/int8.md) on `data`, JIT-compiled as kernel_output is. With a
// prepared `form`, the kernel reads the weights and bias as the compile prepares them
// (prepare_weights, prepare_bias).
ref::QTensor quant_kernel_output(const Layer& layer, const ref::QLayerData& data,
                                 const std::string& target = "host",
                                 const nlohmann::json& schedule = nlohmann::json::object(),
                                 const WeightForm& form = {});

// A quantized conv with the residual add in its epilogue (`block`: the conv, then the add reading
// the conv's output and `residual`, in either order), on `data`, JIT-compiled as kernel_output is.
ref::QTensor quant_residual_kernel_output(const Block& block, const ref::QLayerData& data,
                                          const ref::QTensor& residual,
                                          const std::string& target = "host",
                                          const WeightForm& form = {});

// Every CPU knob at a random in-range value: a search value or, on ranges of at most 256, any
// value of the range (as `--schedules` or a hand-edited database may give them).
nlohmann::json random_cpu_knobs(std::mt19937& rng);

// The CPU target families the kernel tests cover, by forced target string (with the seed each one
// draws its cases with): AVX-512, AVX2, SSE4.1, and the cross targets that are compile-only here.
struct TargetFamilyCase {
  std::string name, target;
  unsigned seed;
};
inline void PrintTo(const TargetFamilyCase& f, std::ostream* os) {
  *os << f.target;
}
const std::vector<TargetFamilyCase>& cpu_target_families();

// Compiles the kernel for `target` without running it (for targets this CPU cannot run) and
// returns the object's size in bytes.
int64_t compile_only(const Layer& layer, const std::string& target,
                     const nlohmann::json& schedule = nlohmann::json::object());

// The kernel's assembly for `target`, as compile_only compiles it.
std::string compiled_assembly(const Layer& layer, const std::string& target,
                              const nlohmann::json& schedule = nlohmann::json::object());

// Whether this CPU runs code for `target` ("host" or a Halide target string).
bool runs_here(const std::string& target);

// An N, C, spatial... shape in the order of the layout (N, spatial..., C when channels last).
std::vector<int64_t> layout_order(const std::vector<int64_t>& nc, bool channels_last);

// `layer` (its fields as a spec writes them, "input" set here) reading a model input "x" of
// `shape` (in the layout's order), resolved as the spec parser resolves it; throws SpecError.
Layer layer_reading(const std::vector<int64_t>& shape, bool channels_last,
                    const nlohmann::json& layer);

// The kernel's output (got) and the reference's (want) on the same random data drawn with `seed`;
// or, where this CPU cannot run `target`, nullopt after compiling the kernel only (throwing if the
// compile gives no code).
struct KernelAndReference {
  ref::Tensor got, want;
};
std::optional<KernelAndReference> run_or_compile(const Layer& layer, const std::string& target,
                                                 unsigned seed);

}  // namespace padfold::testing
