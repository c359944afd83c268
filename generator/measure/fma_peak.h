// One core's float32 multiply-add peak, measured: independent FMA chains in registers, no memory
// traffic, at the widest vector width a target uses. What `padfold bench` states each kernel's
// GFLOP/s as a share of.
#pragma once

#include <string>

namespace padfold::measure {

struct FmaPeak {
  std::string isa;    // avx512, avx2 (256-bit FMA), sse (128-bit multiply and add), neon
  double gflops = 0;  // one core, best of several runs of thread CPU time
};

// The peak for code of a Halide target string (the widest vectors it enables, which this CPU
// must run); "host": this CPU's widest.
FmaPeak fma_peak(const std::string& target);

}  // namespace padfold::measure
