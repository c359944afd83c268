#include "tune/build.h"

#include <dlfcn.h>

#include <filesystem>

#include "algorithm/algorithm.h"
#include "base/text.h"
#include "compile/jobs.h"
#include "compile/lower.h"
#include "compile/target.h"

namespace padfold {

namespace fs = std::filesystem;

const std::vector<std::string>& autoscheduler_names() {
  static const std::vector<std::string> names = {"Mullapudi2016", "Adams2019", "Li2018"};
  return names;
}

namespace {

// The plugins ship beside libHalide.so (the SDK's lib64/): found through the address of a Halide
// symbol, so that no path is configured.
std::string plugin_path(const std::string& name) {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&Halide::load_plugin), &info) || !info.dli_fname)
    throw std::runtime_error("cannot locate libHalide.so to find the autoscheduler plugins");
  const fs::path p =
      fs::path(info.dli_fname).parent_path() / ("libautoschedule_" + ascii_lower(name) + ".so");
  if (!fs::exists(p)) throw std::runtime_error("autoscheduler plugin " + p.string() + " not found");
  return p.string();
}

Halide::Region region_of(const std::vector<int64_t>& shape) {
  Halide::Region r;
  for (size_t i = shape.size(); i-- > 0;) r.emplace_back(0, static_cast<int>(shape[i]));
  return r;
}

Kernel autoscheduled_kernel(const Layer& L, const Halide::Target& target,
                            const std::string& autoscheduler) {
  Halide::load_plugin(plugin_path(autoscheduler));
  Algorithm alg = build_algorithm(L);
  for (BufferParam& b : alg.buffers) {
    if (b.param.defined())
      b.param.set_estimates(region_of(b.info.shape));
    else
      alg.output.set_estimates(region_of(b.info.shape));
  }
  Kernel k;
  k.name = L.name;
  k.schedule.name = "auto." + autoscheduler;
  k.buffers = alg.buffers;
  k.pipeline = Halide::Pipeline(alg.output);
  // One thread, as the tuned kernels are measured.
  k.pipeline.apply_autoscheduler(codegen_target(target), {autoscheduler, {{"parallelism", "1"}}});
  return k;
}

}  // namespace

void build_tune_runtime(const Halide::Target& target, const std::string& archive) {
  Halide::compile_standalone_runtime({{Halide::OutputFileType::static_library, archive}},
                                     codegen_target(target));
}

void build_candidate_library(const Layer& L, const Halide::Target& target,
                             const ScheduleParams& resolved, const std::string& autoscheduler,
                             const std::string& function, const std::string& runtime_archive,
                             const std::string& so_path) {
  const Kernel k = autoscheduler.empty() ? lower(L, target, resolved)
                                         : autoscheduled_kernel(L, target, autoscheduler);
  const std::string obj = so_path + ".o";
  compile_kernel_files(k, target, {{Halide::OutputFileType::object, obj}}, function);
  // -Bsymbolic: the library's runtime calls bind to its own copy, whatever the process has loaded.
  SharedLibraryLink link;
  link.output = so_path;
  link.inputs = {obj};
  link.halide_runtime = runtime_archive;
  link.link_flags = {"-Wl,-Bsymbolic"};
  link_shared_library(link, "linking the candidate " + so_path);
  fs::remove(obj);
}

}  // namespace padfold
