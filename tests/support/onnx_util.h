// Reading the ONNX backend node tests (model.onnx + test_data_set_N/{input,output}_K.pb), as
// installed by Debian's libonnx-testdata, with the importer's reader (generator/frontend/onnx:
// tensor conversion, attributes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_model.h"

namespace padfold::onnx_test {

using onnx_import::Attribute;
using onnx_import::FloatTensor;
using onnx_import::NodeAttributes;
// Raised for missing or unreadable files and unsupported contents.
using OnnxTestError = onnx_import::ImportError;

struct NodeTest {
  std::string dir;   // absolute path of the test directory
  std::string name;  // directory name, e.g. "test_conv_with_strides_padding"
  std::string op_type;
  int64_t opset = 0;  // default-domain opset the model imports
  NodeAttributes attributes;
  std::vector<std::string> node_inputs, node_outputs;  // names as the node lists them
  // The node's inputs in node order, from test_data_set_N/input_K.pb or the model's initializers.
  std::vector<FloatTensor> inputs;
  std::vector<FloatTensor> outputs;  // test_data_set_N/output_K.pb

  bool has(const std::string& attr) const { return attributes.has(attr); }
  int64_t get_int(const std::string& attr, int64_t dflt) const {
    return attributes.get_int(attr, dflt);
  }
  std::vector<int64_t> get_ints(const std::string& attr, std::vector<int64_t> dflt = {}) const {
    return attributes.get_ints(attr, std::move(dflt));
  }
  std::optional<std::vector<int64_t>> find_ints(const std::string& attr) const {
    return attributes.find_ints(attr);
  }
  std::string get_string(const std::string& attr, const std::string& dflt) const {
    return attributes.get_string(attr, dflt);
  }
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

// The node test's model with every graph input the test feeds from input_K.pb except the first
// (a conv's W and B) turned into an initializer holding that data: what a deployed model with
// constant weights looks like, ready for the importer.
onnx::ModelProto node_test_model_with_weights(const std::string& dir, int data_set = 0);

// Names (not paths) of the test directories under `root` whose model is a single node with one of
// `op_types`, sorted. Returns an empty list if `root` does not exist.
std::vector<std::string> find_node_tests(const std::string& root,
                                         const std::vector<std::string>& op_types);

}  // namespace padfold::onnx_test
