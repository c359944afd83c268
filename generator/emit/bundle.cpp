#include "emit/bundle.h"

#include <Halide.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <kainjow/mustache.hpp>
#include <optional>

#include "base/fault_injection.h"
#include "base/npy.h"
#include "base/process.h"
#include "base/text.h"
#include "compile/fusion.h"
#include "compile/lower.h"
#include "compile/target.h"
#include "emit/bundle_dir.h"
#include "emit/data_dir.h"
#include "emit/weights.h"
#include "padfold_templates.h"

namespace padfold {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Halide::OutputFileType;

namespace {

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

std::string render(const char* tmpl, const kainjow::mustache::data& data) {
  kainjow::mustache::mustache m{std::string(tmpl)};
  if (!m.is_valid()) throw std::logic_error("bad template: " + m.error_message());
  return m.render(data);
}

std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

// A C string literal of any text (a produced_by note is the user's).
std::string c_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char ch : text) {
    if (ch == '"' || ch == '\\')
      out += std::string("\\") + static_cast<char>(ch);
    else if (ch >= 0x20 && ch < 0x7f && ch != '?')  // '?': no trigraphs
      out += static_cast<char>(ch);
    else
      out += fmt::format("\\{:03o}", ch);
  }
  return out + "\"";
}

// The weights of the model's layers, read and checked once: copied into the bundle or baked into
// its libraries.
struct BundleWeights {
  bool embedded = false;
  std::vector<WeightFile> files;
  std::vector<std::vector<float>> data;  // per file

  const WeightFile* find(const Layer& L, const std::string& buffer) const {
    for (const WeightFile& w : files)
      if (w.layer == &L && w.buffer == buffer) return &w;
    return nullptr;
  }
  // The C symbol of an embedded buffer's values.
  static std::string symbol(const Model& model, const WeightFile& w) {
    return kernel_function_name(model, *w.layer) + "_" + w.buffer + "_data";
  }
};

// Where a buffer's values come from in a whole-model run (pf_buffer_desc.source): the tensor
// feeding an input buffer, the bundle's .npy file of weights and bias (none when embedded).
// The layer of the block a buffer belongs to.
const Layer& layer_of(const Block& block, const BufferInfo& b) {
  for (const Layer* L : block.layers)
    if (L->name == b.layer) return *L;
  throw std::logic_error("buffer '" + b.name + "' belongs to no layer of block " + block.names());
}

std::optional<std::string> buffer_source(const Block& block, const BufferInfo& b,
                                         size_t input_index, const BundleWeights& weights) {
  if (b.role == "input") return block.first().inputs.at(input_index);
  if (b.role == "output" || weights.embedded) return std::nullopt;
  const WeightFile* w = weights.find(layer_of(block, b), b.role);
  return w ? std::optional<std::string>(w->bundle_path()) : std::nullopt;
}

// The embedded weights as C arrays of their float32 bits (exact, and faster to compile than
// float literals), one per buffer; registry.c's data pointers name them.
std::string embedded_weights_c(const Model& model, const BundleWeights& weights) {
  std::string out;
  for (size_t i = 0; i < weights.files.size(); ++i) {
    const std::vector<float>& values = weights.data[i];
    out += fmt::format("static const uint32_t {}[{}] = {{",
                       BundleWeights::symbol(model, weights.files[i]),
                       std::max<size_t>(values.size(), 1));
    for (size_t k = 0; k < values.size(); ++k) {
      uint32_t bits;
      std::memcpy(&bits, &values[k], sizeof bits);
      out += fmt::format("{}0x{:08x}u", k % 8 ? " " : "\n    ", bits);
      if (k + 1 < values.size()) out += ",";
    }
    out += "};\n";
  }
  return out;
}

