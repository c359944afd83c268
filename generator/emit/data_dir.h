// Where padfold's data lives: the runtime sources and HalideRuntime.h that every bundle carries.
#pragma once

#include <filesystem>

namespace padfold {

// Overrides the data directory (for a relocated install).
constexpr const char* kDataDirVariable = "PADFOLD_DATA_DIR";

// $PADFOLD_DATA_DIR, else share/padfold beside the running program's bin/ (the build tree has
// the installed layout). Throws naming the directory tried when it lacks the runtime sources.
std::filesystem::path data_dir();

}  // namespace padfold
