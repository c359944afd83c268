// libFuzzer: the .npy reader of `padfold run`, on bytes in memory, and the runtime's C header
// reader (weight files of pf_model_open) against it: both accept the same files (the C reader
// takes at most PF_MAX_RANK dimensions) with the same dtype (float32, int8, uint8, int32), shape
// and data offset, and the float32-only reader exactly the float32 ones. An array or a
// runtime_error is any answer; another exception, a disagreement, a crash, a sanitizer report or a
// hang is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/npy.h"
#include "base/npy_dtype.h"

extern "C" {
#include "internal.h"
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  bool cpp_ok = true, f32_ok = true;
  padfold::NpyHeader cpp;
  try {
    (void)padfold::parse_npy(bytes, "fuzz");
    cpp = padfold::parse_npy_header(bytes, size, "fuzz");
  } catch (const std::runtime_error&) {
    cpp_ok = false;
  }
  try {
    (void)padfold::parse_npy_f32(bytes, "fuzz");
    (void)padfold::parse_npy_header_f32(bytes, size, "fuzz");
  } catch (const std::runtime_error&) {
    f32_ok = false;
  }
  if (f32_ok != (cpp_ok && cpp.dtype == padfold::NpyDType::F32)) {
    std::fprintf(
        stderr, "npy readers disagree: the float32 reader %s a file the reader of every dtype %s\n",
        f32_ok ? "accepts" : "rejects", cpp_ok ? "accepts" : "rejects");
    std::abort();
  }
  char err[PF_ERRLEN];
  pf_npy_header c;
  const bool c_ok =
      pf_npy_parse_header(bytes.data(), size, size, "fuzz", &c, err, sizeof err) == PF_OK;
  if (cpp_ok && cpp.shape.size() > PF_MAX_RANK) return 0;
  const bool same = c_ok == cpp_ok &&
                    (!c_ok || (c.dtype == padfold::pf_dtype_of(cpp.dtype) &&
                               std::vector<int64_t>(c.shape, c.shape + c.rank) == cpp.shape &&
                               c.data_offset == cpp.data_offset && c.data_bytes == cpp.data_bytes));
  if (!same) {
    std::fprintf(stderr, "npy readers disagree: C++ %s, C %s (%s)\n",
                 cpp_ok ? "accepts" : "rejects", c_ok ? "accepts" : "rejects", c_ok ? "" : err);
    std::abort();
  }
  return 0;
}
