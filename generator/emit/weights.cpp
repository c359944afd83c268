#include "emit/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

#include "algorithm/algorithm.h"
#include "base/npy.h"

namespace padfold {

std::vector<WeightFile> weight_files(const Model& model) {
  std::vector<WeightFile> files;
  for (const Layer& L : model.layers)
    for (const BufferInfo& b : buffer_infos(L)) {
      const std::string& path = b.role == PF_ROLE_WEIGHTS ? L.weights_file
                                : b.role == PF_ROLE_BIAS  ? L.bias_file
                                                          : std::string();
      if (!path.empty()) files.push_back({&L, b.name, b.role, path, b.shape});
    }
  return files;
}

std::vector<float> read_weight_file(const Model& model, const WeightFile& w) {
  const std::string where =
      fmt::format("{}: layer '{}': field 'weight_files.{}'", model.file, w.layer->name, w.buffer);
  NpyArray a;
  try {
    a = read_npy_f32(w.path);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("{}: {}", where, e.what()));
  }
  if (a.shape != w.shape)
    throw std::runtime_error(fmt::format(
        "{}: {} holds an array of shape ({}); expected ({}), the layer's {} buffer{}", where,
        w.path, fmt::join(a.shape, ", "), fmt::join(w.shape, ", "), w.buffer,
        w.role == PF_ROLE_WEIGHTS ? " in weight_layout " + w.layer->weight_layout.order : ""));
  return std::move(a.data);
}

void check_weight_files(const Model& model) {
  for (const WeightFile& w : weight_files(model)) read_weight_file(model, w);
}

}  // namespace padfold
