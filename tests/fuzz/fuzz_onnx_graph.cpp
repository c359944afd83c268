// libFuzzer: the ONNX importer's graph passes. The inputs stay valid ModelProtos: a custom mutator
// parses the input, changes its graph (a node input rewired, an attribute or a dim changed, an
// op_type swapped, a node duplicated, removed or moved, a graph output dropped or added, an
// initializer truncated (quantization scales and zero points too), the opset changed) and
// serializes it again; it falls back to libFuzzer's byte mutations for an input that does not
// parse, and now and then for one that does. The body is fuzz_onnx's (onnx_import_check.h says what
// is a finding).
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "onnx_import_check.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using Rng = std::minstd_rand;

size_t pick(Rng& rng, size_t n) {
  return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
}

template <typename T, size_t N>
const T& pick(Rng& rng, const T (&values)[N]) {
  return values[pick(rng, N)];
}

// The importer's ops, the ones it folds or bypasses, and some it leaves to the caller.
const char* const kOps[] = {"Conv",
                            "ConvTranspose",
                            "MaxPool",
                            "AveragePool",
                            "Add",
                            "Concat",
                            "Relu",
                            "Clip",
                            "LeakyRelu",
                            "Pad",
                            "Identity",
                            "Dropout",
                            "Sigmoid",
                            "Mul",
                            "Constant",
                            "Flatten",
                            "Gemm",
                            "GlobalAveragePool",
                            "Reshape",
                            "ReduceMean",
                            "Squeeze",
                            "QuantizeLinear",
                            "DequantizeLinear",
                            "QLinearConv"};
const char* const kIntsAttrs[] = {"kernel_shape",   "strides",      "pads", "dilations",
                                  "output_padding", "output_shape", "axes"};
const char* const kIntAttrs[] = {"group",         "axis",         "ceil_mode", "count_include_pad",
                                 "storage_order", "training_mode"};
const char* const kAutoPads[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "same_upper", ""};
const char* const kPadModes[] = {"constant", "reflect", "edge", "wrap", "Constant"};
constexpr int64_t kBig = int64_t{1} << 31, kMax = std::numeric_limits<int64_t>::max(),
                  kMin = std::numeric_limits<int64_t>::min();
const int64_t kInts[] = {-1, 0, 1, 2, 3, 4, 5, 7, 8, 64, 1 << 16, kBig, -kBig, kMax, kMin};
const int64_t kOpsets[] = {1, 2, 6, 7, 10, 11, 12, 13, 18, 19, 21, 99};

// Every tensor name the graph knows: inputs, initializers, node outputs, and "" (an absent input).
std::vector<std::string> tensor_names(const onnx::GraphProto& g) {
  std::vector<std::string> names{""};
  for (const auto& i : g.input()) names.push_back(i.name());
  for (const auto& t : g.initializer()) names.push_back(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) names.push_back(o);
  return names;
}

onnx::AttributeProto* attribute(onnx::NodeProto* n, const std::string& name,
                                onnx::AttributeProto::AttributeType type) {
  for (auto& a : *n->mutable_attribute())
    if (a.name() == name) return &a;
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}

void mutate_ints(google::protobuf::RepeatedField<int64_t>* v, Rng& rng) {
  switch (pick(rng, 4)) {
    case 0:
      if (!v->empty()) {
        v->Set(static_cast<int>(pick(rng, v->size())), pick(rng, kInts));
        break;
      }
      [[fallthrough]];
    case 1:
      v->Add(pick(rng, kInts) & 7);
      break;
    case 2:
      if (!v->empty()) v->RemoveLast();
      break;
    default:  // small values everywhere: the sizes a model could have
      for (int i = 0; i < v->size(); ++i) v->Set(i, static_cast<int64_t>(pick(rng, 5)));
  }
}

