#include "frontend/onnx/onnx_model.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/text.h"                 // valid_utf8
#include "frontend/onnx/onnx_graph.h"  // shape_text

namespace padfold::onnx_import {
namespace {

using TP = onnx::TensorProto;

[[noreturn]] void fail(const std::string& what) {
  throw ImportError(what);
}

// Copies little-endian raw bytes of element type T into floats.
template <typename T>
std::vector<float> from_raw(const std::string& raw, size_t count, const std::string& what) {
  if (raw.size() != count * sizeof(T))
    fail(what + ": raw_data has " + std::to_string(raw.size()) + " bytes; expected " +
         std::to_string(count * sizeof(T)) + " for its shape");
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

const char* attribute_type_name(int type) {
  using AP = onnx::AttributeProto;
  switch (type) {
    case AP::FLOAT:
      return "FLOAT";
    case AP::INT:
      return "INT";
    case AP::STRING:
      return "STRING";
    case AP::TENSOR:
      return "TENSOR";
    case AP::GRAPH:
      return "GRAPH";
    case AP::FLOATS:
      return "FLOATS";
    case AP::INTS:
      return "INTS";
    case AP::STRINGS:
      return "STRINGS";
    default:
      return "another type";
  }
}

// Number of elements of `shape`, refusing negative dims and more than 2^31 elements.
size_t element_count(const std::vector<int64_t>& shape, const std::string& what) {
  for (int64_t d : shape)
    if (d < 0) fail(what + ": negative dimension " + std::to_string(d));
  // A zero dim anywhere makes the tensor empty, however large the rest (checked before multiplying
  // so that no product wraps around).
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (static_cast<uint64_t>(d) > (uint64_t{1} << 31) / n)
      fail(what + ": shape " + shape_text(shape, true) + " has more than 2^31 elements");
    n *= static_cast<uint64_t>(d);
  }
  return static_cast<size_t>(n);
}

void check_not_external(const TP& t, const std::string& what) {
  if (t.data_location() == TP::EXTERNAL || t.external_data_size() > 0)
    fail(what +
         ": its data is stored outside the model file (external data); expected the data inside "
         "the .onnx file (re-save with onnx.save_model(m, path, save_as_external_data=False))");
}

// Bytes per element of a tensor's raw_data, 0 for types that have none (strings, unknown types).
size_t raw_element_bytes(int type) {
  switch (type) {
    case TP::UINT8:
    case TP::INT8:
    case TP::BOOL:
      return 1;
    case TP::UINT16:
    case TP::INT16:
    case TP::FLOAT16:
    case TP::BFLOAT16:
      return 2;
    case TP::FLOAT:
    case TP::INT32:
    case TP::UINT32:
      return 4;
    case TP::DOUBLE:
    case TP::INT64:
    case TP::UINT64:
    case TP::COMPLEX64:
      return 8;
    case TP::COMPLEX128:
      return 16;
    default:
      return 0;
  }
}

// A tensor stored in the model file: its data inside the file, and raw_data exactly as long as its
// shape and type say (libonnx 1.12's shape inference copies raw_data into a vector sized by
// rounding down, a heap overflow on any other length).
void check_tensor(const TP& t, const std::string& what) {
  check_not_external(t, what);
  if (!t.has_raw_data()) return;
  const size_t bytes = raw_element_bytes(t.data_type());
  if (bytes == 0)
    fail(what + ": raw_data for element type " + elem_type_name(t.data_type()) +
         ", which has none; expected a numeric type");
  const size_t count = element_count({t.dims().begin(), t.dims().end()}, what);
  if (t.raw_data().size() != count * bytes)
    fail(what + ": raw_data has " + std::to_string(t.raw_data().size()) + " bytes; expected " +
         std::to_string(count * bytes) + " for shape " +
         shape_text({t.dims().begin(), t.dims().end()}, true) + " of " +
         elem_type_name(t.data_type()));
}

// check_tensor on every tensor of `g`: initializers and node attributes, in subgraphs too.
void check_graph_tensors(const onnx::GraphProto& g, const std::string& where) {
  for (const auto& t : g.initializer()) check_tensor(t, where + "initializer '" + t.name() + "'");
  for (const auto& s : g.sparse_initializer()) {
    check_tensor(s.values(), where + "sparse initializer '" + s.values().name() + "' values");
    check_tensor(s.indices(), where + "sparse initializer '" + s.values().name() + "' indices");
  }
  for (int i = 0; i < g.node_size(); ++i) {
    for (const auto& a : g.node(i).attribute()) {
      const std::string at = where + node_label(g.node(i), i) + ": attribute '" + a.name() + "'";
      if (a.has_t()) check_tensor(a.t(), at);
      for (const auto& t : a.tensors()) check_tensor(t, at);
      if (a.has_g()) check_graph_tensors(a.g(), at + ": ");
      for (const auto& sub : a.graphs()) check_graph_tensors(sub, at + ": ");
    }
  }
}

// Every string of the model the import copies into its spec, report or messages must be UTF-8:
// names (model, graph, nodes, tensors, attributes), op types, domains, dim names and string
// attributes. The message says where, without the bytes themselves.
void check_utf8(const onnx::ModelProto& m, const std::string& label) {
  auto check = [&](const std::string& s, const std::string& where) {
    if (!valid_utf8(s))
      fail(label + ": " + where +
           " is not valid UTF-8; expected UTF-8 text (ONNX strings are UTF-8)");
  };
  check(m.producer_name(), "field 'producer_name'");
  check(m.producer_version(), "field 'producer_version'");
  check(m.domain(), "field 'domain'");
  for (int k = 0; k < m.opset_import_size(); ++k)
    check(m.opset_import(k).domain(), "opset_import #" + std::to_string(k) + ": field 'domain'");
  const onnx::GraphProto& g = m.graph();
  check(g.name(), "the graph's name");
  auto value_infos = [&](const auto& list, const char* what) {
    for (int k = 0; k < list.size(); ++k) {
      const std::string where = std::string(what) + " #" + std::to_string(k);
      check(list[k].name(), where + ": its name");
      const auto& t = list[k].type();
      if (t.has_tensor_type() && t.tensor_type().has_shape())
        for (const auto& d : t.tensor_type().shape().dim())
          check(d.dim_param(), where + ": a dim_param");
    }
  };
  value_infos(g.input(), "graph input");
  value_infos(g.output(), "graph output");
  value_infos(g.value_info(), "value_info");
  for (int k = 0; k < g.initializer_size(); ++k)
    check(g.initializer(k).name(), "initializer #" + std::to_string(k) + ": its name");
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    const std::string where = "node #" + std::to_string(i);
    check(n.name(), where + ": its name");
    check(n.op_type(), where + ": its op_type");
    check(n.domain(), where + ": its domain");
    for (int k = 0; k < n.input_size(); ++k)
      check(n.input(k), where + ": input " + std::to_string(k));
    for (int k = 0; k < n.output_size(); ++k)
      check(n.output(k), where + ": output " + std::to_string(k));
    for (int k = 0; k < n.attribute_size(); ++k) {
      const onnx::AttributeProto& a = n.attribute(k);
      check(a.name(), where + ": attribute #" + std::to_string(k) + ": its name");
      check(a.s(), where + ": attribute #" + std::to_string(k) + ": its string value");
      if (a.has_t())
        check(a.t().name(), where + ": attribute #" + std::to_string(k) + ": its tensor's name");
    }
  }
}

}  // namespace

