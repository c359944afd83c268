// A tuning run's private working directory for candidate libraries, locked while the run lives.
#pragma once

#include <filesystem>

namespace padfold {

// This run's candidate libraries, under /tmp/padfold-tune-<pid>-*, removed at the end. A run
// killed with SIGKILL cannot remove its own: directories of runs that are over are removed first.
class WorkDir {
 public:
  WorkDir();
  ~WorkDir();
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int lock_fd_ = -1;
};

}  // namespace padfold
