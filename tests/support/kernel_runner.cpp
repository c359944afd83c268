#include "kernel_runner.h"

#include <Halide.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "compile/lower.h"
#include "compile/target.h"

namespace padfold::testing {

namespace {

ref::Tensor random_tensor(std::vector<int64_t> shape, std::mt19937& rng) {
  ref::Tensor t(std::move(shape));
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float& v : t.data) v = dist(rng);
  return t;
}

ref::BorderKind border_kind(Border b) {
  switch (b) {
    case Border::Zeros:
      return ref::BorderKind::Zeros;
    case Border::Constant:
      return ref::BorderKind::Constant;
    case Border::Reflect:
      return ref::BorderKind::Reflect;
    case Border::Symmetric:
      return ref::BorderKind::Symmetric;
    case Border::Replicate:
      return ref::BorderKind::Replicate;
    case Border::Circular:
      return ref::BorderKind::Circular;
  }
  return ref::BorderKind::Zeros;
}

ref::ActivationKind activation_kind(Activation a) {
  switch (a) {
    case Activation::None:
      return ref::ActivationKind::None;
    case Activation::Relu:
      return ref::ActivationKind::Relu;
    case Activation::Relu6:
      return ref::ActivationKind::Relu6;
    case Activation::LeakyRelu:
      return ref::ActivationKind::LeakyRelu;
  }
  return ref::ActivationKind::None;
}

Halide::Buffer<float> as_buffer(const ref::Tensor& t) {
  std::vector<int> sizes(t.shape.rbegin(), t.shape.rend());
  return Halide::Buffer<float>(const_cast<float*>(t.data.data()), sizes);
}

}  // namespace

LayerData random_data(const Layer& L, unsigned seed) {
  std::mt19937 rng(seed);
  LayerData d;
  d.input = random_tensor(L.input_shape(), rng);
  if (L.has_weights()) d.weights = random_tensor(L.weight_shape(), rng);
  if (L.bias) d.bias = random_tensor({L.out_channels}, rng);
  return d;
}

ref::Tensor reference_output(const Layer& L, const LayerData& d) {
  const int dims = L.spatial_dims;
  const ref::Tensor x = L.layout.channels_last ? ref::from_channels_last(d.input) : d.input;
  const ref::Tensor* bias = L.bias ? &d.bias : nullptr;
  std::vector<int64_t> before, after;
  for (const AxisPads& p : L.pads.axes) {
    before.push_back(p.before);
    after.push_back(p.after);
  }
  ref::Tensor y;
  switch (L.op) {
    case Op::Conv: {
      const ref::Tensor w =
          ref::permute(d.weights, L.weight_layout.order, "OI" + spatial_letters(dims));
      ref::ConvParams p{L.stride,      L.dilation, before, after, L.groups, border_kind(L.border),
                        L.border_value};
      y = ref::conv(x, w, bias, p, L.out_spatial);
      break;
    }
    case Op::ConvTranspose: {
      const ref::Tensor w =
          ref::permute(d.weights, L.weight_layout.order, "IO" + spatial_letters(dims));
      y = ref::conv_transpose(x, w, bias, L.stride, L.dilation, before, after, L.groups,
                              L.out_spatial);
      break;
    }
    case Op::MaxPool:
    case Op::AvgPool: {
      ref::PoolParams p{
          L.kernel,       L.stride,           L.dilation, before, after, border_kind(L.border),
          L.border_value, L.count_include_pad};
      y = L.op == Op::MaxPool ? ref::max_pool(x, p, L.out_spatial)
                              : ref::avg_pool(x, p, L.out_spatial);
      break;
    }
    case Op::Add:
    case Op::Concat:  // several inputs: join_kernels_test has their reference
      throw std::invalid_argument("reference_output: layer '" + L.name + "' joins several inputs");
  }
  y = ref::activation(y, activation_kind(L.activation), L.activation_alpha);
  return L.layout.channels_last ? ref::to_channels_last(y) : y;
}

ref::Tensor kernel_output(const Layer& L, const LayerData& d, const std::string& target_name,
                          const nlohmann::json& schedule) {
  const Halide::Target target = resolve_target(target_name);
  Kernel k = lower(L, target, schedule);
  k.param("input").set(as_buffer(d.input));
  if (L.has_weights()) k.param("weights").set(as_buffer(d.weights));
  if (L.bias) k.param("bias").set(as_buffer(d.bias));
  ref::Tensor out(L.output_shape_full());
  Halide::Buffer<float> out_buf = as_buffer(out);
  k.pipeline.realize(out_buf, codegen_target(target));
  return out;
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

int64_t compile_only(const Layer& L, const std::string& target_name,
                     const nlohmann::json& schedule) {
  namespace fs = std::filesystem;
  const Halide::Target target = resolve_target(target_name);
  Kernel k = lower(L, target, schedule);
  const fs::path obj =
      fs::temp_directory_path() / ("padfold_compile_only_" + std::to_string(getpid()) + ".o");
  compile_kernel_files(k, target, {{Halide::OutputFileType::object, obj.string()}}, "kernel");
  const auto bytes = static_cast<int64_t>(fs::file_size(obj));
  fs::remove(obj);
  return bytes;
}

}  // namespace padfold::testing
