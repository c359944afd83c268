#include "frontend/onnx/onnx_graph.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>

#include "base/fault_injection.h"
#include "base/limits.h"
#include "base/process.h"
#include "frontend/onnx/constant_fold.h"
#include "frontend/onnx/decomposed_activations.h"
#include "frontend/onnx/hoist_transposes.h"
#include "frontend/onnx/last_axis_regions.h"
#include "frontend/onnx/split_channels.h"
#include "frontend/onnx/tf_forms.h"
#include "padding/padding.h"

namespace padfold::onnx_import {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw ImportError(what);
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? sep : "") + parts[i];
  return s;
}

TensorType type_of(const onnx::TypeProto& t) {
  TensorType r;
  if (!t.has_tensor_type()) return r;
  r.elem_type = t.tensor_type().elem_type();
  if (!t.tensor_type().has_shape()) return r;
  r.has_shape = true;
  for (const auto& d : t.tensor_type().shape().dim())
    r.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return r;
}

// "dims 0, 2 are" / "dim 3 is"
std::string dims_text(const std::vector<std::string>& dims) {
  return std::string(dims.size() > 1 ? "dims " : "dim ") + join(dims, ", ") +
         (dims.size() > 1 ? " are " : " is ");
}

// "[?, 3, ?, -1] (dims 0, 2 are dynamic: 'batch', 'height'; dim 3 is -1, not a positive size)"
std::string dynamic_text(const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return "has no shape";
  std::vector<std::string> shape, dyn, params, bad, values;
  const auto& dims = v.type().tensor_type().shape().dim();
  for (int i = 0; i < dims.size(); ++i) {
    if (dims[i].has_dim_value()) {
      const int64_t d = dims[i].dim_value();
      shape.push_back(std::to_string(d));
      if (d > 0) continue;
      bad.push_back(std::to_string(i));
      values.push_back(std::to_string(d));
      continue;
    }
    shape.push_back("?");
    dyn.push_back(std::to_string(i));
    params.push_back(dims[i].has_dim_param() ? "'" + dims[i].dim_param() + "'" : "no name");
  }
  std::vector<std::string> parts;
  if (!dyn.empty()) parts.push_back(dims_text(dyn) + "dynamic: " + join(params, ", "));
  if (!bad.empty())
    parts.push_back(dims_text(bad) + join(values, ", ") +
                    (bad.size() > 1 ? ", not positive sizes" : ", not a positive size"));
  if (parts.empty()) return "";
  return "[" + join(shape, ", ") + "] (" + join(parts, "; ") + ")";
}

// libonnx 1.12's shape inference of the conv and pool ops trusts its input more than a model file
// deserves: with auto_pad SAME and a stride it counts a dim down by the stride one step at a time
// (hours for a Pad of 2^45), it reads weight dims a weight of lower rank than X does not have (a
// segfault) and divides by a stride of 0 (SIGFPE). This registry hands out those schemas with an
// inference that first refuses an input 0 of kMaxBufferBytes or more (a layer padfold could not
// generate anyway), weights whose rank is not X's, and strides, dilations, kernel sizes or groups
// below 1. A refusal only leaves the node's outputs uninferred (error mode 0): the importer then
// reports the node itself. Every other schema is the global registry's, but for Gelu, which
// libonnx 1.12 does not know (opset 20) and decomposed_activations.h writes at any opset: the
// output is the input's type and shape.
class GuardedSchemas final : public onnx::ISchemaRegistry {
 public:
  const onnx::OpSchema* GetSchema(const std::string& key, const int max_version,
                                  const std::string& domain) const override {
    const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(key, max_version, domain);
    if (!s && key == "Gelu" && (domain.empty() || domain == "ai.onnx")) return &gelu();
    const auto op = kGuarded.find(key);
    if (!s || !(domain.empty() || domain == "ai.onnx") || op == kGuarded.end()) return s;
    const std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<onnx::OpSchema>& guarded = cache_[s];
    if (!guarded) {
      guarded = std::make_unique<onnx::OpSchema>(*s);
      guarded->TypeAndShapeInferenceFunction([infer = s->GetTypeAndShapeInferenceFunction(),
                                              weights = op->second](onnx::InferenceContext& ctx) {
        check(ctx, weights);
        if (infer) infer(ctx);
      });
    }
    return guarded.get();
  }