// The runtime's pf_role for a buffer role (runtime/include/padfold_runtime.h).
const char* role_enum(const std::string& role) {
  static const std::pair<const char*, const char*> roles[] = {{"input", "PF_ROLE_INPUT"},
                                                              {"weights", "PF_ROLE_WEIGHTS"},
                                                              {"bias", "PF_ROLE_BIAS"},
                                                              {"output", "PF_ROLE_OUTPUT"}};
  for (const auto& [name, value] : roles)
    if (role == name) return value;
  throw std::logic_error("no runtime role for buffer role '" + role + "'");
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

// The C compiler that can link a shared library for `t` on this machine, or "" if none.
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

// --- kernels ------------------------------------------------------------------------------------

struct TargetPlan {
  Halide::Target target;
  std::string name;  // the target string: directory name and manifest key
  fs::path dir;
};

struct KernelTask {
  const Block* block = nullptr;
  size_t target = 0;  // index into the plans
  ScheduleParams schedule;
  bool fallback = false;
  std::string fallback_from, fallback_reason;
  std::string source = "default";  // default, overrides, tuned (db)
  json tuning;                     // a tuned schedule's provenance
  WorkerResult result;
};

fs::path object_path(const TargetPlan& t, const std::string& fn) {
  return t.dir / "obj" / (fn + ".o");
}

// What a compile worker does for one kernel: lower, then emit object, header and statement.
void compile_kernel(const Model& model, const KernelTask& task, const TargetPlan& t,
                    const fs::path& root, bool write_header, const CompileOptions& opt,
                    const InjectedFaults& faults) {
  const Layer& L = task.block->last();
  const auto fault = faults.find(L.name);
  if (fault != faults.end() && (!task.fallback || fault->second.every)) raise_fault(fault->second);
  const std::string fn = kernel_function_name(model, L);
  Kernel k = lower(*task.block, t.target, task.schedule);
  std::map<OutputFileType, std::string> outputs{
      {OutputFileType::object, object_path(t, fn).string()}};
  if (write_header) outputs[OutputFileType::c_header] = (root / "include" / (fn + ".h")).string();
  if (opt.emit_stmt) outputs[OutputFileType::stmt] = (t.dir / (L.name + ".stmt")).string();
  const std::string device = device_api_name(t.target);
  const std::string device_code =
      opt.emit_device_code && !device.empty()
          ? (t.dir / (L.name + (device == "cuda" ? ".ptx" : ".cl"))).string()
          : "";
  compile_kernel_files(k, t.target, outputs, fn, device_code);
}

// "layer 'a'", or "block a+b (dw->pw)".
std::string block_label(const Block& b) {
  return b.fused() ? "block " + b.names() + " (" + b.kind() + ")" : "layer '" + b.last().name + "'";
}

std::string task_label(const KernelTask& task, const TargetPlan& t) {
  return "target " + t.name + ", " + block_label(*task.block) + ", schedule " + task.schedule.name;
}

// Compiles every kernel in workers; kernels whose tuned schedule fails are retried once with the
// conservative schedule. Throws, naming each kernel that failed both ways.
void compile_kernels(const Model& model, std::vector<KernelTask>& tasks,
                     const std::vector<TargetPlan>& plans, const fs::path& root,
                     const CompileOptions& opt,
                     const std::function<void(const KernelTask&)>& on_compiled) {
  const auto faults = injected_faults();
  WorkerOptions wopt;
  wopt.parallel = opt.jobs > 0 ? opt.jobs : default_parallel_jobs();
  wopt.timeout_s = opt.kernel_timeout_s;
  std::vector<size_t> pending(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) pending[i] = i;
  for (int attempt = 0; attempt < 2 && !pending.empty(); ++attempt) {
    std::vector<WorkerJob> jobs;
    for (size_t i : pending) {
      const KernelTask& task = tasks[i];
      jobs.push_back({task_label(task, plans[task.target]), [&, i] {
                        compile_kernel(model, tasks[i], plans[tasks[i].target], root,
                                       tasks[i].target == 0, opt, faults);
                      }});
    }
    wopt.on_done = [&](size_t job, const WorkerResult& r) {
      KernelTask& task = tasks[pending[job]];
      task.result = r;
      if (!r.output.empty())  // Halide's warnings, or a crash's last words
        std::fprintf(stderr, "%s:\n%s", jobs[job].label.c_str(), r.output.c_str());
      if (r.ok) on_compiled(task);
    };
    run_workers(jobs, wopt);
    std::vector<size_t> failed;
    for (size_t i : pending)
      if (!tasks[i].result.ok) failed.push_back(i);
    if (attempt == 0) {
      for (size_t i : failed) {
        KernelTask& task = tasks[i];
        task.fallback_from = task.schedule.name;
        task.fallback_reason = task.result.error;
        task.schedule = conservative_schedule(task.block->last(), plans[task.target].target);
        task.fallback = true;
      }
    }
    pending = failed;
  }
  if (pending.empty()) return;
  std::string msg = std::to_string(pending.size()) + " kernel(s) failed to compile:";
  for (size_t i : pending) {
    const KernelTask& task = tasks[i];
    msg += "\n  target " + plans[task.target].name + ", " + block_label(*task.block) +
           ": schedule " + task.fallback_from + ": " + task.fallback_reason +
           "; retried with schedule " + task.schedule.name + ": " + task.result.error;
  }
  throw std::runtime_error(msg);
}

// --- per-target libraries -----------------------------------------------------------------------

// The kernels' static library and the target's Halide runtime (compiled in a worker too: it is
// LLVM code generation like the kernels).
void build_target_libraries(const std::vector<TargetPlan>& plans, const Model& model,
                            const std::vector<Block>& blocks, const CompileOptions& opt) {
  std::vector<WorkerJob> jobs;
  for (const TargetPlan& t : plans) {
    jobs.push_back(
        {"target " + t.name + ": kernel library and Halide runtime", [&, &t = t] {
           std::vector<std::string> objects;
           for (const Block& b : blocks)
             objects.push_back(object_path(t, kernel_function_name(model, b.last())).string());
           Halide::create_static_library(
               objects, t.target,
               (t.dir / ("libpadfold_" + c_identifier(model.name) + ".a")).string());
           Halide::compile_standalone_runtime(
               {{OutputFileType::static_library, (t.dir / "halide_runtime.a").string()}}, t.target);
         }});
  }
  WorkerOptions wopt;
  wopt.parallel = opt.jobs > 0 ? opt.jobs : default_parallel_jobs();
  // --kernel-timeout is for one kernel; the library and Halide runtime of a target take seconds
  // (more on a loaded machine) and get a limit of their own.
  wopt.timeout_s = std::max(opt.kernel_timeout_s, 900.0);
  const std::vector<WorkerResult> results = run_workers(jobs, wopt);
  for (size_t i = 0; i < results.size(); ++i)
    if (!results[i].ok) throw std::runtime_error(jobs[i].label + ": " + results[i].error);
}

json kernel_buffers_json(const Block& block, const BundleWeights& weights) {
  json buffers = json::array();
  size_t inputs = 0;
  for (const BufferInfo& b : block_buffers(block)) {
    const auto source = buffer_source(block, b, inputs, weights);
    if (b.role == "input") ++inputs;
    buffers.push_back({{"name", b.name},
                       {"role", b.role},
                       {"dtype", "float32"},
                       {"layout", b.layout},
                       {"shape", b.shape},
                       {"strides", dense_strides(b.shape)},
                       {"source", source ? json(*source) : json(nullptr)}});
  }
  return buffers;
}

json graph_json(const Model& model) {
  json inputs = json::array();
  for (const ModelInput& in : model.inputs)
    inputs.push_back(
        {{"name", in.name},
         {"dtype", to_string(in.dtype)},
         {"layout", in.layout.name()},
         {"shape", in.shape},
         {"strides", dense_strides(in.shape)},
         {"produced_by", in.produced_by.empty() ? json(nullptr) : json(in.produced_by)}});
  return {{"inputs", inputs}, {"outputs", model.outputs}};
}

kainjow::mustache::object buffer_entry(const std::string& name, const std::string& role,
                                       const std::string& layout, const std::vector<int64_t>& shape,
                                       const std::optional<std::string>& source,
                                       const std::string& data) {
  return {{"name", name},
          {"role", role_enum(role)},
          {"layout", layout},
          {"rank", std::to_string(shape.size())},
          {"shape", join(shape)},
          {"strides", join(dense_strides(shape))},
          {"source", source ? c_string(*source) : "NULL"},
          {"data", data.empty() ? "NULL" : data}};
}

kainjow::mustache::list registry_kernels(const Model& model, const std::vector<Block>& blocks,
                                         const BundleWeights& weights) {
  kainjow::mustache::list kernels;
  for (const Block& block : blocks) {
    const Layer& L = block.last();
    kainjow::mustache::list buffers;
    size_t inputs = 0;
    for (const BufferInfo& b : block_buffers(block)) {
      const auto source = buffer_source(block, b, inputs, weights);
      if (b.role == "input") ++inputs;
      const WeightFile* w = weights.embedded && b.role != "input" && b.role != "output"
                                ? weights.find(layer_of(block, b), b.role)
                                : nullptr;
      buffers.push_back(buffer_entry(b.name, b.role, b.layout, b.shape, source,
                                     w ? BundleWeights::symbol(model, *w) : ""));
    }
    kernels.push_back(kainjow::mustache::object{{"layer", L.name},
                                                {"function", kernel_function_name(model, L)},
                                                {"op", block.fused() ? block.kind() : L.op_name},
                                                {"num_buffers", std::to_string(buffers.size())},
                                                {"buffers", buffers}});
  }
  return kernels;
}

// registry.c and bundle_entry.c: the kernel table the runtime reads, and the bundle's entry point.
void write_registry_sources(const TargetPlan& t, const Model& model,
                            const std::vector<Block>& blocks, const BundleWeights& weights,
                            const std::string& embedded_data) {
  const std::string model_id = c_identifier(model.name);
  kainjow::mustache::data data;
  data.set("version", PADFOLD_VERSION);
  data.set("target", t.name);
  data.set("model", model_id);
  data.set("registry_symbol", "padfold_registry_" + model_id);
  data.set("num_kernels", std::to_string(blocks.size()));
  data.set("kernels", registry_kernels(model, blocks, weights));
  kainjow::mustache::list inputs, outputs;
  for (const ModelInput& in : model.inputs)
    inputs.push_back(
        buffer_entry(in.name, "input", in.layout.name(), in.shape,
                     in.produced_by.empty() ? std::nullopt : std::optional(in.produced_by), ""));
  for (const std::string& name : model.outputs)
    outputs.push_back(kainjow::mustache::object{{"name", name}});
  data.set("inputs", inputs);
  data.set("num_inputs", std::to_string(model.inputs.size()));
  data.set("outputs", outputs);
  data.set("num_outputs", std::to_string(model.outputs.size()));
  data.set("embedded_weights", embedded_data);
  const std::string device = device_api_name(t.target);
  data.set("device", device.empty() ? kainjow::mustache::data(false)
                                    : kainjow::mustache::data(kainjow::mustache::object{
                                          {"api", device},
                                          {"header", device == "cuda" ? "HalideRuntimeCuda.h"
                                                                      : "HalideRuntimeOpenCL.h"}}));
  write_file(t.dir / "registry.c", render(templates::registry_c, data));
  write_file(t.dir / "bundle_entry.c", render(templates::bundle_entry_c, data));
}

// The shared library for pf_bundle_open, where a C compiler links for the target; returns its
// path in the bundle, or null.
json link_shared_library(const TargetPlan& t, const Model& model, const fs::path& root) {
  const std::string cc = linker_for(t.target);
  if (cc.empty()) return nullptr;
  const std::string model_id = c_identifier(model.name);
  const std::string so = "libpadfold_" + model_id + ".so";
  run_program(
      {cc, "-shared", "-fPIC", "-O2", "-std=c99", "-o", (t.dir / so).string(),
       "-I" + (root / "include").string(), "-I" + (root / "runtime" / "include").string(),
       (t.dir / "registry.c").string(), (t.dir / "bundle_entry.c").string(), "-Wl,--whole-archive",
       (t.dir / ("libpadfold_" + model_id + ".a")).string(), "-Wl,--no-whole-archive",
       (t.dir / "halide_runtime.a").string(), "-Wl,--exclude-libs,ALL", "-lpthread", "-ldl", "-lm"},
      "linking the shared library for " + t.name);
  return t.name + "/" + so;
}

// The knobs in effect for each of the target's kernels, with the fallback where there was one.
json target_schedules(const TargetPlan& t, const std::vector<KernelTask>& tasks,
                      size_t target_index) {
  json schedules = json::object();
  for (const KernelTask& task : tasks) {
    if (task.target != target_index) continue;
    json s = to_json(resolved_schedule(*task.block, t.target, task.schedule));
    if (task.fallback)
      s["fallback"] = {{"from", task.fallback_from}, {"reason", task.fallback_reason}};
    s["source"] = task.source;
    if (!task.tuning.is_null()) s["tuning"] = task.tuning;
    schedules[task.block->last().name] = s;
  }
  return schedules;
}

// Registry sources, shared library and the target's manifest entry.
json finish_target(const TargetPlan& t, const Model& model, const std::vector<Block>& blocks,
                   const fs::path& root, const std::vector<KernelTask>& tasks, size_t target_index,
                   const BundleWeights& weights, const std::string& embedded_data) {
  const std::string model_id = c_identifier(model.name);
  write_registry_sources(t, model, blocks, weights, embedded_data);
  const json shared = link_shared_library(t, model, root);
  fs::remove_all(t.dir / "obj");
  const std::string tune = tuning_name(t.target);
  const std::string device = device_api_name(t.target);
  // HL_CUDA_JIT_MAX_REGISTERS is one per process: the highest any kernel asks for.
  int max_registers = 0;
  for (const KernelTask& task : tasks)
    if (task.target == target_index)
      max_registers = std::max(
          max_registers, resolved_schedule(*task.block, t.target, task.schedule).gpu_max_registers);
  return {{"target", t.name},
          {"device_api", device.empty() ? json(nullptr) : json(device)},
          {"cuda_arch", device == "cuda" ? json(cuda_arch_name(t.target)) : json(nullptr)},
          {"cuda_jit_max_registers",
           device == "cuda" && max_registers > 0 ? json(max_registers) : json(nullptr)},
          {"arch", arch_name(t.target)},
          {"bits", t.target.bits},
          {"os", t.target.os == Halide::Target::Linux ? "linux" : "other"},
          {"features", cpu_feature_names(t.target)},
          {"tuned_for", tune.empty() ? json(nullptr) : json(tune)},
          {"dir", t.name},
          {"static_library", t.name + "/libpadfold_" + model_id + ".a"},
          {"halide_runtime", t.name + "/halide_runtime.a"},
          {"registry_source", t.name + "/registry.c"},
          {"registry_symbol", "padfold_registry_" + model_id},
          {"shared_library", shared},
          {"schedules", target_schedules(t, tasks, target_index)}};
}

json layer_pads_json(const Layer& L) {
  json pads_before = json::array(), pads_after = json::array();
  for (const AxisPads& p : L.pads.axes) {
    pads_before.push_back(p.before);
    pads_after.push_back(p.after);
  }
  return {{"layer", L.name},
          {"op", L.op_name},
          {"pads_before", pads_before},
          {"pads_after", pads_after},
          {"border", to_string(L.border)},
          {"flops", L.flops()}};
}

// One kernel: a layer's pads and border at the top level; a fused block names its layers (each
// with its pads and border) and the reason it was fused.
json kernel_manifest(const Model& model, const Block& block, const BundleWeights& weights) {
  const Layer& L = block.last();
  json k = layer_pads_json(L);
  k["function"] = kernel_function_name(model, L);
  k["buffers"] = kernel_buffers_json(block, weights);
  if (block.fused()) {
    k["op"] = block.kind();
    double flops = 0;
    json layers = json::array();
    for (const Layer* F : block.layers) {
      layers.push_back(layer_pads_json(*F));
      flops += F->flops();
    }
    k["flops"] = flops;
    k["fused"] = {{"layers", layers}, {"reason", block.reason}};
  }
  return k;
}

void write_consumer_files(const Model& model, const std::vector<Block>& blocks,
                          const std::vector<TargetPlan>& plans, const fs::path& root) {
  const std::string model_id = c_identifier(model.name);
  std::string umbrella = "/* Generated by padfold. Do not edit. */\n#pragma once\n";
  for (const Block& b : blocks)
    umbrella += "#include \"" + kernel_function_name(model, b.last()) + ".h\"\n";
  write_file(root / "include" / ("padfold_" + model_id + ".h"), umbrella);

  kainjow::mustache::list target_list;
  for (const TargetPlan& t : plans)
    target_list.push_back(kainjow::mustache::object{{"dir", t.name}});
  kainjow::mustache::data data;
  data.set("version", PADFOLD_VERSION);
  data.set("model", model_id);
  data.set("targets", target_list);
  data.set("static_library", "libpadfold_" + model_id + ".a");
  data.set("halide_runtime", "halide_runtime.a");
  write_file(root / ("padfold_" + model_id + ".cmake"), render(templates::consumer_cmake, data));
}

}  // namespace

