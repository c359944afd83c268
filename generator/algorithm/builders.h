// The algorithm of each op, one file per family: convolutions (conv.cpp), pools (pool.cpp),
// elementwise ops (elementwise.cpp), data movement (data_movement.cpp). build_algorithm
// (algorithm.cpp) sets up the Algorithm's buffers and variables and calls the op's builder, which
// defines `reduce` and/or `output`. Internal to algorithm/.
#pragma once

#include <Halide.h>

#include "algorithm/algorithm.h"

namespace padfold {

// The layer's fused activation applied to v (float layers).
Halide::Expr activate(Halide::Expr v, const Layer& L);

void build_conv(Algorithm& a, const Layer& L);
void build_conv_transpose(Algorithm& a, const Layer& L);

void build_max_pool(Algorithm& a, const Layer& L);
void build_avg_pool(Algorithm& a, const Layer& L);

void build_add(Algorithm& a);
void build_mul(Algorithm& a);
void build_activation(Algorithm& a);
void build_softmax(Algorithm& a);
void build_layer_norm(Algorithm& a);
void build_quantize(Algorithm& a);
void build_dequantize(Algorithm& a);

void build_transpose(Algorithm& a);
void build_gather_channels(Algorithm& a);
void build_resize(Algorithm& a);
void build_concat(Algorithm& a);

}  // namespace padfold
