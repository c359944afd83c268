// bundle_manifest: the JSON the runtime's pf_bundle_open reads and checks the registry against.
#include "emit/manifest.h"

#include <algorithm>
#include <optional>
#include <string>

#include "compile/target.h"
#include "emit/dtypes.h"
#include "emit/libraries.h"
#include "emit/writers.h"

namespace padfold {

using json = nlohmann::json;

namespace {

json quant_json(const QuantParams& q) {
  return {{"scale", q.scale}, {"zero_point", q.zero_point}};
}

// The quantization the first layer reading model input `name` reads it in, if it is quantized.
std::optional<QuantParams> input_quant(const Model& model, const std::string& name) {
  for (const Layer& l : model.layers) {
    if (!l.quant) continue;
    for (size_t k = 0; k < l.quant->inputs.size(); ++k)
      if (k < l.inputs.size() && l.inputs[k] == name) return l.quant->inputs[k];
  }
  return std::nullopt;
}

json graph_json(const Model& model) {
  json inputs = json::array();
  for (const ModelInput& in : model.inputs)
    inputs.push_back(
        {{"name", in.name},
         {"dtype", name_of(kDtypeNames, pf_dtype_of(in.dtype))},
         {"layout", in.layout.name()},
         {"shape", in.shape},
         {"strides", dense_strides(in.shape)},
         {"produced_by", in.produced_by.empty() ? json(nullptr) : json(in.produced_by)}});
  // Outputs that ops outside padfold read (read by the CLI; the runtime ignores the field).
  json read_by = json::object();
  for (const std::string& name : model.outputs)
    if (const Layer* l = model.find_layer(name); l && !l->read_by.empty())
      read_by[name] = l->read_by;
  // The shape each output is read in where it is not its buffer's (the CLI and the Python package
  // write and return it; the runtime's buffers keep the layer's shape, the same values).
  json output_shapes = json::object();
  for (const auto& [name, shape] : model.output_shapes) output_shapes[name] = shape;
  // What the integers of each int8/uint8 model input and output stand for, scale * (q -
  // zero_point) (the CLI and the Python package report it; the runtime ignores the field).
  json quant = json::object();
  for (const ModelInput& in : model.inputs)
    if (in.dtype != DType::F32)
      if (const auto q = input_quant(model, in.name)) quant[in.name] = quant_json(*q);
  for (const std::string& name : model.outputs)
    if (const Layer* l = model.find_layer(name); l && l->quant && l->output_dtype() != DType::F32)
      quant[name] = quant_json(l->quant->output);
  return {{"inputs", inputs},
          {"outputs", model.outputs},
          {"read_by", read_by},
          {"output_shapes", output_shapes},
          {"quant", quant}};
}

// The knobs in effect for each of the target's kernels, with the fallback where there was one.
json target_schedules(const BundlePlan& plan, const std::vector<KernelBuild>& builds,
                      size_t target) {
  json schedules = json::object();
  for (const KernelBuild& b : builds) {
    if (b.target != target) continue;
    const KernelPlan& k = plan.kernels[b.kernel];
    const KernelSchedule& planned = k.schedules[target];
    json s = to_json(b.resolved);
    if (b.fallback) s["fallback"] = {{"from", b.fallback_from}, {"reason", b.fallback_reason}};
    s["source"] = planned.source;
    if (!planned.tuning.is_null()) s["tuning"] = planned.tuning;
    s["halide_scratch"] = {{"stack_bytes", b.memory.stack_bytes},
                           {"heap_bytes", b.memory.heap_bytes},
                           {"heap_buffers", b.memory.heap_buffers}};
    schedules[k.block.last().name] = s;
  }
  return schedules;
}

json target_manifest(const BundlePlan& plan, const std::vector<KernelBuild>& builds, size_t index,
                     const std::optional<std::string>& shared_library) {
  const TargetPlan& t = plan.targets[index];
  const std::string tune = tuning_name(t.target);
  const std::string device = device_api_name(t.target);
  // HL_CUDA_JIT_MAX_REGISTERS is one per process: the highest any kernel asks for.
  int max_registers = 0;
  for (const KernelBuild& b : builds)
    if (b.target == index) max_registers = std::max(max_registers, b.resolved.gpu_max_registers);
  // The kernels' own scratch besides the arena: one kernel runs at a time, so a thread's stack
  // needs the largest kernel's; heap scratch (none with padfold's CPU schedules) makes a static
  // run allocate.
  int64_t stack_bytes = 0;
  for (const KernelBuild& b : builds)
    if (b.target == index) stack_bytes = std::max(stack_bytes, b.memory.stack_bytes);
  const json heap_kernels = heap_scratch_kernels(plan, builds, index);
  return {{"target", t.name},
          {"device_api", device.empty() ? json(nullptr) : json(device)},
          {"cuda_arch", device == "cuda" ? json(cuda_arch_name(t.target)) : json(nullptr)},
          {"cuda_jit_max_registers",
           device == "cuda" && max_registers > 0 ? json(max_registers) : json(nullptr)},
          {"arch", arch_name(t.target)},
          {"bits", t.target.bits},
          {"os", t.target.os == Halide::Target::Linux ? "linux" : "other"},
          {"features", cpu_feature_names(t.target)},
          {"tuned_for", tune.empty() ? json(nullptr) : json(tune)},
          {"dir", t.name},
          {"static_library", t.name + "/" + plan.static_library},
          {"halide_runtime", t.name + "/" + plan.halide_runtime},
          {"registry_source", t.name + "/registry.c"},
          {"registry_symbol", plan.registry_symbol},
          {"shared_library", shared_library ? json(*shared_library) : json(nullptr)},
          {"halide_scratch", {{"stack_bytes", stack_bytes}, {"heap_kernels", heap_kernels}}},
          {"schedules", target_schedules(plan, builds, index)}};
}

json buffer_json(const std::string& name, pf_role role, pf_dtype dtype, const std::string& layout,
                 const std::vector<int64_t>& shape, const std::optional<std::string>& source) {
  return {{"name", name},
          {"role", role_name(role)},
          {"dtype", name_of(kDtypeNames, dtype)},
          {"layout", layout},
          {"shape", shape},
          {"strides", dense_strides(shape)},
          {"source", source ? json(*source) : json(nullptr)}};
}

json buffers_json(const KernelPlan& k) {
  json buffers = json::array();
  for (const BufferPlan& b : k.buffers)
    buffers.push_back(buffer_json(b.name, b.role, b.dtype, b.layout, b.shape, b.source));
  return buffers;
}

// The kernel preparing a layer's weights from the caller's (pf_bundle_prepare_kernel).
json prepare_json(const KernelPlan& k) {
  json buffers = json::array();
  for (const BufferInfo& b : preparation_buffers(k.block.consumer(), k.weight_form))
    buffers.push_back(buffer_json(b.name, b.role, b.dtype, b.layout, b.shape, std::nullopt));
  return {{"function", k.prepare_function}, {"buffers", buffers}};
}

json layer_pads_json(const Layer& L) {
  json pads_before = json::array(), pads_after = json::array();
  for (const AxisPads& p : L.pads.axes) {
    pads_before.push_back(p.before);
    pads_after.push_back(p.after);
  }
  return {{"layer", L.name},
          {"op", L.op_name},
          {"pads_before", pads_before},
          {"pads_after", pads_after},
          {"border", to_string(L.border)},
          {"flops", L.flops()}};
}

// One kernel: a layer's pads and border at the top level; a fused block names its layers (each
// with its pads and border) and the reason it was fused.
json kernel_manifest(const KernelPlan& k) {
  const Block& block = k.block;
  json j = layer_pads_json(block.last());
  j["function"] = k.function;
  j["buffers"] = buffers_json(k);
  j["arena_offset"] = k.arena_offset ? json(*k.arena_offset) : json(nullptr);
  if (!k.prepare_function.empty()) j["prepare"] = prepare_json(k);
  if (block.fused()) {
    j["op"] = block.kind();
    double flops = 0;
    json layers = json::array();
    for (const Layer* F : block.layers) {
      layers.push_back(layer_pads_json(*F));
      flops += F->flops();
    }
    j["flops"] = flops;
    j["fused"] = {{"layers", layers}, {"reason", block.reason}};
  }
  return j;
}

}  // namespace

json bundle_manifest(const BundlePlan& plan, const std::vector<KernelBuild>& builds,
                     const std::vector<std::optional<std::string>>& shared_libraries) {
  json manifest = {{"format", PF_FORMAT_NAME},           {"format_version", PF_FORMAT_VERSION},
                   {"padfold_version", PADFOLD_VERSION}, {"model", plan.model_id},
                   {"targets", json::array()},           {"kernels", json::array()}};
  manifest["graph"] = graph_json(*plan.model);
  manifest["embedded_weights"] = plan.embedded_weights;
  manifest["memory_plan"] = {{"alignment", kArenaAlignment},
                             {"arena_bytes", plan.arena.arena_bytes},
                             {"lower_bound", plan.arena.lower_bound},
                             {"intermediates_bytes", plan.arena.total_bytes}};
  for (size_t t = 0; t < plan.targets.size(); ++t)
    manifest["targets"].push_back(target_manifest(plan, builds, t, shared_libraries.at(t)));
  for (const KernelPlan& k : plan.kernels) manifest["kernels"].push_back(kernel_manifest(k));
  return manifest;
}

}  // namespace padfold
