// libFuzzer: the runtime's manifest parser and validation (pf_bundle_open up to, not including,
// loading the library). A status is any answer; a crash or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>

extern "C" {
#include "internal.h"
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char err[PF_ERRLEN];
  (void)pf_manifest_check(reinterpret_cast<const char*>(data), size, "manifest.json", err,
                          sizeof err);
  return 0;
}
