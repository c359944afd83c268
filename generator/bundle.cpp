#include "bundle.h"

#include <Halide.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <kainjow/mustache.hpp>
#include <sstream>

#include "algorithm.h"
#include "padfold_templates.h"
#include "schedule.h"

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

std::string joined(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
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

const char* role_enum(const std::string& name) {
  if (name == "input") return "PF_ROLE_INPUT";
  if (name == "weights") return "PF_ROLE_WEIGHTS";
  if (name == "bias") return "PF_ROLE_BIAS";
  return "PF_ROLE_OUTPUT";
}

// Halide's feature names, for the runtime's CPU check.
std::vector<std::string> feature_names(const Halide::Target& t) {
  std::vector<std::string> names;
  std::stringstream ss(t.to_string());
  std::string part;
  int index = 0;
  while (std::getline(ss, part, '-')) {
    if (index++ >= 3 && part != "no_runtime") names.push_back(part);
  }
  return names;
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
  const Halide::Target host = Halide::get_host_target();
  std::string cc;
  if (t.arch == host.arch && t.bits == host.bits && t.os == host.os)
    cc = "cc";
  else if (t.arch == Halide::Target::ARM && t.bits == 64 && t.os == Halide::Target::Linux)
    cc = "aarch64-linux-gnu-gcc";
  else if (t.arch == Halide::Target::ARM && t.bits == 32 && t.os == Halide::Target::Linux)
    cc = "arm-linux-gnueabihf-gcc";
  else if (t.arch == Halide::Target::RISCV && t.os == Halide::Target::Linux)
    cc = "riscv64-linux-gnu-gcc";
  if (cc.empty()) return "";
  return std::system(("command -v " + cc + " >/dev/null 2>&1").c_str()) == 0 ? cc : "";
}

void run_command(const std::string& cmd, const std::string& what) {
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error(what + " failed; command was: " + cmd);
}

// Copies the C runtime (sources, headers and its CMakeLists.txt) into the bundle.
void copy_runtime(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
}

struct TargetOutput {
  json manifest;
  std::vector<KernelReport> reports;
};

TargetOutput compile_target(const Model& model, const std::string& target_name,
                            const CompileOptions& opt,
                            const std::function<void(const KernelReport&)>& progress) {
  const Halide::Target target(target_name);
  const Halide::Target kernel_target = target.with_feature(Halide::Target::NoRuntime);
  const std::string dir_name = target.to_string();
  const fs::path dir = fs::path(opt.out_dir) / dir_name;
  const fs::path obj_dir = dir / "obj";
  fs::create_directories(obj_dir);
  const std::string model_id = c_identifier(model.name);

  TargetOutput result;
  std::vector<std::string> objects;
  kainjow::mustache::list kernels;
  for (const Layer& L : model.layers) {
    const auto start = std::chrono::steady_clock::now();
    Algorithm alg = build_algorithm(L);
    ScheduleParams params = default_schedule(L, target);
    if (opt.schedule_overrides.contains(L.name))
      update_from_json(params, opt.schedule_overrides.at(L.name));
    apply_schedule(alg, params, target);
    const std::string fn = kernel_function_name(model, L);
    Halide::Pipeline pipeline(alg.output);
    std::map<OutputFileType, std::string> outputs{
        {OutputFileType::object, (obj_dir / (fn + ".o")).string()},
        {OutputFileType::c_header, (fs::path(opt.out_dir) / "include" / (fn + ".h")).string()}};
    if (opt.emit_stmt) outputs[OutputFileType::stmt] = (dir / (L.name + ".stmt")).string();
    try {
      pipeline.compile_to(outputs, alg.arguments(), fn, kernel_target);
    } catch (const Halide::CompileError& e) {
      throw std::runtime_error("target " + dir_name + ", layer '" + L.name +
                               "': Halide could not compile the kernel: " + e.what());
    }
    objects.push_back(outputs[OutputFileType::object]);

    KernelReport rep;
    rep.target = dir_name;
    rep.layer = L.name;
    rep.schedule = params.name;
    rep.compile_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rep.object_bytes = static_cast<int64_t>(fs::file_size(objects.back()));
    if (progress) progress(rep);
    result.reports.push_back(rep);

    kainjow::mustache::list buffers;
    for (const BufferInfo& b : buffer_infos(L)) {
      kainjow::mustache::object o{
          {"name", b.name},           {"role", role_enum(b.name)},
          {"layout", b.layout},       {"rank", std::to_string(b.shape.size())},
          {"shape", joined(b.shape)}, {"strides", joined(dense_strides(b.shape))}};
      buffers.push_back(o);
    }
    kainjow::mustache::object k{{"layer", L.name},
                                {"function", fn},
                                {"op", L.op_name},
                                {"num_buffers", std::to_string(buffers.size())},
                                {"buffers", buffers}};
    kernels.push_back(k);
    result.manifest["schedules"][L.name] = to_json(params);
  }

  const std::string lib = "libpadfold_" + model_id + ".a";
  Halide::create_static_library(objects, target, (dir / lib).string());
  Halide::compile_standalone_runtime(
      {{OutputFileType::static_library, (dir / "halide_runtime.a").string()}}, target);

  const std::string registry_symbol = "padfold_registry_" + model_id;
  kainjow::mustache::data data;
  data.set("version", PADFOLD_VERSION);
  data.set("spec", model.file);
  data.set("target", dir_name);
  data.set("model", model_id);
  data.set("registry_symbol", registry_symbol);
  data.set("num_kernels", std::to_string(model.layers.size()));
  data.set("kernels", kernels);
  write_file(dir / "registry.c", render(templates::registry_c, data));
  write_file(dir / "bundle_entry.c", render(templates::bundle_entry_c, data));

  json shared = nullptr;
  const std::string cc = linker_for(target);
  if (!cc.empty()) {
    const std::string so = "libpadfold_" + model_id + ".so";
    const fs::path inc = fs::path(opt.out_dir) / "include";
    const fs::path rt_inc = fs::path(opt.out_dir) / "runtime" / "include";
    run_command(cc + " -shared -fPIC -O2 -std=c99 -o '" + (dir / so).string() + "' -I'" +
                    inc.string() + "' -I'" + rt_inc.string() + "' '" +
                    (dir / "registry.c").string() + "' '" + (dir / "bundle_entry.c").string() +
                    "' -Wl,--whole-archive '" + (dir / lib).string() +
                    "' -Wl,--no-whole-archive '" + (dir / "halide_runtime.a").string() +
                    "' -Wl,--exclude-libs,ALL -lpthread -ldl -lm",
                "linking the shared library for " + dir_name);
    shared = dir_name + "/" + so;
  }
  fs::remove_all(obj_dir);

  result.manifest["target"] = dir_name;
  result.manifest["arch"] = arch_name(target);
  result.manifest["bits"] = target.bits;
  result.manifest["os"] = target.os == Halide::Target::Linux ? "linux" : "other";
  result.manifest["features"] = feature_names(target);
  result.manifest["dir"] = dir_name;
  result.manifest["static_library"] = dir_name + "/" + lib;
  result.manifest["halide_runtime"] = dir_name + "/halide_runtime.a";
  result.manifest["registry_source"] = dir_name + "/registry.c";
  result.manifest["registry_symbol"] = registry_symbol;
  result.manifest["shared_library"] = shared;
  return result;
}

json kernel_manifest(const Model& model, const Layer& L) {
  json buffers = json::array();
  for (const BufferInfo& b : buffer_infos(L))
    buffers.push_back({{"name", b.name},
                       {"role", b.name},
                       {"dtype", "float32"},
                       {"layout", b.layout},
                       {"shape", b.shape},
                       {"strides", dense_strides(b.shape)}});
  json pads_before = json::array(), pads_after = json::array();
  for (const AxisPads& p : L.pads.axes) {
    pads_before.push_back(p.before);
    pads_after.push_back(p.after);
  }
  return {{"layer", L.name},
          {"function", kernel_function_name(model, L)},
          {"op", L.op_name},
          {"buffers", buffers},
          {"pads_before", pads_before},
          {"pads_after", pads_after},
          {"border", to_string(L.border)},
          {"flops", L.flops()}};
}

}  // namespace

