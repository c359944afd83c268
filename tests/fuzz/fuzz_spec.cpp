// libFuzzer: the spec parser. Any input is either a model or a SpecError; anything else (another
// exception, a crash, a sanitizer report, a hang) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontend/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const padfold::Model m =
        padfold::parse_spec(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    for (const padfold::Layer& L : m.layers) (void)L.flops();
  } catch (const padfold::SpecError&) {
  }
  return 0;
}
