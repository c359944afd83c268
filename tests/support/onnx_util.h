// Reading the ONNX backend node tests (model.onnx + test_data_set_N/{input,output}_K.pb), as
// installed by Debian's libonnx-testdata, through libonnx-dev's protobuf classes.
//
// Only this header is needed by tests; the protobuf types stay inside onnx_util.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace padfold::onnx_test {

// A tensor from a .pb file or an initializer, converted to float whatever its element type.
struct FloatTensor {
  std::string name;
  int elem_type = 0;  // onnx::TensorProto::DataType value (1 = FLOAT, 2 = UINT8, 7 = INT64, ...)
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// One node attribute. `type` is the onnx::AttributeProto::AttributeType value.
struct Attribute {
  int type = 0;
  int64_t i = 0;
  float f = 0.f;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

struct NodeTest {
  std::string dir;   // absolute path of the test directory
  std::string name;  // directory name, e.g. "test_conv_with_strides_padding"
  std::string op_type;
  int64_t opset = 0;  // default-domain opset the model imports
  std::map<std::string, Attribute> attributes;
  std::vector<std::string> node_inputs, node_outputs;  // names as the node lists them
  // The node's inputs in node order, from test_data_set_N/input_K.pb or the model's initializers.
  std::vector<FloatTensor> inputs;
  std::vector<FloatTensor> outputs;  // test_data_set_N/output_K.pb

  bool has(const std::string& attr) const { return attributes.count(attr) != 0; }
  int64_t get_int(const std::string& attr, int64_t dflt) const;
  std::vector<int64_t> get_ints(const std::string& attr, std::vector<int64_t> dflt = {}) const;
  std::optional<std::vector<int64_t>> find_ints(const std::string& attr) const;
  std::string get_string(const std::string& attr, const std::string& dflt) const;
};

// Raised for missing or unreadable files and unsupported contents.
struct OnnxTestError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where the node tests live: $PADFOLD_ONNX_NODE_DIR if set, else the Debian location
// /usr/share/libonnx-testdata/data/node.
std::string node_test_root();

// Reads a TensorProto file (input_K.pb / output_K.pb).
FloatTensor read_tensor_file(const std::string& path);

// Operator type of the (single) node of dir/model.onnx, or "" if the file is missing or the graph
// does not have exactly one node.
std::string single_node_op(const std::string& dir);

// Loads dir/model.onnx and dir/test_data_set_<data_set>/*.pb. Works for the node tests and for
// single-node models with initializers (e.g. data/pytorch-converted).
NodeTest load_node_test(const std::string& dir, int data_set = 0);

// Names (not paths) of the test directories under `root` whose model is a single node with one of
// `op_types`, sorted. Returns an empty list if `root` does not exist.
std::vector<std::string> find_node_tests(const std::string& root,
                                         const std::vector<std::string>& op_types);

}  // namespace padfold::onnx_test
