// The exceptions the module raises: padfold.Error (RuntimeError) for everything padfold refuses
// or fails at, with the CLI's message, and padfold.TensorError (an Error) for an array that does
// not fit a kernel's buffer, before anything runs.
#pragma once

#include <stdexcept>

namespace padfold::python {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct TensorError : Error {
  using Error::Error;
};

}  // namespace padfold::python
