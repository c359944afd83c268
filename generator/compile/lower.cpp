#include "compile/lower.h"

#include <stdexcept>

#include "compile/target.h"

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

Kernel lower(const Layer& layer, const Halide::Target& target, const ScheduleParams& requested) {
  Algorithm a = build_algorithm(layer, Halide::Func(), target.has_gpu_feature());
  Kernel k;
  k.name = layer.name;
  k.schedule = apply_schedule(a, requested, target);
  k.buffers = a.buffers;
  k.pipeline = Halide::Pipeline(a.output);
  return k;
}

ScheduleParams requested_schedule(const Block& block, const Halide::Target& target,
                                  const nlohmann::json& overrides) {
  return requested_schedule(block.last(), target, overrides);
}

ScheduleParams resolved_schedule(const Block& block, const Halide::Target& target,
                                 const ScheduleParams& requested) {
  if (!block.fused()) return resolve_schedule(block.last(), target, requested);
  return resolve_block_schedule(block.layers, target, requested);
}

Kernel lower(const Block& block, const Halide::Target& target, const ScheduleParams& requested) {
  if (!block.fused()) return lower(block.last(), target, requested);
  std::vector<Algorithm> chain;
  Halide::Func source;
  for (const Layer* L : block.layers) {
    chain.push_back(build_algorithm(*L, source));
    source = chain.back().output;
  }
  Kernel k;
  k.name = block.last().name;
  k.schedule = apply_block_schedule(chain, requested, target);
  // Buffers in block_buffers order: the parameters of every layer, renamed as the block names them.
  const std::vector<BufferInfo> infos = block_buffers(block);
  for (const BufferInfo& info : infos) {
    for (const Algorithm& a : chain)
      for (const BufferParam& b : a.buffers)
        if (b.info.layer == info.layer && b.info.role == info.role &&
            (info.role != "output" || a.layer == &block.last()))
          k.buffers.push_back({info, b.param});
  }
  k.pipeline = Halide::Pipeline(chain.back().output);
  return k;
}

void compile_kernel_files(const Kernel& kernel, const Halide::Target& target,
                          const std::map<Halide::OutputFileType, std::string>& outputs,
                          const std::string& function) {
  Halide::Pipeline pipeline = kernel.pipeline;
  pipeline.compile_to(outputs, kernel.arguments(), function,
                      codegen_target(target).with_feature(Halide::Target::NoRuntime));
}

}  // namespace padfold
