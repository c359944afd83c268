// padfold import as a call: an ONNX model -> a directory with its spec, weights and import report,
// which appears only when complete. The CLI prints the summary; the Python package compiles the
// spec it wrote (padfold.compile on an .onnx file).
#pragma once

#include <string>
#include <vector>

#include "frontend/onnx/import.h"

namespace padfold {

struct ImportRequest {
  std::string model;                // the .onnx file
  std::string out;                  // DIR: DIR/<model>.json, DIR/weights/, DIR/import-report.json
  std::vector<std::string> inputs;  // NAME=SIZES for graph inputs with dynamic dims
  std::string emit_onnx;            // also write the model with auto_pad made explicit, or empty
  std::string name;                 // the spec's model name; empty: from the file name
  std::string layout = "auto";      // onnx_import::parse_import_layout: the layers' layout
  std::string io_layout = "auto";   // and that of the model's inputs and outputs
};

// Throws std::runtime_error with the CLI's messages; a failure while writing leaves `out` as it
// was ("nothing imported; <out> is as it was").
onnx_import::ImportOutput import_model(const ImportRequest& request);
// The writing half of import_model: `imported` (of request.model) into request.out, all or nothing.
void write_import(const ImportRequest& request, const onnx_import::ImportOutput& imported);

// The spec file import_model wrote: <out>/<model_name>.json.
std::string imported_spec_path(const ImportRequest& request,
                               const onnx_import::ImportOutput& imported);

}  // namespace padfold
