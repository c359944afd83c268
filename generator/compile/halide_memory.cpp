#include "compile/halide_memory.h"

#include <sstream>
#include <stdexcept>

namespace padfold {

namespace {

using namespace Halide::Internal;

class AllocationSizes : public IRVisitor {
 public:
  HalideMemory memory;

 private:
  using IRVisitor::visit;
  void visit(const Allocate* op) override {
    const int64_t elements = Allocate::constant_allocation_size(op->extents, op->name);
    const int64_t bytes =
        elements > 0 ? (elements + op->padding) * op->type.bytes() : 0;  // 0: not constant
    // As Halide's CodeGen_Posix decides: only Register memory goes on the stack whatever its
    // size; Stack and Auto do when small enough.
    const bool heap = op->new_expr.defined() || op->memory_type == Halide::MemoryType::Heap ||
                      (op->memory_type != Halide::MemoryType::Register &&
                       (bytes == 0 || !can_allocation_fit_on_stack(bytes)));
    if (heap) {
      memory.heap_bytes += bytes;
      memory.heap_buffers.push_back(op->name);
    } else {
      memory.stack_bytes += bytes;
    }
    IRVisitor::visit(op);
  }
};

}  // namespace

// The host code only: a GPU target's device kernels (submodules) allocate on the device.
HalideMemory halide_memory(const Halide::Module& module) {
  AllocationSizes sizes;
  for (const LoweredFunc& f : module.functions()) f.body.accept(&sizes);
  return sizes.memory;
}

std::string memory_line(const HalideMemory& m) {
  std::string line = std::to_string(m.stack_bytes) + " " + std::to_string(m.heap_bytes);
  for (const std::string& b : m.heap_buffers) line += " " + b;
  return line;
}

HalideMemory parse_memory_line(const std::string& line) {
  std::istringstream in(line);
  HalideMemory m;
  if (!(in >> m.stack_bytes >> m.heap_bytes) || m.stack_bytes < 0 || m.heap_bytes < 0)
    throw std::runtime_error("malformed Halide memory figures '" + line + "'");
  for (std::string b; in >> b;) m.heap_buffers.push_back(b);
  return m;
}

}  // namespace padfold
