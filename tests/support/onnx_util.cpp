#include "onnx_util.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace padfold::onnx_test {
namespace {

namespace fs = std::filesystem;

template <typename Message>
Message parse_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw OnnxTestError("cannot open " + path);
  Message m;
  if (!m.ParseFromIstream(&in)) throw OnnxTestError("cannot parse " + path + " as protobuf");
  return m;
}

// The input_K.pb files of a data set, in order.
std::vector<std::string> input_files(const std::string& data_dir) {
  if (!fs::is_directory(data_dir)) throw OnnxTestError(data_dir + " does not exist");
  std::vector<std::string> files;
  for (int k = 0;; ++k) {
    const std::string p = data_dir + "/input_" + std::to_string(k) + ".pb";
    if (!fs::is_regular_file(p)) break;
    files.push_back(p);
  }
  return files;
}

// The graph inputs input_K.pb feeds: the K-th graph input that has no initializer (all graph
// inputs if there are as many files as graph inputs).
std::vector<std::string> fed_inputs(const onnx::GraphProto& g, size_t files,
                                    const std::string& data_dir) {
  std::vector<std::string> inits;
  for (const auto& init : g.initializer()) inits.push_back(init.name());
  std::vector<std::string> fed;
  for (const auto& in : g.input())
    if (std::find(inits.begin(), inits.end(), in.name()) == inits.end() ||
        files == static_cast<size_t>(g.input_size()))
      fed.push_back(in.name());
  if (files != fed.size())
    throw OnnxTestError(data_dir + " has " + std::to_string(files) + " input files for " +
                        std::to_string(fed.size()) + " graph inputs");
  return fed;
}

}  // namespace

std::string node_test_root() {
  if (const char* env = std::getenv("PADFOLD_ONNX_NODE_DIR"); env && *env) return env;
  return "/usr/share/libonnx-testdata/data/node";
}

FloatTensor read_tensor_file(const std::string& path) {
  return onnx_import::to_float_tensor(parse_file<onnx::TensorProto>(path), path);
}

std::string single_node_op(const std::string& dir) {
  const std::string path = dir + "/model.onnx";
  if (!fs::is_regular_file(path)) return "";
  const auto model = parse_file<onnx::ModelProto>(path);
  if (model.graph().node_size() != 1) return "";
  return model.graph().node(0).op_type();
}

NodeTest load_node_test(const std::string& dir, int data_set) {
  NodeTest t;
  t.dir = dir;
  t.name = fs::path(dir).filename().string();
  const auto model = parse_file<onnx::ModelProto>(dir + "/model.onnx");
  const onnx::GraphProto& g = model.graph();
  if (g.node_size() != 1)
    throw OnnxTestError(dir + ": expected a single-node graph, found " +
                        std::to_string(g.node_size()) + " nodes");
  t.opset = onnx_import::default_opset(model);
  const onnx::NodeProto& node = g.node(0);
  t.op_type = node.op_type();
  t.node_inputs.assign(node.input().begin(), node.input().end());
  t.node_outputs.assign(node.output().begin(), node.output().end());
  t.attributes = NodeAttributes(node);
  for (auto& [name, a] : t.attributes.all) a.t = nullptr;  // would point into `model`

  const std::string data_dir = dir + "/test_data_set_" + std::to_string(data_set);
  const std::vector<std::string> paths = input_files(data_dir);
  std::map<std::string, FloatTensor> by_name;
  for (const auto& init : g.initializer())
    by_name[init.name()] = onnx_import::to_float_tensor(init, dir + ": " + init.name());
  const std::vector<std::string> fed = fed_inputs(g, paths.size(), data_dir);
  for (size_t k = 0; k < paths.size(); ++k) by_name[fed[k]] = read_tensor_file(paths[k]);
  size_t used = t.node_inputs.size();
  while (used > 0 && t.node_inputs[used - 1].empty()) --used;  // trailing optional inputs
  for (size_t k = 0; k < used; ++k) {
    const std::string& name = t.node_inputs[k];
    auto it = by_name.find(name);
    if (name.empty() || it == by_name.end())
      throw OnnxTestError(dir + ": node input " + std::to_string(k) + " ('" + name +
                          "') is neither a graph input nor an initializer");
    t.inputs.push_back(it->second);
    t.inputs.back().name = name;
  }
  for (int k = 0;; ++k) {
    const std::string p = data_dir + "/output_" + std::to_string(k) + ".pb";
    if (!fs::is_regular_file(p)) break;
    t.outputs.push_back(read_tensor_file(p));
  }
  if (t.outputs.empty()) throw OnnxTestError(data_dir + " has no output_0.pb");
  return t;
}

onnx::ModelProto node_test_model_with_weights(const std::string& dir, int data_set) {
  auto model = parse_file<onnx::ModelProto>(dir + "/model.onnx");
  onnx::GraphProto& g = *model.mutable_graph();
  const std::string data_dir = dir + "/test_data_set_" + std::to_string(data_set);
  const std::vector<std::string> paths = input_files(data_dir);
  const std::vector<std::string> fed = fed_inputs(g, paths.size(), data_dir);
  for (size_t k = 1; k < fed.size(); ++k) {
    onnx::TensorProto t = parse_file<onnx::TensorProto>(paths[k]);
    t.set_name(fed[k]);
    bool replaced = false;
    for (auto& init : *g.mutable_initializer())
      if (init.name() == fed[k]) {
        init = t;
        replaced = true;
      }
    if (!replaced) *g.add_initializer() = t;
    auto* inputs = g.mutable_input();
    for (int i = inputs->size() - 1; i >= 0; --i)
      if (inputs->Get(i).name() == fed[k]) inputs->DeleteSubrange(i, 1);
  }
  return model;
}

std::vector<std::string> find_node_tests(const std::string& root,
                                         const std::vector<std::string>& op_types) {
  std::vector<std::string> names;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return names;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!entry.is_directory()) continue;
    const std::string op = single_node_op(entry.path().string());
    if (std::find(op_types.begin(), op_types.end(), op) != op_types.end())
      names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace padfold::onnx_test
