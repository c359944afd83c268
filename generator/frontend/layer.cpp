// Layer and layout helpers: shapes in layout order, weight shapes, names.
#include "frontend/layer.h"

#include <algorithm>
#include <cstring>

#include "frontend/names.h"
#include "frontend/op_table.h"

namespace padfold {
namespace {

const char* const kSpatialLetters = "DHW";

std::vector<int64_t> with_n_c(const TensorLayout& layout, int64_t batch, int64_t channels,
                              const std::vector<int64_t>& spatial) {
  std::vector<int64_t> s{batch};
  if (!layout.channels_last) s.push_back(channels);
  s.insert(s.end(), spatial.begin(), spatial.end());
  if (layout.channels_last) s.push_back(channels);
  return s;
}

std::vector<int64_t> with_n_c(const Layer& l, int64_t channels,
                              const std::vector<int64_t>& spatial) {
  return with_n_c(l.layout, l.batch, channels, spatial);
}

}  // namespace

std::string spatial_letters(int dims) {
  return std::string(kSpatialLetters + 3 - dims);
}

std::vector<int64_t> channels_last_perm(size_t rank) {
  std::vector<int64_t> p{0};
  for (size_t k = 2; k < rank; ++k) p.push_back(static_cast<int64_t>(k));
  p.push_back(1);
  return p;
}

std::vector<int64_t> channels_first_perm(size_t rank) {
  std::vector<int64_t> p{0, static_cast<int64_t>(rank) - 1};
  for (size_t k = 1; k + 1 < rank; ++k) p.push_back(static_cast<int64_t>(k));
  return p;
}

std::string implicit_input_name(const std::string& layer) {
  return layer + ".input";
}

std::string TensorLayout::name() const {
  const std::string s = spatial_letters(spatial_dims);
  return channels_last ? "N" + s + "C" : "NC" + s;
}

int WeightLayout::axis_of(char letter) const {
  if (letter >= 'S' && letter < 'S' + 3) {
    int k = letter - 'S';
    for (size_t i = 0; i < order.size(); ++i)
      if (std::strchr(kSpatialLetters, order[i]) && k-- == 0) return static_cast<int>(i);
    return -1;
  }
  const size_t pos = order.find(letter);
  return pos == std::string::npos ? -1 : static_cast<int>(pos);
}

std::vector<AxisParams> Layer::axes() const {
  std::vector<AxisParams> a;
  for (size_t i = 0; i < in_spatial.size(); ++i)
    a.push_back({in_spatial[i], kernel[i], stride[i], dilation[i]});
  return a;
}

std::vector<int64_t> Layer::input_shape(size_t i) const {
  if (op == Op::Transpose || relayout_input)
    return with_n_c(input_layout, batch, in_channels, in_spatial);
  if (op == Op::Mul && channel_broadcast && i == 1)
    return with_n_c(*this, in_channels, std::vector<int64_t>(in_spatial.size(), 1));
  return with_n_c(*this, i < input_channels.size() ? input_channels[i] : in_channels, in_spatial);
}

std::vector<int64_t> Layer::output_shape_full() const {
  return with_n_c(*this, out_channels, out_spatial);
}

std::vector<int64_t> Layer::weight_shape() const {
  if (!has_weights()) return {};
  const bool t = op == Op::ConvTranspose;
  std::vector<int64_t> shape;
  for (char ch : weight_layout.order) {
    if (ch == 'O')
      shape.push_back(t ? out_channels / groups : out_channels);
    else if (ch == 'I')
      shape.push_back(t ? in_channels : in_channels / groups);
    else
      shape.push_back(
          kernel[std::strchr(kSpatialLetters, ch) - kSpatialLetters - (3 - spatial_dims)]);
  }
  return shape;
}

double Layer::flops() const {
  return op_def(op).flops(*this);
}

bool Layer::has_weights() const {
  return op_def(op).has(kWeights);
}

bool Layer::is_join() const {
  return op_def(op).has(kJoin);
}

std::vector<int64_t> without_unit_dims(std::vector<int64_t> shape) {
  shape.erase(std::remove(shape.begin(), shape.end(), 1), shape.end());
  return shape;
}

std::vector<size_t> inserted_unit_axes(const std::vector<int64_t>& full,
                                       const std::vector<int64_t>& lower) {
  if (full.size() <= lower.size() || lower.size() < 2) return {};
  std::vector<size_t> axes;
  size_t j = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    if (j < lower.size() && full[i] == lower[j])
      ++j;
    else if (i >= 2 && full[i] == 1)
      axes.push_back(i);
    else
      return {};
  }
  return j == lower.size() && j >= 2 ? axes : std::vector<size_t>{};
}

std::optional<int64_t> buffer_bytes(const std::vector<int64_t>& shape, DType dtype) {
  const int64_t element = dtype == DType::F32 ? 4 : dtype == DType::F16 ? 2 : 1;
  const std::optional<int64_t> count = checked_product(shape);
  return count ? checked_mul(*count, element) : std::nullopt;
}

const Layer* Model::find_layer(const std::string& layer) const {
  for (const Layer& l : layers)
    if (l.name == layer) return &l;
  return nullptr;
}

const ModelInput* Model::find_input(const std::string& input) const {
  for (const ModelInput& i : inputs)
    if (i.name == input) return &i;
  return nullptr;
}

bool Layer::ignores_padding() const {
  if (op != Op::MaxPool && op != Op::AvgPool) return false;
  return pool_ignores_padding(op == Op::MaxPool ? PoolKind::Max : PoolKind::Avg, border,
                              count_include_pad);
}

std::string to_string(Op op) {
  return op_def(op).name;
}

std::string to_string(Activation act) {
  return name_of(kActivationNames, act);
}

std::string to_string(DType dtype) {
  return name_of(kDTypeNames, dtype);
}

std::string to_string(Requantize mode) {
  return name_of(kRequantizeNames, mode);
}

}  // namespace padfold
