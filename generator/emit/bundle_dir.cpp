#include "emit/bundle_dir.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "base/atomic_file.h"
#include "base/identifiers.h"
#include "base/limits.h"

namespace padfold {

namespace fs = std::filesystem;

namespace {

// A single file name (not ".", "..", empty or a path), as a marker may list.
bool plain_name(const nlohmann::json& j) {
  if (!j.is_string()) return false;
  const std::string s = j.get<std::string>();
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos;
}

// Throws unless `dir` (named `label` in messages) is a directory `kind` describes: its marker, a
// regular file of bounded size (a FIFO would hang the read), of the kind's format, and nothing
// but the entries the marker lists.
void check_replaceable(const fs::path& dir, const DirectoryKind& kind, const std::string& label) {
  const std::string refuse_tail = "; padfold replaces only " + std::string(kind.noun) +
                                  "s: remove it or choose another directory";
  const std::string not_kind = "-o " + label + ": exists and is not a padfold " + kind.noun;
  const std::string not_of_format =
      not_kind + " (no " + kind.marker + " of format " + kind.format + ")" + refuse_tail;
  const fs::path marker_path = dir / kind.marker;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(marker_path, ec))) throw std::runtime_error(not_of_format);
  std::string text;
  try {
    text = read_regular_file(marker_path.string(), kMaxManifestBytes, /*follow_link=*/false);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(not_kind + " (" + e.what() + ")" + refuse_tail);
  }
  const nlohmann::json marker = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!marker.is_object() || !marker.contains("format") || marker["format"] != kind.format)
    throw std::runtime_error(not_of_format);
  const std::vector<std::string> entries = kind.entries(marker);
  std::vector<std::string> unexpected;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (std::find(entries.begin(), entries.end(), name) == entries.end())
      unexpected.push_back(name + (e.is_directory(ec) && !e.is_symlink(ec) ? "/" : ""));
  }
  if (unexpected.empty()) return;
  std::sort(unexpected.begin(), unexpected.end());
  std::string listed;
  const size_t shown = std::min<size_t>(unexpected.size(), 5);
  for (size_t i = 0; i < shown; ++i) listed += (i ? ", " : "") + unexpected[i];
  if (unexpected.size() > shown)
    listed += " and " + std::to_string(unexpected.size() - shown) + " more";
  throw std::runtime_error("-o " + label + ": a padfold " + kind.noun + " with files padfold " +
                           kind.writer + " does not write: " + listed +
                           "; padfold replaces only what it wrote: move them out or choose " +
                           "another directory");
}

fs::path unique_sibling(const fs::path& destination, const std::string& tag) {
  static std::atomic<int> counter{0};
  return destination.parent_path() / ("." + destination.filename().string() + "." + tag + "-" +
                                      std::to_string(getpid()) + "-" + std::to_string(counter++));
}

bool lexically_inside(const fs::path& a, const fs::path& b) {
  auto ai = a.begin();
  for (auto bi = b.begin(); bi != b.end(); ++bi, ++ai) {
    if (bi->empty()) continue;  // a trailing separator
    if (ai == a.end() || *ai != *bi) return false;
  }
  return true;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// Removes the staging directories (.<name>.partial-<pid>-<n>) writers of `destination` killed
// with SIGKILL or SIGHUP left beside it. Called with the destination's lock held: every writer
// takes it before staging and keeps it (its compile workers too) until its staging directory is
// gone, so none of these has a live owner. The directory an old bundle is moved to (.old-) may be
// the only copy of it after a kill and is left alone.
void remove_stale_staging(const fs::path& destination) {
  const std::string prefix = "." + destination.filename().string() + ".partial-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(destination.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string tail = name.substr(prefix.size());
    const size_t dash = tail.find('-');
    if (dash == std::string::npos || !all_digits(tail.substr(0, dash)) ||
        !all_digits(tail.substr(dash + 1)))
      continue;
    fs::remove_all(e.path(), ec);
  }
}

}  // namespace

std::vector<std::string> bundle_entries(const nlohmann::json& manifest) {
  std::vector<std::string> names{"manifest.json", "include", "runtime", "weights"};
  const nlohmann::json model = manifest.value("model", nlohmann::json());
  if (model.is_string())
    names.push_back("padfold_" + c_identifier(model.get<std::string>()) + ".cmake");
  const nlohmann::json targets = manifest.value("targets", nlohmann::json());
  if (targets.is_array())
    for (const nlohmann::json& t : targets)
      if (t.is_object() && plain_name(t.value("dir", nlohmann::json())))
        names.push_back(t["dir"].get<std::string>());
  return names;
}

