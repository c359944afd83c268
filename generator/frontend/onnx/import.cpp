#include "frontend/onnx/import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "base/text.h"
#include "frontend/onnx/import_ops.h"
#include "frontend/onnx/names.h"

namespace padfold::onnx_import {
namespace {

using detail::ActInfo;
using detail::Context;
using detail::Draft;
using detail::Kind;
using detail::Left;
using detail::ojson;
using detail::PadInfo;

enum class Role { Left, Layer, FoldedPad, FusedActivation, Bypassed, Constant };

const char* const kLayerOps[] = {"Conv",        "ConvTranspose", "MaxPool",
                                 "AveragePool", "Add",           "Concat"};
const char* const kActivationOps[] = {"Relu", "Clip", "LeakyRelu"};

template <size_t N>
bool one_of(const std::string& s, const char* const (&list)[N]) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

bool default_domain(const onnx::NodeProto& n) {
  return n.domain().empty() || n.domain() == "ai.onnx";
}

std::string quoted_node(const onnx::NodeProto& n) {
  return "'" + n.name() + "' (" + n.op_type() + ")";
}

// The border a Pad's values make: null for zeros. A max pool ignores zero padding (padded taps
// never win), but the Pad's zeros do take part in the max: a constant border, even for 0.
ojson pad_border(const PadInfo& p, Kind consumer) {
  if (p.mode == "reflect") return "reflect";
  if (p.mode == "edge") return "replicate";
  if (p.value == 0.f && consumer != Kind::MaxPool) return nullptr;
  return {{"mode", "constant"}, {"value", p.value}};
}

class Importer {
 public:
  Importer(const PreparedModel& p, const ImportOptions& o)
      : p_(p), o_(o), g_(p.inferred, p.label), c_(g_) {}

  ImportResult run() {
    const int n = g_.num_nodes();
    role_.assign(static_cast<size_t>(n), Role::Left);
    reason_.assign(static_cast<size_t>(n), "");
    for (int i = 0; i < n; ++i) classify_bypass(i);
    for (int i = 0; i < n; ++i) classify_layer(i);
    for (int i = 0; i < n; ++i)
      if (default_domain(g_.node(i)) && g_.node(i).op_type() == "Pad") fold_pad(i);
    for (int i = 0; i < n; ++i)
      if (default_domain(g_.node(i)) && one_of(g_.node(i).op_type(), kActivationOps))
        fuse_activation(i);
    for (int i = 0; i < n; ++i) classify_rest(i);
    if (drafts_.empty()) {
      std::string why;
      int shown = 0;
      for (int i = 0; i < n && shown < 5; ++i) {
        if (g_.node(i).op_type() == "Constant") continue;
        const std::string reason =
            role_[i] == Role::Bypassed ? "bypassed (its output stands for its input)" : reason_[i];
        why += std::string(shown++ ? "; " : "") + quoted_node(g_.node(i)) + ": " + reason;
      }
      throw ImportError("no node of " + p_.label +
                        " is supported: padfold generates Conv, ConvTranspose, MaxPool, "
                        "AveragePool, Add and Concat; " +
                        why + (n > shown ? fmt::format(" ({} node(s) in all)", n) : ""));
    }
    return assemble();
  }

 private:
  void classify_bypass(int i) {
    const onnx::NodeProto& node = g_.node(i);
    if (!default_domain(node) || (node.op_type() != "Identity" && node.op_type() != "Dropout"))
      return;
    if (const auto left = detail::bypass_check(c_, i)) {
      reason_[i] = left->reason;
      return;
    }
    role_[i] = Role::Bypassed;
    c_.add_alias(node.output(0), node.input(0));
    c_.set_bypassed(i);
  }

  void classify_layer(int i) {
    const onnx::NodeProto& node = g_.node(i);
    if (!default_domain(node) || !one_of(node.op_type(), kLayerOps)) return;
    auto r = detail::draft_layer(c_, i);
    if (auto* left = std::get_if<Left>(&r)) {
      reason_[i] = left->reason;
      return;
    }
    role_[i] = Role::Layer;
    // Layers reading this one get the shape padfold computes, which can differ from ONNX shape
    // inference's (check_inferred_shape warns).
    c_.set_layer_shape(node.output(0), std::get<Draft>(r).out_shape);
    drafts_.emplace(i, std::move(std::get<Draft>(r)));
  }

