#include "emit/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

#include "algorithm/algorithm.h"
#include "base/npy.h"
#include "base/npy_dtype.h"
#include "emit/dtypes.h"

namespace padfold {

std::vector<WeightFile> weight_files(const Model& model) {
  std::vector<WeightFile> files;
  for (const Layer& L : model.layers)
    for (const BufferInfo& b : buffer_infos(L)) {
      const std::string& path = b.role == PF_ROLE_WEIGHTS ? L.weights_file
                                : b.role == PF_ROLE_BIAS  ? L.bias_file
                                                          : std::string();
      if (!path.empty()) files.push_back({&L, b.name, b.role, path, b.shape, b.dtype, {}});
    }
  return files;
}

NpyData read_weight_file(const Model& model, const WeightFile& w) {
  const std::string where =
      fmt::format("{}: layer '{}': field 'weight_files.{}'", model.file, w.layer->name, w.buffer);
  const std::optional<NpyDType> want = npy_dtype_of(w.dtype);
  if (!want)
    throw std::runtime_error(
        fmt::format("{}: the layer's {} buffer is {}, which no .npy file holds", where, w.buffer,
                    name_of(kDtypeNames, w.dtype)));
  NpyData a;
  try {
    a = read_npy(w.path);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("{}: {}", where, e.what()));
  }
  if (a.dtype != *want)
    throw std::runtime_error(fmt::format(
        "{}: {} holds {} ('{}'); expected {} ('{}'), the dtype of the layer's {} buffer{}", where,
        w.path, npy_dtype_name(a.dtype), npy_descr(a.dtype), npy_dtype_name(*want),
        npy_descr(*want), w.buffer,
        w.layer->quantized()
            ? " (a quantized layer's weights are int8, its bias int32: docs/int8.md)"
            : ""));
  if (a.shape != w.shape)
    throw std::runtime_error(fmt::format(
        "{}: {} holds an array of shape ({}); expected ({}), the layer's {} buffer{}", where,
        w.path, fmt::join(a.shape, ", "), fmt::join(w.shape, ", "), w.buffer,
        w.role == PF_ROLE_WEIGHTS ? " in weight_layout " + w.layer->weight_layout.order : ""));
  return a;
}

std::vector<int64_t> WeightFile::stored_shape() const {
  return role == PF_ROLE_WEIGHTS && form.prepared() ? weight_form_shape(*layer, form) : shape;
}

std::vector<NpyData> stored_weights(const Model& model, const std::vector<WeightFile>& files) {
  std::vector<NpyData> values;
  for (const WeightFile& w : files) values.push_back(read_weight_file(model, w));
  // Biases first: folding one reads its layer's weights as the file holds them.
  for (size_t i = 0; i < files.size(); ++i) {
    const WeightFile& w = files[i];
    if (w.role != PF_ROLE_BIAS || !w.form.zero_point_in_bias) continue;
    const auto weights = std::find_if(files.begin(), files.end(), [&](const WeightFile& f) {
      return f.layer == w.layer && f.role == PF_ROLE_WEIGHTS;
    });
    if (weights == files.end())
      throw std::logic_error("layer '" + w.layer->name + "': a folded bias without a weights file");
    values[i] = prepare_bias(*w.layer, w.form,
                             values[static_cast<size_t>(weights - files.begin())], values[i]);
  }
  for (size_t i = 0; i < files.size(); ++i)
    if (files[i].role == PF_ROLE_WEIGHTS)
      values[i] = prepare_weights(*files[i].layer, files[i].form, values[i]);
  return values;
}

void check_weight_files(const Model& model) {
  for (const WeightFile& w : weight_files(model)) read_weight_file(model, w);
}

}  // namespace padfold