std::string elem_type_name(int type) {
  switch (type) {
    case TP::FLOAT:
      return "float32";
    case TP::UINT8:
      return "uint8";
    case TP::INT8:
      return "int8";
    case TP::UINT16:
      return "uint16";
    case TP::INT16:
      return "int16";
    case TP::INT32:
      return "int32";
    case TP::INT64:
      return "int64";
    case TP::STRING:
      return "string";
    case TP::BOOL:
      return "bool";
    case TP::FLOAT16:
      return "float16";
    case TP::DOUBLE:
      return "float64";
    case TP::UINT32:
      return "uint32";
    case TP::UINT64:
      return "uint64";
    case TP::BFLOAT16:
      return "bfloat16";
    default:
      return "type " + std::to_string(type);
  }
}

std::string node_label(const onnx::NodeProto& node, int index) {
  return "node '" + node.name() + "' (" + node.op_type() + ", #" + std::to_string(index) + ")";
}

int64_t default_opset(const onnx::ModelProto& model) {
  int64_t v = 0;
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") v = op.version();
  return v;
}

onnx::ModelProto parse_model(std::string_view bytes, const std::string& label) {
  onnx::ModelProto m;
  if (bytes.size() > kMaxModelBytes)
    fail(label + ": " + std::to_string(bytes.size()) + " bytes; expected at most " +
         std::to_string(kMaxModelBytes) + " (protobuf's limit)");
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    fail(label +
         ": not a valid ONNX model: the protobuf does not parse (a truncated or corrupt file, or "
         "not an .onnx file)");
  if (!m.has_graph() || m.graph().node_size() == 0)
    fail(label + ": the model has no graph nodes (a truncated file or not an ONNX model)");
  check_utf8(m, label);
  const int64_t opset = default_opset(m);
  if (opset == 0)
    fail(label +
         ": field 'opset_import': no entry for the default domain (\"\" or ai.onnx); "
         "expected one with a version from 1 to " +
         std::to_string(kMaxOpset));
  if (opset > kMaxOpset)
    fail(label + ": field 'opset_import': opset " + std::to_string(opset) +
         " of the default domain; expected at most " + std::to_string(kMaxOpset) +
         " (the newest opset libonnx 1.12 knows; re-export the model with opset 17 or lower, "
         "e.g. torch.onnx.export(..., opset_version=17))");
  check_graph_tensors(m.graph(), label + ": ");
  return m;
}

