#include "kernel_runner.h"

#include <Halide.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "compile/lower.h"
#include "compile/target.h"
#include "schedules/knobs.h"

namespace padfold::testing {

namespace {

Halide::Buffer<float> as_buffer(const ref::Tensor& t) {
  std::vector<int> sizes(t.shape.rbegin(), t.shape.rend());
  return Halide::Buffer<float>(const_cast<float*>(t.data.data()), sizes);
}

}  // namespace

ref::Tensor kernel_output(const Layer& L, const ref::LayerData& d, const std::string& target_name,
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
