#include "compile/target.h"

#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace padfold {

using Halide::Target;

namespace {

std::vector<std::string> target_tokens(const Target& t) {
  std::vector<std::string> tokens;
  std::stringstream ss(t.to_string());
  for (std::string part; std::getline(ss, part, '-');) tokens.push_back(part);
  return tokens;
}

// Halide 21 generates RISC-V code only with the vector extension and a fixed vector length.
void check_riscv(const Target& t, const std::string& name) {
  if (t.arch != Target::RISCV) return;
  if (!t.has_feature(Target::RVV) || t.vector_bits == 0)
    throw std::runtime_error(
        "target '" + name +
        "': Halide 21 generates RISC-V code only for the vector extension "
        "with a fixed vector length; use e.g. riscv-64-linux-rvv-vector_bits_128");
}

// The GPU APIs padfold generates for; the highest CUDA capability Halide 21 knows.
bool is_device_token(const std::string& token) {
  return token == "cuda" || token == "opencl" || token.rfind("cuda_capability_", 0) == 0 ||
         token.rfind("cl_", 0) == 0;
}

Target with_gpu_defaults(Target t, const std::string& name) {
  if (!t.has_gpu_feature()) return t;
  for (Target::Feature f : {Target::Metal, Target::D3D12Compute, Target::Vulkan, Target::WebGPU})
    if (t.has_feature(f))
      throw std::runtime_error("target '" + name +
                               "': padfold generates GPU kernels for CUDA and OpenCL only "
                               "(e.g. host-cuda, host-cuda-cuda_capability_86, host-opencl)");
  if (t.has_feature(Target::CUDA) && t.has_feature(Target::OpenCL))
    throw std::runtime_error("target '" + name + "': one GPU API per target (cuda or opencl)");
  if (t.has_feature(Target::CUDA) && t.get_cuda_capability_lower_bound() < 30)
    t = t.with_feature(kDefaultCudaCapability);
  return t;
}

}  // namespace

Target host_target() {
  const char* forced = std::getenv(kHostTargetVariable);
  if (forced == nullptr || *forced == '\0') return Halide::get_host_target();
  if (!Target::validate_target_string(forced))
    throw std::runtime_error(std::string(kHostTargetVariable) + "='" + forced +
                             "' is not a Halide target (expected arch-bits-os[-feature...], e.g. "
                             "x86-64-linux-tune_znver3-avx-avx2-f16c-fma-sse41)");
  return Target(forced).without_feature(Target::NoRuntime);
}

Target resolve_target(const std::string& name) {
  Target t;
  // host-cuda, host-opencl, ...: the host CPU ($PADFOLD_HOST_TARGET) with the features added.
  const std::string with_host =
      name.rfind("host-", 0) == 0 ? host_target().to_string() + name.substr(4) : "";
  if (name == "host") {
    t = host_target();
  } else if (!with_host.empty() && Target::validate_target_string(with_host)) {
    t = Target(with_host);
  } else if (Target::validate_target_string(name)) {
    t = Target(name);
  } else {
    throw std::runtime_error("unknown target '" + name +
                             "'; expected 'host' or a Halide target such as "
                             "x86-64-linux-avx2-fma, x86-64-linux-avx512_skylake, arm-64-linux, "
                             "arm-32-linux, riscv-64-linux-rvv-vector_bits_128 "
                             "(arch-bits-os[-feature...])");
  }
  t = with_gpu_defaults(t, name);
  check_riscv(t, name);
  return t.without_feature(Target::NoRuntime);
}

Target codegen_target(const Target& t) {
  return t.with_feature(Target::EnableLLVMLoopOpt);
}

std::vector<std::string> cpu_feature_names(const Target& t) {
  std::vector<std::string> names;
  const std::vector<std::string> tokens = target_tokens(t.without_feature(Target::NoRuntime));
  for (size_t i = 3; i < tokens.size(); ++i)
    if (tokens[i].rfind("tune_", 0) != 0 && tokens[i].rfind("vector_bits_", 0) != 0 &&
        !is_device_token(tokens[i]))
      names.push_back(tokens[i]);
  return names;
}

std::string device_api_name(const Target& t) {
  if (t.has_feature(Target::CUDA)) return "cuda";
  if (t.has_feature(Target::OpenCL)) return "opencl";
  return "";
}

std::string cuda_arch_name(const Target& t) {
  const int cap = t.get_cuda_capability_lower_bound();
  return t.has_feature(Target::CUDA) ? "sm_" + std::to_string(cap) : "";
}

std::string tuning_name(const Target& t) {
  for (const std::string& token : target_tokens(t))
    if (token.rfind("tune_", 0) == 0) return token.substr(5);
  return "";
}

bool can_run_here(const Target& t) {
  const Target cpu = Halide::get_host_target();
  if (t.arch != cpu.arch || t.bits != cpu.bits || t.os != cpu.os) return false;
  static const Target::Feature isa[] = {Target::SSE41,
                                        Target::AVX,
                                        Target::AVX2,
                                        Target::AVXVNNI,
                                        Target::FMA,
                                        Target::FMA4,
                                        Target::F16C,
                                        Target::AVX512,
                                        Target::AVX512_KNL,
                                        Target::AVX512_Skylake,
                                        Target::AVX512_Cannonlake,
                                        Target::AVX512_SapphireRapids,
                                        Target::AVX512_Zen4,
                                        Target::AVX512_Zen5,
                                        Target::AVX10_1,
                                        Target::X86APX,
                                        Target::ARMDotProd,
                                        Target::ARMFp16,
                                        Target::SVE,
                                        Target::SVE2,
                                        Target::RVV};
  for (Target::Feature f : isa)
    if (t.has_feature(f) && !cpu.has_feature(f)) return false;
  return true;
}

}  // namespace padfold
