// The tuner's work directory: created under /tmp with an flock held for the run's life, and the
// directories of runs that are over (killed) cleaned up.
#include "tune/workdir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace padfold {

namespace fs = std::filesystem;

namespace {

// Whether the run owning work directory `dir` is over: it holds an flock on dir/.lock while it,
// or a worker it forked, runs (released however it ends, even while a killed run is a zombie not
// yet reaped). A directory without the lock file is judged by its pid instead.
bool work_dir_owner_gone(const fs::path& dir, const std::string& pid) {
  const int fd = open((dir / ".lock").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH;
  const bool gone = flock(fd, LOCK_EX | LOCK_NB) == 0;
  close(fd);
  return gone;
}

}  // namespace

WorkDir::WorkDir() {
  const std::string prefix = "padfold-tune-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid =
        name.substr(prefix.size(), name.find('-', prefix.size()) - prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9)
      continue;
    if (work_dir_owner_gone(e.path(), pid)) fs::remove_all(e.path(), ec);
  }
  std::string t =
      (fs::temp_directory_path() / (prefix + std::to_string(getpid()) + "-XXXXXX")).string();
  if (!mkdtemp(t.data())) throw std::runtime_error("cannot create a directory under /tmp");
  path_ = t;
  // Locked before it has the name another run looks for.
  const fs::path unnamed = path_ / ".lock.new";
  lock_fd_ = open(unnamed.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lock_fd_ < 0 || flock(lock_fd_, LOCK_EX) != 0 ||
      rename(unnamed.c_str(), (path_ / ".lock").c_str()) != 0)
    throw std::runtime_error("cannot lock " + (path_ / ".lock").string() + ": " +
                             std::strerror(errno));
}

WorkDir::~WorkDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
  if (lock_fd_ >= 0) close(lock_fd_);
}

}  // namespace padfold