void mutate_attribute(onnx::NodeProto* n, Rng& rng) {
  using A = onnx::AttributeProto;
  switch (pick(rng, 7)) {
    case 0:
      mutate_ints(attribute(n, pick(rng, kIntsAttrs), A::INTS)->mutable_ints(), rng);
      break;
    case 1:
      attribute(n, pick(rng, kIntAttrs), A::INT)->set_i(pick(rng, kInts));
      break;
    case 2:
      attribute(n, "auto_pad", A::STRING)->set_s(pick(rng, kAutoPads));
      break;
    case 3:
      attribute(n, "mode", A::STRING)->set_s(pick(rng, kPadModes));
      break;
    case 4: {
      const char* const floats[] = {"alpha", "min", "max", "value", "ratio"};
      constexpr float kInf = std::numeric_limits<float>::infinity(),
                      kNaN = std::numeric_limits<float>::quiet_NaN();
      const float values[] = {0.f, 0.1f, 1.f, 6.f, -1.f, kInf, kNaN};
      attribute(n, pick(rng, floats), A::FLOAT)->set_f(pick(rng, values));
      break;
    }
    case 5:  // an attribute of another type than its name says
      if (n->attribute_size() > 0) {
        A* a = n->mutable_attribute(static_cast<int>(pick(rng, n->attribute_size())));
        const A::AttributeType types[] = {A::INT, A::INTS, A::FLOAT, A::STRING, A::TENSOR};
        a->set_type(pick(rng, types));
      }
      break;
    default:
      if (n->attribute_size() > 0)
        n->mutable_attribute()->DeleteSubrange(static_cast<int>(pick(rng, n->attribute_size())), 1);
  }
}

void mutate_dim(onnx::TensorShapeProto* shape, Rng& rng) {
  if (shape->dim_size() == 0 || pick(rng, 8) == 0) {
    shape->add_dim()->set_dim_value(1 + static_cast<int64_t>(pick(rng, 8)));
    return;
  }
  auto* d = shape->mutable_dim(static_cast<int>(pick(rng, shape->dim_size())));
  switch (pick(rng, 4)) {
    case 0:
      d->set_dim_value(pick(rng, kInts));
      break;
    case 1:
      d->set_dim_value(1 + static_cast<int64_t>(pick(rng, 16)));
      break;
    case 2:
      d->set_dim_param(std::to_string(1 + pick(rng, 64)));  // fuzz_onnx's sizes take it
      break;
    default:
      shape->mutable_dim()->DeleteSubrange(static_cast<int>(pick(rng, shape->dim_size())), 1);
  }
}

// Cuts the data of an initializer (float, or int8/uint8/int32 as quantized models hold scales'
// zero points, weights and biases); `consistent` shortens its first dim to match, so that a scale
// or zero point vector of another length stays a valid tensor. A scalar becomes a vector first.
void truncate_initializer(onnx::TensorProto* t, bool consistent, Rng& rng) {
  using TP = onnx::TensorProto;
  const bool bytes = t->data_type() == TP::INT8 || t->data_type() == TP::UINT8;
  const size_t element = bytes ? 1 : 4;
  if (t->dims_size() == 0 && consistent) t->add_dims(1);
  int64_t per_row = 1;
  for (int i = 1; i < t->dims_size(); ++i) per_row *= t->dims(i);
  const bool raw = !t->raw_data().empty();
  const bool ints = t->data_type() == TP::INT32 || bytes;
  const int64_t count = raw    ? static_cast<int64_t>(t->raw_data().size() / element)
                        : ints ? t->int32_data_size()
                               : t->float_data_size();
  int64_t keep = count > 0 ? static_cast<int64_t>(pick(rng, static_cast<size_t>(count))) : 0;
  if (consistent && t->dims_size() > 0 && per_row > 0) {
    keep -= keep % per_row;
    t->set_dims(0, keep / per_row);
  }
  if (raw)
    t->mutable_raw_data()->resize(static_cast<size_t>(keep) * element +
                                  (consistent ? 0 : pick(rng, 4)));
  else if (ints)
    t->mutable_int32_data()->Truncate(static_cast<int>(keep));
  else
    t->mutable_float_data()->Truncate(static_cast<int>(keep));
}

