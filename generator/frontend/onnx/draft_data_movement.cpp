// Drafts of the ops that move data: Resize and Upsample, channel Slices, crops, channel shuffles.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/limits.h"
#include "base/text.h"
#include "frontend/onnx/import_ops.h"

namespace padfold::onnx_import::detail {

// Resize (opset 10: X, scales; 11 on: X, roi, scales, sizes) and Upsample (X, scales) of the
// spatial axes: scales or sizes from constants, or the output size from shape inference where
// sizes are computed (torch's F.interpolate(size=...) writes Shape -> Slice -> Concat, constant
// once the input size is fixed).
std::variant<Draft, Left> draft_resize(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  if (input_of(n, 0).empty()) c.fail(i, "expected input 'X'");
  Draft d;
  d.node = i;
  const std::string x = c.canon(n.input(0));
  TensorType xt;
  if (std::string why = check_float_input(c, i, x, xt); !why.empty()) return Left{why};
  const size_t rank = xt.shape.size();
  if (rank < 3 || rank > 5)
    return Left{"input 'X' has rank " + std::to_string(rank) +
                "; padfold resizes N, C and 1-3 spatial axes"};
  const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
  const bool upsample = n.op_type() == "Upsample";
  const int64_t opset = c.graph().opset();
  const bool v10 = upsample || opset < 11;  // scales only, asymmetric coordinates
  ResizeSpec r;
  try {
    r.mode = parse_resize_mode(c.at_node(i, [&] { return a.get_string("mode", "nearest"); }));
    r.coordinates =
        v10 ? ResizeCoordinates::Asymmetric : parse_resize_coordinates(c.at_node(i, [&] {
          return a.get_string("coordinate_transformation_mode", "half_pixel");
        }));
    if (!v10)
      r.rounding = parse_nearest_rounding(
          c.at_node(i, [&] { return a.get_string("nearest_mode", "round_prefer_floor"); }));
  } catch (const std::invalid_argument& e) {
    return Left{e.what()};
  }
  if (c.at_node(i, [&] { return a.get_int("antialias", 0); }) != 0)
    return Left{"antialias is set; padfold resizes without an antialiasing filter"};
  if (a.find_ints("axes"))
    return Left{"axes is given; padfold reads scales or sizes for every axis"};
  if (c.at_node(i, [&] { return a.get_string("keep_aspect_ratio_policy", "stretch"); }) !=
      "stretch")
    return Left{"keep_aspect_ratio_policy is not 'stretch'"};
  const std::string scales_name = input_of(n, v10 ? 1 : 2), sizes_name = v10 ? "" : input_of(n, 3);
  std::vector<float> scales;
  std::vector<int64_t> sizes;
  if (!scales_name.empty()) {
    const onnx::TensorProto* t = c.constant(scales_name);
    if (!t) return Left{"its scales '" + scales_name + "' are computed, not a constant"};
    scales = c.at_node(i, [&] { return to_float_tensor(*t, "scales").data; });
  }
  if (scales.empty() && !sizes_name.empty()) {
    if (const onnx::TensorProto* t = c.constant(sizes_name)) {
      sizes = c.at_node(i, [&] { return to_int64s(*t, "sizes"); });
    } else if (const auto out = onnx_shape(c, n.output(0)); out && out->size() == rank) {
      sizes = *out;  // shape inference's, for this input size
    } else {
      return Left{"its sizes '" + sizes_name +
                  "' are computed and ONNX shape inference gives no static output shape"};
    }
  }
  if (scales.empty() && sizes.empty())
    c.fail(i, "expected scales or sizes (one of them non-empty)");
  const size_t given = scales.empty() ? sizes.size() : scales.size();
  if (given != rank)
    c.fail(i, std::string(scales.empty() ? "sizes" : "scales") + " has " + std::to_string(given) +
                  " values; expected " + std::to_string(rank) + " (one per axis of X " +
                  shape_text(xt.shape, true) + ")");
  for (size_t k = 0; k < 2; ++k)
    if (scales.empty() ? sizes[k] != xt.shape[k] : scales[k] != 1.f)
      return Left{std::string(scales.empty() ? "sizes" : "scales") + " change axis " +
                  std::to_string(k) + " (" + (k == 0 ? "the batch" : "the channels") +
                  "); padfold resizes the spatial axes"};
  if (scales.empty())
    r.output.assign(sizes.begin() + 2, sizes.end());
  else
    r.scales.assign(scales.begin() + 2, scales.end());
  if (r.coordinates == ResizeCoordinates::TfCropAndResize) {
    // roi holds every axis's start, then every axis's end; only the spatial axes move.
    if (const std::string roi_name = input_of(n, 1); !roi_name.empty()) {
      const onnx::TensorProto* t = c.constant(roi_name);
      if (!t) return Left{"its roi '" + roi_name + "' is computed, not a constant"};
      const std::vector<float> roi = c.at_node(i, [&] { return to_float_tensor(*t, "roi").data; });
      if (roi.size() != 2 * rank)
        c.fail(i, "roi has " + std::to_string(roi.size()) + " values; expected " +
                      std::to_string(2 * rank) + " (every axis's start, then every axis's end)");
      for (size_t k = 2; k < rank; ++k) r.roi.emplace_back(roi[k], roi[rank + k]);
    }
    r.extrapolation_value = c.at_node(i, [&] { return a.get_float("extrapolation_value", 0.f); });
  }
  if (v10 && r.mode == ResizeMode::Nearest) {
    // Opset 10's nearest rounds down when upsampling and up when downsampling, per axis.
    const bool down = std::any_of(r.scales.begin(), r.scales.end(), [](float s) { return s < 1; });
    const bool up = std::any_of(r.scales.begin(), r.scales.end(), [](float s) { return s > 1; });
    if (down && up) return Left{"nearest at opset 10 upsamples one axis and downsamples another"};
    r.rounding = down ? NearestRounding::Ceil : NearestRounding::Floor;
  }
  Layer& l = d.layer;
  l.op = Op::Resize;
  l.op_name = "resize";
  l.spatial_dims = static_cast<int>(rank) - 2;
  l.layout = layout_for(l.spatial_dims);
  l.resize = r;
  l.inputs = {x};
  d.output = n.output(0);
  return d;
}

namespace {

// The indices ONNX's Slice takes along an axis of `dim` elements: start and end counted from the
// end where negative, then clamped ([0, dim] for a positive step, [-1, dim - 1] for a negative).
std::vector<int64_t> slice_indices(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  std::vector<int64_t> out;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    for (int64_t k = start; k < end; k += step) out.push_back(k);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    for (int64_t k = start; k > end; k += step) out.push_back(k);
  }
  return out;
}

// A Slice along the channels (torch's chunk and split, a Split's part): the gather of its
// channels. Every other axis must be kept whole.
struct SliceKept {
  std::string input;
  TensorType type;
  std::vector<std::vector<int64_t>> kept;  // per axis of the input

