#include "onnx_util.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

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

// Copies little-endian raw bytes of element type T into floats.
template <typename T>
std::vector<float> from_raw(const std::string& raw, size_t count, const std::string& what) {
  if (raw.size() != count * sizeof(T))
    throw OnnxTestError(what + ": raw_data has " + std::to_string(raw.size()) +
                        " bytes, expected " + std::to_string(count * sizeof(T)));
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<float>(v);
  }
  return out;
}

template <typename Field>
std::vector<float> from_field(const Field& f) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(f.size()));
  for (const auto& v : f) out.push_back(static_cast<float>(v));
  return out;
}

FloatTensor convert(const onnx::TensorProto& t, const std::string& what) {
  FloatTensor r;
  r.name = t.name();
  r.elem_type = t.data_type();
  r.shape.assign(t.dims().begin(), t.dims().end());
  size_t count = 1;
  for (int64_t d : r.shape) count *= static_cast<size_t>(d);
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    throw OnnxTestError(what + ": external data is not supported");
  const bool raw = t.has_raw_data();
  using TP = onnx::TensorProto;
  switch (t.data_type()) {
    case TP::FLOAT:
      r.data = raw ? from_raw<float>(t.raw_data(), count, what) : from_field(t.float_data());
      break;
    case TP::DOUBLE:
      r.data = raw ? from_raw<double>(t.raw_data(), count, what) : from_field(t.double_data());
      break;
    case TP::UINT8:
      r.data = raw ? from_raw<uint8_t>(t.raw_data(), count, what) : from_field(t.int32_data());
      break;
    case TP::INT8:
      r.data = raw ? from_raw<int8_t>(t.raw_data(), count, what) : from_field(t.int32_data());
      break;
    case TP::INT32:
      r.data = raw ? from_raw<int32_t>(t.raw_data(), count, what) : from_field(t.int32_data());
      break;
    case TP::INT64:
      r.data = raw ? from_raw<int64_t>(t.raw_data(), count, what) : from_field(t.int64_data());
      break;
    default:
      throw OnnxTestError(what + ": unsupported element type " + std::to_string(t.data_type()));
  }
  if (r.data.size() != count)
    throw OnnxTestError(what + ": " + std::to_string(r.data.size()) + " values for a shape of " +
                        std::to_string(count) + " elements");
  return r;
}

}  // namespace

int64_t NodeTest::get_int(const std::string& attr, int64_t dflt) const {
  auto it = attributes.find(attr);
  return it == attributes.end() ? dflt : it->second.i;
}

std::vector<int64_t> NodeTest::get_ints(const std::string& attr, std::vector<int64_t> dflt) const {
  auto it = attributes.find(attr);
  return it == attributes.end() ? dflt : it->second.ints;
}

std::optional<std::vector<int64_t>> NodeTest::find_ints(const std::string& attr) const {
  auto it = attributes.find(attr);
  if (it == attributes.end()) return std::nullopt;
  return it->second.ints;
}

std::string NodeTest::get_string(const std::string& attr, const std::string& dflt) const {
  auto it = attributes.find(attr);
  return it == attributes.end() ? dflt : it->second.s;
}

std::string node_test_root() {
  if (const char* env = std::getenv("PADFOLD_ONNX_NODE_DIR"); env && *env) return env;
  return "/usr/share/libonnx-testdata/data/node";
}

FloatTensor read_tensor_file(const std::string& path) {
  return convert(parse_file<onnx::TensorProto>(path), path);
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
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") t.opset = op.version();
  const onnx::NodeProto& node = g.node(0);
  t.op_type = node.op_type();
  t.node_inputs.assign(node.input().begin(), node.input().end());
  t.node_outputs.assign(node.output().begin(), node.output().end());
  for (const auto& a : node.attribute()) {
    Attribute attr;
    attr.type = a.type();
    attr.i = a.i();
    attr.f = a.f();
    attr.s = a.s();
    attr.ints.assign(a.ints().begin(), a.ints().end());
    attr.floats.assign(a.floats().begin(), a.floats().end());
    t.attributes[a.name()] = std::move(attr);
  }

  const std::string data_dir = dir + "/test_data_set_" + std::to_string(data_set);
  if (!fs::is_directory(data_dir)) throw OnnxTestError(data_dir + " does not exist");
  std::vector<FloatTensor> files;
  for (int k = 0;; ++k) {
    const std::string p = data_dir + "/input_" + std::to_string(k) + ".pb";
    if (!fs::is_regular_file(p)) break;
    files.push_back(read_tensor_file(p));
  }
  // input_K.pb feeds the K-th graph input that has no initializer (all graph inputs if there are
  // as many files as graph inputs); the node's inputs are then looked up by name.
  std::map<std::string, FloatTensor> by_name;
  for (const auto& init : g.initializer())
    by_name[init.name()] = convert(init, dir + ": " + init.name());
  std::vector<std::string> fed;
  for (const auto& in : g.input())
    if (by_name.count(in.name()) == 0 || files.size() == static_cast<size_t>(g.input_size()))
      fed.push_back(in.name());
  if (files.size() != fed.size())
    throw OnnxTestError(data_dir + " has " + std::to_string(files.size()) + " input files for " +
                        std::to_string(fed.size()) + " graph inputs");
  for (size_t k = 0; k < files.size(); ++k) by_name[fed[k]] = files[k];
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