std::string c_identifier(const std::string& name) {
  std::string id;
  for (char ch : name) id += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  if (id.empty() || std::isdigit(static_cast<unsigned char>(id[0]))) id = "m_" + id;
  return id;
}

std::string kernel_function_name(const Model& model, const Layer& layer) {
  return "pf_" + c_identifier(model.name) + "_" + layer.name;
}

std::string resolve_target(const std::string& name) {
  Halide::Target t;
  if (name == "host") {
    t = Halide::get_host_target();
  } else if (Halide::Target::validate_target_string(name)) {
    t = Halide::Target(name);
  } else {
    throw std::runtime_error("unknown target '" + name +
                             "'; expected 'host' or a Halide target "
                             "such as x86-64-linux-avx2-fma, x86-64-linux-avx512_skylake, "
                             "arm-64-linux, arm-32-linux (arch-bits-os[-feature...])");
  }
  if (t.has_gpu_feature())
    throw std::runtime_error("target '" + name + "': GPU targets are not generated yet");
  return t.without_feature(Halide::Target::NoRuntime).to_string();
}

std::vector<KernelReport> compile_bundle(const Model& model, const CompileOptions& opt,
                                         const std::function<void(const KernelReport&)>& progress) {
  if (opt.targets.empty()) throw std::runtime_error("no target given");
  const fs::path out(opt.out_dir);
  fs::create_directories(out / "include");

  // The runtime sources and Halide's runtime header travel with the bundle, so it is
  // self-contained for embedded builds.
  copy_runtime(PADFOLD_RUNTIME_DIR, out / "runtime");
  fs::copy_file(PADFOLD_HALIDE_INCLUDE_DIR "/HalideRuntime.h", out / "include" / "HalideRuntime.h",
                fs::copy_options::overwrite_existing);

  json manifest = {{"format", "padfold-bundle"},
                   {"format_version", kBundleFormatVersion},
                   {"padfold_version", PADFOLD_VERSION},
                   {"model", c_identifier(model.name)},
                   {"spec", model.file},
                   {"targets", json::array()},
                   {"kernels", json::array()}};
  std::vector<KernelReport> reports;
  std::vector<std::string> seen;
  kainjow::mustache::list target_list;
  for (const std::string& name : opt.targets) {
    const std::string resolved = resolve_target(name);
    if (std::find(seen.begin(), seen.end(), resolved) != seen.end()) continue;
    seen.push_back(resolved);
    TargetOutput t = compile_target(model, resolved, opt, progress);
    manifest["targets"].push_back(t.manifest);
    reports.insert(reports.end(), t.reports.begin(), t.reports.end());
    target_list.push_back(kainjow::mustache::object{{"dir", resolved}});
  }
  for (const Layer& L : model.layers) manifest["kernels"].push_back(kernel_manifest(model, L));
  // Each kernel's header: one umbrella header includes them all.
  std::string umbrella = "/* Generated by padfold. Do not edit. */\n#pragma once\n";
  for (const Layer& L : model.layers)
    umbrella += "#include \"" + kernel_function_name(model, L) + ".h\"\n";
  write_file(out / "include" / ("padfold_" + c_identifier(model.name) + ".h"), umbrella);
  write_file(out / "manifest.json", manifest.dump(2) + "\n");

  kainjow::mustache::data data;
  data.set("version", PADFOLD_VERSION);
  data.set("spec", model.file);
  data.set("model", c_identifier(model.name));
  data.set("targets", target_list);
  data.set("static_library", "libpadfold_" + c_identifier(model.name) + ".a");
  data.set("halide_runtime", "halide_runtime.a");
  write_file(out / ("padfold_" + c_identifier(model.name) + ".cmake"),
             render(templates::consumer_cmake, data));
  return reports;
}

}  // namespace padfold