  // The draft a tensor comes out of, or null.
  Draft* draft_producing(const std::string& tensor) {
    for (auto& [i, d] : drafts_)
      if (d.output == tensor) return &d;
    return nullptr;
  }

  // Why a fold or fusion cannot happen, or "".
  std::string single_reader(const std::string& tensor, int& reader) const {
    if (c_.reaches_graph_output(tensor)) return "its output '" + tensor + "' is a graph output";
    const std::vector<int> readers = c_.readers(tensor);
    if (readers.size() != 1)
      return "its output '" + tensor + "' is read by " + std::to_string(readers.size()) +
             " nodes; padfold joins it only to a single reader";
    reader = readers[0];
    return "";
  }

  void fold_pad(int i) {
    auto info = detail::pad_info(c_, i);
    if (auto* left = std::get_if<Left>(&info)) {
      reason_[i] = "not folded: " + left->reason;
      return;
    }
    const PadInfo& p = std::get<PadInfo>(info);
    const std::string why = try_fold(i, p);
    if (why.empty())
      role_[i] = Role::FoldedPad;
    else
      reason_[i] = "not folded: " + why;
  }

  std::string try_fold(int i, const PadInfo& p) {
    const std::string out = g_.node(i).output(0);
    int r = -1;
    if (std::string why = single_reader(out, r); !why.empty()) return why;
    const auto it = drafts_.find(r);
    const onnx::NodeProto& rn = g_.node(r);
    if (it == drafts_.end() || it->second.kind == Kind::Add || it->second.kind == Kind::Concat)
      return "its reader " + quoted_node(rn) + " is not a padfold conv or pool";
    Draft& d = it->second;
    if (d.kind == Kind::ConvTranspose)
      return "its reader " + quoted_node(rn) +
             " is a ConvTranspose, whose pads crop its output: a Pad before it is no border";
    if (d.inputs[0] != c_.canon(out)) return "it does not feed input 0 of " + quoted_node(rn);
    const bool own_zero = d.auto_pad == "VALID" ||
                          (d.auto_pad == "NOTSET" && std::all_of(d.pads.begin(), d.pads.end(),
                                                                 [](int64_t v) { return v == 0; }));
    const bool zero_fill = p.mode == "constant" && p.value == 0.f;
    Draft nd = d;
    nd.inputs[0] = p.input;
    nd.in_shape = c_.type(p.input)->shape;
    nd.auto_pad = "NOTSET";
    nd.pads = p.before;
    nd.pads.insert(nd.pads.end(), p.after.begin(), p.after.end());
    if (own_zero) {
      nd.border = pad_border(p, d.kind);
      if (d.kind == Kind::AvgPool) nd.count_include_pad = true;  // the Pad's values are data
    } else if (zero_fill && d.kind == Kind::Conv) {
      add_own_pads(d, nd);
    } else if (zero_fill && d.kind == Kind::AvgPool && d.count_include_pad.value_or(false)) {
      add_own_pads(d, nd);
    } else if (d.kind == Kind::MaxPool) {
      return "its reader " + quoted_node(rn) +
             " has pads of its own, which never win the max, while the Pad's values do: "
             "no single border";
    } else if (d.kind == Kind::AvgPool && zero_fill) {
      return "its reader " + quoted_node(rn) +
             " leaves its own pads out of the average (count_include_pad 0) but counts the "
             "Pad's: no single border";
    } else {
      return "its reader " + quoted_node(rn) + " has pads of its own (zeros) and the Pad fills " +
             (p.mode == "constant" ? fmt::format("with {}", p.value) : "in mode " + p.mode) +
             ": no single border";
    }
    auto checked = detail::check_with_parser(nd);
    if (const auto* msg = std::get_if<std::string>(&checked))
      return "folded into " + quoted_node(rn) + ", padfold's spec parser refuses it: " + *msg;
    const std::vector<int64_t> shape = std::get<Layer>(checked).output_shape_full();
    if (shape != d.out_shape)
      return "folding it into " + quoted_node(rn) + " gives the output " + shape_text(shape) +
             " instead of " + shape_text(d.out_shape) +
             " (ceil_mode counts from the input, not "
             "the padded tensor)";
    nd.out_shape = shape;
    nd.pad_node = i;
    pad_mode_[r] = p.mode == "constant" ? fmt::format("constant {}", p.value) : p.mode;
    d = std::move(nd);
    return "";
  }

