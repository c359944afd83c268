// Lowering: the one way a layer or a fused block becomes a scheduled Halide pipeline, used by
// `padfold compile`, the tuner, the tests and the benchmark tools alike, for CPU and GPU targets.
#pragma once

#include <Halide.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "algorithm/algorithm.h"
#include "compile/block.h"
#include "compile/halide_memory.h"
#include "schedules/schedule.h"

namespace padfold {

// A scheduled pipeline with its buffers. Not tied to one layer's four buffers: a fused block is
// one Kernel with several layers' weights.
struct Kernel {
  std::string name;                  // the Halide function's base name
  ScheduleParams schedule;           // the knobs in effect (resolved), as the manifest records them
  std::vector<BufferParam> buffers;  // manifest order; outputs have no parameter
  Halide::Pipeline pipeline;

  std::vector<Halide::Argument> arguments() const;  // the input parameters, in buffer order
  // The parameter of input buffer `name`; throws std::invalid_argument for any other name.
  Halide::ImageParam param(const std::string& name) const;
};

// The layer's default knobs for `target` with `overrides` (knob name -> value) applied; bad
// overrides throw KnobError naming the knob, or the layer where they name an implementation that
// their knobs do not choose.
ScheduleParams requested_schedule(const Layer& layer, const Halide::Target& target,
                                  const nlohmann::json& overrides = nlohmann::json::object());

// Builds the layer's algorithm and schedules it for `target`.
Kernel lower(const Layer& layer, const Halide::Target& target,
             const nlohmann::json& overrides = nlohmann::json::object());
Kernel lower(const Layer& layer, const Halide::Target& target, const ScheduleParams& requested);

// A block's knobs: its consumer's (last layer's) defaults with `overrides` applied.
ScheduleParams requested_schedule(const Block& block, const Halide::Target& target,
                                  const nlohmann::json& overrides = nlohmann::json::object());
// The knobs a block's kernel runs with (resolve_schedule, or resolve_block_schedule when fused).
ScheduleParams resolved_schedule(const Block& block, const Halide::Target& target,
                                 const ScheduleParams& requested);
// The knobs that compute a kernel whose weights are prepared in `weights`' form that way (a
// Winograd form sets the winograd knob to its m, on any output size).
ScheduleParams with_weight_form(ScheduleParams requested, const WeightForm& weights);

// A block as one kernel, named after its last layer: each layer's algorithm reads the previous
// one's output Func; its buffers are block_buffers(block, weights). With prepared `weights` (a
// one-layer chain only) the kernel reads its consumer's weights in that form.
Kernel lower(const Block& block, const Halide::Target& target, const ScheduleParams& requested,
             const WeightForm& weights = {});

// Writes the kernel's AOT outputs (object, header, statement ...) as `function`, without the
// Halide runtime (a bundle carries one per target), with padfold's code generation options. For
// a GPU target and a non-empty `device_code`, also the kernels' device source there (PTX for
// CUDA, OpenCL C for OpenCL). Returns the kernel's own scratch (halide_memory).
HalideMemory compile_kernel_files(const Kernel& kernel, const Halide::Target& target,
                                  const std::map<Halide::OutputFileType, std::string>& outputs,
                                  const std::string& function, const std::string& device_code = "");

// Writes the AOT outputs of the kernel `function` that puts a layer's weights, as the caller
// passes them, into `form` (define_prepared_weights): its buffers are preparation_buffers(layer,
// form), a bundle's prepare kernel of the layer (padfold compile --prepare-entry).
void compile_weight_preparation(const Layer& layer, const WeightForm& form,
                                const Halide::Target& target,
                                const std::map<Halide::OutputFileType, std::string>& outputs,
                                const std::string& function);

}  // namespace padfold
