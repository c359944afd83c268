#include "compile/lower.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

#include "algorithm/requantize.h"
#include "compile/target.h"
#include "schedules/block.h"

namespace padfold {

std::vector<Halide::Argument> Kernel::arguments() const {
  std::vector<Halide::Argument> args;
  for (const BufferParam& b : buffers)
    if (b.param.defined()) args.push_back(b.param);
  return args;
}

Halide::ImageParam Kernel::param(const std::string& name) const {
  for (const BufferParam& b : buffers)
    if (b.info.name == name && b.param.defined()) return b.param;
  throw std::invalid_argument("kernel '" + this->name + "' has no input buffer '" + name + "'");
}

ScheduleParams requested_schedule(const Layer& layer, const Halide::Target& target,
                                  const nlohmann::json& overrides) {
  ScheduleParams params = default_schedule(layer, target);
  update_from_json(params, overrides);
  // Overrides naming an implementation (a manifest's knobs read back) name the one they choose.
  const std::string chosen = implementation_for(layer, target, params).name;
  if (!params.implementation.empty() && params.implementation != chosen)
    throw KnobError("layer '" + layer.name + "': the schedule names implementation '" +
                    params.implementation + "', but its knobs choose '" + chosen +
                    "' (the knobs say which implementation computes a layer)");
  params.implementation.clear();
  return params;
}

Kernel lower(const Layer& layer, const Halide::Target& target, const nlohmann::json& overrides) {
  return lower(layer, target, requested_schedule(layer, target, overrides));
}

namespace {

// The variant of a layer of a kernel on `target`: the algorithm the implementation its knobs
// choose schedules.
AlgorithmVariant variant_of(const Implementation& implementation, const Layer& layer,
                            const Halide::Target& target, const ScheduleParams& requested,
                            const Layer* residual, const WeightForm& weights) {
  const ScheduleStrategy& s = *implementation.strategy;
  AlgorithmVariant v;
  v.explicit_border = s.capabilities.explicit_border;
  v.residual = residual;
  v.dot = dot_operands(target);
  v.native_fma = native_fma(target);
  v.weights = weights;
  if (s.variant) s.variant(layer, resolve_schedule(implementation, layer, target, requested), v);
  return v;
}

Kernel lower_layer(const Layer& layer, const Halide::Target& target,
                   const ScheduleParams& requested, const WeightForm& weights) {
  const Implementation& implementation = implementation_for(layer, target, requested);
  Algorithm a = build_algorithm(
      layer, variant_of(implementation, layer, target, requested, nullptr, weights));
  Kernel k;
  k.name = layer.name;
  k.schedule = apply_schedule(a, requested, target).resolved;
  k.buffers = a.buffers;
  k.pipeline = Halide::Pipeline(a.output);
  return k;
}

}  // namespace

ScheduleParams with_weight_form(ScheduleParams requested, const WeightForm& weights) {
  if (weights.winograd_m > 0) {
    requested.winograd = winograd_knob(weights.winograd_m);
    requested.winograd_min_tiles = 0;
  }
  return requested;
}

Kernel lower(const Layer& layer, const Halide::Target& target, const ScheduleParams& requested) {
  return lower_layer(layer, target, requested, {});
}

ScheduleParams requested_schedule(const Block& block, const Halide::Target& target,
                                  const nlohmann::json& overrides) {
  return requested_schedule(block.consumer(), target, overrides);
}

ScheduleParams resolved_schedule(const Block& block, const Halide::Target& target,
                                 const ScheduleParams& requested) {
  const std::vector<const Layer*> chain = block.chain();
  if (chain.size() == 1) return resolve_schedule(*chain[0], target, requested);
  return resolve_block_schedule(chain, target, requested);
}

namespace {

Kernel lower_block(const Block& block, const Halide::Target& target,
                   const ScheduleParams& requested, const WeightForm& weights, bool in_registers) {
  std::vector<Algorithm> chain;
  Halide::Func source;
  for (const Layer* L : block.chain()) {
    const Layer* residual = L == &block.consumer() ? block.residual() : nullptr;
    // A fused chain is built of its rows' fused implementations; a conv with a residual add alone
    // takes the one its knobs choose.
    const Implementation& implementation = block.chain().size() == 1
                                               ? implementation_for(*L, target, requested)
                                               : fused_implementation(*L, target);
    const WeightForm form = L == &block.consumer() ? weights : WeightForm{};
    chain.push_back(build_algorithm(
        *L, variant_of(implementation, *L, target, requested, residual, form), source));
    source = chain.back().output;
  }
  Kernel k;
  k.name = block.last().name;
  k.schedule = chain.size() == 1
                   ? apply_schedule(chain[0], requested, target).resolved
                   : apply_block_schedule(chain, requested, target, in_registers).resolved;
  // Buffers in block_buffers order: the parameters of every layer, renamed as the block names them.
  const std::vector<BufferInfo> infos = block_buffers(block, weights);
  for (const BufferInfo& info : infos) {
    for (const Algorithm& a : chain)
      for (const BufferParam& b : a.buffers)
        if (b.info.layer == info.layer && b.info.role == info.role &&
            (info.role != PF_ROLE_OUTPUT || b.info.layer == block.last().name))
          k.buffers.push_back({info, b.param});
  }
  k.pipeline = Halide::Pipeline(chain.back().output);
  return k;
}

}  // namespace

// Producers' buffers in Register memory (on the stack) where Halide bounds every one of them by a
// constant; otherwise where Halide chooses (its heap above 16 KB), as halide_scratch then states.
Kernel lower(const Block& block, const Halide::Target& target, const ScheduleParams& requested,
             const WeightForm& weights) {
  if (weights.prepared() && block.chain().size() != 1)
    throw std::logic_error("block " + block.names() + ": a fused chain reads its weights raw");
  const ScheduleParams knobs = with_weight_form(requested, weights);
  if (!block.fused()) return lower_layer(block.last(), target, knobs, weights);
  Kernel k = lower_block(block, target, knobs, weights, true);
  try {
    Halide::Pipeline p = k.pipeline;
    const Halide::Module m = p.compile_to_module(k.arguments(), k.name, codegen_target(target));
    if (registers_have_fixed_sizes(m)) return k;
  } catch (const Halide::CompileError&) {
  }
  return lower_block(block, target, knobs, weights, false);
}

HalideMemory compile_kernel_files(const Kernel& kernel, const Halide::Target& target,
                                  const std::map<Halide::OutputFileType, std::string>& outputs,
                                  const std::string& function, const std::string& device_code) {
  Halide::Pipeline pipeline = kernel.pipeline;
  const Halide::Module module = pipeline.compile_to_module(
      kernel.arguments(), function, codegen_target(target).with_feature(Halide::Target::NoRuntime));
  module.compile(outputs);
  const HalideMemory memory = halide_memory(module);
  if (device_code.empty() || !target.has_gpu_feature()) return memory;
  // Halide embeds the kernels' device source (PTX, OpenCL C) as a buffer of the module.
  for (const Halide::Buffer<void>& b : module.buffers()) {
    if (b.name().find("_gpu_source_kernels") == std::string::npos) continue;
    const char* text = static_cast<const char*>(b.data());
    std::ofstream f(device_code, std::ios::binary);
    f.write(text, static_cast<std::streamsize>(strnlen(text, b.size_in_bytes())));
    if (!f) throw std::runtime_error("cannot write " + device_code);
    return memory;
  }
  throw std::runtime_error("kernel '" + kernel.name + "': Halide's module holds no device code");
}

void compile_weight_preparation(const Layer& L, const WeightForm& form,
                                const Halide::Target& target,
                                const std::map<Halide::OutputFileType, std::string>& outputs,
                                const std::string& function) {
  const BufferInfo raw = preparation_buffers(L, form).front();
  Halide::ImageParam weights(halide_type(raw.dtype), static_cast<int>(raw.shape.size()),
                             L.name + "_weights");
  Halide::Func prepared = define_prepared_weights(L, form, weights);
  Halide::Pipeline(prepared)
      .compile_to_module({weights}, function,
                         codegen_target(target).with_feature(Halide::Target::NoRuntime))
      .compile(outputs);
}

}  // namespace padfold
