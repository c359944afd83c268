// Small ONNX models built in C++ with libonnx's protobuf classes, for the importer's tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_model.h"

namespace padfold::onnx_test {

// Attribute setters on a node, chained: b.node("Conv", {"x", "w"}, {"y"}, "c1").ints("strides",
// {2, 2}).str("auto_pad", "SAME_UPPER").
class NodeRef {
 public:
  explicit NodeRef(onnx::NodeProto* n) : n_(n) {}
  NodeRef& ints(const std::string& name, const std::vector<int64_t>& v);
  NodeRef& i(const std::string& name, int64_t v);
  NodeRef& f(const std::string& name, float v);
  NodeRef& str(const std::string& name, const std::string& v);
  onnx::NodeProto& proto() { return *n_; }

 private:
  onnx::NodeProto* n_;
};

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 13);
  // A graph input; a dim < 0 is dynamic (dim_param "d<k>").
  ModelBuilder& input(const std::string& name, const std::vector<int64_t>& shape,
                      int elem_type = onnx::TensorProto::FLOAT);
  ModelBuilder& output(const std::string& name, int elem_type = onnx::TensorProto::FLOAT);
  // A float32 initializer; without data, deterministic values (k * 0.37 mod 1, minus 0.5).
  ModelBuilder& initializer(const std::string& name, const std::vector<int64_t>& shape,
                            std::vector<float> data = {});
  ModelBuilder& int_initializer(const std::string& name, const std::vector<int64_t>& values);
  NodeRef node(const std::string& op, const std::vector<std::string>& inputs,
               const std::vector<std::string>& outputs, const std::string& name = "");
  onnx::ModelProto& model() { return m_; }
  onnx::ModelProto model_copy() const { return m_; }
  std::string bytes() const;
  void save(const std::string& path) const;

 private:
  onnx::ModelProto m_;
};

// The deterministic values initializer() fills in.
std::vector<float> test_values(size_t n);

}  // namespace padfold::onnx_test
