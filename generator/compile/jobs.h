// Compile jobs in worker processes with the test suite's injected faults and an optional retry,
// and the link of a shared library with one Halide runtime: shared by padfold compile and the
// tuner.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/process.h"

namespace padfold {

struct CompileJob {
  std::string label;  // names the job in messages ("target T, layer L, schedule S")
  std::string layer;  // the layer whose injected fault (PADFOLD_INJECT_COMPILE_FAULT) hits the job
  // Only faults marked ":every" hit the job: a job that must build (the tuner's default
  // candidate). Every retry is spared so.
  bool spare_first_faults = false;
  std::function<void()> work;  // runs in the worker; throwing fails the job with the message
};

struct CompileJobOptions {
  int parallel = 1;        // jobs running at once
  double timeout_s = 600;  // a job still running after this long is killed and failed
  // Called in the parent as each attempt of a job ends (in completion order).
  std::function<void(size_t job, const WorkerResult&)> on_done;
  // Called in the parent, in job order, for each job whose first attempt failed, once every first
  // attempt has ended: the job to run once more in its place, or nullopt to leave it failed.
  // Unset: no retries.
  std::function<std::optional<CompileJob>(size_t job, const WorkerResult&)> retry;
};

// Runs the jobs in worker processes (run_workers), at most `parallel` at once, then the retries.
// Returns each job's last result, in job order.
std::vector<WorkerResult> run_compile_jobs(std::vector<CompileJob> jobs,
                                           const CompileJobOptions& options);

// `cc -shared` linking `inputs` (C sources, objects) and `whole_archives` (every member kept, as
// for a bundle whose kernels are looked up at run time) with the Halide runtime archive.
struct SharedLibraryLink {
  std::string cc = "cc";
  std::vector<std::string> compile_flags;  // before -o: -fPIC, -O2, -std=c99
  std::string output;
  std::vector<std::string> include_dirs;
  std::vector<std::string> inputs;
  std::vector<std::string> whole_archives;
  std::string halide_runtime;
  std::vector<std::string> link_flags;  // after the runtime: -Wl,--exclude-libs,ALL, -Wl,-Bsymbolic
};

// Runs the link (run_program); throws std::runtime_error naming `what` when it fails.
void link_shared_library(const SharedLibraryLink& link, const std::string& what);

}  // namespace padfold
