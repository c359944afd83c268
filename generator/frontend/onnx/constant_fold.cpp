#include "frontend/onnx/constant_fold.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <vector>

#include "frontend/onnx/onnx_model.h"

namespace padfold::onnx_import {
namespace {

using Shape = std::vector<int64_t>;

struct Ints {
  int elem_type = onnx::TensorProto::INT64;
  Shape dims;
  std::vector<int64_t> v;
};

std::optional<int64_t> count_of(const Shape& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > kMaxFoldedValues / d)) return std::nullopt;
    n *= d;
  }
  return n;
}

bool integer_type(int t) {
  return t == onnx::TensorProto::INT64 || t == onnx::TensorProto::INT32;
}

std::optional<Ints> read(const onnx::TensorProto* t) {
  if (!t || !integer_type(t->data_type())) return std::nullopt;
  Ints r;
  r.elem_type = t->data_type();
  r.dims.assign(t->dims().begin(), t->dims().end());
  const auto n = count_of(r.dims);
  if (!n) return std::nullopt;
  try {
    r.v = to_int64s(*t, "constant");
  } catch (const ImportError&) {
    return std::nullopt;
  }
  if (static_cast<int64_t>(r.v.size()) != *n) return std::nullopt;
  return r;
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::optional<int64_t> int_attribute(const onnx::NodeProto& n, const std::string& name) {
  const onnx::AttributeProto* a = attribute(n, name);
  if (!a || a->type() != onnx::AttributeProto::INT) return std::nullopt;
  return a->i();
}

std::optional<Shape> ints_attribute(const onnx::NodeProto& n, const std::string& name) {
  const onnx::AttributeProto* a = attribute(n, name);
  if (!a || a->type() != onnx::AttributeProto::INTS) return std::nullopt;
  return Shape(a->ints().begin(), a->ints().end());
}

// Row-major strides of `dims`.
Shape strides_of(const Shape& dims) {
  Shape s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * dims[k];
  return s;
}

// Axis `a` of a rank `rank` tensor, negative from the end; nullopt outside it.
std::optional<size_t> axis_of(int64_t a, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (a < -r || a >= r) return std::nullopt;
  return static_cast<size_t>(a < 0 ? a + r : a);
}

std::optional<Ints> concat(const onnx::NodeProto& n, const std::vector<Ints>& in) {
  const auto axis_attr = int_attribute(n, "axis");
  if (!axis_attr || in.empty()) return std::nullopt;
  const auto axis = axis_of(*axis_attr, in[0].dims.size());
  if (!axis) return std::nullopt;
  Ints r = in[0];
  r.dims[*axis] = 0;
  for (const Ints& t : in) {
    if (t.elem_type != r.elem_type || t.dims.size() != r.dims.size()) return std::nullopt;
    for (size_t k = 0; k < t.dims.size(); ++k)
      if (k != *axis && t.dims[k] != r.dims[k]) return std::nullopt;
    r.dims[*axis] += t.dims[*axis];
  }
  if (!count_of(r.dims)) return std::nullopt;
  // Rows outer to the axis, each the inputs' blocks one after another.
  int64_t outer = 1;
  for (size_t k = 0; k < *axis; ++k) outer *= r.dims[k];
  r.v.clear();
  for (int64_t o = 0; o < outer; ++o)
    for (const Ints& t : in) {
      const int64_t block = outer == 0 ? 0 : static_cast<int64_t>(t.v.size()) / outer;
      r.v.insert(r.v.end(), t.v.begin() + o * block, t.v.begin() + (o + 1) * block);
    }
  return r;
}

std::optional<Ints> reshape(const onnx::NodeProto& n, const Ints& data, const Ints& shape) {
  if (shape.dims.size() != 1) return std::nullopt;
  const bool allowzero = int_attribute(n, "allowzero").value_or(0) != 0;
  Shape dims = shape.v;
  int64_t known = 1;
  int inferred = -1;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 0 && !allowzero) {
      if (k >= data.dims.size()) return std::nullopt;
      dims[k] = data.dims[k];
    }
    if (dims[k] == -1) {
      if (inferred >= 0) return std::nullopt;
      inferred = static_cast<int>(k);
      continue;
    }
    if (dims[k] < 0 || (dims[k] > 0 && known > kMaxFoldedValues / dims[k])) return std::nullopt;
    known *= dims[k];
  }
  const auto total = static_cast<int64_t>(data.v.size());
  if (inferred >= 0) {
    if (known == 0 || total % known != 0) return std::nullopt;
    dims[static_cast<size_t>(inferred)] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  Ints r = data;
  r.dims = dims;
  return r;
}

