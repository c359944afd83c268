// Reading ONNX models through libonnx-dev's protobuf classes (onnx-ml.pb.h, ONNX_ML=1): the checked
// model reader of `padfold import`, tensor conversion and attribute access. The tests' node-test
// loader (tests/support/onnx_util) is built on the same functions.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace padfold::onnx_import {

// Every import failure. The message names the file, then the node (name, op type and index) or the
// tensor, the attribute or input at fault, what was found and what was expected.
struct ImportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The newest default-domain opset libonnx 1.12 (Debian 12) has schemas for. A newer model would be
// shape-inferred with older schemas (ops changed in 18+, such as Pad's axes input), so it is
// refused.
inline constexpr int64_t kMaxOpset = 17;
// Largest model file read: protobuf parses at most 2 GiB - 1 bytes.
inline constexpr uint64_t kMaxModelBytes = (uint64_t{1} << 31) - 1;

// Parses `bytes` as a ModelProto; `label` (the path) starts every error. Checks: the bytes parse
// completely, the graph has nodes, the default domain ("" or "ai.onnx") is imported at an opset of
// at most kMaxOpset, no initializer keeps its data outside the file (external data), and every
// name, op type, domain and string attribute is UTF-8 (the JSON written must be).
onnx::ModelProto parse_model(std::string_view bytes, const std::string& label);
// Reads a regular file of at most kMaxModelBytes and parses it with parse_model.
onnx::ModelProto read_model(const std::string& path);
// The default-domain opset the model imports (0 when none).
int64_t default_opset(const onnx::ModelProto& model);

// "node 'conv1' (Conv, #3)": how errors and reports name a node (index in the graph's node list).
std::string node_label(const onnx::NodeProto& node, int index);
// The name of TensorProto::DataType `type`: "float32", "int64", "uint8", ... ("type 42" if
// unknown).
std::string elem_type_name(int type);

// A tensor converted to float whatever its numeric element type (FLOAT, DOUBLE, integers).
struct FloatTensor {
  std::string name;
  int elem_type = 0;  // onnx::TensorProto::DataType value (1 = FLOAT, 2 = UINT8, 7 = INT64, ...)
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Converts an initializer, a Constant's value or a .pb tensor file. `what` starts every error
// (e.g. "model.onnx: initializer 'W'"). Refuses external data, non-numeric types, negative dims and
// a data size that does not match the shape.
FloatTensor to_float_tensor(const onnx::TensorProto& t, const std::string& what);
// The values of an integer tensor (INT64, INT32, INT8 or UINT8): Pad's pads, quantized weights.
std::vector<int64_t> to_int64s(const onnx::TensorProto& t, const std::string& what);

// One node attribute. `type` is the onnx::AttributeProto::AttributeType value.
struct Attribute {
  int type = 0;
  int64_t i = 0;
  float f = 0.f;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  const onnx::TensorProto* t = nullptr;  // TENSOR attributes; points into the NodeProto
};

// A node's attributes by name. The typed getters return the default when the attribute is absent
// and throw ImportError ("attribute 'group' is FLOAT; expected INT") when its type differs.
class NodeAttributes {
 public:
  NodeAttributes() = default;
  explicit NodeAttributes(const onnx::NodeProto& node);

  bool has(const std::string& name) const { return all.count(name) != 0; }
  int64_t get_int(const std::string& name, int64_t dflt) const;
  float get_float(const std::string& name, float dflt) const;
  std::string get_string(const std::string& name, const std::string& dflt) const;
  std::vector<int64_t> get_ints(const std::string& name, std::vector<int64_t> dflt = {}) const;
  std::optional<std::vector<int64_t>> find_ints(const std::string& name) const;
  const onnx::TensorProto* find_tensor(const std::string& name) const;

  std::map<std::string, Attribute> all;

 private:
  const Attribute* typed(const std::string& name, int type) const;
};

// The tensor names a graph takes (initializers, inputs, node outputs), and fresh ones for the
// initializers, tensors and nodes a rewrite adds: `base`, else base_1, base_2, ...
class GraphNames {
 public:
  explicit GraphNames(const onnx::GraphProto& g);
  std::string fresh(const std::string& base);

 private:
  std::set<std::string> taken_;
};

// An initializer of `values`: int64 of shape [values.size()]; float32 of shape `dims`.
onnx::TensorProto int64_tensor(const std::string& name, const std::vector<int64_t>& values);
onnx::TensorProto float_tensor(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<float>& values);

}  // namespace padfold::onnx_import