 private:
  static const onnx::OpSchema& gelu() {
    static const onnx::OpSchema schema = [] {
      onnx::OpSchema s("Gelu", __FILE__, __LINE__);
      s.SinceVersion(1)
          .Input(0, "X", "", "T")
          .Output(0, "Y", "", "T")
          .Attr("approximate", "", onnx::AttributeProto::STRING, std::string("none"))
          .TypeConstraint("T", {"tensor(float)", "tensor(float16)", "tensor(double)"}, "")
          .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
      s.Finalize();
      return s;
    }();
    return schema;
  }

  static const onnx::TensorShapeProto* shape_of(onnx::InferenceContext& ctx, int k) {
    if (k < 0 || static_cast<size_t>(k) >= ctx.getNumInputs()) return nullptr;
    const onnx::TypeProto* t = ctx.getInputType(static_cast<size_t>(k));
    if (!t || !t->has_tensor_type() || !t->tensor_type().has_shape()) return nullptr;
    return &t->tensor_type().shape();
  }

  static void check(onnx::InferenceContext& ctx, int weights) {
    for (const char* name : {"strides", "dilations", "kernel_shape"})  // divisors, loop bounds
      if (const onnx::AttributeProto* a = ctx.getAttribute(name))
        for (int64_t v : a->ints())
          if (v < 1) fail_shape_inference("attribute '", name, "' has ", v, "; expected >= 1");
    if (const onnx::AttributeProto* a = ctx.getAttribute("group"); a && a->i() < 1)
      fail_shape_inference("attribute 'group' is ", a->i(), "; expected >= 1");
    const onnx::TensorShapeProto* x = shape_of(ctx, 0);
    if (!x) return;
    int64_t bytes = 4;  // at least float32's
    for (const auto& d : x->dim()) {
      if (!d.has_dim_value() || d.dim_value() <= 0) continue;
      const auto next = checked_mul(bytes, d.dim_value());
      if (!next || *next >= kMaxBufferBytes)
        fail_shape_inference("input 0 has ", kMaxBufferBytes, " bytes or more (padfold's limit)");
      bytes = *next;
    }
    const onnx::TensorShapeProto* w = shape_of(ctx, weights);
    if (w && w->dim_size() != x->dim_size())
      fail_shape_inference("the weights have rank ", w->dim_size(), "; expected input 0's, ",
                           x->dim_size());
  }

  // The ops guarded, with the index of their weights input (-1: none).
  inline static const std::map<std::string, int> kGuarded = {
      {"Conv", 1},     {"ConvTranspose", 1}, {"ConvInteger", 1}, {"QLinearConv", 3},
      {"MaxPool", -1}, {"AveragePool", -1},  {"LpPool", -1}};
  mutable std::mutex mutex_;
  mutable std::map<const onnx::OpSchema*, std::unique_ptr<onnx::OpSchema>> cache_;
};

void add_owned_constant(std::deque<onnx::TensorProto>& owned, const onnx::AttributeProto& a) {
  onnx::TensorProto t;
  if (a.name() == "value_float") {
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.add_float_data(a.f());
  } else if (a.name() == "value_floats") {
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.add_dims(a.floats_size());
    for (float f : a.floats()) t.add_float_data(f);
  } else if (a.name() == "value_int") {
    t.set_data_type(onnx::TensorProto::INT64);
    t.add_int64_data(a.i());
  } else {
    t.set_data_type(onnx::TensorProto::INT64);
    t.add_dims(a.ints_size());
    for (int64_t i : a.ints()) t.add_int64_data(i);
  }
  owned.push_back(std::move(t));
}

// A file a child writes and its parent reads, in a private directory removed with it.
class PrivateFile {
 public:
  PrivateFile() {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/padfold-onnx-XXXXXX";
    if (!mkdtemp(dir.data()))
      fail("cannot create a temporary directory in " + dir.substr(0, dir.rfind('/')) + ": " +
           std::strerror(errno));
    dir_ = dir;
  }
  ~PrivateFile() {
    std::remove(path().c_str());
    rmdir(dir_.c_str());
  }
  PrivateFile(const PrivateFile&) = delete;
  PrivateFile& operator=(const PrivateFile&) = delete;
  std::string path() const { return dir_ + "/shapes.pb"; }

