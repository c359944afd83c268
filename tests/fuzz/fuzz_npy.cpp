// libFuzzer: the .npy reader of `padfold run`, on bytes in memory. An array or a runtime_error is
// any answer; another exception, a crash, a sanitizer report or a hang is a finding.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cli/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)padfold::parse_npy_f32(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const std::runtime_error&) {
  }
  return 0;
}
