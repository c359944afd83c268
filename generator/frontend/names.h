// The names of the frontend's enums, one table each (see base/enum_names.h): to_string
// (layer.cpp) and the spec parser (spec.cpp) both read them. Internal to the frontend. Ops are
// named in their definitions (op_table.h), activations in theirs (activation.h).
#pragma once

#include "base/enum_names.h"
#include "frontend/layer.h"

namespace padfold {

inline constexpr EnumName<DType> kDTypeNames[] = {
    {DType::F32, "float32"}, {DType::F32, "f32", Spelling::Alias},
    {DType::F16, "float16"}, {DType::F16, "f16", Spelling::Alias},
    {DType::I8, "int8"},     {DType::I8, "i8", Spelling::Alias},
    {DType::U8, "uint8"},    {DType::U8, "u8", Spelling::Alias},
};

inline constexpr EnumName<Requantize> kRequantizeNames[] = {
    {Requantize::Tflite, "tflite"},
    {Requantize::Onnx, "onnx"},
};

}  // namespace padfold