void mutate_graph(onnx::ModelProto& m, Rng& rng) {
  onnx::GraphProto* g = m.mutable_graph();
  const int nodes = g->node_size();
  onnx::NodeProto* n = nodes ? g->mutable_node(static_cast<int>(pick(rng, nodes))) : nullptr;
  switch (pick(rng, 12)) {
    case 0:  // rewire an input
      if (n && n->input_size() > 0) {
        const auto names = tensor_names(*g);
        n->set_input(static_cast<int>(pick(rng, n->input_size())), names[pick(rng, names.size())]);
      }
      break;
    case 1:
    case 2:
      if (n) mutate_attribute(n, rng);
      break;
    case 3:
      if (g->input_size() > 0)
        mutate_dim(g->mutable_input(static_cast<int>(pick(rng, g->input_size())))
                       ->mutable_type()
                       ->mutable_tensor_type()
                       ->mutable_shape(),
                   rng);
      break;
    case 4:
      if (g->initializer_size() > 0) {
        onnx::TensorProto* t =
            g->mutable_initializer(static_cast<int>(pick(rng, g->initializer_size())));
        if (t->dims_size() > 0)
          t->set_dims(static_cast<int>(pick(rng, t->dims_size())), pick(rng, kInts) & 15);
        else
          t->add_dims(1);
      }
      break;
    case 5:
      if (n) n->set_op_type(pick(rng, kOps));
      break;
    case 6:  // duplicate a node (its copy writes the same outputs) or add an input to it
      if (n) {
        if (pick(rng, 2)) {
          *g->add_node() = *n;
        } else {
          const auto names = tensor_names(*g);
          n->add_input(names[pick(rng, names.size())]);
        }
      }
      break;
    case 7:
      if (nodes > 0) g->mutable_node()->DeleteSubrange(static_cast<int>(pick(rng, nodes)), 1);
      break;
    case 8:  // move a node
      if (nodes > 1)
        g->mutable_node()->SwapElements(static_cast<int>(pick(rng, nodes)),
                                        static_cast<int>(pick(rng, nodes)));
      break;
    case 9:  // drop a graph output, or make a tensor one
      if (g->output_size() > 0 && pick(rng, 2)) {
        g->mutable_output()->DeleteSubrange(static_cast<int>(pick(rng, g->output_size())), 1);
      } else {
        const auto names = tensor_names(*g);
        g->add_output()->set_name(names[pick(rng, names.size())]);
      }
      break;
    case 10:
      if (g->initializer_size() > 0)
        truncate_initializer(
            g->mutable_initializer(static_cast<int>(pick(rng, g->initializer_size()))),
            pick(rng, 2), rng);
      break;
    default:
      if (m.opset_import_size() > 0)
        m.mutable_opset_import(0)->set_version(pick(rng, kOpsets));
      else
        m.add_opset_import()->set_version(pick(rng, kOpsets));
  }
}

size_t serialize(const onnx::ModelProto& m, uint8_t* data, size_t max_size) {
  std::string out;
  if (!m.SerializeToString(&out) || out.size() > max_size) return 0;
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  Rng rng(seed);
  onnx::ModelProto m;
  if (pick(rng, 16) == 0 || !m.ParseFromArray(data, static_cast<int>(size)))
    return LLVMFuzzerMutate(data, size, max_size);
  for (size_t i = 0, n = 1 + pick(rng, 3); i < n; ++i) mutate_graph(m, rng);
  const size_t out = serialize(m, data, max_size);
  return out ? out : LLVMFuzzerMutate(data, size, max_size);
}

// Two models' graphs spliced: the first's nodes up to a point, then the second's from a point,
// with both's inputs, initializers and outputs.
extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1,
                                            const uint8_t* data2, size_t size2, uint8_t* out,
                                            size_t max_out_size, unsigned int seed) {
  Rng rng(seed);
  onnx::ModelProto a, b;
  if (!a.ParseFromArray(data1, static_cast<int>(size1)) ||
      !b.ParseFromArray(data2, static_cast<int>(size2)))
    return 0;
  onnx::GraphProto* g = a.mutable_graph();
  const onnx::GraphProto& h = b.graph();
  const int keep = static_cast<int>(pick(rng, static_cast<size_t>(g->node_size()) + 1));
  g->mutable_node()->DeleteSubrange(keep, g->node_size() - keep);
  for (int i = static_cast<int>(pick(rng, static_cast<size_t>(h.node_size()) + 1));
       i < h.node_size(); ++i)
    *g->add_node() = h.node(i);
  for (const auto& v : h.input()) *g->add_input() = v;
  for (const auto& t : h.initializer()) *g->add_initializer() = t;
  for (const auto& v : h.output()) *g->add_output() = v;
  return serialize(a, out, max_out_size);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  padfold::fuzz::import_and_check(data, size, "fuzz_onnx_graph");
  return 0;
}