 private:
  std::string dir_;
};

// libonnx's shape inference is no more hardened beyond the guards above than fuzz_onnx found it (a
// Constant's raw_data of the wrong length overflowed the heap): it runs in a child process, so that
// a crash or a hang in it is an ImportError, and sends back only what it adds, the graph's
// value_info and output types.
void infer_shapes(onnx::ModelProto& model, const std::string& label) {
  const PrivateFile file;
  const InjectedFaults faults = injected_faults();
  WorkerJob job{"ONNX shape inference", [&] {
                  if (const auto f = faults.find(kShapeInferenceFault); f != faults.end())
                    raise_fault(f->second);
                  onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/0,
                                                      /*data_prop=*/true);
                  static const GuardedSchemas schemas;
                  onnx::shape_inference::InferShapes(model, &schemas, options);
                  onnx::GraphProto shapes;
                  *shapes.mutable_value_info() = model.graph().value_info();
                  *shapes.mutable_output() = model.graph().output();
                  std::ofstream out(file.path(), std::ios::binary);
                  if (!shapes.SerializeToOstream(&out) || !out.flush())
                    throw std::runtime_error("cannot write " + file.path());
                }};
  WorkerOptions options;
  options.timeout_s = kShapeInferenceSeconds;
  const WorkerResult r = run_workers({job}, options).at(0);
  if (!r.ok) fail(label + ": ONNX shape inference failed: " + r.error);
  std::ifstream in(file.path(), std::ios::binary);
  onnx::GraphProto shapes;
  if (!shapes.ParseFromIstream(&in))
    fail(label + ": ONNX shape inference failed: its result did not read back");
  onnx::GraphProto& g = *model.mutable_graph();
  *g.mutable_value_info() = shapes.value_info();
  *g.mutable_output() = shapes.output();
}

}  // namespace

bool TensorType::is_static() const {
  return has_shape && std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d > 0; });
}

InputSize parse_input_size(const std::string& text) {
  const std::string expected =
      "expected NAME=SIZES with positive sizes separated by 'x' or ',', e.g. x=1x3x224x224";
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    fail("--input '" + text + "': " + expected);
  InputSize r;
  r.name = text.substr(0, eq);
  const std::string sizes = text.substr(eq + 1);
  size_t start = 0;
  while (start <= sizes.size()) {
    size_t end = sizes.find_first_of("x,", start);
    if (end == std::string::npos) end = sizes.size();
    const std::string part = sizes.substr(start, end - start);
    if (part.empty() || part.size() > 10 ||
        !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }))
      fail("--input '" + text + "': size '" + part + "' is not a positive integer; " + expected);
    const int64_t v = std::stoll(part);
    if (v <= 0 || v > kMaxSize)
      fail("--input '" + text + "': size " + part + " is out of range; expected 1 to " +
           std::to_string(kMaxSize));
    r.shape.push_back(v);
    start = end + 1;
  }
  return r;
}

