#include "compile/lower.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

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
  return params;
}

Kernel lower(const Layer& layer, const Halide::Target& target, const nlohmann::json& overrides) {
  return lower(layer, target, requested_schedule(layer, target, overrides));
}

namespace {

// F(m, 3)'s m where the resolved knobs compute the layer as Winograd, else 0.
int winograd_m(const Layer& layer, const Halide::Target& target, const ScheduleParams& requested) {
  if (!winograd_applies(layer)) return 0;
  return winograd_outputs(resolve_schedule(layer, target, requested).winograd);
}

// The variant of a layer of a kernel on `target` with the requested knobs.
AlgorithmVariant variant_of(const Layer& layer, const Halide::Target& target, int m,
                            const Layer* residual, const WeightForm& weights) {
  AlgorithmVariant v;
  v.explicit_border = strategy_for(layer, target).capabilities.explicit_border;
  v.residual = residual;
  v.winograd_m = m;
  v.dot = dot_operands(target);
  v.weights = weights;
  return v;
}

Kernel lower_layer(const Layer& layer, const Halide::Target& target,
                   const ScheduleParams& requested, const WeightForm& weights) {
  Algorithm a = build_algorithm(
      layer, variant_of(layer, target, winograd_m(layer, target, requested), nullptr, weights));
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
    // A fused chain's consumer is never Winograd (resolve_block_schedule); a conv with a residual
    // add alone may be.
    const int m = block.chain().size() == 1 ? winograd_m(*L, target, requested) : 0;
    const WeightForm form = L == &block.consumer() ? weights : WeightForm{};
    chain.push_back(build_algorithm(*L, variant_of(*L, target, m, residual, form), source));
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

}  // namespace padfold
