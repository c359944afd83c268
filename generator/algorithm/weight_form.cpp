#include "algorithm/weight_form.h"

#include <stdexcept>

#include "algorithm/winograd.h"

namespace padfold {

std::string weight_form_layout(const Layer& L, const WeightForm& form) {
  if (!form.prepared()) return L.weight_layout.order;
  return "winograd_f" + std::to_string(form.winograd_m) + "_u";
}

std::vector<int64_t> weight_form_shape(const Layer& L, const WeightForm& form) {
  if (!form.prepared()) return L.weight_shape();
  const int64_t t = winograd_matrices(form.winograd_m).t;
  return {t, t, L.in_channels, L.out_channels};
}

NpyData prepare_weights(const Layer& L, const WeightForm& form, const NpyData& file) {
  if (!form.prepared()) return file;
  if (!winograd_applies(L) || file.dtype != NpyDType::F32 || file.shape != L.weight_shape())
    throw std::logic_error("layer '" + L.name + "': its weights cannot be prepared for Winograd");
  // Halide's dimensions are innermost first, the file's outermost first.
  std::vector<int> sizes(file.shape.rbegin(), file.shape.rend());
  Halide::Buffer<float> raw(reinterpret_cast<float*>(const_cast<unsigned char*>(file.bytes.data())),
                            sizes);
  WinogradStages s;
  define_winograd_weights(s, L, form.winograd_m, Halide::Func(raw));
  NpyData out;
  out.shape = weight_form_shape(L, form);
  out.dtype = NpyDType::F32;
  int64_t n = 1;
  for (int64_t d : out.shape) n *= d;
  out.bytes.resize(static_cast<size_t>(n) * sizeof(float));
  std::vector<int> out_sizes(out.shape.rbegin(), out.shape.rend());
  Halide::Buffer<float> prepared(reinterpret_cast<float*>(out.bytes.data()), out_sizes);
  s.weights.realize(prepared, Halide::get_host_target());
  return out;
}

}  // namespace padfold
