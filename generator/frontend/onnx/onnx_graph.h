// A model ready for import: graph input sizes fixed from --input, ONNX shape inference run, and an
// index of the graph (who produces and who reads each tensor, the constants, the shapes).
#pragma once

#include <algorithm>
#include <deque>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/text.h"
#include "frontend/onnx/onnx_model.h"

namespace padfold::onnx_import {

// One --input option: name=1x3x224x224.
struct InputSize {
  std::string name;
  std::vector<int64_t> shape;
};

// Parses "name=1x3x224x224" (sizes separated by 'x' or ','; the name is everything before the last
// '='). Throws ImportError naming the option.
InputSize parse_input_size(const std::string& text);

struct PreparedModel {
  std::string label;  // the file, for messages
  // As read, with the --input sizes written into the graph inputs, the layout Transposes moved
  // up to the inputs (hoist_transposes.h), channels-last stretches computed channels first
  // (last_axis_regions.h) and decomposed activations folded (decomposed_activations.h).
  onnx::ModelProto model;
  onnx::ModelProto inferred;  // the same after ONNX shape inference
  // Tensors of channels-last stretches that `model` computes channels first (last_axis_regions.h),
  // each mapped to its stretch's name: the file holds them with the channel axis last.
  std::map<std::string, std::string> relaid;
};

// Writes the --input sizes into the graph inputs (an error names every --input that names no graph
// input, every size contradicting a fixed dim, and every graph input still having a dynamic dim),
// then runs libonnx's shape inference on a copy, in a child process (a crash in it, or a run past
// kShapeInferenceSeconds, is an ImportError).
inline constexpr double kShapeInferenceSeconds = 120;
// `kept_regions`: channels-last stretches (PreparedModel::relaid's names) left as the file has
// them.
PreparedModel prepare_model(onnx::ModelProto model, const std::vector<InputSize>& sizes,
                            const std::string& label,
                            const std::set<std::string>& kept_regions = {});

struct TensorType {
  int elem_type = 0;           // TensorProto::DataType; 0 when unknown
  bool has_shape = false;      // the rank is known
  std::vector<int64_t> shape;  // -1 for a dim without a value
  bool is_static() const;      // known rank, every dim > 0
};

// An index of one graph. Pointers into `model`, which must outlive it.
class GraphIndex {
 public:
  GraphIndex(const onnx::ModelProto& model, const std::string& label);

  const onnx::GraphProto& graph() const { return *graph_; }
  const onnx::NodeProto& node(int i) const { return graph_->node(i); }
  int num_nodes() const { return graph_->node_size(); }
  const std::string& label() const { return label_; }
  int64_t opset() const { return opset_; }

  // Initializers, the values of Constant nodes and of the nodes folded at import (constant_fold.h).
  const onnx::TensorProto* constant(const std::string& tensor) const;
  // Whether node `i` computes a constant, folded at import.
  bool folded(int node) const { return folded_.count(node) != 0; }
  // The node producing `tensor`, or -1 (graph input, initializer).
  int producer(const std::string& tensor) const;
  // The nodes reading `tensor`, once each, in graph order.
  const std::vector<int>& consumers(const std::string& tensor) const;
  bool is_graph_input(const std::string& tensor) const { return inputs_.count(tensor) != 0; }
  bool is_graph_output(const std::string& tensor) const { return outputs_.count(tensor) != 0; }
  // Graph inputs without an initializer, in graph order.
  const std::vector<std::string>& graph_inputs() const { return input_order_; }
  std::optional<TensorType> type(const std::string& tensor) const;

 private:
  const onnx::GraphProto* graph_;
  std::string label_;
  int64_t opset_ = 0;
  std::map<std::string, const onnx::TensorProto*> constants_;
  std::deque<onnx::TensorProto> owned_;  // value_float(s)/value_int(s) Constants, folded nodes
  std::set<int> folded_;
  std::map<std::string, int> producer_;
  std::map<std::string, std::vector<int>> consumers_;
  std::set<std::string> inputs_, outputs_;
  std::vector<std::string> input_order_;
  std::map<std::string, TensorType> types_;
};

// Whether the node is of ONNX's default domain ("" or "ai.onnx").
bool default_domain(const onnx::NodeProto& n);

// Whether an op type is in a list of them.
template <size_t N>
bool one_of(const std::string& op_type, const char* const (&list)[N]) {
  return std::find(std::begin(list), std::end(list), op_type) != std::end(list);
}

// A node's input k, or "" where it has fewer (an omitted optional input is "" too).
inline std::string input_of(const onnx::NodeProto& n, int k) {
  return k < n.input_size() ? n.input(k) : std::string();
}

}  // namespace padfold::onnx_import
