// The GPU tests' case sets, each a spec with its knob overrides: gpu_kernels_test runs them on
// PoCL against the reference; gpu_cases_export writes them, compiled for CUDA with their inputs
// and reference outputs, for a machine with a GPU (bench/gpu/check_cases.py).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "frontend/spec.h"

namespace padfold::testing {

struct CaseSet {
  std::string name;                                     // a bundle name: "matrix", "wide", "knobs"
  std::string spec;                                     // spec JSON, one layer per case
  nlohmann::json overrides = nlohmann::json::object();  // {layer: {knob: value}}
  int layers = 0;

  // What a failing layer is: its spec entry and its knob overrides.
  std::string describe(const Layer& L) const;
};

// The op x convention x border x layout matrix: by default two cases per (op, convention), borders
// k and k+3 (mod 6) of the k-th pair, which make_kernel_cases draws in opposite layouts
// (PADFOLD_GPU_FULL_MATRIX: every case); layers "c<i>". Plus tile-tail cases ("tail<i>", tail1
// with the conservative family's knobs, the last two reading their input in the other layout) and
// add, concat, mul by one value per channel and softmax of graph inputs in both layouts.
const CaseSet& matrix_cases();

// `count` layers whose window is wider than the input on at least one axis (kernels and dilations
// up to 5x the extent, inputs of 1-4 pixels, every spatial rank and layout), where a block's staged
// tile holds more border than input, plus the 3-row max pools PoCL once got wrong.
CaseSet wide_window_cases(int count, unsigned seed);

// Every GPU knob at a random value of its range (search values: powers of two for the thread
// counts) on a quarter of a draw of the matrix.
CaseSet random_knob_cases(unsigned seed);

}  // namespace padfold::testing
