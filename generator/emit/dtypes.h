// The runtime's element types (padfold_registry.h's pf_dtype) as the bundle's files spell them:
// the manifest's "dtype" (the runtime's pf_dtype_name), registry.c's constants, element sizes for
// the memory plan and size report.
#pragma once

#include <cstdint>

#include "base/enum_names.h"
#include "padfold_registry.h"

namespace padfold {

// The manifest's names: what the runtime's pf_dtype_name returns and its manifest parser reads.
inline constexpr EnumName<pf_dtype> kDtypeNames[] = {
    {PF_F32, "float32"}, {PF_F16, "float16"}, {PF_I8, "int8"}, {PF_U8, "uint8"}, {PF_I32, "int32"}};

// The C constants registry.c writes.
inline constexpr EnumName<pf_dtype> kDtypeConstants[] = {
    {PF_F32, "PF_F32"}, {PF_F16, "PF_F16"}, {PF_I8, "PF_I8"}, {PF_U8, "PF_U8"}, {PF_I32, "PF_I32"}};

// Bytes of one element, as the runtime's pf_dtype_size.
inline int64_t dtype_size(pf_dtype t) {
  switch (t) {
    case PF_F32:
    case PF_I32:
      return 4;
    case PF_F16:
      return 2;
    case PF_I8:
    case PF_U8:
      return 1;
  }
  return 4;
}

}  // namespace padfold
