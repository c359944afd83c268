// Writing a file whole or not at all, and the checked POSIX I/O every padfold writer and reader
// shares. Errors are std::runtime_error "<path>: <what is wrong>".
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace padfold {

// An owned file descriptor, closed on destruction.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now; returns the errno of a failed close, or 0.
  int close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// Reads exactly n bytes at offset; returns how many it got (fewer at the end of the file).
size_t pread_fully(int fd, void* buf, size_t n, uint64_t offset, const std::string& path);

// Writes all of it, or throws naming the path.
void write_fully(int fd, const char* buf, size_t n, const std::string& path);

// The whole of `path`, a regular file of at most `max_bytes`. Never waits on a FIFO nor reads a
// device; with `follow_link` false a symbolic link is refused too. Throws "<path>: not a regular
// file (a FIFO)", "<path>: larger than N bytes", or the failed call.
// What a file of `mode` is, for messages: "a directory", "a FIFO", "a character device"...
const char* file_kind(mode_t mode);

std::string read_regular_file(const std::string& path, int64_t max_bytes, bool follow_link = true);

// Writes `preamble` then `bytes` to `path`:
//  - A regular file, or a path that does not exist yet: written to a new temporary file in the
//    same directory (".<name>.<pid>.<n>.tmp"), flushed with fsync, then renamed over the path, so
//    the path holds either its old contents or the complete new file, never part of one. The
//    temporary file is removed when anything fails. A symbolic link is followed: the file it points
//    to is replaced and the link kept. An existing file keeps its permission bits; a new one gets
//    0666 less the umask.
//  - An existing non-regular file (a character device such as /dev/null or /dev/full, a pipe):
//    written in place, since it cannot be renamed over; write errors (ENOSPC for /dev/full, EPIPE)
//    are errors.
//  - A directory: an error.
// For any file padfold writes whole: .npy arrays, the normalized model of `import --emit-onnx`.
void write_file_replacing(const std::string& path, const std::string& preamble,
                          const std::string& bytes = "");

// A file to write whole: `preamble` then `bytes` to `path`.
struct FileContents {
  std::string path, preamble, bytes;
};

// Writes a set of files, each by write_file_replacing's rules, all or nothing: every temporary file
// is written first, then the devices and pipes in place, then the temporary files renamed over
// their paths. Any failure before the renames (a missing directory, a full disk, /dev/full) leaves
// every regular file as it was and no temporary file behind. For commands with several outputs.
void write_files_replacing(const std::vector<FileContents>& files);

}  // namespace padfold
