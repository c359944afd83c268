#include "emit/data_dir.h"

#include <cstdlib>
#include <stdexcept>
#include <system_error>

namespace padfold {

namespace fs = std::filesystem;

namespace {
fs::path& library_data_dir() {
  static fs::path dir;
  return dir;
}
}  // namespace

void set_data_dir(const fs::path& dir) {
  library_data_dir() = dir;
}

fs::path data_dir() {
  fs::path dir;
  if (const char* env = std::getenv(kDataDirVariable); env && *env) {
    dir = env;
  } else if (!library_data_dir().empty()) {
    dir = library_data_dir();
  } else {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) throw std::runtime_error("cannot find the padfold program's path: " + ec.message());
    dir = exe.parent_path().parent_path() / "share" / "padfold";
  }
  if (!fs::is_regular_file(dir / "runtime" / "include" / "padfold_runtime.h") ||
      !fs::is_regular_file(dir / "include" / "HalideRuntime.h"))
    throw std::runtime_error("padfold's data directory " + dir.string() +
                             " lacks runtime/include/padfold_runtime.h or include/HalideRuntime.h "
                             "(reinstall padfold, or set " +
                             kDataDirVariable + ")");
  return dir;
}

}  // namespace padfold
