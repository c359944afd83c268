// registry.c, bundle_entry.c, the umbrella header and the consumer CMake file, from templates/.
#include "emit/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <kainjow/mustache.hpp>
#include <optional>

#include "base/enum_names.h"
#include "base/text.h"
#include "compile/target.h"
#include "emit/dtypes.h"
#include "emit/writers.h"
#include "padfold_templates.h"

namespace padfold {

namespace fs = std::filesystem;
using kainjow::mustache::data;
using kainjow::mustache::list;
using kainjow::mustache::object;

namespace {

// The C constants of the roles (padfold_registry.h), as registry.c writes them.
constexpr EnumName<pf_role> kRoleConstants[] = {{PF_ROLE_INPUT, "PF_ROLE_INPUT"},
                                                {PF_ROLE_WEIGHTS, "PF_ROLE_WEIGHTS"},
                                                {PF_ROLE_BIAS, "PF_ROLE_BIAS"},
                                                {PF_ROLE_OUTPUT, "PF_ROLE_OUTPUT"}};

// The C symbol of an embedded buffer's values.
std::string weight_symbol(const BundlePlan& plan, const WeightFile& w) {
  return kernel_function_name(*plan.model, *w.layer) + "_" + w.buffer + "_data";
}

object buffer_entry(const std::string& name, pf_role role, pf_dtype dtype,
                    const std::string& layout, const std::vector<int64_t>& shape,
                    const std::optional<std::string>& source, const std::string& data) {
  return {{"name", name},
          {"role", name_of(kRoleConstants, role)},
          {"dtype", name_of(kDtypeConstants, dtype)},
          {"layout", layout},
          {"rank", std::to_string(shape.size())},
          {"shape", join(shape)},
          {"strides", join(dense_strides(shape))},
          {"source", source ? c_string(*source) : "NULL"},
          {"data", data.empty() ? "NULL" : data}};
}

list registry_kernels(const BundlePlan& plan) {
  list kernels;
  for (const KernelPlan& k : plan.kernels) {
    const Layer& L = k.block.last();
    list buffers;
    for (const BufferPlan& b : k.buffers) {
      const bool embedded = plan.embedded_weights && b.weight_file >= 0;
      buffers.push_back(buffer_entry(
          b.name, b.role, b.dtype, b.layout, b.shape, b.source,
          embedded ? weight_symbol(plan, plan.weight_files[static_cast<size_t>(b.weight_file)])
                   : ""));
    }
    kernels.push_back(object{{"layer", L.name},
                             {"function", k.function},
                             {"op", k.block.fused() ? k.block.kind() : L.op_name},
                             {"num_buffers", std::to_string(buffers.size())},
                             {"buffers", buffers}});
  }
  return kernels;
}

// The kernels preparing layers' weights from the caller's (pf_registry.prepares), in kernel order.
list registry_prepares(const BundlePlan& plan) {
  list prepares;
  for (const KernelPlan& k : plan.kernels) {
    if (k.prepare_function.empty()) continue;
    const Layer& L = k.block.consumer();
    list buffers;
    for (const BufferInfo& b : preparation_buffers(L, k.weight_form))
      buffers.push_back(buffer_entry(b.name, b.role, b.dtype, b.layout, b.shape, std::nullopt, ""));
    prepares.push_back(object{{"layer", L.name},
                              {"function", k.prepare_function},
                              {"op", "prepare_weights"},
                              {"num_buffers", std::to_string(buffers.size())},
                              {"buffers", buffers}});
  }
  return prepares;
}

}  // namespace

std::string embedded_weights_c(const BundlePlan& plan, const std::vector<NpyData>& data) {
  std::string out;
  for (size_t i = 0; i < plan.weight_files.size(); ++i) {
    const NpyData& values = data.at(i);
    const size_t n = values.numel();
    // float32 as its bits (exact, and no locale or rounding in between); integers as themselves,
    // 8 per line for float32 and int32, 16 for the bytes.
    const char* type = "uint32_t";
    size_t per_line = 8;
    switch (values.dtype) {
      case NpyDType::F32:
        break;
      case NpyDType::I8:
        type = "int8_t";
        per_line = 16;
        break;
      case NpyDType::U8:
        type = "uint8_t";
        per_line = 16;
        break;
      case NpyDType::I32:
        type = "int32_t";
        break;
    }
    out += fmt::format("static const {} {}[{}] PF_WEIGHTS_ALIGNED = {{", type,
                       weight_symbol(plan, plan.weight_files[i]), std::max<size_t>(n, 1));
    for (size_t k = 0; k < n; ++k) {
      const unsigned char* at = values.bytes.data() + k * npy_dtype_size(values.dtype);
      std::string v;
      switch (values.dtype) {
        case NpyDType::F32: {
          uint32_t bits;
          std::memcpy(&bits, at, sizeof bits);
          v = fmt::format("0x{:08x}u", bits);
          break;
        }
        case NpyDType::I8:
          v = std::to_string(static_cast<int>(static_cast<int8_t>(*at)));
          break;
        case NpyDType::U8:
          v = std::to_string(static_cast<unsigned>(*at));
          break;
        case NpyDType::I32: {
          int32_t x;
          std::memcpy(&x, at, sizeof x);
          // INT32_MIN has no literal of type int32_t: -2147483648 is the negation of a long.
          v = x == INT32_MIN ? "(-2147483647 - 1)" : std::to_string(x);
          break;
        }
      }
      out += fmt::format("{}{}", k % per_line ? " " : "\n    ", v);
      if (k + 1 < n) out += ",";
    }
    out += "};\n";
  }
  return out;
}

void write_registry_sources(const BundlePlan& plan, const TargetPlan& t, const fs::path& root,
                            const std::string& embedded_data,
                            const std::string& heap_scratch_kernel) {
  const Model& model = *plan.model;
  data d;
  d.set("version", PADFOLD_VERSION);
  d.set("target", t.name);
  d.set("model", plan.model_id);
  d.set("registry_symbol", plan.registry_symbol);
  d.set("num_kernels", std::to_string(plan.kernels.size()));
  d.set("kernels", registry_kernels(plan));
  const list prepares = registry_prepares(plan);
  d.set("num_prepares", std::to_string(prepares.size()));
  d.set("prepares", prepares);
  list inputs, outputs;
  for (const ModelInput& in : model.inputs)
    inputs.push_back(
        buffer_entry(in.name, PF_ROLE_INPUT, pf_dtype_of(in.dtype), in.layout.name(), in.shape,
                     in.produced_by.empty() ? std::nullopt : std::optional(in.produced_by), ""));
  for (const std::string& name : model.outputs) outputs.push_back(object{{"name", name}});
  d.set("inputs", inputs);
  d.set("num_inputs", std::to_string(model.inputs.size()));
  d.set("outputs", outputs);
  d.set("num_outputs", std::to_string(model.outputs.size()));
  d.set("embedded_weights", embedded_data);
  std::vector<int64_t> offsets;
  for (const KernelPlan& k : plan.kernels) offsets.push_back(k.arena_offset.value_or(-1));
  d.set("arena_offsets", offsets.empty() ? "-1" : join(offsets));
  d.set("arena_bytes", std::to_string(plan.arena.arena_bytes));
  // A layer name: a C identifier, safe in a string literal.
  d.set("heap_scratch_kernel",
        heap_scratch_kernel.empty() ? "NULL" : "\"" + heap_scratch_kernel + "\"");
  const std::string device = device_api_name(t.target);
  d.set("device", device.empty()
                      ? data(false)
                      : data(object{{"api", device},
                                    {"header", device == "cuda" ? "HalideRuntimeCuda.h"
                                                                : "HalideRuntimeOpenCL.h"}}));
  const fs::path dir = target_dir(root, t);
  write_file(dir / "registry.c", render(templates::registry_c, d));
  write_file(dir / "bundle_entry.c", render(templates::bundle_entry_c, d));
}

void write_consumer_files(const BundlePlan& plan, const fs::path& root) {
  list kernels;
  for (const KernelPlan& k : plan.kernels) kernels.push_back(object{{"function", k.function}});
  data umbrella;
  umbrella.set("kernels", kernels);
  umbrella.set("MODEL", ascii_upper(plan.model_id));
  umbrella.set("model", plan.model_id);
  umbrella.set("arena_bytes", std::to_string(plan.arena.arena_bytes));
  umbrella.set("alignment", std::to_string(kArenaAlignment));
  write_file(root / "include" / plan.umbrella_header, render(templates::umbrella_h, umbrella));

  list targets;
  for (const TargetPlan& t : plan.targets) targets.push_back(object{{"dir", t.name}});
  data d;
  d.set("version", PADFOLD_VERSION);
  d.set("model", plan.model_id);
  d.set("targets", targets);
  d.set("static_library", plan.static_library);
  d.set("halide_runtime", plan.halide_runtime);
  write_file(root / plan.consumer_cmake, render(templates::consumer_cmake, d));
}

}  // namespace padfold