  // A zero Pad before a layer with pads of its own: the sum of both (padfold resolved the layer's
  // own, SAME included, on the padded tensor).
  static void add_own_pads(const Draft& d, Draft& nd) {
    const size_t dims = d.resolved_before.size();
    for (size_t k = 0; k < dims; ++k) {
      nd.pads[k] += d.resolved_before[k];
      nd.pads[dims + k] += d.resolved_after[k];
    }
  }

  void fuse_activation(int i) {
    auto info = detail::act_info(c_, i);
    if (auto* left = std::get_if<Left>(&info)) {
      reason_[i] = "not fused: " + left->reason;
      return;
    }
    const ActInfo& a = std::get<ActInfo>(info);
    Draft* d = draft_producing(a.input);
    if (!d) {
      reason_[i] = "not fused: its input '" + a.input + "' is not the output of a padfold layer";
      return;
    }
    if (d->kind != Kind::Conv && d->kind != Kind::ConvTranspose && d->kind != Kind::Add) {
      reason_[i] = "not fused: its input comes from " + quoted_node(g_.node(d->node)) +
                   "; padfold fuses activations into convolutions and add only";
      return;
    }
    int r = -1;
    if (std::string why = single_reader(a.input, r); !why.empty()) {
      reason_[i] = "not fused: the input's producer " + quoted_node(g_.node(d->node)) + ": " + why;
      return;
    }
    d->activation = a.activation;
    d->output = g_.node(i).output(0);
    d->act_node = i;
    role_[i] = Role::FusedActivation;
  }

  void classify_rest(int i) {
    const onnx::NodeProto& node = g_.node(i);
    if (role_[i] != Role::Left || !reason_[i].empty()) return;
    if (default_domain(node) && node.op_type() == "Constant") {
      bool absorbed = true;
      for (int r : c_.readers(node.output(0)))
        if (role_[static_cast<size_t>(r)] == Role::Left && r != i) absorbed = false;
      if (absorbed && !c_.reaches_graph_output(node.output(0))) {
        role_[i] = Role::Constant;
        return;
      }
      reason_[i] = "a constant read by nodes left to the caller";
      return;
    }
    reason_[i] = default_domain(node)
                     ? "padfold does not generate " + node.op_type() +
                           " (it generates Conv, ConvTranspose, MaxPool, AveragePool, Add and "
                           "Concat, folds Pad and fuses Relu, Clip and LeakyRelu into them)"
                     : "op " + node.op_type() + " of domain '" + node.domain() +
                           "': padfold generates ONNX default-domain ops only";
  }

  // A bypassed node or constant whose output a node left to the caller reads is the caller's too.
  void settle_bypassed() {
    for (int i = 0; i < g_.num_nodes(); ++i) {
      if (role_[i] != Role::Bypassed) continue;
      for (int r : g_.consumers(g_.node(i).output(0)))
        if (role_[static_cast<size_t>(r)] == Role::Left) {
          role_[i] = Role::Left;
          reason_[i] =
              "its output is read by " + quoted_node(g_.node(r)) + ", which is left to the caller";
          break;
        }
    }
  }

  std::string model_name() const {
    if (!o_.model_name.empty()) {
      const std::string s = sanitize_identifier(o_.model_name);
      if (s != o_.model_name)
        throw ImportError("--name '" + o_.model_name +
                          "': expected a C identifier ([A-Za-z_][A-Za-z0-9_]*) of at most 64 "
                          "characters, e.g. '" +
                          (s.empty() ? std::string("model") : s) + "'");
      return s;
    }
    const std::string s = sanitize_identifier(std::filesystem::path(p_.label).stem().string());
    return s.empty() ? "model" : s;
  }