// ONNX Slice (opset 10+: starts, ends, axes and steps as inputs).
std::optional<Ints> slice(const Ints& data, const std::vector<std::optional<Ints>>& in) {
  const size_t rank = data.dims.size();
  if (!in[1] || !in[2] || in[1]->v.size() != in[2]->v.size()) return std::nullopt;
  const size_t m = in[1]->v.size();
  Shape axes(m), steps(m, 1);
  for (size_t i = 0; i < m; ++i) axes[i] = static_cast<int64_t>(i);
  if (in.size() > 3 && in[3]) axes = in[3]->v;
  if (in.size() > 4 && in[4]) steps = in[4]->v;
  if (axes.size() != m || steps.size() != m) return std::nullopt;
  Shape start(rank, 0), step(rank, 1), len = data.dims;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < m; ++i) {
    const auto a = axis_of(axes[i], rank);
    if (!a || seen[*a] || steps[i] == 0) return std::nullopt;
    seen[*a] = true;
    const int64_t dim = data.dims[*a], s = steps[i];
    int64_t b = in[1]->v[i], e = in[2]->v[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      len[*a] = e > b ? (e - b + s - 1) / s : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      len[*a] = b > e ? (b - e - s - 1) / -s : 0;
    }
    start[*a] = b;
    step[*a] = s;
  }
  Ints r = data;
  r.dims = len;
  r.v.clear();
  const Shape in_strides = strides_of(data.dims);
  const auto total = count_of(len);
  if (!total) return std::nullopt;
  Shape index(rank, 0);
  for (int64_t o = 0; o < *total; ++o) {
    int64_t src = 0;
    for (size_t k = 0; k < rank; ++k) src += (start[k] + index[k] * step[k]) * in_strides[k];
    r.v.push_back(data.v[static_cast<size_t>(src)]);
    for (size_t k = rank; k-- > 0;) {
      if (++index[k] < len[k]) break;
      index[k] = 0;
    }
  }
  return r;
}

std::optional<Ints> transpose(const onnx::NodeProto& n, const Ints& data) {
  const size_t rank = data.dims.size();
  Shape perm = ints_attribute(n, "perm").value_or(Shape{});
  if (perm.empty())
    for (size_t k = rank; k-- > 0;) perm.push_back(static_cast<int64_t>(k));
  if (perm.size() != rank) return std::nullopt;
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)])
      return std::nullopt;
    seen[static_cast<size_t>(p)] = true;
  }
  Ints r = data;
  for (size_t k = 0; k < rank; ++k) r.dims[k] = data.dims[static_cast<size_t>(perm[k])];
  const Shape in_strides = strides_of(data.dims);
  Shape index(rank, 0);
  for (size_t o = 0; o < data.v.size(); ++o) {
    int64_t src = 0;
    for (size_t k = 0; k < rank; ++k) src += index[k] * in_strides[static_cast<size_t>(perm[k])];
    r.v[o] = data.v[static_cast<size_t>(src)];
    for (size_t k = rank; k-- > 0;) {
      if (++index[k] < r.dims[k]) break;
      index[k] = 0;
    }
  }
  return r;
}

