// Internal to the importer: what one ONNX node becomes (a layer draft, a foldable Pad, a fusable
// activation), or why it is left to the caller. import.cpp decides which drafts are joined.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "frontend/onnx/onnx_graph.h"
#include "frontend/spec.h"

namespace padfold::onnx_import::detail {

using ojson = nlohmann::ordered_json;

enum class Kind { Conv, ConvTranspose, MaxPool, AvgPool, Add, Concat };

// A padfold layer in the making.
struct Draft {
  int node = -1;  // the ONNX node it comes from
  Kind kind = Kind::Conv;
  int dims = 0;                     // spatial dims
  std::vector<std::string> inputs;  // the tensors it reads (after bypassed nodes)
  std::string output;               // the tensor it produces (the activation's, once fused)
  std::vector<int64_t> in_shape;    // conv/pool: input 0, N C spatial...
  std::vector<std::vector<int64_t>> join_shapes;  // add/concat: each input's
  std::vector<int64_t> out_shape;                 // as padfold computes it
  // Conv/pool padding: auto_pad (NOTSET, VALID, SAME_UPPER, SAME_LOWER) and, for NOTSET, the
  // explicit pads in ONNX order (all befores, then all afters).
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> pads;
  ojson border;                                          // null: zeros
  std::optional<bool> count_include_pad;                 // avg_pool
  std::vector<int64_t> resolved_before, resolved_after;  // the pads padfold resolved
  ojson fields;      // op, layout, kernel, stride, ... in the spec's order
  ojson activation;  // null: none
  const onnx::TensorProto* weights = nullptr;
  const onnx::TensorProto* bias = nullptr;
  int pad_node = -1;  // a folded Pad
  int act_node = -1;  // a fused activation
};

// Why a node is left to the caller.
struct Left {
  std::string reason;
};

// A Pad that could be folded into the conv/pool reading its output.
struct PadInfo {
  std::string input;                   // the tensor it pads
  std::vector<int64_t> before, after;  // spatial pads
  std::string mode;                    // constant, reflect, edge
  float value = 0.f;                   // constant
};

// An activation that could be fused into the layer producing its input.
struct ActInfo {
  std::string input;
  ojson activation;  // "relu", "relu6" or {"type": "leaky_relu", "alpha": a}
};

// The graph and how its tensors alias through bypassed nodes (Identity, Dropout).
class Context {
 public:
  explicit Context(const GraphIndex& g) : g_(g) {}
  const GraphIndex& graph() const { return g_; }
  // Throws ImportError "<file>: node '<name>' (<op>, #i): <what>".
  [[noreturn]] void fail(int node, const std::string& what) const;
  // Runs `f`, prefixing an ImportError it throws (an attribute of the wrong type) with the node.
  template <typename F>
  auto at_node(int node, F&& f) const -> decltype(f()) {
    try {
      return f();
    } catch (const ImportError& e) {
      fail(node, e.what());
    }
  }
  // The tensor `t` stands for once bypassed nodes are removed.
  std::string canon(const std::string& t) const;
  void add_alias(const std::string& from, const std::string& to) { alias_[from] = to; }
  bool bypassed(int node) const;
  void set_bypassed(int node) { bypassed_.push_back(node); }
  // The nodes reading `t` or an alias of it, bypassed nodes excluded.
  std::vector<int> readers(const std::string& t) const;
  // Whether `t` or an alias of it is a graph output.
  bool reaches_graph_output(const std::string& t) const;
  // The type after shape inference, with the shape padfold computes for a layer's output
  // (set_layer_shape), which is what the layers reading it get.
  std::optional<TensorType> type(const std::string& t) const;
  void set_layer_shape(const std::string& t, const std::vector<int64_t>& shape) {
    layer_shapes_[t] = shape;
  }
  const onnx::TensorProto* constant(const std::string& t) const { return g_.constant(canon(t)); }

 private:
  const GraphIndex& g_;
  std::map<std::string, std::string> alias_;
  std::vector<int> bypassed_;
  std::map<std::string, std::vector<int64_t>> layer_shapes_;
};

// The per-dim attribute `name` (strides, dilations, kernel_shape...), checked to have `dims`
// values of at least `min`; `dflt` on every dim when absent.
std::vector<int64_t> per_dim(const Context& c, int node, const NodeAttributes& a,
                             const std::string& name, int dims, int64_t dflt, int64_t min);

// auto_pad and pads of a conv or pool node into d.auto_pad and d.pads, checked: pads only with
// auto_pad NOTSET (a pads attribute of zeros is tolerated), 2*dims values, none negative.
void read_padding(const Context& c, int node, const NodeAttributes& a, int dims, Draft& d);

// Identity / Dropout: whether the node can be bypassed (output 0 stands for input 0).
std::optional<Left> bypass_check(const Context& c, int node);

// Conv, ConvTranspose, MaxPool, AveragePool, Add, Concat: a draft, or why not. Errors for a node
// that breaks the ONNX spec in a way that matters (pads with auto_pad, a wrong weight shape...).
std::variant<Draft, Left> draft_layer(const Context& c, int node);
std::variant<PadInfo, Left> pad_info(const Context& c, int node);
std::variant<ActInfo, Left> act_info(const Context& c, int node);

// The layer's spec JSON: name, op, `input` (when given), input_shape, the fields, padding, border,
// activation.
ojson layer_json(const Draft& d, const std::string& name, const ojson* input);
// The draft through padfold's spec parser (padding module included): the parsed layer, or the
// parser's message (from the field on). An add/concat reads model inputs of its join_shapes.
std::variant<Layer, std::string> check_with_parser(const Draft& d);

}  // namespace padfold::onnx_import::detail
