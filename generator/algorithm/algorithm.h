// Halide algorithms: what each op computes, with every shape fixed and the border folded into the
// kernel (no padded copy). Nothing here decides how it is computed: that is schedules/.
#pragma once

#include <Halide.h>

#include <string>
#include <vector>

#include "algorithm/weight_form.h"
#include "algorithm/winograd.h"
#include "frontend/spec.h"
#include "padfold_registry.h"  // pf_role: the bundle contract's buffer roles

namespace padfold {

// A role as the manifest and messages spell it: "input", "weights", "bias", "output" (the
// runtime's pf_role_name spelling).
const char* role_name(pf_role role);

// A buffer of a layer in manifest order (input, weights?, bias?, output; add and concat:
// input0..input<n-1>, output).
struct BufferInfo {
  std::string name;  // input, input0.., weights, bias, output
  pf_role role;      // PF_ROLE_*; a single layer names a buffer after its role (input0.. too)
  std::string layout;
  std::vector<int64_t> shape;  // outermost first
  std::string layer;           // the layer it belongs to (a fused block has several)
  pf_dtype dtype = PF_F32;     // quantized layers: int8/uint8 activations, int8 weights, int32 bias
};
// The weights buffer in `weights`' form (default: as the layer's weight_layout says).
std::vector<BufferInfo> buffer_infos(const Layer& layer, const WeightForm& weights = {});
// The buffers of the kernel that prepares a layer's weights passed by the caller (padfold compile
// --prepare-entry): "weights" as the layer's weight_layout lays them out, and "prepared" in
// `form` (the layer's kernel's weights buffer).
std::vector<BufferInfo> preparation_buffers(const Layer& layer, const WeightForm& form);

// The Halide type of a buffer's elements, and of a layer's output.
Halide::Type halide_type(pf_dtype dtype);
Halide::Type element_type(const Layer& layer);

// A buffer with the Halide parameter that carries it (undefined for the output).
struct BufferParam {
  BufferInfo info;
  Halide::ImageParam param;
};

// The operands a target's dot-product instructions multiply, and so the type a quantized conv's
// input is offset to: x86's vpdpbusd takes uint8 x int8, arm's sdot int8 x int8.
enum class DotOperands { U8xI8, I8xI8 };
DotOperands dot_operands(const Halide::Target& target);
// A quantized conv's input zero point as its products see it with those operands: offset by 128
// where the input's type is flipped to theirs (dot_input).
int32_t dot_zero_point(const Layer& layer, DotOperands dot);

// The Funcs and parameters of one layer's pipeline, exposed so a schedule can be applied.
struct Algorithm {
  const Layer* layer = nullptr;

  Halide::ImageParam input, weights, bias;  // weights/bias undefined when the op has none
  // In a fused block, the producer layer's output Func in place of `input` (undefined otherwise).
  Halide::Func source;
  std::vector<Halide::ImageParam> inputs;  // every input: {input}, or add's and concat's
  Halide::Func bordered;  // the input seen through the border mode, infinite along spatial axes
  bool explicit_border = false;  // bordered written as clamps/selects, not BoundaryConditions
  Halide::Func reduce;           // the reduction (conv sum, pool max/sum), args in `vars` order;
                                 // undefined for add and concat
  Halide::Func output;           // bias, activation, averaging; args in `vars` order; a
                                 // concat's: one update per input (its channels an RVar)

  // Pure variables in the output buffer's dimension order (Halide order: innermost first).
  std::vector<Halide::Var> vars;
  Halide::Var c, n;                  // channel and batch, also present in `vars`
  std::vector<Halide::Var> spatial;  // spatial[0] is the innermost spatial axis (W)
  Halide::RDom r;                    // reduction domain of `reduce`
  std::vector<Halide::Func>
      helpers;               // small tables (e.g. avg-pool divisors) a schedule computes at root
  Halide::Func dot_weights;  // quantized_dot_product: the weights as the dot products read them,
                             // built per call (a helper); undefined where the weights buffer is
                             // that table already (WeightForm::dot_table)
  Halide::Func weight_sum;   // a quantized conv's weights summed per output channel (a helper)

