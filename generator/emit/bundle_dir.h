// A bundle directory built aside and moved into place only when complete.
#pragma once

#include <filesystem>

namespace padfold {

class StagedDirectory {
 public:
  // Checks that `destination` may be replaced (absent, empty, or a padfold bundle) and creates a
  // staging directory beside it, on the same file system.
  explicit StagedDirectory(const std::filesystem::path& destination);
  ~StagedDirectory();  // removes the staging directory unless committed
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  const std::filesystem::path& path() const { return staging_; }
  // Moves the staging directory to the destination (an atomic exchange when one exists) and
  // removes what was there before.
  void commit();

 private:
  std::filesystem::path destination_, staging_;
  bool committed_ = false;
};

}  // namespace padfold
