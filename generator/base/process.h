// Child processes. Compile workers: each job runs in a child process, so a crash or a hang inside
// Halide or LLVM (SIGFPE, SIGSEGV, an assertion's abort) becomes a reported failure instead of a
// dead padfold. Tools (the linker): run from an argument vector, never through a shell.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace padfold {

struct WorkerJob {
  std::string label;           // names the job in messages ("target T, layer L, schedule S")
  std::function<void()> work;  // runs in the child; throwing reports the exception's message
};

struct WorkerResult {
  bool ok = false;
  std::string error;   // why it failed: the exception's message, the signal, or the timeout
  std::string output;  // what the job printed to stderr (Halide's warnings, a crash's last words)
  double seconds = 0;
};

struct WorkerOptions {
  int parallel = 1;        // jobs running at once
  double timeout_s = 600;  // a job still running after this long is killed and failed
  // Called in the parent as each job ends (in completion order). It may run workers of its own
  // while the other jobs go on (the tuner measures each candidate as its compile ends).
  std::function<void(size_t job, const WorkerResult&)> on_done;
};

// Runs every job, at most `parallel` at a time, and returns their results in job order. SIGINT,
// SIGTERM and SIGHUP while it runs kill the children and throw std::runtime_error("interrupted").
std::vector<WorkerResult> run_workers(const std::vector<WorkerJob>& jobs,
                                      const WorkerOptions& options);

// The number of jobs to run at once by default: this machine's online cores.
int default_parallel_jobs();

// Whether `program` is an executable file in a directory of $PATH.
bool program_on_path(const std::string& program);

// Runs argv[0] (looked up in $PATH) with argv and waits for it; throws std::runtime_error naming
// `what` and the command when it cannot start or exits with a failure.
void run_program(const std::vector<std::string>& argv, const std::string& what);

}  // namespace padfold
