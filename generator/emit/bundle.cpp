// compile_bundle: a planned bundle written into a staged directory, step by step.
#include "emit/bundle.h"

#include <filesystem>
#include <optional>

#include "base/npy.h"
#include "emit/bundle_dir.h"
#include "emit/data_dir.h"
#include "emit/kernel_jobs.h"
#include "emit/libraries.h"
#include "emit/manifest.h"
#include "emit/registry.h"
#include "emit/weights.h"
#include "emit/writers.h"

namespace padfold {

namespace fs = std::filesystem;

namespace {

// The runtime sources and Halide's runtime headers travel with the bundle, so it is
// self-contained for embedded builds.
void copy_runtime(const fs::path& root) {
  const fs::path data = data_dir();
  fs::copy(data / "runtime", root / "runtime", fs::copy_options::recursive);
  for (const char* header : {"HalideRuntime.h", "HalideRuntimeCuda.h", "HalideRuntimeOpenCL.h"})
    fs::copy_file(data / "include" / header, root / "include" / header);
}

KernelReport report_of(const BundlePlan& plan, const KernelBuild& b, const fs::path& root) {
  const TargetPlan& t = plan.targets[b.target];
  const KernelPlan& k = plan.kernels[b.kernel];
  return {t.name,
          k.block.last().name,
          b.schedule.name,
          b.result.seconds,
          static_cast<int64_t>(fs::file_size(object_path(root, t, k))),
          b.fallback_from,
          b.fallback_reason,
          k.block.fused() ? k.block.names() : "",
          k.schedules[b.target].source,
          b.memory};
}

}  // namespace

std::vector<KernelReport> compile_bundle(const BundlePlan& plan,
                                         const std::function<void(const KernelReport&)>& progress) {
  const Model& model = *plan.model;
  // Weights are read, checked and prepared before anything is compiled.
  const std::vector<NpyData> weights = stored_weights(model, plan.weight_files);
  StagedDirectory staged(plan.options.out_dir);
  const fs::path root = staged.path();
  if (!plan.embedded_weights && !plan.weight_files.empty()) {
    fs::create_directories(root / "weights");
    for (size_t i = 0; i < plan.weight_files.size(); ++i)
      write_npy((root / plan.weight_files[i].bundle_path()).string(), weights[i].shape,
                weights[i].dtype, weights[i].data());
  }
  for (const TargetPlan& t : plan.targets) fs::create_directories(target_dir(root, t) / "obj");
  fs::create_directories(root / "include");
  copy_runtime(root);

  const std::vector<KernelBuild> builds = compile_kernels(plan, root, [&](const KernelBuild& b) {
    if (progress) progress(report_of(plan, b, root));
  });
  // In (target, kernel) order, whatever order the workers finished in.
  std::vector<KernelReport> reports;
  for (const KernelBuild& b : builds) reports.push_back(report_of(plan, b, root));
  build_target_libraries(plan, root);

  const std::string embedded_data = plan.embedded_weights ? embedded_weights_c(plan, weights) : "";
  std::vector<std::optional<std::string>> shared_libraries;
  for (size_t i = 0; i < plan.targets.size(); ++i) {
    const TargetPlan& t = plan.targets[i];
    const std::vector<std::string> heap = heap_scratch_kernels(plan, builds, i);
    write_registry_sources(plan, t, root, embedded_data, heap.empty() ? "" : heap.front());
    shared_libraries.push_back(link_bundle_library(plan, t, root));
    fs::remove_all(target_dir(root, t) / "obj");
  }
  write_consumer_files(plan, root);
  write_file(root / "manifest.json",
             bundle_manifest(plan, builds, shared_libraries).dump(2) + "\n");
  staged.commit();
  return reports;
}

std::vector<KernelReport> compile_bundle(const Model& model, const CompileOptions& options,
                                         const std::function<void(const KernelReport&)>& progress) {
  return compile_bundle(plan_bundle(model, options), progress);
}

}  // namespace padfold