  bool keeps_whole(size_t axis) const {
    const std::vector<int64_t>& idx = kept[axis];
    return static_cast<int64_t>(idx.size()) == type.shape[axis] &&
           (idx.empty() || idx.front() == 0) && std::is_sorted(idx.begin(), idx.end());
  }
};

// The indices Slice node `i` keeps of each axis of its input (of rank 3 to 5), in order.
std::variant<SliceKept, Left> slice_kept(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  if (input_of(n, 0).empty()) c.fail(i, "expected input 'data'");
  SliceKept r;
  r.input = c.canon(n.input(0));
  TensorType& xt = r.type;
  if (std::string why = check_float_input(c, i, r.input, xt); !why.empty()) return Left{why};
  const int64_t rank = static_cast<int64_t>(xt.shape.size());
  if (rank < 3 || rank > 5)
    return Left{"input 'data' has rank " + std::to_string(rank) +
                "; padfold slices tensors of N, C and 1-3 spatial axes"};
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.graph().opset() < 10) {
    const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
    starts = c.at_node(i, [&] { return a.get_ints("starts"); });
    ends = c.at_node(i, [&] { return a.get_ints("ends"); });
    axes = c.at_node(i, [&] { return a.get_ints("axes"); });
  } else {
    const char* const names[] = {"", "starts", "ends", "axes", "steps"};
    std::vector<int64_t>* values[] = {nullptr, &starts, &ends, &axes, &steps};
    for (int k = 1; k <= 4; ++k) {
      const std::string t = input_of(n, k);
      if (t.empty()) continue;
      const onnx::TensorProto* v = c.constant(t);
      if (!v)
        return Left{std::string("its ") + names[k] + " '" + t + "' are computed, not constants"};
      *values[k] = c.at_node(i, [&] { return to_int64s(*v, names[k]); });
    }
  }
  if (axes.empty())
    for (int64_t k = 0; k < static_cast<int64_t>(starts.size()); ++k) axes.push_back(k);
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail(i, fmt::format("starts, ends, axes and steps have {}, {}, {} and {} values; expected "
                          "one each per sliced axis",
                          starts.size(), ends.size(), axes.size(), steps.size()));
  std::vector<std::vector<int64_t>>& kept = r.kept;
  kept.resize(static_cast<size_t>(rank));
  for (int64_t k = 0; k < rank; ++k)
    for (int64_t e = 0; e < xt.shape[static_cast<size_t>(k)]; ++e)
      kept[static_cast<size_t>(k)].push_back(e);
  std::set<int64_t> seen;
  for (size_t s = 0; s < starts.size(); ++s) {
    int64_t axis = axes[s] < 0 ? axes[s] + rank : axes[s];
    if (axis < 0 || axis >= rank || !seen.insert(axis).second)
      c.fail(i, fmt::format("axes {} names axis {} of a rank-{} input twice or not at all",
                            shape_text(axes), axes[s], rank));
    if (steps[s] == 0) c.fail(i, "a step of 0; expected steps other than 0");
    kept[static_cast<size_t>(axis)] =
        slice_indices(xt.shape[static_cast<size_t>(axis)], starts[s], ends[s], steps[s]);
  }
  return r;
}

}  // namespace

