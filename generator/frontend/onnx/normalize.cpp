#include "frontend/onnx/normalize.h"

#include <fmt/format.h>

#include <algorithm>

#include "frontend/onnx/decomposed_activations.h"
#include "frontend/onnx/import_ops.h"
#include "padding/padding.h"

namespace padfold::onnx_import {
namespace {

using detail::Context;

const char* const kOps[] = {"Conv", "ConvTranspose", "MaxPool", "AveragePool"};

void remove_attribute(onnx::NodeProto& n, const std::string& name) {
  auto* attrs = n.mutable_attribute();
  for (int k = attrs->size() - 1; k >= 0; --k)
    if (attrs->Get(k).name() == name) attrs->DeleteSubrange(k, 1);
}

void set_ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  remove_attribute(n, name);
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void set_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
  remove_attribute(n, name);
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

std::vector<int64_t> outputs_of(const Resolved& r) {
  std::vector<int64_t> out;
  for (const AxisPads& p : r.axes) out.push_back(p.output);
  return out;
}

class Normalizer {
 public:
  explicit Normalizer(const PreparedModel& p) : p_(p), g_(p.inferred, p.label), c_(g_) {}

  NormalizeResult run() {
    r_.model = p_.model;
    for (int i = 0; i < g_.num_nodes(); ++i) {
      const onnx::NodeProto& n = g_.node(i);
      if ((!n.domain().empty() && n.domain() != "ai.onnx") ||
          std::find(std::begin(kOps), std::end(kOps), n.op_type()) == std::end(kOps))
        continue;
      rewrite(i, *r_.model.mutable_graph()->mutable_node(i));
    }
    expand_gelu_below_opset20(r_.model);  // the import's own Gelu, which ONNX lacks before 20
    return std::move(r_);
  }

 private:
  void rewrite(int i, onnx::NodeProto& out) {
    const onnx::NodeProto& n = g_.node(i);
    const NodeAttributes a = c_.at_node(i, [&] { return NodeAttributes(n); });
    const std::string ap = c_.at_node(i, [&] { return a.get_string("auto_pad", "NOTSET"); });
    if (ap.empty() || ap == "NOTSET") return;
    const auto x = n.input_size() > 0 ? g_.type(n.input(0)) : std::nullopt;
    if (!x || !x->is_static() || x->shape.size() < 3)
      c_.fail(i, "cannot rewrite auto_pad " + ap +
                     ": the shape of input 0 is unknown after ONNX "
                     "shape inference");
    const int dims = static_cast<int>(x->shape.size()) - 2;
    const PaddingSpec spec = detail::read_padding(c_, i, a, dims);
    const bool transposed = n.op_type() == "ConvTranspose";
    const bool conv = transposed || n.op_type() == "Conv";
    std::vector<int64_t> kernel;
    if (conv && !a.has("kernel_shape")) {
      const auto w = n.input_size() > 1 ? g_.type(n.input(1)) : std::nullopt;
      if (!w || !w->is_static() || w->shape.size() != x->shape.size())
        c_.fail(i, "cannot rewrite auto_pad " + ap + ": the weights' shape is unknown");
      kernel.assign(w->shape.begin() + 2, w->shape.end());
    } else {
      kernel = detail::per_dim(c_, i, a, "kernel_shape", dims, 1, 1);
    }
    const auto strides = detail::per_dim(c_, i, a, "strides", dims, 1, 1);
    const auto dilations = detail::per_dim(c_, i, a, "dilations", dims, 1, 1);
    std::vector<AxisParams> axes;
    for (int k = 0; k < dims; ++k)
      axes.push_back({x->shape[static_cast<size_t>(k) + 2], kernel[static_cast<size_t>(k)],
                      strides[static_cast<size_t>(k)], dilations[static_cast<size_t>(k)]});
    try {
      std::vector<int64_t> pads(2 * static_cast<size_t>(dims), 0);
      if (transposed) {
        rewrite_transposed(i, a, spec, axes, pads, out);
      } else {
        bool ceil_mode = c_.at_node(i, [&] { return a.get_int("ceil_mode", 0); }) != 0;
        const Resolved r = resolve_forward(spec, axes, ceil_mode);
        for (int k = 0; k < dims; ++k) {
          pads[static_cast<size_t>(k)] = r.axes[static_cast<size_t>(k)].before;
          pads[static_cast<size_t>(dims + k)] = r.axes[static_cast<size_t>(k)].after;
        }
        const PaddingSpec ex = explicit_padding(pads, dims);
        if (outputs_of(resolve_forward(ex, axes, ceil_mode)) != outputs_of(r)) {
          // ceil_mode with explicit pads can add a window SAME does not have.
          if (!ceil_mode || outputs_of(resolve_forward(ex, axes, false)) != outputs_of(r))
            c_.fail(i, "cannot rewrite auto_pad " + ap + " to pads " + shape_text(pads) +
                           ": the output size would change");
          set_int(out, "ceil_mode", 0);
          r_.changes.push_back(node_label(n, i) + ": ceil_mode 1 -> 0 (same output size)");
        }
      }
      remove_attribute(out, "auto_pad");
      set_ints(out, "pads", pads);
      r_.changes.push_back(node_label(n, i) + ": auto_pad " + ap + " -> pads " + shape_text(pads));
    } catch (const PaddingError& e) {
      c_.fail(i, "cannot rewrite auto_pad " + ap + ": " + e.what());
    }
  }

