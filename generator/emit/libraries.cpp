// build_target_libraries, link_bundle_library and the choice of C compiler for a target.
#include "emit/libraries.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "base/process.h"
#include "compile/jobs.h"

namespace padfold {

namespace fs = std::filesystem;
using Halide::OutputFileType;

std::string linker_for(const Halide::Target& t) {
  const Halide::Target cpu = Halide::get_host_target();
  std::string cc;
  if (t.arch == cpu.arch && t.bits == cpu.bits && t.os == cpu.os)
    cc = "cc";
  else if (t.arch == Halide::Target::ARM && t.bits == 64 && t.os == Halide::Target::Linux)
    cc = "aarch64-linux-gnu-gcc";
  else if (t.arch == Halide::Target::ARM && t.bits == 32 && t.os == Halide::Target::Linux)
    cc = "arm-linux-gnueabihf-gcc";
  else if (t.arch == Halide::Target::RISCV && t.os == Halide::Target::Linux)
    cc = "riscv64-linux-gnu-gcc";
  return !cc.empty() && program_on_path(cc) ? cc : "";
}

std::string arch_name(const Halide::Target& t) {
  switch (t.arch) {
    case Halide::Target::X86:
      return t.bits == 64 ? "x86-64" : "x86-32";
    case Halide::Target::ARM:
      return t.bits == 64 ? "arm-64" : "arm-32";
    case Halide::Target::RISCV:
      return "riscv-64";
    default:
      return "other";
  }
}

void build_target_libraries(const BundlePlan& plan, const fs::path& root) {
  std::vector<WorkerJob> jobs;
  for (const TargetPlan& t : plan.targets) {
    jobs.push_back(
        {"target " + t.name + ": kernel library and Halide runtime", [&, &t = t] {
           const fs::path dir = target_dir(root, t);
           std::vector<std::string> objects;
           for (const KernelPlan& k : plan.kernels) {
             objects.push_back(object_path(root, t, k).string());
             if (!k.prepare_function.empty())
               objects.push_back(prepare_object_path(root, t, k).string());
           }
           Halide::create_static_library(objects, t.target, (dir / plan.static_library).string());
           Halide::compile_standalone_runtime(
               {{OutputFileType::static_library, (dir / plan.halide_runtime).string()}}, t.target);
         }});
  }
  WorkerOptions wopt;
  wopt.parallel = plan.options.jobs > 0 ? plan.options.jobs : default_parallel_jobs();
  // --kernel-timeout is for one kernel; the library and Halide runtime of a target take seconds
  // (more on a loaded machine) and get a limit of their own.
  wopt.timeout_s = std::max(plan.options.kernel_timeout_s, 900.0);
  const std::vector<WorkerResult> results = run_workers(jobs, wopt);
  for (size_t i = 0; i < results.size(); ++i)
    if (!results[i].ok) throw std::runtime_error(jobs[i].label + ": " + results[i].error);
}

std::optional<std::string> link_bundle_library(const BundlePlan& plan, const TargetPlan& t,
                                               const fs::path& root) {
  SharedLibraryLink link;
  link.cc = linker_for(t.target);
  if (link.cc.empty()) return std::nullopt;
  const fs::path dir = target_dir(root, t);
  link.compile_flags = {"-fPIC", "-O2", "-std=c99"};
  link.output = (dir / plan.shared_library).string();
  link.include_dirs = {(root / "include").string(), (root / "runtime" / "include").string()};
  link.inputs = {(dir / "registry.c").string(), (dir / "bundle_entry.c").string()};
  link.whole_archives = {(dir / plan.static_library).string()};
  link.halide_runtime = (dir / plan.halide_runtime).string();
  link.link_flags = {"-Wl,--exclude-libs,ALL"};
  link_shared_library(link, "linking the shared library for " + t.name);
  return t.name + "/" + plan.shared_library;
}

}  // namespace padfold
