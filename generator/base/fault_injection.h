// Faults on purpose, for the tests of the crash and hang handling of the compile workers and of
// the ONNX importer's shape inference.
#pragma once

#include <map>
#include <string>

namespace padfold {

// Set to "<layer>:<fault>[:every]" (comma-separated for several) to make the compile worker of
// that layer fail on purpose: fault is sigfpe, sigsegv, abort or hang; without ":every" only the
// first attempt (the tuned schedule) fails, so the retry can succeed. The name
// kShapeInferenceFault stands for the ONNX importer's shape inference child instead.
constexpr const char* kInjectFaultVariable = "PADFOLD_INJECT_COMPILE_FAULT";

constexpr const char* kShapeInferenceFault = "onnx-shape-inference";

struct InjectedFault {
  std::string kind;  // sigfpe, sigsegv, abort, hang
  bool every = false;
};
using InjectedFaults = std::map<std::string, InjectedFault>;  // by layer name

// The faults the variable asks for; throws std::runtime_error naming an unknown fault.
InjectedFaults injected_faults();

// Crashes or hangs this process as `fault` says.
[[noreturn]] void raise_fault(const InjectedFault& fault);

}  // namespace padfold