  std::string node_text(int i) const {
    const onnx::NodeProto& n = g_.node(i);
    return n.op_type() + " '" + n.name() + "'";
  }

  ojson node_ref(int i, const char* role) const {
    return {{"name", g_.node(i).name()},
            {"op_type", g_.node(i).op_type()},
            {"index", i},
            {"role", role}};
  }

  std::string layer_description(const Draft& d) const {
    std::string s = "ONNX ";
    if (d.pad_node >= 0) s += node_text(d.pad_node) + " (" + pad_mode_.at(d.node) + ", folded) + ";
    s += node_text(d.node);
    if (d.act_node >= 0) s += " + " + node_text(d.act_node);
    return s + "; output tensor '" + d.output + "'";
  }

  ImportResult assemble() {
    settle_bypassed();
    ImportResult res;
    res.model_name = model_name();
    NameAllocator names;
    // Names: graph inputs the layers read first (the user's names), then the layers, then the
    // tensors computed by nodes left to the caller.
    std::map<std::string, std::string> tensor_name;  // ONNX tensor -> spec name
    std::vector<std::string> spec_inputs;            // ONNX tensors, in order of first use
    for (const auto& [i, d] : drafts_)
      for (const std::string& t : d.inputs)
        if (!draft_producing(t) &&
            std::find(spec_inputs.begin(), spec_inputs.end(), t) == spec_inputs.end())
          spec_inputs.push_back(t);
    for (const std::string& t : spec_inputs)
      if (g_.is_graph_input(t)) tensor_name[t] = names.allocate(t, "input");
    std::map<int, std::string> layer_name;
    for (const auto& [i, d] : drafts_) {
      layer_name[i] = names.allocate(g_.node(i).name(),
                                     ascii_lower(g_.node(i).op_type()) + "_" + std::to_string(i));
      tensor_name[d.output] = layer_name[i];
    }
    for (const std::string& t : spec_inputs)
      if (!g_.is_graph_input(t)) tensor_name[t] = names.allocate(t, "input");

    ojson inputs = ojson::array(), report_inputs = ojson::array();
    for (const std::string& t : spec_inputs) {
      const TensorType ty = *c_.type(t);
      ojson in = {{"name", tensor_name[t]},
                  {"shape", ty.shape},
                  {"layout", "NC" + spatial_letters(static_cast<int>(ty.shape.size()) - 2)},
                  {"dtype", "float32"}};
      ojson rep = {{"name", tensor_name[t]}, {"onnx_tensor", t}, {"produced_by", nullptr}};
      if (g_.is_graph_input(t)) {
        in["description"] = "ONNX graph input '" + t + "'";
      } else {
        const int prod = g_.producer(t);
        if (prod < 0 || role_[static_cast<size_t>(prod)] != Role::Left)
          throw ImportError(p_.label + ": " + kInternalError + ": tensor '" + t +
                            "' read by a layer has no producer left to the caller");
        in["produced_by"] =
            "ONNX node '" + g_.node(prod).name() + "' (" + g_.node(prod).op_type() + ")";
        in["description"] = "ONNX tensor '" + t + "'";
        rep["produced_by"] = node_ref(prod, "left");
      }
      inputs.push_back(in);
      report_inputs.push_back(rep);
    }

    ojson layers = ojson::array(), report_layers = ojson::array();
    ojson outputs = ojson::array(), report_outputs = ojson::array();
    std::map<std::string, int> position;  // layer name -> index in layers
    for (const auto& [i, d] : drafts_) {
      const std::string& name = layer_name[i];
      ojson input;
      std::vector<std::string> in_names;
      for (const std::string& t : d.inputs) {
        in_names.push_back(tensor_name.at(t));
        if (const Draft* src = draft_producing(t); src && !position.count(tensor_name.at(t)))
          throw ImportError(p_.label + ": " + node_label(g_.node(i), i) + ": input '" + t +
                            "' comes from " + node_label(g_.node(src->node), src->node) +
                            ", which is later in the graph; expected the nodes in topological "
                            "order");
      }
      if (d.kind == Kind::Add || d.kind == Kind::Concat)
        input = in_names;
      else
        input = in_names[0];
      ojson l = detail::layer_json(d, name, &input);
      if (d.weights) {
        ojson files = {{"weights", "weights/" + name + "_weights.npy"}};
        res.weights.push_back(weight_file(files["weights"], *d.weights, d.node, 1));
        if (d.bias) {
          files["bias"] = "weights/" + name + "_bias.npy";
          res.weights.push_back(weight_file(files["bias"], *d.bias, d.node, 2));
        }
        l["weight_files"] = files;
      }
      l["description"] = layer_description(d);
      position[name] = static_cast<int>(layers.size());
      layers.push_back(l);

      ojson nodes = ojson::array();
      if (d.pad_node >= 0) nodes.push_back(node_ref(d.pad_node, "pad"));
      nodes.push_back(node_ref(i, "layer"));
      if (d.act_node >= 0) nodes.push_back(node_ref(d.act_node, "activation"));
      report_layers.push_back({{"name", name},
                               {"op", d.fields["op"]},
                               {"input", input},
                               {"output_shape", d.out_shape},
                               {"onnx_nodes", nodes},
                               {"output_tensor", d.output}});
      check_inferred_shape(d, name, res.warnings);

      // An output: a graph output, read by a node left to the caller, or read by nobody.
      const std::vector<int> readers = c_.readers(d.output);
      const bool graph_out = c_.reaches_graph_output(d.output);
      const bool caller_reads = std::any_of(readers.begin(), readers.end(), [&](int r) {
        return role_[static_cast<size_t>(r)] == Role::Left;
      });
      if (graph_out || caller_reads || readers.empty()) {
        outputs.push_back(name);
        report_outputs.push_back({{"name", name},
                                  {"onnx_tensor", d.output},
                                  {"graph_output", graph_out},
                                  {"read_by_caller", caller_reads}});
      }
    }

    ojson left = ojson::array(), absorbed = ojson::array();
    for (int i = 0; i < g_.num_nodes(); ++i) {
      const onnx::NodeProto& node = g_.node(i);
      if (role_[i] == Role::Left) {
        res.left_to_caller.push_back({i, node.name(), node.op_type(), reason_[i]});
        left.push_back({{"name", node.name()},
                        {"op_type", node.op_type()},
                        {"index", i},
                        {"reason", reason_[i]}});
      } else if (role_[i] == Role::Bypassed || role_[i] == Role::Constant) {
        absorbed.push_back(node_ref(i, role_[i] == Role::Bypassed ? "bypassed" : "constant"));
      }
    }

    const std::string file = std::filesystem::path(p_.label).filename().string();
    std::string producer = p_.model.producer_name();
    if (!p_.model.producer_version().empty()) producer += " " + p_.model.producer_version();
    res.spec = {{"model", res.model_name},
                {"description", "Imported by padfold import from " + file + " (ONNX opset " +
                                    std::to_string(g_.opset()) +
                                    (producer.empty() ? "" : ", producer " + producer) + ")"},
                {"inputs", inputs},
                {"outputs", outputs},
                {"layers", layers}};
    res.report = {{"format", "padfold-import"},
                  {"format_version", 1},
                  {"source", file},
                  {"opset", g_.opset()},
                  {"ir_version", p_.model.ir_version()},
                  {"producer", producer},
                  {"model", res.model_name},
                  {"spec", res.model_name + ".json"},
                  {"nodes", g_.num_nodes()},
                  {"layers", report_layers},
                  {"inputs", report_inputs},
                  {"outputs", report_outputs},
                  {"absorbed", absorbed},
                  {"left_to_caller", left},
                  {"warnings", res.warnings}};
    return res;
  }

