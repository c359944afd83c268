// The .npy element types (base/npy.h) as the runtime's pf_dtype (padfold_registry.h), for code that
// sees both (the emitter, `padfold run`, `padfold bench`). Header only: padfold_base itself does
// not include the runtime's headers.
#pragma once

#include <optional>

#include "base/npy.h"
#include "padfold_registry.h"

namespace padfold {

// The .npy dtype of a buffer's elements; none for a dtype no .npy file of padfold holds (float16).
inline std::optional<NpyDType> npy_dtype_of(pf_dtype t) {
  switch (t) {
    case PF_F32:
      return NpyDType::F32;
    case PF_I8:
      return NpyDType::I8;
    case PF_U8:
      return NpyDType::U8;
    case PF_I32:
      return NpyDType::I32;
    case PF_F16:
      break;
  }
  return std::nullopt;
}

inline pf_dtype pf_dtype_of(NpyDType t) {
  switch (t) {
    case NpyDType::F32:
      return PF_F32;
    case NpyDType::I8:
      return PF_I8;
    case NpyDType::U8:
      return PF_U8;
    case NpyDType::I32:
      return PF_I32;
  }
  return PF_F32;
}

}  // namespace padfold
