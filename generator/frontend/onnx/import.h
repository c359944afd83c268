// ONNX graph -> padfold spec (docs/model-graph.md) + weights + the list of nodes left to the
// caller.
//
// Conv, ConvTranspose, MaxPool, AveragePool, Add (two same-shape tensors) and Concat (channels)
// become layers; a Pad before a conv/pool is folded into it as its pads and border mode, a Relu,
// Clip(0, 6) or LeakyRelu after a conv or add becomes its activation, Identity and inference
// Dropout are bypassed. Every other node is left to the caller: the tensors it produces that
// padfold layers read become spec inputs marked `produced_by`, and the layer outputs it reads
// become spec outputs. Pads are not computed here: auto_pad becomes the layer's padding request and
// the padding module resolves it (frontend/resolve.h).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/npy.h"
#include "frontend/layer.h"
#include "frontend/onnx/normalize.h"
#include "frontend/onnx/onnx_graph.h"

namespace padfold::onnx_import {

// A layout choice: the layout the layers compute in (padfold import --layout), and the layout of
// the model's inputs and outputs (--io-layout).
enum class ImportLayout {
  Auto,           // compute: channels last (padfold's CPU kernels are fastest so); inputs and
                  // outputs: as the model file has them (an ONNX tensor channels first, a tf2onnx
                  // model's inputs and outputs behind its layout Transposes channels last)
  ChannelsFirst,  // compute: channels first (tf2onnx's layout Transposes left to the caller)
  ChannelsLast,   // channels last
};

struct ImportOptions {
  std::string model_name;  // the spec's `model`; empty: from the file name (sanitized)
  ImportLayout layout = ImportLayout::Auto;
  // Where an input's or output's layout differs from the layers', a transpose layer converts it
  // (the user's arrays keep their layout); spatial dims all 1 need none.
  ImportLayout io_layout = ImportLayout::Auto;
};

// "auto", "nchw"/"channels_first", "nhwc"/"channels_last" (any case); throws std::runtime_error
// naming the option and the valid values.
ImportLayout parse_import_layout(const std::string& text, const std::string& option = "--layout");

// A .npy file to write, path relative to the spec's directory.
struct WeightFile {
  std::string path;  // weights/<layer>_weights.npy or weights/<layer>_bias.npy
  std::vector<int64_t> shape;
  std::vector<float> data;         // float32
  NpyDType dtype = NpyDType::F32;  // quantized layers: int8 weights, int32 bias
  std::vector<int32_t> ints;       // their values, for dtype I8 or I32
};

struct LeftNode {
  int index = 0;  // in the graph's node list
  std::string name, op_type, reason;
};

struct ImportResult {
  std::string model_name;
  Model model;                    // the spec as padfold reads it (file: <model_name>.json)
  nlohmann::ordered_json spec;    // DIR/<model_name>.json: to_spec_json(model)
  nlohmann::ordered_json report;  // DIR/import-report.json
  std::vector<WeightFile> weights;
  std::vector<LeftNode> left_to_caller;
  std::vector<std::string> warnings;
};

// Starts the message of an ImportError that is a bug of the importer, not of the model.
inline constexpr const char* kInternalError = "internal error (a bug of padfold import)";

// The ops that become layers, as messages list them.
inline constexpr const char* kGeneratedOps =
    "Conv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, ReduceMean and "
    "ReduceMax over the spatial axes, Gemm and MatMul on a global pool's output, Add, Mul by one "
    "value per channel, Concat and Softmax over channels, Resize and Upsample (nearest, linear) of "
    "the spatial axes, Slice and Split of the channels, channel shuffles (Reshape, Transpose, "
    "Reshape), LayerNorm over the channels (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div; "
    "LayerNormalization and MatMul on channels-last stretches between Transposes); "
    "quantized: QuantizeLinear, "
    "DequantizeLinear, QLinearConv, QLinearAdd, QLinearAveragePool, QLinearGlobalAveragePool and "
    "QDQ groups around Conv, MaxPool, AveragePool and Add";

// Why a default-domain node of `op_type` is left to the caller when no pattern covers it.
std::string not_generated_reason(const std::string& op_type);

// Imports a prepared model. Throws ImportError for a model that is not valid ONNX in a way that
// matters here (pads with auto_pad, a conv's weight shape, an attribute of the wrong type...), a
// tensor padfold would compute that is not float32, and a model of which no node is supported.
// Every layer is resolved by frontend/resolve.h as it is drafted.
ImportResult import_model(const PreparedModel& prepared, const ImportOptions& options);

// Thrown by import_model where nodes left to the caller read or write tensors of channels-last
// stretches that the prepared model computes channels first (the caller would compute them on the
// file's channels-last tensors): `stretches` names those stretches (PreparedModel::relaid's
// names). import_onnx then imports again with them as the file has them.
struct StretchLeftToCaller : ImportError {
  StretchLeftToCaller(const std::string& what, std::set<std::string> names)
      : ImportError(what), stretches(std::move(names)) {}
  std::set<std::string> stretches;
};

// A model prepared and imported (prepare_model, import_model), where nodes left to the caller see
// channels-last stretches computed channels first, prepared and imported again with those
// stretches as the file has them (a warning says which node kept each).
struct Imported {
  PreparedModel prepared;
  ImportResult result;
};
Imported prepare_and_import(const onnx::ModelProto& model, const std::vector<InputSize>& sizes,
                            const std::string& label, const ImportOptions& options);

// `padfold import` short of writing files, the one path the CLI and tests/fuzz/fuzz_onnx take.
struct ImportOutput {
  ImportResult result;
  std::string spec_text;                      // the contents of DIR/<model_name>.json
  std::string report_text;                    // DIR/import-report.json
  std::optional<NormalizeResult> normalized;  // with emit_onnx
  std::string onnx_bytes;                     // with emit_onnx: the normalized model, serialized
};

// Parses the --input texts (parse_input_size), prepares the model (prepare_model), imports it
// (import_model) and, with `emit_onnx`, rewrites its auto_pads (normalize_auto_pad); then
// serializes what is to be written. Every failure is an ImportError.
ImportOutput import_onnx(onnx::ModelProto model, const std::vector<std::string>& inputs,
                         const std::string& label, const ImportOptions& options, bool emit_onnx);

// The printed summary: the layers, each with the ONNX nodes it covers, then every node left to the
// caller with its op type and why.
std::string summary_text(const ImportResult& result);

}  // namespace padfold::onnx_import
