// Names for what an import writes: padfold layer and model-input names are C identifiers of at
// most 64 characters ([A-Za-z_][A-Za-z0-9_]*, the spec's rule), unique in the spec, derived from
// the ONNX node and tensor names.
#pragma once

#include <map>
#include <set>
#include <string>

#include "base/identifiers.h"

namespace padfold::onnx_import {

// Hands out unique names. A name is taken when it was handed out, or when it is another name plus
// "_argv" or "_metadata" (or that name is it plus one of them): Halide defines those symbols beside
// each kernel, and the spec parser refuses such pairs.
class NameAllocator {
 public:
  // sanitize_identifier(wanted), else sanitize_identifier(fallback), made unique with "_2", "_3"...
  std::string allocate(const std::string& wanted, const std::string& fallback);
  bool taken(const std::string& name) const;

 private:
  std::set<std::string> used_;
  std::map<std::string, int> next_suffix_;  // base -> the first suffix number not yet tried
};

}  // namespace padfold::onnx_import