std::vector<std::string> import_entries(const nlohmann::json& report) {
  std::vector<std::string> names{"import-report.json", "weights"};
  if (plain_name(report.value("spec", nlohmann::json())))
    names.push_back(report["spec"].get<std::string>());
  return names;
}

bool path_inside(const fs::path& inner, const fs::path& outer) {
  const fs::path in = fs::absolute(inner).lexically_normal();
  const fs::path out = fs::weakly_canonical(fs::absolute(outer));
  // The file the path leads to, and the path itself with only its directory resolved (a link
  // inside `outer` to a file elsewhere is removed with `outer` too).
  return lexically_inside(fs::weakly_canonical(in), out) ||
         (!in.filename().empty() &&
          lexically_inside(fs::weakly_canonical(in.parent_path()) / in.filename(), out));
}

void refuse_inputs_inside(const std::string& out,
                          const std::vector<std::pair<std::string, std::string>>& inputs) {
  if (out.empty()) return;
  for (const auto& [what, path] : inputs)
    if (!path.empty() && path_inside(path, out))
      throw std::runtime_error(what + " " + path + ": inside -o " + out +
                               ", which is replaced as a whole; expected a path outside it");
}

StagedDirectory::StagedDirectory(const fs::path& destination, const DirectoryKind& kind) {
  if (destination.empty()) throw std::runtime_error("no output directory given");
  fs::path given = fs::absolute(destination).lexically_normal();
  if (given.filename().empty()) given = given.parent_path();  // "out/tiny/"
  // Resolved once: a link to a directory is written through (the link kept), and the staging
  // directory and the lock go beside the directory it points to, on its file system.
  const fs::path d = fs::weakly_canonical(given);
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(d, ec)))
    throw std::runtime_error("-o " + destination.string() + ": a symbolic link to " +
                             fs::read_symlink(d, ec).string() +
                             ", which does not exist; expected a directory, a link to one, or a "
                             "path that does not exist yet");
  destination_ = d;
  if (fs::exists(d, ec)) {
    if (!fs::is_directory(d))
      throw std::runtime_error("-o " + destination.string() + ": exists and is not a directory");
    if (!fs::is_empty(d)) check_replaceable(d, kind, destination.string());
  }
  fs::create_directories(d.parent_path());
  // One writer at a time: two compiles into one directory would otherwise both succeed, the last
  // rename winning. The lock file is removed when the writer is done.
  lock_ = d.parent_path() / ("." + d.filename().string() + ".lock");
  for (;;) {
    lock_fd_ = open(lock_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd_ < 0)
      throw std::runtime_error("-o " + destination.string() + ": cannot create the lock file " +
                               lock_.string() + ": " + std::strerror(errno));
    if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      close(lock_fd_);
      lock_fd_ = -1;
      throw std::runtime_error(
          "-o " + destination.string() +
          (err == EWOULDBLOCK
               ? ": another padfold " + std::string(kind.writer) + " is writing this " + kind.noun +
                     " (" + lock_.string() + " is locked); try again when it is done"
               : ": cannot lock " + lock_.string() + ": " + std::strerror(err)));
    }
    // The previous writer may have removed the file between our open and flock: then the lock
    // is on a file nobody else sees; take the current one instead.
    struct stat held, current;
    if (fstat(lock_fd_, &held) == 0 && stat(lock_.c_str(), &current) == 0 &&
        held.st_ino == current.st_ino && held.st_dev == current.st_dev)
      break;
    close(lock_fd_);
  }
  remove_stale_staging(d);
  staging_ = unique_sibling(d, "partial");
  fs::create_directory(staging_);
}

StagedDirectory::~StagedDirectory() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }
  if (lock_fd_ >= 0) {
    unlink(lock_.c_str());  // while still holding it (see the constructor)
    close(lock_fd_);
  }
}

void StagedDirectory::commit() {
  if (!fs::exists(destination_)) {
    fs::rename(staging_, destination_);
  } else if (renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, destination_.c_str(),
                       RENAME_EXCHANGE) != 0) {
    // No atomic exchange on this file system: move the old bundle aside first.
    const fs::path old = unique_sibling(destination_, "old");
    fs::rename(destination_, old);
    try {
      fs::rename(staging_, destination_);
    } catch (...) {
      fs::rename(old, destination_);
      throw;
    }
    staging_ = old;
  }
  committed_ = true;
  std::error_code ec;
  fs::remove_all(staging_, ec);  // the previous bundle, after an exchange
}

}  // namespace padfold
