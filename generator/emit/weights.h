// The weights a spec names (weight_files): checked against each layer's buffers, copied into the
// bundle (weights/<layer>_<buffer>.npy) or baked into its libraries (--embed-weights).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithm/weight_form.h"
#include "base/npy.h"
#include "frontend/spec.h"
#include "padfold_registry.h"

namespace padfold {

// One weights or bias buffer of a layer and the file holding it.
struct WeightFile {
  const Layer* layer = nullptr;
  std::string buffer;              // "weights" or "bias": the buffer's name in its layer
  pf_role role = PF_ROLE_WEIGHTS;  // PF_ROLE_WEIGHTS or PF_ROLE_BIAS
  std::string path;                // as resolved by the spec parser
  std::vector<int64_t> shape;      // the buffer's shape in its layout
  // The buffer's dtype: float32, or a quantized layer's int8 weights and int32 bias (docs/int8.md).
  pf_dtype dtype = PF_F32;
  // The form the bundle stores them in: prepared for their kernel (bundle_plan), or as the file.
  WeightForm form;

  // The shape of what the bundle stores.
  std::vector<int64_t> stored_shape() const;
  std::string bundle_path() const { return "weights/" + layer->name + "_" + buffer + ".npy"; }
};

// Every weights/bias buffer whose layer names its file, in layer order.
std::vector<WeightFile> weight_files(const Model& model);

// Reads one file and checks it holds exactly the buffer: the buffer's dtype, C order, the buffer's
// shape. Errors name the spec file, the layer, the field and the path (a dtype mismatch both
// dtypes).
NpyData read_weight_file(const Model& model, const WeightFile& w);

// Each file read once (read_weight_file) and prepared in its form (prepare_weights; a bias with
// the zero point's term folded in from its layer's weights, prepare_bias): the values the bundle
// stores, in `files`' order.
std::vector<NpyData> stored_weights(const Model& model, const std::vector<WeightFile>& files);

// Checks every weight file of the model (read_weight_file), throwing at the first bad one.
void check_weight_files(const Model& model);

}  // namespace padfold