std::variant<Draft, Left> draft_slice(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  auto sliced = slice_kept(c, i);
  if (auto* left = std::get_if<Left>(&sliced)) return *left;
  const SliceKept& sk = std::get<SliceKept>(sliced);
  const std::vector<std::vector<int64_t>>& kept = sk.kept;
  const TensorType& xt = sk.type;
  const int64_t rank = static_cast<int64_t>(xt.shape.size());
  const std::string& x = sk.input;
  for (int64_t k = 0; k < rank; ++k) {
    if (k == 1) continue;
    if (!sk.keeps_whole(static_cast<size_t>(k)))
      return Left{"it slices axis " + std::to_string(k) + " (" +
                  (k == 0 ? std::string("the batch")
                          : std::string("a spatial axis: a crop, which folds only into the convs "
                                        "and pools reading it")) +
                  "); padfold slices the channels (axis 1)"};
  }
  if (kept[1].empty()) return Left{"it takes no channels (an empty tensor)"};
  Draft d;
  d.node = i;
  Layer& l = d.layer;
  l.op = Op::GatherChannels;
  l.op_name = "gather_channels";
  l.spatial_dims = static_cast<int>(rank) - 2;
  l.layout = layout_for(l.spatial_dims);
  l.channels = kept[1];
  l.inputs = {x};
  d.output = n.output(0);
  return d;
}

std::variant<PadInfo, Left> crop_info(const Context& c, int i) {
  auto sliced = slice_kept(c, i);
  if (auto* left = std::get_if<Left>(&sliced)) return *left;
  const SliceKept& sk = std::get<SliceKept>(sliced);
  const std::vector<int64_t>& shape = sk.type.shape;
  bool crops = false;
  for (size_t k = 2; k < shape.size(); ++k) crops = crops || !sk.keeps_whole(k);
  if (!crops) return Left{""};  // no crop: the drafter's reason stands
  for (size_t k = 0; k < 2; ++k)
    if (!sk.keeps_whole(k))
      return Left{"it slices axis " + std::to_string(k) + " (" +
                  (k == 0 ? std::string("the batch") : std::string("the channels")) +
                  ") and a spatial axis; padfold slices the channels or crops the spatial axes"};
  PadInfo p;
  p.input = sk.input;
  p.mode = "crop";
  for (size_t k = 2; k < shape.size(); ++k) {
    const std::vector<int64_t>& idx = sk.kept[k];
    bool run = !idx.empty();
    for (size_t j = 1; run && j < idx.size(); ++j) run = idx[j] == idx[j - 1] + 1;
    if (!run)
      return Left{"it takes " +
                  (idx.empty() ? std::string("nothing") : "a strided or reversed run") +
                  " of spatial axis " + std::to_string(k) +
                  "; padfold folds crops (a run of step 1) into the conv or pool reading them"};
    p.pad.before.push_back(-idx.front());
    p.pad.after.push_back(idx.back() + 1 - shape[k]);
  }
  return p;
}

