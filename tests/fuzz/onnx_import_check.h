// The body of the ONNX importer's fuzz targets (fuzz_onnx, fuzz_onnx_graph): `padfold import
// --emit-onnx` in memory (import_onnx) on a model's bytes, every graph input given an --input
// size, then the checks of what the import would write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace padfold::fuzz {

// Prints "<target> finding: <what>" and aborts.
[[noreturn]] void finding(const char* target, const std::string& what);

// Parses and imports the model. An ImportError is the documented failure. Anything else is a
// finding of `target`: an internal ImportError, a crash, a sanitizer report, a hang, another
// exception escaping, or an import that succeeds with a spec padfold's parser rejects, an
// --emit-onnx model that does not read back, or a weight file whose data does not match its shape.
void import_and_check(const uint8_t* data, size_t size, const char* target);

}  // namespace padfold::fuzz