// Unsqueeze (`add`) or Squeeze of `axes` (attribute before opset 13, else input 1).
std::optional<Ints> unit_axes(const onnx::NodeProto& n, const Ints& data,
                              const std::optional<Ints>& axes_input, bool add) {
  std::optional<Shape> axes = ints_attribute(n, "axes");
  if (!axes && axes_input) axes = axes_input->v;
  Ints r = data;
  if (!axes) {
    if (add) return std::nullopt;
    r.dims.erase(std::remove(r.dims.begin(), r.dims.end(), 1), r.dims.end());
    return r;
  }
  const size_t rank = data.dims.size() + (add ? axes->size() : 0);
  std::vector<bool> at(rank, false);
  for (int64_t a : *axes) {
    const auto k = axis_of(a, rank);
    if (!k || at[*k] || (!add && data.dims[*k] != 1)) return std::nullopt;
    at[*k] = true;
  }
  r.dims.clear();
  size_t j = 0;
  for (size_t k = 0; k < rank; ++k) {
    if (add && at[k]) {
      r.dims.push_back(1);
    } else if (!add && at[k]) {
      ++j;
    } else {
      r.dims.push_back(data.dims[j++]);
    }
  }
  return r;
}

// Add, Sub, Mul, Div of tensors of one shape, or of a tensor and a one-value tensor of no higher
// rank. Div truncates toward zero, as ONNX Runtime divides integers (torch.onnx writes a shape's
// floor division as Div; shapes are positive, where the two agree); by zero: no value.
std::optional<Ints> arithmetic(const std::string& op, const Ints& a, const Ints& b) {
  if (a.elem_type != b.elem_type) return std::nullopt;
  const Ints* big = &a;
  const Ints* small = &b;
  if (a.dims != b.dims) {
    if (b.v.size() != 1 || (a.v.size() == 1 && a.dims.size() < b.dims.size()))
      std::swap(big, small);
    if (small->v.size() != 1 || small->dims.size() > big->dims.size()) return std::nullopt;
  }
  Ints r = *big;
  const auto at = [](const Ints& t, size_t k) { return t.v[t.v.size() == 1 ? 0 : k]; };
  constexpr int64_t kLimit = int64_t{1} << 40;  // shape arithmetic: far from overflow
  for (size_t k = 0; k < r.v.size(); ++k) {
    const int64_t x = at(a, k), y = at(b, k);
    if (std::abs(x) > kLimit || std::abs(y) > kLimit) return std::nullopt;
    if (op == "Div" && y == 0) return std::nullopt;
    r.v[k] = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y;
  }
  return r;
}

// Shape (opset 15: from `start` to `end`, negative counting from the back).
Ints shape_of(const onnx::NodeProto& n, const Shape& dims) {
  const auto r = static_cast<int64_t>(dims.size());
  auto at = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
  const int64_t start = at(int_attribute(n, "start").value_or(0));
  const int64_t end = at(int_attribute(n, "end").value_or(r));
  Ints s;
  for (int64_t k = start; k < end; ++k) s.v.push_back(dims[static_cast<size_t>(k)]);
  s.dims = {static_cast<int64_t>(s.v.size())};
  return s;
}

// Gather along axis 0 of a 1-D tensor (a shape's dims picked by index).
std::optional<Ints> gather(const onnx::NodeProto& n, const Ints& data, const Ints& indices) {
  if (data.dims.size() != 1 || int_attribute(n, "axis").value_or(0) != 0) return std::nullopt;
  Ints r;
  r.elem_type = data.elem_type;
  r.dims = indices.dims;
  const auto size = static_cast<int64_t>(data.v.size());
  for (int64_t i : indices.v) {
    if (i < -size || i >= size) return std::nullopt;
    r.v.push_back(data.v[static_cast<size_t>(i < 0 ? i + size : i)]);
  }
  return r;
}

