// What fuzz_db asks the tuning database for, and what fuzz_db_seeds writes its seeds for: the
// layers of examples/tiny.json on one fixed x86 target, measured on a fixed machine id.
#pragma once

#include <Halide.h>

#include <cstdlib>
#include <string>

#include "frontend/spec.h"

namespace padfold::fuzz_db {

inline const char* const kTarget = "x86-64-linux-avx2-fma-f16c-sse41";
inline const char* const kMachine = "fuzz-machine";  // $PADFOLD_MACHINE_ID of both

// Makes kMachine this machine's id (machine_id() reads $PADFOLD_MACHINE_ID) and loads the model.
inline Model setup() {
  setenv("PADFOLD_MACHINE_ID", kMachine, 1);
  return load_spec(PADFOLD_FUZZ_DB_SPEC);
}

inline Halide::Target target() {
  return Halide::Target(kTarget);
}

}  // namespace padfold::fuzz_db