std::optional<Draft> draft_channel_permutation(const Context& c, int i) {
  const GraphIndex& g = c.graph();
  auto node_of = [&](const std::string& t, const char* op) {
    const int p = g.producer(c.canon(t));
    const bool ok = p >= 0 && default_domain(g.node(p)) && g.node(p).op_type() == op &&
                    g.node(p).input_size() >= 1 && g.node(p).output_size() == 1 &&
                    c.readers(g.node(p).output(0)).size() == 1 &&
                    !c.reaches_graph_output(g.node(p).output(0));
    return ok ? p : -1;
  };
  const onnx::NodeProto& last = g.node(i);
  if (last.op_type() != "Reshape" || last.input_size() < 1 || last.output_size() != 1) return {};
  const int t = node_of(last.input(0), "Transpose");
  const int first = t < 0 ? -1 : node_of(g.node(t).input(0), "Reshape");
  if (first < 0) return {};
  const std::string x = c.canon(g.node(first).input(0));
  TensorType xt;
  if (!check_data_input(c, x, xt).empty() || xt.elem_type != kFloat) return {};
  const auto mid = onnx_shape(c, g.node(first).output(0));
  const auto out = onnx_shape(c, last.output(0));
  const std::vector<int64_t>& in = xt.shape;
  const size_t rank = in.size();
  if (!mid || !out || *out != in || mid->size() <= rank) return {};
  const size_t factors = mid->size() - rank + 1;  // axes 1..factors of mid split the channels
  int64_t product = 1;
  for (size_t a = 1; a <= factors; ++a) product *= (*mid)[a];
  if ((*mid)[0] != in[0] || product != in[1] ||
      !std::equal(in.begin() + 2, in.end(), mid->begin() + static_cast<int64_t>(factors) + 1))
    return {};
  const auto perm = c.at_node(t, [&] { return NodeAttributes(g.node(t)).find_ints("perm"); });
  if (!perm || perm->size() != mid->size()) return {};
  std::vector<bool> used(factors + 1, false);
  for (size_t a = 0; a < perm->size(); ++a) {
    const int64_t p = (*perm)[a];
    const bool factor = a >= 1 && a <= factors;
    if (factor ? p < 1 || p > static_cast<int64_t>(factors) || used[static_cast<size_t>(p)]
               : p != static_cast<int64_t>(a))
      return {};
    if (factor) used[static_cast<size_t>(p)] = true;
  }
  // Output channel j, in the mixed radix of the permuted factors, is the input channel with the
  // same digits in the input's order of factors.
  Draft d;
  d.node = i;
  d.part_nodes = {first, t};
  Layer& l = d.layer;
  for (int64_t j = 0; j < in[1]; ++j) {
    std::vector<int64_t> digit(factors + 1);
    int64_t rest = j;
    for (size_t a = factors; a >= 1; --a) {
      const size_t from = static_cast<size_t>((*perm)[a]);
      digit[from] = rest % (*mid)[from];
      rest /= (*mid)[from];
    }
    int64_t channel = 0;
    for (size_t a = 1; a <= factors; ++a) channel = channel * (*mid)[a] + digit[a];
    l.channels.push_back(channel);
  }
  l.op = Op::GatherChannels;
  l.op_name = "gather_channels";
  l.spatial_dims = static_cast<int>(rank) - 2;
  l.layout = layout_for(l.spatial_dims);
  l.inputs = {x};
  d.output = last.output(0);
  if (!resolve_draft(c, d).empty()) return {};
  return d;
}

}  // namespace padfold::onnx_import::detail