std::optional<Ints> evaluate(const onnx::NodeProto& n, const std::vector<std::optional<Ints>>& in) {
  const std::string& op = n.op_type();
  if (op == "ConstantOfShape") {
    const onnx::AttributeProto* value = attribute(n, "value");
    if (!in[0] || in[0]->dims.size() != 1 || !value || !value->has_t()) return std::nullopt;
    const auto fill = read(&value->t());
    if (!fill || fill->v.size() != 1) return std::nullopt;
    Ints r;
    r.elem_type = fill->elem_type;
    r.dims = in[0]->v;
    const auto total = count_of(r.dims);
    if (!total) return std::nullopt;
    r.v.assign(static_cast<size_t>(*total), fill->v[0]);
    return r;
  }
  for (size_t k = 0; k < in.size(); ++k)
    if (!in[k] && !(op == "Slice" && k >= 3) && !(op == "Unsqueeze" || op == "Squeeze"))
      return std::nullopt;
  if (op == "Concat") {
    std::vector<Ints> all;
    for (const auto& t : in) all.push_back(*t);
    return concat(n, all);
  }
  if (!in[0]) return std::nullopt;
  if (op == "Reshape" && in.size() == 2) return reshape(n, *in[0], *in[1]);
  if (op == "Slice" && in.size() >= 3 && !attribute(n, "starts")) return slice(*in[0], in);
  if (op == "Transpose" && in.size() == 1) return transpose(n, *in[0]);
  if (op == "Gather" && in.size() == 2) return gather(n, *in[0], *in[1]);
  if ((op == "Unsqueeze" || op == "Squeeze") && in.size() <= 2)
    return unit_axes(n, *in[0], in.size() == 2 ? in[1] : std::nullopt, op == "Unsqueeze");
  if (op == "Cast" && in.size() == 1) {
    const auto to = int_attribute(n, "to");
    if (!to || !integer_type(static_cast<int>(*to))) return std::nullopt;
    Ints r = *in[0];
    r.elem_type = static_cast<int>(*to);
    if (r.elem_type == onnx::TensorProto::INT32)
      for (int64_t v : r.v)
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
          return std::nullopt;
    return r;
  }
  if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && in.size() == 2)
    return arithmetic(op, *in[0], *in[1]);
  if (op == "Neg" && in.size() == 1)
    return arithmetic("Sub", Ints{in[0]->elem_type, {}, {0}}, *in[0]);
  return std::nullopt;
}

// The one value of a rank-0 constant of `type` (any type when 0), or nullopt.
std::optional<float> scalar(const onnx::TensorProto* t, int type = 0) {
  if (!t || t->dims_size() != 0 || (type && t->data_type() != type)) return std::nullopt;
  try {
    const FloatTensor f = to_float_tensor(*t, "constant");
    if (f.data.size() == 1) return f.data[0];
  } catch (const ImportError&) {
  }
  return std::nullopt;
}

// QuantizeLinear or DequantizeLinear of a rank-0 constant with a rank-0 scale and zero point:
// ONNX Runtime's quantizer writes a Pad's constant value so (the Constant quantized, then
// dequantized). Evaluated as ONNX Runtime computes them: saturate(round half to even(x / scale) +
// zero point) into the zero point's type (uint8 without one); (q - zero point) * scale in float32.
std::optional<onnx::TensorProto> fold_scalar_qdq(
    const onnx::NodeProto& n,
    const std::function<const onnx::TensorProto*(const std::string&)>& constant) {
  const bool quantize = n.op_type() == "QuantizeLinear";
  if (n.input_size() < 2 || n.input_size() > 3 || attribute(n, "saturate")) return std::nullopt;
  const onnx::TensorProto* zp_t =
      n.input_size() == 3 && !n.input(2).empty() ? constant(n.input(2)) : nullptr;
  if (n.input_size() == 3 && !n.input(2).empty() && !zp_t) return std::nullopt;
  const int qtype = zp_t ? zp_t->data_type() : onnx::TensorProto::UINT8;
  if (qtype != onnx::TensorProto::UINT8 && qtype != onnx::TensorProto::INT8) return std::nullopt;
  const auto x = scalar(constant(n.input(0)), quantize ? onnx::TensorProto::FLOAT : qtype);
  const auto scale = scalar(constant(n.input(1)), onnx::TensorProto::FLOAT);
  const auto zp = zp_t ? scalar(zp_t) : std::optional<float>(0.f);
  if (!x || !scale || !zp || !(*scale > 0) || !std::isfinite(*scale) || !std::isfinite(*x))
    return std::nullopt;
  onnx::TensorProto t;
  t.set_name(n.output(0));
  if (!quantize) {
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.add_float_data((*x - *zp) * *scale);
    return t;
  }
  const float lo = qtype == onnx::TensorProto::INT8 ? -128.f : 0.f, hi = lo + 255.f;
  const float q = std::clamp(std::nearbyint(*x / *scale) + *zp, lo, hi);
  t.set_data_type(qtype);
  t.add_int32_data(static_cast<int32_t>(q));
  return t;
}

