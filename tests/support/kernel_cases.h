// Random single-layer specs for kernel correctness tests: every op x convention x border mode x
// layout, on small random shapes (inputs smaller than kernels, strides larger than kernels, even
// and non-square kernels, dilations 1-3, 1/2/3 spatial dims, odd channel counts).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace padfold::testing {

struct KernelCase {
  std::string name;  // a readable id: op_convention_border_layout_index
  std::string spec;  // JSON text of a one-layer spec
};

inline void PrintTo(const KernelCase& c, std::ostream* os) {
  *os << c.name;
}

// Deterministic for a given seed; only cases that the spec parser accepts are returned.
std::vector<KernelCase> make_kernel_cases(unsigned seed, int per_combination);

}  // namespace padfold::testing
