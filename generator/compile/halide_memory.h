// What a compiled kernel's own Halide code allocates (its scratch: compute_at buffers, register
// tiles), read from the lowered pipeline: the memory a model's arena does not hold.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <string>
#include <vector>

namespace padfold {

struct HalideMemory {
  // An upper bound of one thread's stack for the kernel's buffers: every stack allocation of the
  // kernel's entry point plus those of its parallel tasks (a thread runs the entry point and, in
  // it, tasks), all live at once.
  int64_t stack_bytes = 0;
  // Bytes allocated through halide_malloc per allocation site, summed over the sites (not
  // multiplied by loop trip counts): 0 for a kernel that never calls halide_malloc.
  int64_t heap_bytes = 0;
  std::vector<std::string> heap_buffers;  // the buffers allocated on the heap
};

// The scratch of every function of the lowered module: Halide's code generator places an
// allocation on the stack when its memory type is Register, or any other but Heap with a constant
// size Halide's can_allocation_fit_on_stack accepts (16 KB: larger Stack memory goes to
// halide_malloc too); everything else goes to halide_malloc.
HalideMemory halide_memory(const Halide::Module& module);

// Whether every Register allocation of the lowered module has a constant size (Halide's code
// generator refuses one whose size it knows only at run time).
bool registers_have_fixed_sizes(const Halide::Module& module);

// "stack_bytes heap_bytes buffer..." and back: a compile worker hands the figures to padfold
// compile in a file beside the kernel's object.
std::string memory_line(const HalideMemory& m);
HalideMemory parse_memory_line(const std::string& line);

}  // namespace padfold