onnx::TensorProto to_tensor(const std::string& name, const Ints& r) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(r.elem_type);
  for (int64_t d : r.dims) t.add_dims(d);
  for (int64_t v : r.v) {
    if (r.elem_type == onnx::TensorProto::INT32)
      t.add_int32_data(static_cast<int32_t>(v));
    else
      t.add_int64_data(v);
  }
  return t;
}

}  // namespace

std::optional<onnx::TensorProto> fold_constant_node(
    const onnx::NodeProto& n,
    const std::function<const onnx::TensorProto*(const std::string&)>& constant,
    const StaticShapeOf& static_shape) {
  static const char* const kOps[] = {
      "ConstantOfShape", "Concat", "Reshape", "Slice", "Transpose", "Cast", "Unsqueeze",
      "Squeeze",         "Gather", "Add",     "Sub",   "Mul",       "Neg",  "Div"};
  if ((!n.domain().empty() && n.domain() != "ai.onnx") || n.output_size() != 1 ||
      n.output(0).empty() || n.input_size() < 1)
    return std::nullopt;
  if (n.op_type() == "Shape") {
    const auto dims = static_shape && n.input_size() == 1 ? static_shape(n.input(0)) : std::nullopt;
    if (!dims) return std::nullopt;
    return to_tensor(n.output(0), shape_of(n, *dims));
  }
  if (n.op_type() == "QuantizeLinear" || n.op_type() == "DequantizeLinear")
    return fold_scalar_qdq(n, constant);
  if (std::find(std::begin(kOps), std::end(kOps), n.op_type()) == std::end(kOps))
    return std::nullopt;
  std::vector<std::optional<Ints>> in;
  for (const std::string& name : n.input()) {
    if (name.empty()) {
      in.emplace_back();
      continue;
    }
    const onnx::TensorProto* t = constant(name);
    if (!t) return std::nullopt;  // computed at run time
    in.push_back(read(t));
    if (!in.back()) return std::nullopt;  // not a small integer tensor
  }
  const std::optional<Ints> r = evaluate(n, in);
  if (!r || static_cast<int64_t>(r->v.size()) > kMaxFoldedValues) return std::nullopt;
  return to_tensor(n.output(0), *r);
}

int replace_folded_nodes(onnx::ModelProto& model) {
  onnx::GraphProto& g = *model.mutable_graph();
  std::map<std::string, std::vector<int64_t>> shapes;  // the static ones
  auto note = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
    std::vector<int64_t> dims;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 1) return;
      dims.push_back(d.dim_value());
    }
    shapes.emplace(v.name(), dims);
  };
  for (const auto& v : g.input()) note(v);
  for (const auto& v : g.value_info()) note(v);
  const auto static_shape = [&](const std::string& t) -> std::optional<std::vector<int64_t>> {
    const auto it = shapes.find(t);
    if (it != shapes.end()) return it->second;
    return std::nullopt;
  };
  std::map<std::string, onnx::TensorProto> values;  // copies: nodes are replaced as we go
  for (const auto& t : g.initializer()) values[t.name()] = t;
  const auto lookup = [&](const std::string& name) -> const onnx::TensorProto* {
    const auto it = values.find(name);
    return it == values.end() ? nullptr : &it->second;
  };
  int replaced = 0;
  for (onnx::NodeProto& n : *g.mutable_node()) {
    if (n.op_type() == "Constant") {
      if (const onnx::AttributeProto* a = attribute(n, "value");
          a && a->has_t() && n.output_size() == 1)
        values[n.output(0)] = a->t();
      continue;
    }
    std::optional<onnx::TensorProto> t = fold_constant_node(n, lookup, static_shape);
    if (!t) continue;
    values[n.output(0)] = *t;
    onnx::NodeProto c;
    c.set_name(n.name());
    c.set_op_type("Constant");
    c.add_output(n.output(0));
    onnx::AttributeProto* a = c.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = std::move(*t);
    n = std::move(c);
    ++replaced;
  }
  return replaced;
}

}  // namespace padfold::onnx_import
