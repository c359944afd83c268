// Where padfold's data lives: the runtime sources and HalideRuntime.h that every bundle carries.
#pragma once

#include <filesystem>

namespace padfold {

// Overrides the data directory (for a relocated install).
constexpr const char* kDataDirVariable = "PADFOLD_DATA_DIR";

// $PADFOLD_DATA_DIR, else the directory set_data_dir gave, else share/padfold beside the running
// program's bin/ (the build tree has the installed layout). Throws naming the directory tried
// when it lacks the runtime sources.
std::filesystem::path data_dir();

// Where a library that is not the padfold program finds the data (the Python package: its own
// share/padfold, since the running program is python). Call before compiling; not thread-safe.
void set_data_dir(const std::filesystem::path& dir);

}  // namespace padfold
