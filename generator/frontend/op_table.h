// One definition per op, as the frontend knows it (op_table.cpp): its spec name, what kind of
// layer it makes, the spec fields it takes beyond every layer's, how those fields are read and
// written, and its work. The spec parser, the spec writer, Layer's predicates and FLOP count read
// it; the later stages keep their part of an op (Halide builder, reference, op class, port) in one
// switch each, which the compiler checks for completeness.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frontend/json_fields.h"
#include "frontend/layer.h"

namespace padfold {

enum OpTrait : unsigned {
  kWindow = 1u << 0,      // a kernel window with strides, padding and a border: conv, pool
  kWeights = 1u << 1,     // weights and bias (convolutions)
  kJoin = 1u << 2,        // several inputs, listed in the spec's "input"
  kActivation = 1u << 3,  // takes a fused activation
  kDimsInName = 1u << 4,  // spelt with its spatial dims only (conv2d); others may add them
  kInt8 = 1u << 5,        // has an int8/uint8 kernel
};

struct OpDef {
  Op op;
  const char* name;  // the spec's base name
  unsigned traits;
  // The spec fields this op takes beyond every layer's (name, op, input, layout, dtype, ...); a
  // layer of another op that gives one is refused, naming the ops that take it.
  std::vector<std::string> fields;
  double (*flops)(const Layer&);  // 2 x multiply-adds over every output (Layer::flops)
  // The op's own fields (beyond the window's, weights' and activation's), read once the layer's
  // input shapes are known and written back by the spec writer; null for ops with none.
  void (*read)(const nlohmann::json& j, const Ctx& c, Layer& l) = nullptr;
  void (*write)(const Layer& l, nlohmann::ordered_json& j) = nullptr;

  bool has(OpTrait t) const { return (traits & t) != 0; }
};

// Every op, in Op order (op_table_test checks that op_def(op).op == op).
const std::vector<OpDef>& op_table();
const OpDef& op_def(Op op);

// The op spelt `base` in a spec (without its dims), or nullptr.
const OpDef* find_op(const std::string& base);

// Whether layers of `op` take spec field `field` (one of op_fields()).
bool op_takes(Op op, const std::string& field);

// "max_pool and avg_pool layers": the layers that take spec field `field`.
std::string layers_taking(const std::string& field);

// "conv, max_pool, ... and transpose": the ops with `trait`, in table order.
std::string op_names_with(OpTrait trait);

// Every spec field some op takes and others refuse.
const std::vector<std::string>& op_fields();

}  // namespace padfold
