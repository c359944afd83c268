#include "frontend/onnx/split_channels.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>
#include <vector>

#include "frontend/onnx/onnx_graph.h"
#include "frontend/onnx/onnx_model.h"

namespace padfold::onnx_import {
namespace {
// The doc_string of a Slice this pass writes starts with it.
const std::string kOrigin = "padfold: output ";
}  // namespace
namespace {

// The part sizes of Split node `n` of a tensor of `channels` channels, or nullopt where they are
// computed or do not add up.
std::optional<std::vector<int64_t>> part_sizes(const GraphIndex& g, const onnx::NodeProto& n,
                                               int64_t channels) {
  const NodeAttributes a(n);
  std::vector<int64_t> sizes;
  if (g.opset() >= 13 && n.input_size() >= 2 && !n.input(1).empty()) {
    const onnx::TensorProto* t = g.constant(n.input(1));
    if (!t) return std::nullopt;
    sizes = to_int64s(*t, "split");
  } else if (g.opset() < 13 && a.has("split")) {
    sizes = a.get_ints("split");
  } else {
    const int64_t parts = a.has("num_outputs") ? a.get_int("num_outputs", 0) : n.output_size();
    if (parts < 1 || parts != n.output_size()) return std::nullopt;
    const int64_t each = a.has("num_outputs") ? (channels + parts - 1) / parts : channels / parts;
    if (each < 1 || (!a.has("num_outputs") && each * parts != channels)) return std::nullopt;
    for (int64_t k = 0, left = channels; k < parts; ++k, left -= each)
      sizes.push_back(std::min(each, left));
  }
  if (static_cast<int>(sizes.size()) != n.output_size() ||
      std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != channels ||
      std::any_of(sizes.begin(), sizes.end(), [](int64_t s) { return s < 0; }))
    return std::nullopt;
  return sizes;
}

}  // namespace

int split_channels_to_slices(onnx::ModelProto& model, const onnx::ModelProto& inferred,
                             const std::string& label) {
  const GraphIndex g(inferred, label);
  GraphNames names(model.graph());  // for the new initializers
  auto add_ints = [&](const std::string& base, int64_t value) {
    onnx::TensorProto* t = model.mutable_graph()->add_initializer();
    *t = int64_tensor(names.fresh(base), {value});
    return t->name();
  };

  int replaced = 0;
  std::set<std::string> dropped;  // the replaced Splits' sizes
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < model.graph().node_size(); ++i) {
    const onnx::NodeProto& n = model.graph().node(i);
    std::optional<std::vector<int64_t>> sizes;
    int64_t channels = 0;
    if (default_domain(n) && n.op_type() == "Split" && n.input_size() >= 1 && !n.input(0).empty()) {
      const auto type = g.type(n.input(0));
      int64_t axis = NodeAttributes(n).get_int("axis", 0);
      if (type && type->has_shape && axis < 0) axis += static_cast<int64_t>(type->shape.size());
      if (type && type->has_shape && type->shape.size() >= 3 && axis == 1 && type->shape[1] > 0) {
        channels = type->shape[1];
        sizes = part_sizes(g, n, channels);
      }
    }
    if (!sizes) {
      *nodes.Add() = n;
      continue;
    }
    int64_t start = 0;
    for (int k = 0; k < n.output_size(); ++k) {
      const int64_t end = start + (*sizes)[static_cast<size_t>(k)];
      const std::string& out = n.output(k);
      if (out.empty() || (g.consumers(out).empty() && !g.is_graph_output(out))) {  // unread
        start = end;
        continue;
      }
      onnx::NodeProto* s = nodes.Add();
      s->set_op_type("Slice");
      s->set_name(n.name() + "_" + std::to_string(k));
      s->set_doc_string(kOrigin + std::to_string(k) + " of Split '" + n.name() + "'");
      s->add_input(n.input(0));
      if (g.opset() >= 10) {
        s->add_input(add_ints(n.name() + "_start" + std::to_string(k), start));
        s->add_input(add_ints(n.name() + "_end" + std::to_string(k), end));
        s->add_input(add_ints(n.name() + "_axis" + std::to_string(k), 1));
      } else {
        const std::pair<const char*, int64_t> attrs[] = {
            {"starts", start}, {"ends", end}, {"axes", 1}};
        for (const auto& [attr, value] : attrs) {
          onnx::AttributeProto* a = s->add_attribute();
          a->set_name(attr);
          a->set_type(onnx::AttributeProto::INTS);
          a->add_ints(value);
        }
      }
      s->add_output(n.output(k));
      start = end;
    }
    if (n.input_size() >= 2) dropped.insert(n.input(1));
    ++replaced;
  }
  if (!replaced) return 0;
  model.mutable_graph()->mutable_node()->Swap(&nodes);
  // The sizes no node reads any more (an initializer otherwise unused would be a model's litter).
  for (const auto& n : model.graph().node())
    for (const auto& in : n.input()) dropped.erase(in);
  auto* inits = model.mutable_graph()->mutable_initializer();
  for (int k = inits->size() - 1; k >= 0; --k)
    if (dropped.count(inits->Get(k).name()) && !g.is_graph_input(inits->Get(k).name()))
      inits->DeleteSubrange(k, 1);
  return replaced;
}

std::string split_part_origin(const onnx::NodeProto& node) {
  const std::string& doc = node.doc_string();
  if (node.op_type() != "Slice" || doc.rfind(kOrigin, 0) != 0) return "";
  return doc.substr(kOrigin.size() - std::string("output ").size());
}

}  // namespace padfold::onnx_import