onnx::ModelProto read_model(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) fail(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  std::string bytes;
  std::string error;
  if (::fstat(fd, &st) != 0) {
    error = std::string("cannot stat: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    error = "not a regular file; expected an .onnx file";
  } else if (static_cast<uint64_t>(st.st_size) > kMaxModelBytes) {
    error = std::to_string(st.st_size) + " bytes; expected at most " +
            std::to_string(kMaxModelBytes) + " (protobuf's limit)";
  } else {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error = n < 0 ? std::string("cannot read: ") + std::strerror(errno)
                      : "the file shrank while being read";
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (!error.empty()) fail(path + ": " + error);
  return parse_model(bytes, path);
}

FloatTensor to_float_tensor(const TP& t, const std::string& what) {
  FloatTensor r;
  r.name = t.name();
  r.elem_type = t.data_type();
  r.shape.assign(t.dims().begin(), t.dims().end());
  const size_t count = element_count(r.shape, what);
  check_not_external(t, what);
  const bool raw = t.has_raw_data();
  switch (t.data_type()) {
    case TP::FLOAT:
      r.data = raw ? from_raw<float>(t.raw_data(), count, what) : from_field(t.float_data());
      break;
    case TP::DOUBLE:
      r.data = raw ? from_raw<double>(t.raw_data(), count, what) : from_field(t.double_data());
      break;
    case TP::UINT8:
    case TP::BOOL:  // one byte each, as uint8
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
      fail(what + ": element type " + elem_type_name(t.data_type()) +
           "; expected a numeric type (float32, float64, an integer type or bool)");
  }
  if (r.data.size() != count)
    fail(what + ": " + std::to_string(r.data.size()) + " values for a shape of " +
         std::to_string(count) + " elements");
  return r;
}

std::vector<int64_t> to_int64s(const TP& t, const std::string& what) {
  check_not_external(t, what);
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  const size_t count = element_count(shape, what);
  std::vector<int64_t> out;
  if (t.data_type() == TP::INT64) {
    if (t.has_raw_data()) {
      if (t.raw_data().size() != count * 8)
        fail(what + ": raw_data has " + std::to_string(t.raw_data().size()) + " bytes; expected " +
             std::to_string(count * 8));
      out.resize(count);
      if (count > 0)  // an empty vector's data() may be null, which memcpy must not be given
        std::memcpy(out.data(), t.raw_data().data(), count * 8);
    } else {
      out.assign(t.int64_data().begin(), t.int64_data().end());
    }
  } else if (t.data_type() == TP::INT32) {
    if (t.has_raw_data()) {
      if (t.raw_data().size() != count * 4)
        fail(what + ": raw_data has " + std::to_string(t.raw_data().size()) + " bytes; expected " +
             std::to_string(count * 4));
      out.resize(count);
      for (size_t i = 0; i < count; ++i) {  // not through float: pads above 2^24 stay exact
        int32_t v;
        std::memcpy(&v, t.raw_data().data() + i * 4, 4);
        out[i] = v;
      }
    } else {
      out.assign(t.int32_data().begin(), t.int32_data().end());
    }
  } else if (t.data_type() == TP::INT8 || t.data_type() == TP::UINT8) {
    const bool is_signed = t.data_type() == TP::INT8;
    if (t.has_raw_data()) {
      if (t.raw_data().size() != count)
        fail(what + ": raw_data has " + std::to_string(t.raw_data().size()) + " bytes; expected " +
             std::to_string(count));
      for (size_t i = 0; i < count; ++i) {
        const auto byte = static_cast<unsigned char>(t.raw_data()[i]);
        out.push_back(is_signed ? static_cast<int64_t>(static_cast<int8_t>(byte)) : byte);
      }
    } else {  // int32_data, one element each
      for (int32_t v : t.int32_data()) {
        if (v < (is_signed ? -128 : 0) || v > (is_signed ? 127 : 255))
          fail(what + ": value " + std::to_string(v) + " is out of the range of " +
               elem_type_name(t.data_type()));
        out.push_back(v);
      }
    }
  } else {
    fail(what + ": element type " + elem_type_name(t.data_type()) +
         "; expected an integer type (int64, int32, int8 or uint8)");
  }
  if (out.size() != count)
    fail(what + ": " + std::to_string(out.size()) + " values for a shape of " +
         std::to_string(count) + " elements");
  return out;
}

NodeAttributes::NodeAttributes(const onnx::NodeProto& node) {
  for (const auto& a : node.attribute()) {
    Attribute attr;
    attr.type = a.type();
    if (attr.type == onnx::AttributeProto::UNDEFINED) {  // early IR versions left it unset
      using AP = onnx::AttributeProto;
      attr.type = a.has_f()          ? AP::FLOAT
                  : a.has_i()        ? AP::INT
                  : a.has_s()        ? AP::STRING
                  : a.has_t()        ? AP::TENSOR
                  : a.floats_size()  ? AP::FLOATS
                  : a.ints_size()    ? AP::INTS
                  : a.strings_size() ? AP::STRINGS
                                     : AP::UNDEFINED;
    }
    attr.i = a.i();
    attr.f = a.f();
    attr.s = a.s();
    attr.ints.assign(a.ints().begin(), a.ints().end());
    attr.floats.assign(a.floats().begin(), a.floats().end());
    if (a.has_t()) attr.t = &a.t();
    all[a.name()] = std::move(attr);
  }
}

const Attribute* NodeAttributes::typed(const std::string& name, int type) const {
  const auto it = all.find(name);
  if (it == all.end()) return nullptr;
  if (it->second.type != type)
    fail("attribute '" + name + "' is " + attribute_type_name(it->second.type) + "; expected " +
         attribute_type_name(type));
  return &it->second;
}

int64_t NodeAttributes::get_int(const std::string& name, int64_t dflt) const {
  const Attribute* a = typed(name, onnx::AttributeProto::INT);
  return a ? a->i : dflt;
}

float NodeAttributes::get_float(const std::string& name, float dflt) const {
  const Attribute* a = typed(name, onnx::AttributeProto::FLOAT);
  return a ? a->f : dflt;
}

std::string NodeAttributes::get_string(const std::string& name, const std::string& dflt) const {
  const Attribute* a = typed(name, onnx::AttributeProto::STRING);
  return a ? a->s : dflt;
}

std::vector<int64_t> NodeAttributes::get_ints(const std::string& name,
                                              std::vector<int64_t> dflt) const {
  const Attribute* a = typed(name, onnx::AttributeProto::INTS);
  return a ? a->ints : dflt;
}

std::optional<std::vector<int64_t>> NodeAttributes::find_ints(const std::string& name) const {
  const Attribute* a = typed(name, onnx::AttributeProto::INTS);
  if (!a) return std::nullopt;
  return a->ints;
}

const onnx::TensorProto* NodeAttributes::find_tensor(const std::string& name) const {
  const Attribute* a = typed(name, onnx::AttributeProto::TENSOR);
  return a ? a->t : nullptr;
}

GraphNames::GraphNames(const onnx::GraphProto& g) {
  for (const auto& t : g.initializer()) taken_.insert(t.name());
  for (const auto& v : g.input()) taken_.insert(v.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) taken_.insert(o);
}

std::string GraphNames::fresh(const std::string& base) {
  std::string name = base;
  for (int k = 1; taken_.count(name); ++k) name = base + "_" + std::to_string(k);
  taken_.insert(name);
  return name;
}

onnx::TensorProto int64_tensor(const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t.add_int64_data(v);
  return t;
}

onnx::TensorProto float_tensor(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<float>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  return t;
}

}  // namespace padfold::onnx_import
