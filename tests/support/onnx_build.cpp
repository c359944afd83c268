#include "onnx_build.h"

#include <cmath>
#include <fstream>
#include <stdexcept>

namespace padfold::onnx_test {
namespace {

onnx::AttributeProto* add(onnx::NodeProto* n, const std::string& name,
                          onnx::AttributeProto::AttributeType type) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}

}  // namespace

NodeRef& NodeRef::ints(const std::string& name, const std::vector<int64_t>& v) {
  auto* a = add(n_, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
  return *this;
}

NodeRef& NodeRef::i(const std::string& name, int64_t v) {
  add(n_, name, onnx::AttributeProto::INT)->set_i(v);
  return *this;
}

NodeRef& NodeRef::f(const std::string& name, float v) {
  add(n_, name, onnx::AttributeProto::FLOAT)->set_f(v);
  return *this;
}

NodeRef& NodeRef::str(const std::string& name, const std::string& v) {
  add(n_, name, onnx::AttributeProto::STRING)->set_s(v);
  return *this;
}

std::vector<float> test_values(size_t n) {
  std::vector<float> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = static_cast<float>(std::fmod(k * 0.37, 1.0) - 0.5);
  return v;
}

ModelBuilder::ModelBuilder(int64_t opset) {
  m_.set_ir_version(8);
  m_.set_producer_name("padfold-test");
  auto* op = m_.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m_.mutable_graph()->set_name("g");
}

ModelBuilder& ModelBuilder::input(const std::string& name, const std::vector<int64_t>& shape,
                                  int elem_type) {
  auto* v = m_.mutable_graph()->add_input();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* s = tt->mutable_shape();
  for (size_t k = 0; k < shape.size(); ++k) {
    auto* d = s->add_dim();
    if (shape[k] < 0)
      d->set_dim_param("d" + std::to_string(k));
    else
      d->set_dim_value(shape[k]);
  }
  return *this;
}

ModelBuilder& ModelBuilder::output(const std::string& name, int elem_type) {
  auto* v = m_.mutable_graph()->add_output();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
  return *this;
}

ModelBuilder& ModelBuilder::initializer(const std::string& name, const std::vector<int64_t>& shape,
                                        std::vector<float> data) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  if (data.empty()) data = test_values(n);
  if (data.size() != n) throw std::invalid_argument("initializer " + name + ": wrong data size");
  auto* t = m_.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : shape) t->add_dims(d);
  for (float x : data) t->add_float_data(x);
  return *this;
}

ModelBuilder& ModelBuilder::int_initializer(const std::string& name,
                                            const std::vector<int64_t>& values) {
  auto* t = m_.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t x : values) t->add_int64_data(x);
  return *this;
}

NodeRef ModelBuilder::node(const std::string& op, const std::vector<std::string>& inputs,
                           const std::vector<std::string>& outputs, const std::string& name) {
  auto* n = m_.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& s : inputs) n->add_input(s);
  for (const auto& s : outputs) n->add_output(s);
  return NodeRef(n);
}

std::string ModelBuilder::bytes() const {
  std::string s;
  if (!m_.SerializeToString(&s)) throw std::runtime_error("cannot serialize the model");
  return s;
}

void ModelBuilder::save(const std::string& path) const {
  std::ofstream f(path, std::ios::binary);
  f << bytes();
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace padfold::onnx_test