  void rewrite_transposed(int i, const NodeAttributes& a, const PaddingSpec& spec,
                          const std::vector<AxisParams>& axes, std::vector<int64_t>& pads,
                          onnx::NodeProto& out) {
    const onnx::NodeProto& n = g_.node(i);
    const int dims = static_cast<int>(axes.size());
    std::vector<int64_t> op = detail::per_dim(c_, i, a, "output_padding", dims, 0, 0);
    std::optional<std::vector<int64_t>> os =
        c_.at_node(i, [&] { return a.find_ints("output_shape"); });
    if (os && os->size() == static_cast<size_t>(dims) + 2) os->erase(os->begin(), os->begin() + 2);
    const Resolved r = resolve_transposed(spec, axes, op, os);
    for (int k = 0; k < dims; ++k) {
      const AxisPads& p = r.axes[static_cast<size_t>(k)];
      pads[static_cast<size_t>(k)] = p.before;
      if (p.after < 0) {
        // The output reaches past the full transposed output: ONNX pads are >= 0, output_padding
        // extends the end.
        op[static_cast<size_t>(k)] += -p.after;
      } else {
        pads[static_cast<size_t>(dims + k)] = p.after;
      }
    }
    const Resolved check = resolve_transposed(explicit_padding(pads, dims), axes, op);
    if (outputs_of(check) != outputs_of(r))
      c_.fail(i, "cannot rewrite auto_pad to pads " + shape_text(pads) + " and output_padding " +
                     shape_text(op) + ": the output size would change");
    if (os) remove_attribute(out, "output_shape");
    if (a.has("output_padding") || std::any_of(op.begin(), op.end(), [](int64_t v) { return v; }))
      set_ints(out, "output_padding", op);
    const bool same = spec.mode == PadMode::SameUpper || spec.mode == PadMode::SameLower;
    for (int k = 0; k < dims; ++k)
      if (same && !os && r.axes[static_cast<size_t>(k)].after < 0) {
        r_.warnings.push_back(fmt::format(
            "{}: ConvTranspose auto_pad {}: its kernel spans less than the stride on spatial axis "
            "{}; the rewrite gives the ONNX spec's output of input x stride, where ONNX Runtime "
            "ran the original to (input - 1) x stride + the span",
            node_label(n, i), to_string(spec.mode), k));
        break;
      }
    if (same)
      r_.warnings.push_back(
          node_label(n, i) + ": ConvTranspose auto_pad " + to_string(spec.mode) +
          " rewritten per the ONNX spec (SAME_UPPER crops the odd pixel at the end); ONNX Runtime "
          "before 1.13 swapped SAME_UPPER and SAME_LOWER for ConvTranspose, so the original model "
          "ran differently there");
  }

  const PreparedModel& p_;
  GraphIndex g_;
  Context c_;
  NormalizeResult r_;
};

}  // namespace

NormalizeResult normalize_auto_pad(const PreparedModel& prepared) {
  return Normalizer(prepared).run();
}

}  // namespace padfold::onnx_import
