// libFuzzer: the ONNX importer (generator/frontend/onnx), along the path `padfold import
// --emit-onnx` takes (import_onnx), in memory. The input is an ONNX model's bytes, mutated as bytes
// (fuzz_onnx_graph mutates the graph); onnx_import_check.h says what is a finding.
#include <cstddef>
#include <cstdint>

#include "onnx_import_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  padfold::fuzz::import_and_check(data, size, "fuzz_onnx");
  return 0;
}
