#include "onnx_spec.h"

#include "frontend/spec.h"

namespace padfold::onnx_test {

using json = nlohmann::json;

namespace {

constexpr int kOnnxFloat = 1;

json padding(const NodeTest& t, size_t dims) {
  const std::string auto_pad = t.get_string("auto_pad", "NOTSET");
  if (auto_pad == "VALID") return "valid";
  if (auto_pad == "SAME_UPPER") return "same_upper";
  if (auto_pad == "SAME_LOWER") return "same_lower";
  return t.get_ints("pads", std::vector<int64_t>(2 * dims, 0));
}

}  // namespace

json layer_spec(const NodeTest& t, const std::string& name) {
  const FloatTensor& X = t.inputs.at(0);
  if (X.elem_type != kOnnxFloat)
    throw OnnxTestError(t.name + ": input is not float32 (padfold generates float32 kernels)");
  const size_t dims = X.shape.size() - 2;
  const std::string dims_s = std::to_string(dims) + "d";
  json L = {{"name", name},
            {"input_shape", X.shape},
            {"layout", "NC" + spatial_letters(static_cast<int>(dims))},
            {"stride", t.get_ints("strides", std::vector<int64_t>(dims, 1))},
            {"padding", padding(t, dims)}};
  if (t.op_type == "Conv" || t.op_type == "ConvTranspose") {
    const FloatTensor& W = t.inputs.at(1);
    const int64_t group = t.get_int("group", 1);
    const bool transposed = t.op_type == "ConvTranspose";
    L["op"] = (transposed ? "conv_transpose" : "conv") + dims_s;
    L["kernel"] = std::vector<int64_t>(W.shape.begin() + 2, W.shape.end());
    L["dilation"] = t.get_ints("dilations", std::vector<int64_t>(dims, 1));
    L["groups"] = group;
    L["bias"] = t.inputs.size() > 2;
    L["weight_layout"] = (transposed ? "IO" : "OI") + spatial_letters(static_cast<int>(dims));
    L["out_channels"] = transposed ? W.shape[1] * group : W.shape[0];
    if (transposed) {
      if (t.has("output_padding")) L["output_padding"] = t.get_ints("output_padding");
      if (t.has("output_shape")) L["output_shape"] = t.get_ints("output_shape");
    }
  } else {
    L["op"] = t.op_type == "MaxPool" ? "max_pool" : "avg_pool";
    L["kernel"] = t.get_ints("kernel_shape");
    L["ceil_mode"] = t.get_int("ceil_mode", 0) != 0;
    if (t.op_type == "MaxPool")
      L["dilation"] = t.get_ints("dilations", std::vector<int64_t>(dims, 1));
    else
      L["count_include_pad"] = t.get_int("count_include_pad", 0) != 0;
  }
  return L;
}

}  // namespace padfold::onnx_test
