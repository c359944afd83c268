// `padfold compile`: turns a resolved model into a bundle directory of ahead-of-time kernels,
// one Halide runtime per target, a manifest, a static registry and a CMake file for consumers.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spec.h"

namespace padfold {

constexpr int kBundleFormatVersion = 1;

struct CompileOptions {
  std::vector<std::string> targets{"host"};  // Halide target strings, best first
  std::string out_dir;
  bool emit_stmt = false;  // also write each kernel's lowered statement (<layer>.stmt)
  nlohmann::json schedule_overrides = nlohmann::json::object();  // layer name -> parameters
};

struct KernelReport {
  std::string target, layer, schedule;
  double compile_seconds = 0;
  int64_t object_bytes = 0;
};

// Writes the bundle and returns one report per (target, layer). Throws std::runtime_error with a
// message naming the target and layer on failure.
std::vector<KernelReport> compile_bundle(
    const Model& model, const CompileOptions& options,
    const std::function<void(const KernelReport&)>& progress = nullptr);

// Resolves a user target string ("host", "x86-64-linux-avx2-fma", ...) or throws with the list of
// valid names.
std::string resolve_target(const std::string& name);

std::string kernel_function_name(const Model& model, const Layer& layer);
std::string c_identifier(const std::string& name);

}  // namespace padfold
