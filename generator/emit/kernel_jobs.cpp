// compile_kernels: a bundle's kernels in compile workers, retried with the conservative schedule.
#include "emit/kernel_jobs.h"

#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "base/atomic_file.h"
#include "compile/jobs.h"
#include "compile/lower.h"
#include "compile/target.h"
#include "frontend/quant_arithmetic.h"

namespace padfold {

namespace fs = std::filesystem;
using Halide::OutputFileType;

namespace {

// Halide names a header's include guard after the header's path, here the staging directory's
// (with padfold's pid): a guard from the function's name keeps build paths out of the bundle and
// the bundle the same from one compile to the next.
void name_include_guard(const std::string& header, const std::string& function) {
  std::ifstream f(header, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  const std::string ifndef = "#ifndef ";
  if (!f || text.rfind(ifndef, 0) != 0)
    throw std::runtime_error(header + ": Halide's header does not start with an include guard");
  const std::string old_guard = text.substr(ifndef.size(), text.find('\n') - ifndef.size());
  std::string guard = function + "_H";
  for (char& c : guard) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (size_t at = text.find(old_guard); at != std::string::npos;
       at = text.find(old_guard, at + guard.size()))
    text.replace(at, old_guard.size(), guard);
  write_file_replacing(header, text);
}

// Where the worker leaves the kernel's Halide scratch figures for the parent (in obj/, which goes
// once the libraries are built).
fs::path memory_path(const fs::path& root, const TargetPlan& t, const KernelPlan& k) {
  fs::path p = object_path(root, t, k);
  return p.replace_extension(".memory");
}

// What a compile worker does for one kernel: lower, then emit object, header and statement.
void compile_kernel(const BundlePlan& plan, const KernelBuild& build, const fs::path& root) {
  const KernelPlan& k = plan.kernels[build.kernel];
  const TargetPlan& t = plan.targets[build.target];
  const fs::path dir = target_dir(root, t);
  const std::string& layer = k.block.last().name;
  Kernel kernel = lower(k.block, t.target, build.schedule, k.weight_form);
  std::map<OutputFileType, std::string> outputs{
      {OutputFileType::object, object_path(root, t, k).string()}};
  if (build.target == 0)
    outputs[OutputFileType::c_header] = (root / "include" / (k.function + ".h")).string();
  if (plan.options.emit_stmt) outputs[OutputFileType::stmt] = (dir / (layer + ".stmt")).string();
  const std::string device = device_api_name(t.target);
  const std::string device_code =
      plan.options.emit_device_code && !device.empty()
          ? (dir / (layer + (device == "cuda" ? ".ptx" : ".cl"))).string()
          : "";
  const HalideMemory memory =
      compile_kernel_files(kernel, t.target, outputs, k.function, device_code);
  if (!k.prepare_function.empty())
    compile_weight_preparation(k.block.consumer(), k.weight_form, t.target,
                               {{OutputFileType::object, prepare_object_path(root, t, k).string()}},
                               k.prepare_function);
  write_file_replacing(memory_path(root, t, k).string(), memory_line(memory) + "\n");
  if (build.target == 0) name_include_guard(outputs[OutputFileType::c_header], k.function);
}

// Starts a worker's error when the layer's own parameters are refused: another schedule cannot
// help, so there is no retry.
constexpr const char* kLayerRefused = "the layer is refused: ";

// "layer 'a'", or "block a+b (dw->pw)".
std::string block_label(const Block& b) {
  return b.fused() ? "block " + b.names() + " (" + b.kind() + ")" : "layer '" + b.last().name + "'";
}

std::string build_label(const BundlePlan& plan, const KernelBuild& b) {
  return "target " + plan.targets[b.target].name + ", " +
         block_label(plan.kernels[b.kernel].block) + ", schedule " + b.schedule.name;
}

}  // namespace

std::vector<std::string> heap_scratch_kernels(const BundlePlan& plan,
                                              const std::vector<KernelBuild>& builds,
                                              size_t target) {
  std::vector<std::string> names;
  for (const KernelBuild& b : builds)
    if (b.target == target && (b.memory.heap_bytes > 0 || !b.memory.heap_buffers.empty()))
      names.push_back(plan.kernels[b.kernel].block.last().name);
  return names;
}

std::vector<KernelBuild> compile_kernels(
    const BundlePlan& plan, const fs::path& root,
    const std::function<void(const KernelBuild&)>& on_compiled) {
  std::vector<KernelBuild> builds;
  for (size_t t = 0; t < plan.targets.size(); ++t)
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      KernelBuild b;
      b.kernel = k;
      b.target = t;
      b.schedule = plan.kernels[k].schedules[t].requested;
      b.resolved = plan.kernels[k].schedules[t].resolved;
      builds.push_back(b);
    }
  // The worker reads the build as it is when the job starts (a retry's conservative schedule).
  const auto job = [&](size_t i) {
    return CompileJob{build_label(plan, builds[i]),
                      plan.kernels[builds[i].kernel].block.last().name, false,
                      [&plan, &builds, &root, i] {
                        try {
                          compile_kernel(plan, builds[i], root);
                        } catch (const Halide::Error& e) {  // not a std::exception: its text
                          throw std::runtime_error(e.what());
                        } catch (const QuantRefused& e) {
                          throw std::runtime_error(kLayerRefused + std::string(e.what()));
                        }
                      }};
  };
  std::vector<CompileJob> jobs;
  for (size_t i = 0; i < builds.size(); ++i) jobs.push_back(job(i));
  CompileJobOptions options;
  options.parallel = plan.options.jobs > 0 ? plan.options.jobs : default_parallel_jobs();
  options.timeout_s = plan.options.kernel_timeout_s;
  options.on_done = [&](size_t i, const WorkerResult& r) {
    KernelBuild& b = builds[i];
    b.result = r;
    if (!r.output.empty())  // Halide's warnings, or a crash's last words
      std::fprintf(stderr, "%s:\n%s", build_label(plan, b).c_str(), r.output.c_str());
    if (r.ok) {
      std::ifstream f(memory_path(root, plan.targets[b.target], plan.kernels[b.kernel]));
      std::string line;
      if (!std::getline(f, line))
        throw std::runtime_error(build_label(plan, b) +
                                 ": the worker left no Halide memory figures");
      b.memory = parse_memory_line(line);
      on_compiled(b);
    }
  };
  options.retry = [&](size_t i, const WorkerResult& r) -> std::optional<CompileJob> {
    KernelBuild& b = builds[i];
    if (r.error.rfind(kLayerRefused, 0) == 0) return std::nullopt;
    const Block& block = plan.kernels[b.kernel].block;
    const Halide::Target& target = plan.targets[b.target].target;
    b.fallback = true;
    b.fallback_from = b.schedule.name;
    b.fallback_reason = r.error;
    b.schedule = with_weight_form(conservative_schedule(block.consumer(), target),
                                  plan.kernels[b.kernel].weight_form);
    b.resolved = resolved_schedule(block, target, b.schedule);
    return job(i);
  };
  run_compile_jobs(std::move(jobs), options);

  std::vector<const KernelBuild*> failed;
  for (const KernelBuild& b : builds)
    if (!b.result.ok) failed.push_back(&b);
  if (failed.empty()) return builds;
  std::string msg = std::to_string(failed.size()) + " kernel(s) failed to compile:";
  for (const KernelBuild* b : failed)
    msg += "\n  target " + plan.targets[b->target].name + ", " +
           block_label(plan.kernels[b->kernel].block) + ": schedule " +
           (b->fallback ? b->fallback_from + ": " + b->fallback_reason +
                              "; retried with schedule " + b->schedule.name + ": "
                        : b->schedule.name + ": ") +
           b->result.error;
  throw std::runtime_error(msg);
}

}  // namespace padfold