namespace {

void clear_inferred(onnx::GraphProto& g) {
  g.clear_value_info();
  for (auto& out : *g.mutable_output())
    if (out.type().has_tensor_type()) out.mutable_type()->mutable_tensor_type()->clear_shape();
}

// libonnx's shape inference gives a ceil_mode pool a last window that starts in the end padding,
// which ONNX Runtime (and padfold's padding module) drop, and infers every tensor after it from
// that size. Where floor mode gives the pool its right size on every axis, this clears the pool's
// ceil_mode in `m`, a copy only shape inference reads; returns whether any pool changed.
bool clear_stale_ceil_modes(onnx::ModelProto& m) {
  std::map<std::string, TensorType> types;
  for (const auto* list : {&m.graph().input(), &m.graph().value_info(), &m.graph().output()})
    for (const auto& v : *list) types[v.name()] = type_of(v.type());
  bool changed = false;
  for (onnx::NodeProto& n : *m.mutable_graph()->mutable_node()) {
    if ((n.op_type() != "MaxPool" && n.op_type() != "AveragePool") ||
        !(n.domain().empty() || n.domain() == "ai.onnx") || n.input_size() < 1 ||
        n.output_size() < 1)
      continue;
    const auto in = types.find(n.input(0));
    const auto out = types.find(n.output(0));
    if (in == types.end() || out == types.end() || !in->second.is_static() ||
        !out->second.is_static() || in->second.shape.size() < 3 ||
        out->second.shape.size() != in->second.shape.size())
      continue;
    try {
      const NodeAttributes a(n);
      const std::string auto_pad = a.get_string("auto_pad", "NOTSET");
      if (a.get_int("ceil_mode", 0) == 0 || (!auto_pad.empty() && auto_pad != "NOTSET")) continue;
      const size_t dims = in->second.shape.size() - 2;
      const std::vector<int64_t> k = a.get_ints("kernel_shape");
      const std::vector<int64_t> st = a.get_ints("strides", std::vector<int64_t>(dims, 1));
      const std::vector<int64_t> d = a.get_ints("dilations", std::vector<int64_t>(dims, 1));
      const std::vector<int64_t> pads = a.get_ints("pads", std::vector<int64_t>(2 * dims, 0));
      if (k.size() != dims || st.size() != dims || d.size() != dims || pads.size() != 2 * dims)
        continue;
      std::vector<AxisParams> axes;
      for (size_t i = 0; i < dims; ++i)
        axes.push_back({in->second.shape[i + 2], k[i], st[i], d[i]});
      const PaddingSpec spec = explicit_padding(pads, static_cast<int>(dims));
      const Resolved ceil = resolve_forward(spec, axes, true);
      const Resolved floor = resolve_forward(spec, axes, false);
      bool stale = false, floor_is_right = true;
      for (size_t i = 0; i < dims; ++i) {
        stale = stale || out->second.shape[i + 2] != ceil.axes[i].output;
        floor_is_right = floor_is_right && floor.axes[i].output == ceil.axes[i].output;
      }
      if (!stale || !floor_is_right) continue;
      for (auto& attr : *n.mutable_attribute())
        if (attr.name() == "ceil_mode") attr.set_i(0);
      changed = true;
    } catch (const std::exception&) {  // attributes the importer refuses later, with their node
      continue;
    }
  }
  return changed;
}

// `model` after shape inference. Shapes recorded by the exporter may hold dims that the --input
// sizes change: they are inferred afresh, with the constant subgraphs folded (the shapes of the
// model as it is) and, where needed, again with clear_stale_ceil_modes' copy.
onnx::ModelProto inferred_copy(const onnx::ModelProto& model, const std::string& label) {
  onnx::ModelProto inferred = model;
  onnx::GraphProto& ig = *inferred.mutable_graph();
  clear_inferred(ig);
  onnx::ModelProto shapes = inferred;
  // Trailing empty inputs are absent optional inputs: dropped, as libonnx 1.12's Resize inference
  // takes an empty sizes after scales for given and infers no output shape.
  for (onnx::NodeProto& n : *shapes.mutable_graph()->mutable_node())
    while (n.input_size() > 0 && n.input(n.input_size() - 1).empty())
      n.mutable_input()->RemoveLast();
  replace_folded_nodes(shapes);
  infer_shapes(shapes, label);
  // Shapes inferred for the fixed input size fold Shape nodes, and what computes on them (a
  // Resize's sizes): their readers' shapes are then inferred in turn.
  for (int round = 0; round < 4 && replace_folded_nodes(shapes) > 0; ++round)
    infer_shapes(shapes, label);
  for (int round = 0; round < 8 && clear_stale_ceil_modes(shapes); ++round) {
    clear_inferred(*shapes.mutable_graph());
    infer_shapes(shapes, label);
  }
  *ig.mutable_value_info() = shapes.graph().value_info();
  *ig.mutable_output() = shapes.graph().output();
  return inferred;
}

}  // namespace

