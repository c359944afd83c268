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
    // As Halide's CodeGen_Posix decides: a size known only at run time goes to the heap; a
    // constant one goes on the stack for Register memory whatever its size, for Stack and Auto
    // when small enough.
    const bool heap =
        op->new_expr.defined() || op->memory_type == Halide::MemoryType::Heap || bytes == 0 ||
        (op->memory_type != Halide::MemoryType::Register && !can_allocation_fit_on_stack(bytes));
    if (heap) {
      memory.heap_bytes += bytes;
      memory.heap_buffers.push_back(op->name);
    } else {
      memory.stack_bytes += bytes;
    }
    IRVisitor::visit(op);
  }
};

class RegisterSizes : public IRVisitor {
 public:
  bool fixed = true;

 private:
  using IRVisitor::visit;
  void visit(const Allocate* op) override {
    if (op->memory_type == Halide::MemoryType::Register &&
        Allocate::constant_allocation_size(op->extents, op->name) <= 0)
      fixed = false;
    IRVisitor::visit(op);
  }
};

}  // namespace

bool registers_have_fixed_sizes(const Halide::Module& module) {
  RegisterSizes sizes;
  for (const LoweredFunc& f : module.functions()) f.body.accept(&sizes);
  return sizes.fixed;
}

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
