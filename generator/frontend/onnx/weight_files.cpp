#include <type_traits>

#include "frontend/onnx/importer.h"

namespace padfold::onnx_import::detail {

void Importer::add_weight_files(const Draft& d, const std::string& name, Layer& l,
                                std::vector<WeightFile>& out) const {
  l.weights_file = "weights/" + name + "_weights.npy";
  if (l.quantized()) {  // int8 weights, int32 bias, as the initializers hold them
    WeightFile w = int_weight_file(l.weights_file, *d.weights, d.node, NpyDType::I8);
    if (!d.dropped_axes.empty()) w.shape = detail::weight_dims(d);
    if (d.dense) w.shape = l.weight_shape();  // B as [K, C] (transB 1): OIHW's order
    if (channels_last_) to_spatial_in_out(w, l);
    out.push_back(std::move(w));
    if (l.bias) {
      l.bias_file = "weights/" + name + "_bias.npy";
      out.push_back(int_weight_file(l.bias_file, *d.bias, d.node, NpyDType::I32));
    }
    return;
  }
  WeightFile w = d.affine_layer ? WeightFile{l.weights_file,
                                             l.weight_shape(),
                                             std::vector<float>(l.out_channels, 1.f),
                                             {},
                                             {}}
                                : weight_file(l.weights_file, *d.weights, d.node, 1);
  if (!d.dropped_axes.empty()) w.shape = detail::weight_dims(d);  // unit axes: the same data
  WeightFile b{"weights/" + name + "_bias.npy", {l.out_channels}, {}, {}, {}};
  if (d.bias) b = weight_file(b.path, *d.bias, d.node, 2);
  if (d.dense) {
    detail::dense_as_conv(*d.dense, d.flatten.transpose >= 0, d.layer, w.shape, w.data, b.data);
    b.shape = {l.out_channels};
  }
  const auto before = before_.find(d.node), after = after_.find(d.node);
  if (before != before_.end() || after != after_.end()) {
    detail::fold_into_conv(
        d.layer, before == before_.end() ? std::nullopt : std::optional(before->second),
        after == after_.end() ? std::nullopt : std::optional(after->second), w.data, b.data);
    l.bias = true;
  }
  if (channels_last_ && l.op != Op::ConvTranspose) to_spatial_in_out(w, l);
  out.push_back(std::move(w));
  if (l.bias) {
    l.bias_file = b.path;
    out.push_back(std::move(b));
  }
}

void Importer::to_spatial_in_out(WeightFile& w, Layer& l) {
  const size_t o = static_cast<size_t>(w.shape[0]), i = static_cast<size_t>(w.shape[1]);
  size_t taps = 1;
  for (size_t k = 2; k < w.shape.size(); ++k) taps *= static_cast<size_t>(w.shape[k]);
  const auto permuted = [&](const auto& values) {
    std::remove_const_t<std::remove_reference_t<decltype(values)>> data(values.size());
    for (size_t a = 0; a < o; ++a)
      for (size_t b = 0; b < i; ++b)
        for (size_t t = 0; t < taps; ++t)
          data[(t * i + b) * o + a] = values[(a * i + b) * taps + t];
    return data;
  };
  if (!w.data.empty()) w.data = permuted(w.data);
  if (!w.ints.empty()) w.ints = permuted(w.ints);
  std::vector<int64_t> shape(w.shape.begin() + 2, w.shape.end());
  shape.push_back(w.shape[1]);
  shape.push_back(w.shape[0]);
  w.shape = std::move(shape);
  l.weight_layout.order = spatial_letters(l.spatial_dims) + "IO";
}

WeightFile Importer::int_weight_file(const std::string& path, const onnx::TensorProto& t, int node,
                                     NpyDType dtype) const {
  const std::vector<int64_t> v =
      c_.at_node(node, [&] { return to_int64s(t, "'" + t.name() + "'"); });
  WeightFile w{path, {t.dims().begin(), t.dims().end()}, {}, dtype, {}};
  w.ints.assign(v.begin(), v.end());
  return w;
}

WeightFile Importer::weight_file(const std::string& path, const onnx::TensorProto& t, int node,
                                 int input) const {
  const FloatTensor f = c_.at_node(node, [&] {
    return to_float_tensor(
        t, "input " + std::to_string(input) + " '" + g_.node(node).input(input) + "'");
  });
  return {path, f.shape, f.data, NpyDType::F32, {}};
}

}  // namespace padfold::onnx_import::detail