  std::vector<BufferParam> buffers;  // every buffer in manifest order; input/weights/bias above
                                     // are the same parameters
  WinogradStages winograd;           // a conv computed as F(m, 3) (winograd.m > 0): its stages
  WeightForm weight_form;            // the weights buffer's form
  // weight_form.block_channels > 0: the weights as their weight_layout indexes them, read from the
  // blocked buffer `weights` (blocked_weights_view); the conv reads them through it.
  Halide::Func blocked_weights;
  DotOperands dot = DotOperands::U8xI8;  // a quantized conv's input offset to these operands
  bool native_fma = false;               // the target's native_fma (quantized adds)
  // AlgorithmVariant::pixel_runs: `reduce` is over (c, pixel, n), pixel = x + W * y, the output
  // plane one run of pixels, and the output, undefined in its pure definition, is written by one
  // update over `pixels` (that run).
  bool pixel_runs = false;
  Halide::RDom pixels;
  // A residual add in the conv's epilogue: the add and its other input (the block's last buffer
  // but the output).
  const Layer* residual = nullptr;
  Halide::ImageParam addend;
};

// The loops of a concat's update `u` (one per input) in the output's dimension order, innermost
// first, the input's channels its RVar: Halide puts an update's RVars innermost, so its schedules
// reorder the loops to these.
std::vector<Halide::VarOrRVar> concat_loops(const Algorithm& a, int u);

// How a layer is computed, beyond the layer itself: what the schedule and the target decide.
struct AlgorithmVariant {
  // `bordered` written as clamps and selects instead of Halide's BoundaryConditions (GPU
  // schedules).
  bool explicit_border = false;
  // An add whose other input is this conv's addend (a residual block): the conv's output (bias and
  // activation applied) plus that addend, through the add's activation, is the output. A
  // "residual" input buffer (the add's output shape, named after the add) is read once per output
  // element in the epilogue, and the output buffer is the add's.
  const Layer* residual = nullptr;
  int winograd_m = 0;  // 2 or 4 (winograd_applies(layer)): the conv computed as F(m, 3)
  DotOperands dot = DotOperands::U8xI8;  // the target's dot_operands (quantized convs only)
  bool native_fma = false;               // the target's native_fma (quantized adds)
  WeightForm weights;  // the form of the weights buffer; a prepared form fits winograd_m
  // A pointwise conv's products over its output plane as one run of pixels (pixel_runs_apply):
  // a tile of consecutive pixels may span rows, as a GEMM's rows do (a 7x7 plane is 49 pixels,
  // not 7 rows of 7).
  bool pixel_runs = false;
};

// Whether a layer can be computed with pixel_runs: a float32 2D conv of one group, channels last,
// 1x1 kernel, no padding, reading its input in its own layout.
bool pixel_runs_apply(const Layer& layer);

// Builds the algorithm for a resolved layer. The buffers have fixed shapes and dense strides. With
// `source` (a fused block's producer, defined over this layer's input shape), the layer reads it
// instead of an input buffer, through its own border and padding.
Algorithm build_algorithm(const Layer& layer, const AlgorithmVariant& variant = {},
                          const Halide::Func& source = Halide::Func());

// A quantized conv, channels last, whose groups reduce a multiple of 4 channels, or of one group
// (its channels padded to a multiple of 4, reduction_channels): it sums 8-bit products 4 input
// channels at a time (x86 vpdpbusd, arm sdot), reading its weights through a table with those 4
// channels innermost, then the output channels (one dense load per vector of accumulators). The
// table is one of the helpers, or the weights buffer as the compile prepared it.
bool quantized_dot_product(const Layer& layer);

// The input channels each output sums over (its RDom's channel extent): in_channels / groups (1
// for layers without weights), rounded up to a multiple of 4 for a one-group quantized dot
// product (a stem's 3 channels as 4: the extra channel reads weight 0, and 4-wide dot products
// of which one lane is idle beat 1-wide multiply-adds).
int64_t reduction_channels(const Layer& layer);

// The residual buffer of a conv whose output an add sums with another tensor.
BufferInfo residual_buffer(const Layer& add);

}  // namespace padfold