std::string kernel_function_name(const Model& model, const Layer& layer) {
  return "pf_" + c_identifier(model.name) + "_" + layer.name;
}

void validate_schedule_overrides(const Model& model, const json& overrides) {
  if (!overrides.is_object())
    throw std::runtime_error("schedule overrides: expected an object of layer names");
  for (const auto& item : overrides.items()) {
    const std::string& layer = item.key();
    const json& knobs = item.value();
    const auto it = std::find_if(model.layers.begin(), model.layers.end(),
                                 [&](const Layer& L) { return L.name == layer; });
    if (it == model.layers.end())
      throw std::runtime_error("layer '" + layer + "' is not in the model (" + model.file + ")");
    try {
      ScheduleParams probe;
      update_from_json(probe, knobs);
    } catch (const KnobError& e) {
      throw std::runtime_error("layer '" + layer + "': " + e.what());
    }
  }
}

std::vector<KernelReport> compile_bundle(const Model& model, const CompileOptions& opt,
                                         const std::function<void(const KernelReport&)>& progress) {
  if (opt.targets.empty()) throw std::runtime_error("no target given");
  if (opt.out_dir.empty()) throw std::runtime_error("no output directory given");
  validate_schedule_overrides(model, opt.schedule_overrides);
  // Every target is resolved before anything is written or compiled.
  std::vector<TargetPlan> plans;
  for (const std::string& name : opt.targets) {
    const Halide::Target target = resolve_target(name);
    const std::string dir = target.to_string();
    if (std::any_of(plans.begin(), plans.end(), [&](const TargetPlan& p) { return p.name == dir; }))
      continue;
    plans.push_back({target, dir, {}});
  }
  // A bundle's kernels are the same on every target, and the GPU family fuses nothing: with a GPU
  // target, every layer is a kernel of its own.
  FuseOptions fuse = opt.fuse;
  const bool any_gpu = std::any_of(plans.begin(), plans.end(),
                                   [](const TargetPlan& p) { return p.target.has_gpu_feature(); });
  if (any_gpu && fuse.mode == FuseOptions::Mode::Listed)
    throw std::runtime_error("--fuse: fused blocks are not generated for GPU targets");
  if (any_gpu) fuse.mode = FuseOptions::Mode::None;
  const std::vector<Block> blocks = plan_fusion(model, fuse).blocks;
  for (const Block& b : blocks)
    for (size_t i = 0; i + 1 < b.layers.size(); ++i)
      if (opt.schedule_overrides.contains(b.layers[i]->name))
        throw std::runtime_error(
            "schedule overrides: layer '" + b.layers[i]->name + "' is fused into block " +
            b.names() + ": give the block's knobs under its last layer, '" + b.last().name + "'");
  // Weights are read and checked before anything is compiled.
  BundleWeights weights;
  weights.embedded = opt.embed_weights;
  weights.files = weight_files(model);
  for (const WeightFile& w : weights.files) weights.data.push_back(read_weight_file(model, w));
  StagedDirectory staged(opt.out_dir);
  const fs::path root = staged.path();
  if (!weights.embedded && !weights.files.empty()) {
    fs::create_directories(root / "weights");
    for (size_t i = 0; i < weights.files.size(); ++i)
      write_npy_f32((root / weights.files[i].bundle_path()).string(), weights.files[i].shape,
                    weights.data[i].data());
  }
  for (TargetPlan& t : plans) {
    t.dir = root / t.name;
    fs::create_directories(t.dir / "obj");
  }
  fs::create_directories(root / "include");
  // The runtime sources and Halide's runtime header travel with the bundle, so it is
  // self-contained for embedded builds.
  const fs::path data = data_dir();
  fs::copy(data / "runtime", root / "runtime", fs::copy_options::recursive);
  for (const char* header : {"HalideRuntime.h", "HalideRuntimeCuda.h", "HalideRuntimeOpenCL.h"})
    fs::copy_file(data / "include" / header, root / "include" / header);

  std::vector<KernelTask> tasks;
  for (size_t t = 0; t < plans.size(); ++t) {
    for (const Block& b : blocks) {
      const std::string& name = b.last().name;
      const json overrides =
          opt.schedule_overrides.contains(name) ? opt.schedule_overrides.at(name) : json::object();
      KernelTask task;
      task.block = &b;
      task.target = t;
      json knobs = overrides;
      if (!overrides.empty()) {
        task.source = "overrides";
      } else if (opt.tuned && !b.fused()) {
        if (const auto tuned = opt.tuned(b.last(), plans[t].target)) {
          knobs = tuned->knobs;
          task.source = "tuned (db)";
          task.tuning = tuned->provenance;
        }
      }
      task.schedule = requested_schedule(b, plans[t].target, knobs);
      tasks.push_back(task);
    }
  }
  std::vector<KernelReport> reports;
  compile_kernels(model, tasks, plans, root, opt, [&](const KernelTask& task) {
    const TargetPlan& t = plans[task.target];
    const Layer& L = task.block->last();
    KernelReport rep{
        t.name,
        L.name,
        task.schedule.name,
        task.result.seconds,
        static_cast<int64_t>(fs::file_size(object_path(t, kernel_function_name(model, L)))),
        task.fallback_from,
        task.fallback_reason,
        task.block->fused() ? task.block->names() : "",
        task.source};
    if (progress) progress(rep);
    reports.push_back(rep);
  });
  build_target_libraries(plans, model, blocks, opt);

  json manifest = {{"format", "padfold-bundle"},         {"format_version", kBundleFormatVersion},
                   {"padfold_version", PADFOLD_VERSION}, {"model", c_identifier(model.name)},
                   {"targets", json::array()},           {"kernels", json::array()}};
  manifest["graph"] = graph_json(model);
  manifest["embedded_weights"] = weights.embedded;
  const std::string embedded_data = weights.embedded ? embedded_weights_c(model, weights) : "";
  for (size_t t = 0; t < plans.size(); ++t)
    manifest["targets"].push_back(
        finish_target(plans[t], model, blocks, root, tasks, t, weights, embedded_data));
  for (const Block& b : blocks) manifest["kernels"].push_back(kernel_manifest(model, b, weights));
  write_consumer_files(model, blocks, plans, root);
  write_file(root / "manifest.json", manifest.dump(2) + "\n");
  staged.commit();
  // Reports in (target, layer) order, whatever order the workers finished in.
  std::vector<KernelReport> ordered;
  for (const TargetPlan& t : plans)
    for (const Block& b : blocks)
      for (const KernelReport& r : reports)
        if (r.target == t.name && r.layer == b.last().name) ordered.push_back(r);
  return ordered;
}

}  // namespace padfold