PreparedModel prepare_model(onnx::ModelProto model, const std::vector<InputSize>& sizes,
                            const std::string& label, const std::set<std::string>& kept_regions) {
  onnx::GraphProto& g = *model.mutable_graph();
  std::set<std::string> initializers;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  std::vector<std::string> names;  // graph inputs without an initializer
  for (const auto& in : g.input())
    if (!initializers.count(in.name())) names.push_back("'" + in.name() + "'");

  std::vector<std::string> problems;
  std::set<std::string> given;
  for (const InputSize& s : sizes) {
    if (!given.insert(s.name).second) {
      problems.push_back("--input '" + s.name + "' is given twice");
      continue;
    }
    onnx::ValueInfoProto* v = nullptr;
    for (auto& in : *g.mutable_input())
      if (in.name() == s.name && !initializers.count(in.name())) v = &in;
    if (!v) {
      problems.push_back("--input '" + s.name + "' names no graph input (the graph inputs are " +
                         (names.empty() ? std::string("none") : join(names, ", ")) + ")");
      continue;
    }
    auto* tt = v->mutable_type()->mutable_tensor_type();
    if (tt->has_shape()) {
      const auto& dims = tt->shape().dim();
      if (static_cast<size_t>(dims.size()) != s.shape.size()) {
        problems.push_back("--input '" + s.name + "' gives " + std::to_string(s.shape.size()) +
                           " sizes; graph input '" + s.name + "' has rank " +
                           std::to_string(dims.size()));
        continue;
      }
      bool ok = true;
      for (int i = 0; i < dims.size(); ++i)
        if (dims[i].has_dim_value() && dims[i].dim_value() > 0 &&
            dims[i].dim_value() != s.shape[static_cast<size_t>(i)]) {
          problems.push_back("--input '" + s.name + "': dim " + std::to_string(i) + " is " +
                             std::to_string(s.shape[static_cast<size_t>(i)]) +
                             " but the model fixes it to " + std::to_string(dims[i].dim_value()));
          ok = false;
        }
      if (!ok) continue;
    }
    auto* shape = tt->mutable_shape();
    shape->clear_dim();
    for (int64_t d : s.shape) shape->add_dim()->set_dim_value(d);
  }
  for (const auto& in : g.input()) {
    if (initializers.count(in.name()) || given.count(in.name())) continue;
    const std::string dyn = dynamic_text(in);
    if (!dyn.empty())
      problems.push_back("graph input '" + in.name() + "' " + dyn +
                         ": give its size with --input " + in.name() + "=...");
  }
  if (!problems.empty())
    fail(label + ": " + join(problems, "; ") +
         (problems.size() > 1 ? " (" + std::to_string(problems.size()) + " problems)" : ""));

  PreparedModel p;
  p.label = label;
  p.model = std::move(model);
  p.inferred = inferred_copy(p.model, label);
  // The rewrites that need no shapes share one inference; the regions need it and get their own.
  const int moved = hoist_layout_transposes(p.model, p.inferred);
  if (moved + fold_decomposed_activations(p.model, label) > 0)
    p.inferred = inferred_copy(p.model, label);
  if (fold_tf_forms(p.model, p.inferred, label) > 0) p.inferred = inferred_copy(p.model, label);
  if (fold_last_axis_regions(p.model, p.inferred, label, kept_regions, p.relaid) > 0)
    p.inferred = inferred_copy(p.model, label);
  if (split_channels_to_slices(p.model, p.inferred, label) > 0)
    p.inferred = inferred_copy(p.model, label);
  return p;
}

