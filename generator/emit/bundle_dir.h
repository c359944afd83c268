// A bundle directory (or another directory padfold writes whole, such as an import's) built aside
// and moved into place only when complete.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "padfold_registry.h"  // PF_FORMAT_NAME

namespace padfold {

// The top-level entries of a bundle whose manifest is `manifest`: manifest.json, include/,
// runtime/, weights/, its target directories and padfold_<model>.cmake.
std::vector<std::string> bundle_entries(const nlohmann::json& manifest);
// The top-level entries of an import directory whose report is `report`: import-report.json,
// weights/ and the spec.
std::vector<std::string> import_entries(const nlohmann::json& report);

// What a StagedDirectory writes and so may replace: a directory holding `marker`, a JSON object
// whose "format" is `format`, and nothing but the `entries` the marker lists. `noun` and `writer`
// are for messages ("bundle", "compile").
struct DirectoryKind {
  const char* marker;
  const char* format;
  const char* noun;
  const char* writer;
  std::vector<std::string> (*entries)(const nlohmann::json& marker);
};
inline constexpr DirectoryKind kBundleDirectory{"manifest.json", PF_FORMAT_NAME, "bundle",
                                                "compile", &bundle_entries};
inline constexpr DirectoryKind kImportDirectory{"import-report.json", "padfold-import", "import",
                                                "import", &import_entries};

// Whether `inner` is `outer` or inside it once symbolic links are resolved, or the link `inner`
// itself lies inside it.
bool path_inside(const std::filesystem::path& inner, const std::filesystem::path& outer);

// Throws when one of the `inputs` (what names it in messages, such as "spec" or "--db", and its
// path) lies inside `out`, the directory about to be replaced: it would be removed with it.
void refuse_inputs_inside(const std::string& out,
                          const std::vector<std::pair<std::string, std::string>>& inputs);

class StagedDirectory {
 public:
  // Checks that `destination` may be replaced (absent, empty, or a directory of this kind holding
  // only what such a directory consists of, else the message lists the rest), takes
  // the destination's lock (a second writer fails at once, naming it) and creates a staging
  // directory beside it, on the same file system.
  explicit StagedDirectory(const std::filesystem::path& destination,
                           const DirectoryKind& kind = kBundleDirectory);
  ~StagedDirectory();  // removes the staging directory unless committed
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  const std::filesystem::path& path() const { return staging_; }
  // Moves the staging directory to the destination (an atomic exchange when one exists) and
  // removes what was there before.
  void commit();

 private:
  std::filesystem::path destination_, staging_, lock_;
  int lock_fd_ =
      -1;  // flock on lock_ (.<name>.lock beside the destination), held until destruction
  bool committed_ = false;
};

}  // namespace padfold
