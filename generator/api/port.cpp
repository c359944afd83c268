#include "api/port.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "api/import_model.h"
#include "api/port_emit.h"
#include "api/port_report.h"
#include "api/python_code.h"
#include "base/atomic_file.h"
#include "base/text.h"
#include "frontend/spec.h"

namespace padfold {
namespace {

namespace fs = std::filesystem;
namespace oi = onnx_import;
using json = nlohmann::ordered_json;

std::string axis_letters(int dims) {
  return std::string("DHW").substr(static_cast<size_t>(3 - dims));
}

std::string pads_text(const Resolved& r) {
  std::vector<std::string> v;
  for (const AxisPads& a : r.axes) v.push_back(fmt::format("({},{})", a.before, a.after));
  return fmt::format("{}", fmt::join(v, " "));
}

std::string target_title(PortTarget t) {
  return t == PortTarget::PyTorch ? "PyTorch" : t == PortTarget::Keras ? "Keras" : "ONNX";
}

json layer_json(const LayerPort& p) {
  const Layer& L = *p.layer;
  json axes = json::array();
  for (size_t i = 0; i < L.pads.axes.size(); ++i)
    axes.push_back({{"axis", std::string(1, axis_letters(L.spatial_dims)[i])},
                    {"input", L.in_spatial[i]},
                    {"before", L.pads.axes[i].before},
                    {"after", L.pads.axes[i].after},
                    {"output", L.pads.axes[i].output},
                    {"naive_before", p.way.naive_pads.axes[i].before},
                    {"naive_after", p.way.naive_pads.axes[i].after},
                    {"naive_output", p.way.naive_pads.axes[i].output}});
  return {{"name", L.name},
          {"op", L.op_name},
          {"source", L.description},
          {"kernel", L.kernel},
          {"stride", L.stride},
          {"dilation", L.dilation},
          {"border", to_string(L.border)},
          {"axes", axes},
          {"reads_as", p.reads_as},
          {"asymmetric", L.pads.asymmetric},
          {"input_dependent", p.input_dependent},
          {"native", p.way.native},
          {"native_exact", p.way.native_exact},
          {"fix", p.way.native_exact ? p.way.native : p.way.fix},
          {"naive", p.way.naive},
          {"naive_differs", p.naive_differs},
          {"shift", p.shift},
          {"output_delta", p.output_delta}};
}

std::string summary(const std::vector<LayerPort>& ports, PortTarget t) {
  const auto count = [&](auto pred) { return std::count_if(ports.begin(), ports.end(), pred); };
  return fmt::format(
      "{} layers with a window, {} need explicit padding in {} (its own padding option does not "
      "compute them exactly), {} differ from a naive port ({})",
      ports.size(), count([](const LayerPort& p) { return !p.way.native_exact; }), target_title(t),
      count([](const LayerPort& p) { return p.naive_differs; }),
      t == PortTarget::PyTorch ? "padding=dilation*(k-1)//2"
      : t == PortTarget::Keras ? "padding='same' wherever the source pads"
                               : "the pads attribute");
}

std::string report_text(const Model& model, const std::vector<LayerPort>& ports, PortTarget t,
                        const std::vector<std::string>& left) {
  std::string s = fmt::format("{}: {} to {}\n", model.file, model.name, target_title(t));
  for (const ModelInput& in : model.inputs)
    s += fmt::format("input {} {} ({})\n", in.name, shape_text(in.shape), in.layout.name());
  for (const LayerPort& p : ports) {
    const Layer& L = *p.layer;
    s += fmt::format(
        "\n{} {} k{} s{}{}: pads {} -> {}; {}{}{}\n", L.name, L.op_name, join(L.kernel, "x"),
        join(L.stride, "x"),
        std::any_of(L.dilation.begin(), L.dilation.end(), [](int64_t d) { return d != 1; })
            ? " d" + join(L.dilation, "x")
            : "",
        pads_text(L.pads),
        [&] {
          std::vector<int64_t> o;
          for (const auto& a : L.pads.axes) o.push_back(a.output);
          return join(o, "x");
        }(),
        p.reads_as, L.pads.asymmetric ? ", asymmetric" : "",
        p.input_dependent ? ", depends on the input size" : "");
    if (L.border != Border::Zeros) s += fmt::format("  border: {}\n", to_string(L.border));
    s += fmt::format("  {}: {}  ({})\n", target_title(t), p.way.native,
                     p.way.native_exact ? "exact" : "not exact");
    if (!p.way.native_exact) s += fmt::format("  fix: {}\n", p.way.fix);
    if (p.naive_differs) {
      std::vector<int64_t> naive_out;
      for (const auto& a : p.way.naive_pads.axes) naive_out.push_back(a.output);
      s += fmt::format(
          "  a naive port, {}, pads {}: output {} and windows shifted by {} pixel(s) "
          "({})\n",
          p.way.naive, pads_text(p.way.naive_pads), join(naive_out, "x"), join(p.shift, "/"),
          axis_letters(L.spatial_dims));
    }
  }
  for (const std::string& l : left) s += fmt::format("\nleft to the caller: {}\n", l);
  return s + "\n" + summary(ports, t) + "\n";
}

// Where the module finds its weights: from an ONNX model, <stem>_padfold/ beside the .py file
// (or none without --emit); from a spec, the spec's folder.
PortModuleOptions module_options(const PortRequest& r, bool onnx, const std::string& root) {
  PortModuleOptions o;
  o.source_label = fs::path(r.model).filename().string();
  const fs::path emit(r.emit);
  const std::string here = "os.path.dirname(os.path.abspath(__file__))";
  if (onnx) {
    const std::string folder = emit.stem().string() + "_padfold";
    o.default_weights_expr =
        r.emit.empty() ? "None" : "os.path.join(" + here + ", " + python_string(folder) + ")";
    o.default_weights_doc = r.emit.empty() ? "none: pass the folder padfold import wrote"
                                           : "the folder " + folder + " beside this file";
    return o;
  }
  const fs::path spec_dir = fs::absolute(root).lexically_normal();
  o.weights_root = root;
  o.default_weights_expr =
      r.emit.empty()
          ? python_string(spec_dir.generic_string())
          : "os.path.join(" + here + ", " +
                python_string(spec_dir.lexically_proximate(fs::absolute(emit).parent_path())
                                  .generic_string()) +
                ")";
  o.default_weights_doc = "the spec's folder";
  return o;
}

}  // namespace

PortOutput port_model(const PortRequest& r) {
  const PortTarget target = parse_port_target(r.to);
  if (!r.emit.empty() && target == PortTarget::Onnx)
    throw std::runtime_error(
        "--emit writes a PyTorch module (--to pytorch) or a Keras model (--to keras); the ONNX "
        "model is the source itself (padfold import --emit-onnx writes it with explicit pads)");
  const bool onnx = ascii_lower(fs::path(r.model).extension().string()) == ".onnx";
  if (!onnx && !r.inputs.empty())
    throw std::runtime_error("--input sets an ONNX graph input's size; a spec has fixed sizes");
  std::optional<oi::ImportOutput> imported;
  Model model;
  std::string weights_root;
  std::vector<std::string> left;
  if (onnx) {
    imported = oi::import_onnx(oi::read_model(r.model), r.inputs, r.model, {}, false);
    model = imported->result.model;
    model.file = r.model;
    for (const oi::LeftNode& n : imported->result.left_to_caller)
      left.push_back(fmt::format("ONNX node '{}' ({}): {}", n.name, n.op_type, n.reason));
  } else {
    model = load_spec(r.model);
    weights_root = fs::path(r.model).parent_path().string();
    if (weights_root.empty()) weights_root = ".";  // a spec in the working folder
  }
  const std::vector<LayerPort> ports = port_layers(model, target);

  PortOutput out;
  std::string module, module_error;
  const bool with_module = r.with_module && target != PortTarget::Onnx;
  if (!r.emit.empty() || with_module) {
    try {
      if (!left.empty())
        throw std::runtime_error(fmt::format(
            "the import leaves {} node(s) to the caller ({}...): a module of the rest would not "
            "compute the model",
            left.size(), left[0]));
      const PortModuleOptions o = module_options(r, onnx, weights_root);
      module = target == PortTarget::Keras ? keras_model_source(model, o)
                                           : torch_module_source(model, o);
    } catch (const std::exception& e) {
      module_error = fmt::format("{}: {}", r.model, e.what());
      if (!r.emit.empty()) throw std::runtime_error(module_error + "; nothing written");
    }
    if (!r.emit.empty()) {
      const fs::path emit(r.emit);
      const fs::path folder = emit.parent_path().empty() ? fs::path(".") : emit.parent_path();
      if (!fs::is_directory(folder))
        throw std::runtime_error(fmt::format(
            "--emit {}: the folder {} does not exist; nothing written", r.emit, folder.string()));
      if (onnx) {
        ImportRequest ir;
        ir.model = r.model;
        ir.out = (emit.parent_path() / (emit.stem().string() + "_padfold")).string();
        write_import(ir, *imported);
        out.wrote.push_back(ir.out);
      }
      write_file_replacing(r.emit, module);
      out.wrote.push_back(r.emit);
    }
  }
  if (!r.json) {
    out.report = report_text(model, ports, target, left);
    return out;
  }
  json j = {{"model", r.model}, {"name", model.name}, {"to", to_string(target)}};
  j["inputs"] = json::array();
  for (const ModelInput& in : model.inputs)
    j["inputs"].push_back({{"name", in.name}, {"shape", in.shape}, {"layout", in.layout.name()}});
  j["layers"] = json::array();
  for (const LayerPort& p : ports) j["layers"].push_back(layer_json(p));
  j["left_to_caller"] = left;
  j["summary"] = summary(ports, target);
  if (with_module) {
    j["module"] = module_error.empty() ? json(module) : json(nullptr);
    if (!module_error.empty()) j["module_error"] = module_error;
  }
  out.report = j.dump(2) + "\n";
  return out;
}

}  // namespace padfold