GraphIndex::GraphIndex(const onnx::ModelProto& model, const std::string& label)
    : graph_(&model.graph()), label_(label), opset_(default_opset(model)) {
  const onnx::GraphProto& g = *graph_;
  for (const auto& t : g.initializer()) {
    constants_[t.name()] = &t;
    TensorType tt;
    tt.elem_type = t.data_type();
    tt.has_shape = true;
    tt.shape.assign(t.dims().begin(), t.dims().end());
    types_[t.name()] = tt;
  }
  for (const auto& in : g.input()) {
    if (!constants_.count(in.name())) {
      if (inputs_.insert(in.name()).second) input_order_.push_back(in.name());
      types_[in.name()] = type_of(in.type());
    }
  }
  for (const auto& v : g.value_info()) types_.emplace(v.name(), type_of(v.type()));
  for (const auto& v : g.output()) {
    outputs_.insert(v.name());
    if (v.type().has_tensor_type()) types_.emplace(v.name(), type_of(v.type()));
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    for (const std::string& out : n.output()) {
      if (out.empty()) continue;
      if (const auto it = producer_.find(out); it != producer_.end())
        fail(label + ": " + node_label(n, i) + ": output '" + out + "' is also produced by " +
             node_label(g.node(it->second), it->second) +
             "; expected every tensor to have one producer");
      if (constants_.count(out) || inputs_.count(out))
        fail(label + ": " + node_label(n, i) + ": output '" + out +
             "' is also a graph input or initializer; expected a new tensor name");
      producer_[out] = i;
    }
    const bool constant_op =
        n.op_type() == "Constant" && (n.domain().empty() || n.domain() == "ai.onnx");
    if (constant_op && n.input_size() > 0)
      fail(label + ": " + node_label(n, i) + ": has " + std::to_string(n.input_size()) +
           " input(s); expected a Constant to have none");
    if (constant_op && n.output_size() == 1) {
      for (const auto& a : n.attribute()) {
        if (a.name() == "value" && a.has_t()) {
          constants_[n.output(0)] = &a.t();
        } else if (a.name() == "value_float" || a.name() == "value_floats" ||
                   a.name() == "value_int" || a.name() == "value_ints") {
          add_owned_constant(owned_, a);
          constants_[n.output(0)] = &owned_.back();
        }
      }
    }
    for (const std::string& in : n.input()) {
      if (in.empty()) continue;
      auto& c = consumers_[in];
      if (c.empty() || c.back() != i) c.push_back(i);
    }
  }
  // Every input of every node must exist somewhere, produced by an earlier node (ONNX keeps its
  // nodes in topological order; a cycle, even an Identity reading its own output, is refused).
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    for (int k = 0; k < n.input_size(); ++k) {
      const std::string& in = n.input(k);
      if (in.empty()) continue;
      if (const auto it = producer_.find(in); it != producer_.end()) {
        if (it->second < i) continue;
        fail(label + ": " + node_label(n, i) + ": input " + std::to_string(k) + " '" + in +
             "' is the output of " +
             (it->second == i
                  ? std::string("this node")
                  : node_label(g.node(it->second), it->second) + ", later in the graph") +
             "; expected the nodes in topological order (every input produced by an earlier "
             "node)");
      }
      if (constants_.count(in) || inputs_.count(in)) continue;
      fail(label + ": " + node_label(n, i) + ": input " + std::to_string(k) + " '" + in +
           "' is not a graph input, an initializer or the output of any node; expected every "
           "input to be one of these (a missing initializer?)");
    }
  }
  for (int k = 0; k < g.output_size(); ++k) {
    const std::string& out = g.output(k).name();
    if (!producer_.count(out) && !constants_.count(out) && !inputs_.count(out))
      fail(label + ": graph output " + std::to_string(k) + " '" + out +
           "' is not a graph input, an initializer or the output of any node; expected every "
           "graph output to be one of these");
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (n.op_type() == "Constant" || n.output_size() != 1 || outputs_.count(n.output(0))) continue;
    auto folded = fold_constant_node(
        n, [&](const std::string& t) { return constant(t); },
        [&](const std::string& t) -> std::optional<std::vector<int64_t>> {
          const auto ty = type(t);
          if (ty && ty->is_static()) return ty->shape;
          return std::nullopt;
        });
    if (!folded) continue;
    owned_.push_back(std::move(*folded));
    constants_[n.output(0)] = &owned_.back();
    folded_.insert(i);
  }
}

const onnx::TensorProto* GraphIndex::constant(const std::string& tensor) const {
  const auto it = constants_.find(tensor);
  return it == constants_.end() ? nullptr : it->second;
}

int GraphIndex::producer(const std::string& tensor) const {
  const auto it = producer_.find(tensor);
  return it == producer_.end() ? -1 : it->second;
}

const std::vector<int>& GraphIndex::consumers(const std::string& tensor) const {
  static const std::vector<int> kNone;
  const auto it = consumers_.find(tensor);
  return it == consumers_.end() ? kNone : it->second;
}

std::optional<TensorType> GraphIndex::type(const std::string& tensor) const {
  const auto it = types_.find(tensor);
  if (it == types_.end()) return std::nullopt;
  return it->second;
}

bool default_domain(const onnx::NodeProto& n) {
  return n.domain().empty() || n.domain() == "ai.onnx";
}

}  // namespace padfold::onnx_import