  WeightFile weight_file(const std::string& path, const onnx::TensorProto& t, int node,
                         int input) const {
    const FloatTensor f = c_.at_node(node, [&] {
      return to_float_tensor(
          t, "input " + std::to_string(input) + " '" + g_.node(node).input(input) + "'");
    });
    return {path, f.shape, f.data};
  }

  // padfold's output shape against ONNX shape inference's (which lacks, e.g., the ceil_mode rule
  // that drops a last window starting in the padding).
  void check_inferred_shape(const Draft& d, const std::string& name,
                            std::vector<std::string>& warnings) const {
    const std::string& out = g_.node(d.node).output(0);
    const auto ty = g_.type(out);
    if (!ty || !ty->is_static() || ty->shape == d.out_shape) return;
    warnings.push_back("layer '" + name + "' (" + node_label(g_.node(d.node), d.node) +
                       "): ONNX shape inference gives " + shape_text(ty->shape, true) + " for '" +
                       out + "', padfold computes " + shape_text(d.out_shape) +
                       "; padfold's is used");
  }

  const PreparedModel& p_;
  const ImportOptions& o_;
  GraphIndex g_;
  Context c_;
  std::vector<Role> role_;
  std::vector<std::string> reason_;
  std::map<int, Draft> drafts_;
  std::map<int, std::string> pad_mode_;  // layer node -> the folded Pad's mode, for descriptions
};

}  // namespace

ImportResult import_model(const PreparedModel& prepared, const ImportOptions& options) {
  ImportResult r = Importer(prepared, options).run();
  // Every layer was checked on its own; the whole spec must pass too (padfold check), or nothing
  // is written.
  try {
    (void)parse_spec(r.spec.dump(), r.model_name + ".json");
  } catch (const SpecError& e) {
    throw ImportError(prepared.label + ": " + kInternalError +
                      ": padfold's spec parser refuses the imported spec: " + e.what());
  }
  return r;
}

ImportOutput import_onnx(onnx::ModelProto model, const std::vector<std::string>& inputs,
                         const std::string& label, const ImportOptions& options, bool emit_onnx) {
  std::vector<InputSize> sizes;
  for (const std::string& s : inputs) sizes.push_back(parse_input_size(s));
  const PreparedModel prepared = prepare_model(std::move(model), sizes, label);
  ImportOutput out;
  out.result = import_model(prepared, options);
  out.spec_text = out.result.spec.dump(2) + "\n";
  out.report_text = out.result.report.dump(2) + "\n";
  if (emit_onnx) {
    out.normalized = normalize_auto_pad(prepared);
    if (!out.normalized->model.SerializeToString(&out.onnx_bytes))
      throw ImportError(label + ": cannot serialize the normalized model");
  }
  return out;
}

std::string summary_text(const ImportResult& r) {
  std::string s;
  const ojson& rep = r.report;
  s += fmt::format(
      "{}: ONNX opset {}, {} node(s) -> model '{}': {} layer(s), {} node(s) left to "
      "the caller\n",
      rep["source"].get<std::string>(), rep["opset"].get<int64_t>(), rep["nodes"].get<int64_t>(),
      r.model_name, rep["layers"].size(), r.left_to_caller.size());
  size_t w = 5;
  for (const auto& l : rep["layers"]) w = std::max(w, l["name"].get<std::string>().size());
  for (const auto& l : rep["layers"]) {
    std::string nodes;
    for (const auto& n : l["onnx_nodes"])
      nodes += (nodes.empty() ? "" : " + ") + n["op_type"].get<std::string>() + " '" +
               n["name"].get<std::string>() + "'";
    const std::string in =
        l["input"].is_array() ? l["input"].dump() : l["input"].get<std::string>();
    s += fmt::format("  layer {:<{}}  {:<18} <- {:<20} {}\n", l["name"].get<std::string>(), w,
                     l["op"].get<std::string>(), in, nodes);
  }
  if (!r.left_to_caller.empty()) {
    s += "nodes left to the caller (node name, op type, why):\n";
    for (const LeftNode& n : r.left_to_caller)
      s += fmt::format("  '{}' ({}): {}\n", n.name, n.op_type, n.reason);
  }
  for (const auto& in : rep["inputs"])
    if (!in["produced_by"].is_null())
      s += fmt::format("spec input '{}' is computed by the caller: tensor '{}' of node '{}' ({})\n",
                       in["name"].get<std::string>(), in["onnx_tensor"].get<std::string>(),
                       in["produced_by"]["name"].get<std::string>(),
                       in["produced_by"]["op_type"].get<std::string>());
  for (const auto& w2 : r.warnings) s += "warning: " + w2 + "\n";
  return s;
}

}  // namespace padfold::onnx_import
