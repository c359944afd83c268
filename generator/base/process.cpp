#include "base/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace padfold {

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> interrupted{0};

extern "C" void on_interrupt(int sig) {
  interrupted = sig;
}

// Installs the interrupt handlers for the lifetime of a run and restores the previous ones. Runs
// nest (a job's on_done may run workers of its own: the tuner measures as compiles end): the
// outermost guard owns the handlers, and an interrupt reaches every level.
int guard_depth = 0;

class InterruptGuard {
 public:
  InterruptGuard() {
    if (guard_depth++ > 0) return;
    interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGHUP, &sa, &old_hup_);  // the terminal closed
  }
  ~InterruptGuard() {
    if (--guard_depth > 0) return;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGHUP, &old_hup_, nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction old_int_ {
  }, old_term_{}, old_hup_{};
};

std::string signal_text(int sig) {
  const char* name = sigabbrev_np(sig);
  const char* what = strsignal(sig);
  return "crashed with SIG" + std::string(name ? name : std::to_string(sig).c_str()) + " (" +
         (what ? what : "signal") + ")";
}

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// The child's stderr goes to `out` (what Halide or LLVM print before they die: an assertion's
// text), its error message to `err`.
[[noreturn]] void run_child(const WorkerJob& job, int out, int err, pid_t parent) {
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  // A worker dies with its parent: a padfold killed by SIGKILL leaves no job running on (holding
  // its work directory, a core, its memory).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  dup2(out, STDERR_FILENO);
  int status = 0;
  try {
    job.work();
  } catch (const std::exception& e) {
    write_all(err, e.what());
    status = 1;
  } catch (...) {
    write_all(err, "unknown exception");
    status = 1;
  }
  _exit(status);  // no atexit handlers or static destructors of the parent's state
}

// The last non-empty line of a child's stderr, shortened.
std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of(" \n\r\t");
  if (end == std::string::npos) return "";
  const size_t begin = text.rfind('\n', end);
  std::string line = text.substr(begin == std::string::npos ? 0 : begin + 1,
                                 end + 1 - (begin == std::string::npos ? 0 : begin + 1));
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

struct Running {
  size_t job;
  pid_t pid;
  int err_fd, out_fd;
  Clock::time_point start;
  std::string message, output;
  bool timed_out = false;
};

void drain(int fd, std::string& into) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return;
    if (into.size() < (1u << 20)) into.append(buf, static_cast<size_t>(n));
  }
}

void drain(Running& r) {
  drain(r.err_fd, r.message);
  drain(r.out_fd, r.output);
}

void close_fds(Running& r) {
  close(r.err_fd);
  close(r.out_fd);
}

WorkerResult finish(Running& r, int status, double timeout_s) {
  drain(r);
  close_fds(r);
  WorkerResult res;
  res.seconds = std::chrono::duration<double>(Clock::now() - r.start).count();
  if (r.timed_out) {
    res.error =
        "did not finish within " + std::to_string(static_cast<int>(timeout_s)) + " s (killed)";
  } else if (WIFSIGNALED(status)) {
    res.error = signal_text(WTERMSIG(status));
    const std::string said = last_line(r.output);
    if (!said.empty()) res.error += ": " + said;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    res.ok = true;
  } else {
    res.error =
        r.message.empty() ? "exited with status " + std::to_string(WEXITSTATUS(status)) : r.message;
  }
  res.output = r.output;
  return res;
}

}  // namespace

int default_parallel_jobs() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::vector<WorkerResult> run_workers(const std::vector<WorkerJob>& jobs,
                                      const WorkerOptions& options) {
  std::vector<WorkerResult> results(jobs.size());
  std::vector<Running> running;
  const size_t parallel = static_cast<size_t>(std::max(1, options.parallel));
  InterruptGuard guard;
  size_t next = 0;
  auto kill_all = [&] {
    for (Running& r : running) {
      kill(r.pid, SIGKILL);
      waitpid(r.pid, nullptr, 0);
      close_fds(r);
    }
    running.clear();
  };
  try {
    while (next < jobs.size() || !running.empty()) {
      if (interrupted) {
        kill_all();
        throw std::runtime_error("interrupted");
      }
      while (next < jobs.size() && running.size() < parallel) {
        int err[2], out[2];
        if (pipe2(err, O_CLOEXEC) != 0)
          throw std::runtime_error("pipe: " + std::string(strerror(errno)));
        if (pipe2(out, O_CLOEXEC) != 0) {
          close(err[0]);
          close(err[1]);
          throw std::runtime_error("pipe: " + std::string(strerror(errno)));
        }
        std::fflush(nullptr);
        const pid_t parent = getpid();
        const pid_t pid = fork();
        if (pid < 0) {
          for (int fd : {err[0], err[1], out[0], out[1]}) close(fd);
          throw std::runtime_error("fork: " + std::string(strerror(errno)));
        }
        if (pid == 0) run_child(jobs[next], out[1], err[1], parent);
        close(err[1]);
        close(out[1]);
        fcntl(err[0], F_SETFL, O_NONBLOCK);
        fcntl(out[0], F_SETFL, O_NONBLOCK);
        running.push_back({next, pid, err[0], out[0], Clock::now(), "", "", false});
        ++next;
      }
      std::vector<pollfd> polls;
      for (const Running& r : running) {
        polls.push_back({r.err_fd, POLLIN, 0});
        polls.push_back({r.out_fd, POLLIN, 0});
      }
      poll(polls.data(), polls.size(), 50);
      for (size_t i = 0; i < running.size();) {
        Running& r = running[i];
        drain(r);
        int status = 0;
        pid_t done = waitpid(r.pid, &status, WNOHANG);
        const double elapsed = std::chrono::duration<double>(Clock::now() - r.start).count();
        if (done == 0 && elapsed > options.timeout_s) {
          kill(r.pid, SIGKILL);
          done = waitpid(r.pid, &status, 0);
          r.timed_out = true;
        }
        if (done == 0) {
          ++i;
          continue;
        }
        results[r.job] = finish(r, status, options.timeout_s);
        if (options.on_done) options.on_done(r.job, results[r.job]);
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  } catch (...) {
    kill_all();
    throw;
  }
  return results;
}

bool program_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string file = (dir.empty() ? "." : dir) + "/" + program;
    struct stat st {};
    if (stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(file.c_str(), X_OK) == 0)
      return true;
  }
  return false;
}

void run_program(const std::vector<std::string>& argv, const std::string& what) {
  std::string command;
  for (const std::string& a : argv) command += (command.empty() ? "" : " ") + a;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (err != 0) throw std::runtime_error(what + ": cannot run " + argv[0] + ": " + strerror(err));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  const std::string how = WIFSIGNALED(status)
                              ? signal_text(WTERMSIG(status))
                              : "exited with status " + std::to_string(WEXITSTATUS(status));
  throw std::runtime_error(what + " failed (" + how + "); command was: " + command);
}

}  // namespace padfold
