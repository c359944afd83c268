#include "kernel_runner.h"

#include <Halide.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "compile/block.h"
#include "compile/lower.h"
#include "compile/target.h"
#include "schedules/knobs.h"

namespace padfold::testing {

namespace {

Halide::Buffer<float> as_buffer(const ref::Tensor& t) {
  std::vector<int> sizes(t.shape.rbegin(), t.shape.rend());
  return Halide::Buffer<float>(const_cast<float*>(t.data.data()), sizes);
}

// A Halide buffer of `type` holding t's values (layout order, outermost first).
Halide::Buffer<> int_buffer(const ref::QTensor& t, Halide::Type type) {
  std::vector<int> sizes(t.shape.rbegin(), t.shape.rend());
  Halide::Buffer<> b(type, sizes);
  for (size_t i = 0; i < t.data.size(); ++i) {
    const int32_t v = t.data[i];
    if (type == Halide::Int(8))
      static_cast<int8_t*>(b.data())[i] = static_cast<int8_t>(v);
    else if (type == Halide::UInt(8))
      static_cast<uint8_t*>(b.data())[i] = static_cast<uint8_t>(v);
    else
      static_cast<int32_t*>(b.data())[i] = v;
  }
  return b;
}

// b's values as a .npy array of `dtype` (b's dimensions outermost first).
NpyData npy_of(const Halide::Buffer<>& b, NpyDType dtype) {
  NpyData n;
  for (int d = b.dimensions() - 1; d >= 0; --d) n.shape.push_back(b.dim(d).extent());
  n.dtype = dtype;
  n.bytes.assign(static_cast<const unsigned char*>(b.data()),
                 static_cast<const unsigned char*>(b.data()) + b.size_in_bytes());
  return n;
}

ref::QTensor ints_of(const Halide::Buffer<>& b, std::vector<int64_t> shape) {
  ref::QTensor t(std::move(shape));
  for (size_t i = 0; i < t.data.size(); ++i)
    t.data[i] = b.type() == Halide::Int(8) ? static_cast<const int8_t*>(b.data())[i]
                                           : static_cast<const uint8_t*>(b.data())[i];
  return t;
}

}  // namespace

namespace {

// A quantized conv, or a conv and the residual add in its epilogue (`residual`: the add's other
// input), on `d`; the buffers named as the block names them.
ref::QTensor quant_block_output(const Block& block, const ref::QLayerData& d,
                                const ref::QTensor* residual, const std::string& target_name,
                                const nlohmann::json& schedule, const WeightForm& form) {
  const Halide::Target target = resolve_target(target_name);
  const Layer& L = block.consumer();
  Kernel k = lower(block, target, requested_schedule(L, target, schedule), form);
  const std::string prefix = residual ? L.name + "_" : "";
  const Halide::Type act = element_type(L);
  if (L.is_join()) {
    for (size_t i = 0; i < d.inputs.size(); ++i)
      k.param("input" + std::to_string(i)).set(int_buffer(d.inputs[i], act));
  } else {
    k.param("input").set(int_buffer(d.inputs.at(0), act));
  }
  Halide::Buffer<> weights, bias;
  if (L.has_weights()) weights = int_buffer(d.weights, Halide::Int(8));
  if (L.bias) bias = int_buffer(ref::QTensor({L.out_channels}, d.bias), Halide::Int(32));
  NpyData file, prepared, bias_file, prepared_bias;
  if (form.prepared() || form.zero_point_in_bias) file = npy_of(weights, NpyDType::I8);
  if (form.prepared()) {
    prepared = prepare_weights(L, form, file);
    weights =
        Halide::Buffer<int8_t>(reinterpret_cast<int8_t*>(prepared.bytes.data()),
                               std::vector<int>(prepared.shape.rbegin(), prepared.shape.rend()));
  }
  if (form.zero_point_in_bias) {
    prepared_bias = prepare_bias(L, form, file, npy_of(bias, NpyDType::I32));
    bias = Halide::Buffer<int32_t>(reinterpret_cast<int32_t*>(prepared_bias.bytes.data()),
                                   static_cast<int>(L.out_channels));
  }
  if (L.has_weights()) k.param(prefix + "weights").set(weights);
  if (L.bias) k.param(prefix + "bias").set(bias);
  if (residual) k.param("residual").set(int_buffer(*residual, act));
  const std::vector<int64_t> shape = L.output_shape_full();
  Halide::Buffer<> out(act, std::vector<int>(shape.rbegin(), shape.rend()));
  k.pipeline.realize(out, codegen_target(target));
  return ints_of(out, shape);
}

}  // namespace

ref::QTensor quant_kernel_output(const Layer& L, const ref::QLayerData& d,
                                 const std::string& target_name, const nlohmann::json& schedule,
                                 const WeightForm& form) {
  Block block;
  block.layers.push_back(&L);
  return quant_block_output(block, d, nullptr, target_name, schedule, form);
}

ref::QTensor quant_residual_kernel_output(const Block& block, const ref::QLayerData& d,
                                          const ref::QTensor& residual,
                                          const std::string& target_name, const WeightForm& form) {
  return quant_block_output(block, d, &residual, target_name, nlohmann::json::object(), form);
}

ref::QTensor quantize_kernel_output(const Layer& L, const ref::Tensor& x,
                                    const std::string& target_name) {
  const Halide::Target target = resolve_target(target_name);
  Kernel k = lower(L, target, nlohmann::json::object());
  k.param("input").set(as_buffer(x));
  const std::vector<int64_t> shape = L.output_shape_full();
  Halide::Buffer<> out(element_type(L), std::vector<int>(shape.rbegin(), shape.rend()));
  k.pipeline.realize(out, codegen_target(target));
  return ints_of(out, shape);
}

ref::Tensor dequantize_kernel_output(const Layer& L, const ref::QTensor& q,
                                     const std::string& target_name) {
  const Halide::Target target = resolve_target(target_name);
  Kernel k = lower(L, target, nlohmann::json::object());
  k.param("input").set(
      int_buffer(q, L.input_dtype() == DType::U8 ? Halide::UInt(8) : Halide::Int(8)));
  ref::Tensor out(L.output_shape_full());
  Halide::Buffer<float> out_buf = as_buffer(out);
  k.pipeline.realize(out_buf, codegen_target(target));
  return out;
}

namespace {

// The block's one kernel on `d` (its first layer's buffers named as the block names them), its
// weights prepared in `form` first.
ref::Tensor block_output(const Block& block, const ref::LayerData& d, const ref::Tensor* residual,
                         const std::string& target_name, const nlohmann::json& schedule,
                         const WeightForm& form) {
  const Halide::Target target = resolve_target(target_name);
  const Layer& L = *block.layers.at(0);
  Kernel k = lower(block, target, requested_schedule(block, target, schedule), form);
  const std::string prefix = residual ? L.name + "_" : "";
  k.param("input").set(as_buffer(d.input));
  NpyData prepared;
  if (L.has_weights() && form.prepared()) {
    NpyData file;
    file.shape = d.weights.shape;
    file.bytes.resize(d.weights.data.size() * sizeof(float));
    std::memcpy(file.bytes.data(), d.weights.data.data(), file.bytes.size());
    prepared = prepare_weights(L, form, file);
    k.param(prefix + "weights")
        .set(Halide::Buffer<float>(
            reinterpret_cast<float*>(prepared.bytes.data()),
            std::vector<int>(prepared.shape.rbegin(), prepared.shape.rend())));
  } else if (L.has_weights()) {
    k.param(prefix + "weights").set(as_buffer(d.weights));
  }
  if (L.bias) k.param(prefix + "bias").set(as_buffer(d.bias));
  if (residual) k.param("residual").set(as_buffer(*residual));
  ref::Tensor out(block.last().output_shape_full());
  Halide::Buffer<float> out_buf = as_buffer(out);
  k.pipeline.realize(out_buf, codegen_target(target));
  return out;
}

}  // namespace

ref::Tensor kernel_output(const Layer& L, const ref::LayerData& d, const std::string& target_name,
                          const nlohmann::json& schedule, const WeightForm& form) {
  Block block;
  block.layers.push_back(&L);
  return block_output(block, d, nullptr, target_name, schedule, form);
}

ResidualCase residual_case(const Model& model, unsigned seed) {
  ResidualCase c;
  for (const Layer& L : model.layers) c.block.layers.push_back(&L);
  const Layer& conv = model.layers.at(0);
  c.data = ref::random_data(conv, seed);
  const ref::Tensor y = ref::reference_output(conv, c.data);
  c.residual = ref::Tensor(y.shape);
  for (size_t e = 0; e < c.residual.data.size(); ++e)
    c.residual.data[e] = std::cos(0.3f * static_cast<float>(e));
  c.want = ref::add_output(model.layers.at(1), c.residual, y);
  return c;
}

ref::Tensor residual_kernel_output(const Block& block, const ref::LayerData& d,
                                   const ref::Tensor& residual, const std::string& target,
                                   const nlohmann::json& schedule, const WeightForm& form) {
  return block_output(block, d, &residual, target, schedule, form);
}

nlohmann::json random_cpu_knobs(std::mt19937& rng) {
  nlohmann::json j = nlohmann::json::object();
  for (const Knob& k : knobs()) {
    if (std::strcmp(k.scope, "cpu") != 0) continue;
    const std::vector<int64_t> values = k.search_values();
    int64_t v = values[rng() % values.size()];
    if (k.type == KnobType::Int && k.max - k.min <= 256 && rng() % 2)
      v = k.min + static_cast<int64_t>(rng() % static_cast<uint64_t>(k.max - k.min + 1));
    if (k.type == KnobType::Bool)
      j[k.name] = v != 0;
    else
      j[k.name] = v;
  }
  return j;
}

const std::vector<TargetFamilyCase>& cpu_target_families() {
  static const std::vector<TargetFamilyCase> families = {
      {"Avx512", "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41", 5},
      {"Avx2", "x86-64-linux-avx2-fma", 7},
      {"Sse41", "x86-64-linux-sse41", 99},
      {"Arm64", "arm-64-linux", 11},
      {"Arm32", "arm-32-linux", 13},
      {"RiscV64", "riscv-64-linux-rvv-vector_bits_128", 17},
  };
  return families;
}

bool runs_here(const std::string& target) {
  return can_run_here(resolve_target(target));
}

namespace {

// The kernel compiled for `target_name` into a temporary file of `type`; `read` gets its path.
template <typename Read>
auto compiled_file(const Layer& L, const std::string& target_name, const nlohmann::json& schedule,
                   Halide::OutputFileType type, Read read) {
  namespace fs = std::filesystem;
  const Halide::Target target = resolve_target(target_name);
  Kernel k = lower(L, target, schedule);
  const fs::path file =
      fs::temp_directory_path() / ("padfold_compile_only_" + std::to_string(getpid()) + ".out");
  compile_kernel_files(k, target, {{type, file.string()}}, "kernel");
  auto result = read(file);
  fs::remove(file);
  return result;
}

}  // namespace

int64_t compile_only(const Layer& L, const std::string& target_name,
                     const nlohmann::json& schedule) {
  return compiled_file(L, target_name, schedule, Halide::OutputFileType::object,
                       [](const std::filesystem::path& f) {
                         return static_cast<int64_t>(std::filesystem::file_size(f));
                       });
}

std::string compiled_assembly(const Layer& L, const std::string& target_name,
                              const nlohmann::json& schedule) {
  return compiled_file(L, target_name, schedule, Halide::OutputFileType::assembly,
                       [](const std::filesystem::path& f) {
                         std::ifstream in(f);
                         return std::string(std::istreambuf_iterator<char>(in), {});
                       });
}

std::vector<int64_t> layout_order(const std::vector<int64_t>& nc, bool channels_last) {
  if (!channels_last) return nc;
  std::vector<int64_t> s = {nc[0]};
  s.insert(s.end(), nc.begin() + 2, nc.end());
  s.push_back(nc[1]);
  return s;
}

Layer layer_reading(const std::vector<int64_t>& shape, bool channels_last,
                    const nlohmann::json& layer) {
  const std::string letters = spatial_letters(static_cast<int>(shape.size()) - 2);
  nlohmann::json l = layer;
  l["input"] = "x";
  const nlohmann::json spec = {
      {"model", "one"},
      {"inputs",
       {{{"name", "x"},
         {"shape", shape},
         {"layout", channels_last ? "N" + letters + "C" : "NC" + letters}}}},
      {"layers", {l}}};
  return parse_spec(spec.dump(), "one_layer.json").layers.back();
}

std::optional<KernelAndReference> run_or_compile(const Layer& layer, const std::string& target,
                                                 unsigned seed) {
  if (!runs_here(target)) {
    if (compile_only(layer, target) <= 0)
      throw std::runtime_error("the kernel of " + layer.name + " for " + target + " has no code");
    return std::nullopt;
  }
  const ref::LayerData data = ref::random_data(layer, seed);
  return KernelAndReference{kernel_output(layer, data, target), ref::reference_output(layer, data)};
}

}  // namespace padfold::testing
