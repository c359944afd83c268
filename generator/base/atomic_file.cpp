// Atomic whole-file writes and the checked POSIX I/O under them (atomic_file.h).
#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace padfold {
namespace {

[[noreturn]] void fail(const std::string& label, const std::string& what) {
  throw std::runtime_error(label + ": " + what);
}

std::string sys_error(int err) {
  return std::strerror(err);
}

void write_all_parts(int fd, const std::string& preamble, const std::string& data,
                     const std::string& path) {
  write_fully(fd, preamble.data(), preamble.size(), path);
  write_fully(fd, data.data(), data.size(), path);
}

}  // namespace

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a plain file";
}

std::string read_regular_file(const std::string& path, int64_t max_bytes, bool follow_link) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | (follow_link ? 0 : O_NOFOLLOW)));
  if (fd.get() < 0) {
    if (errno == ELOOP && !follow_link) fail(path, "not a regular file (a symbolic link)");
    fail(path, "cannot open: " + sys_error(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail(path, "cannot read: " + sys_error(errno));
  if (!S_ISREG(st.st_mode))
    fail(path, std::string("not a regular file (") + file_kind(st.st_mode) + ")");
  const std::string too_large = "larger than " + std::to_string(max_bytes) + " bytes";
  if (st.st_size > max_bytes) fail(path, too_large);
  std::string text;
  char buf[1 << 16];
  uint64_t offset = 0;
  for (;;) {  // to the end, never past the limit (the file may grow meanwhile)
    const size_t n = pread_fully(fd.get(), buf, sizeof buf, offset, path);
    text.append(buf, n);
    offset += n;
    if (static_cast<int64_t>(text.size()) > max_bytes) fail(path, too_large);
    if (n < sizeof buf) return text;
  }
}

// Reads exactly n bytes at offset; returns how many it got (fewer at the end of the file).
size_t pread_fully(int fd, void* buf, size_t n, uint64_t offset, const std::string& path) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r =
        ::pread(fd, static_cast<char*>(buf) + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(path, "cannot read: " + sys_error(errno));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

// Writes all of it, or throws naming the path.
void write_fully(int fd, const char* buf, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t r = ::write(fd, buf, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(path, "cannot write: " + sys_error(errno));
    }
    if (r == 0) fail(path, "cannot write: the write made no progress");
    buf += r;
    n -= static_cast<size_t>(r);
  }
}

namespace {

// A file of a set being written: a temporary file to rename over `target` once all are written,
// or (a device or pipe) one to write in place.
struct PendingFile {
  const FileContents* file;
  bool in_place = false;
  std::string tmp, target;
};

// Where `path` leads through symbolic links, the last of which may name a file that does not
// exist yet (a dangling link is written through like any other); `path` itself when no link.
std::string link_target(const std::string& path) {
  std::string at = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat lst {};
    if (::lstat(at.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) return at;
    std::vector<char> buf(4096);
    const ssize_t n = ::readlink(at.c_str(), buf.data(), buf.size());
    if (n < 0 || static_cast<size_t>(n) >= buf.size())
      fail(path, "cannot resolve the symbolic link: " + sys_error(n < 0 ? errno : ENAMETOOLONG));
    std::string to(buf.data(), static_cast<size_t>(n));
    const size_t slash = at.rfind('/');
    if (!to.empty() && to[0] != '/' && slash != std::string::npos)
      to = at.substr(0, slash + 1) + to;
    at = to;
  }
  fail(path, "cannot resolve the symbolic link: " + sys_error(ELOOP));
}

// Checks the path and, unless it is written in place, writes the complete temporary file beside
// it (the path itself is untouched).
PendingFile write_temporary(const FileContents& f) {
  const std::string& path = f.path;
  PendingFile p{&f, false, {}, {}};
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) fail(path, "cannot write: " + sys_error(errno));
  if (exists && S_ISDIR(st.st_mode)) fail(path, "cannot write: is a directory");
  if (exists && !S_ISREG(st.st_mode)) {
    p.in_place = true;  // a device or a pipe cannot be replaced by a rename
    return p;
  }

  // A regular file or a new one: a temporary file beside it, renamed over it when complete. A
  // symbolic link is written through, whether its target exists yet or not.
  p.target = link_target(path);
  const size_t slash = p.target.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : p.target.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? p.target : p.target.substr(slash + 1);
  if (name.empty()) fail(path, "cannot write: the path names a directory");

  int raw = -1;
  for (unsigned n = 0; raw < 0 && n < 100; ++n) {
    p.tmp = (slash == std::string::npos ? std::string() : dir) + "." + name + "." +
            std::to_string(::getpid()) + "." + std::to_string(n) + ".tmp";
    raw = ::open(p.tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    if (raw < 0 && errno != EEXIST) break;
  }
  if (raw < 0)
    fail(path, "cannot create a temporary file in directory '" + dir + "': " + sys_error(errno));
  Fd fd(raw);
  try {
    if (exists && ::fchmod(fd.get(), st.st_mode & 07777) != 0)
      fail(path, "cannot set the permissions of the temporary file: " + sys_error(errno));
    write_all_parts(fd.get(), f.preamble, f.bytes, path);
    if (::fsync(fd.get()) != 0 && errno != EINVAL && errno != EROFS)
      fail(path, "cannot write: " + sys_error(errno));
    if (const int err = fd.close()) fail(path, "cannot write: " + sys_error(err));
  } catch (...) {
    ::unlink(p.tmp.c_str());
    throw;
  }
  return p;
}

void write_in_place(const FileContents& f) {
  Fd fd(::open(f.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) fail(f.path, "cannot open for writing: " + sys_error(errno));
  write_all_parts(fd.get(), f.preamble, f.bytes, f.path);
  if (const int err = fd.close()) fail(f.path, "cannot write: " + sys_error(err));
}

}  // namespace

void write_files_replacing(const std::vector<FileContents>& files) {
  std::vector<PendingFile> pending;
  auto remove_temporaries = [&] {
    for (const PendingFile& p : pending)
      if (!p.tmp.empty()) ::unlink(p.tmp.c_str());
  };
  try {
    for (const FileContents& f : files) pending.push_back(write_temporary(f));
    for (const PendingFile& p : pending)
      if (p.in_place) write_in_place(*p.file);
    for (PendingFile& p : pending) {
      if (p.in_place) continue;
      if (::rename(p.tmp.c_str(), p.target.c_str()) != 0)
        fail(p.file->path, "cannot replace it with the new file: " + sys_error(errno));
      p.tmp.clear();
    }
  } catch (...) {
    remove_temporaries();
    throw;
  }
}

void write_file_replacing(const std::string& path, const std::string& preamble,
                          const std::string& bytes) {
  write_files_replacing({FileContents{path, preamble, bytes}});
}

}  // namespace padfold
