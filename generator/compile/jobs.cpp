// Compile jobs in workers with injected faults and a retry; the shared-library link.
#include "compile/jobs.h"

#include "base/fault_injection.h"

namespace padfold {

namespace {

// The job with the fault the tests inject into its layer's worker, if any, raised first.
WorkerJob with_fault(const CompileJob& job, const InjectedFaults& faults, bool spared) {
  const auto fault = faults.find(job.layer);
  if (fault == faults.end() || (spared && !fault->second.every)) return {job.label, job.work};
  return {job.label, [fault = fault->second] { raise_fault(fault); }};
}

}  // namespace

std::vector<WorkerResult> run_compile_jobs(std::vector<CompileJob> jobs,
                                           const CompileJobOptions& options) {
  const InjectedFaults faults = injected_faults();
  std::vector<WorkerResult> results(jobs.size());
  std::vector<size_t> pending(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) pending[i] = i;
  for (int attempt = 0; attempt < 2 && !pending.empty(); ++attempt) {
    std::vector<WorkerJob> batch;
    for (size_t i : pending)
      batch.push_back(with_fault(jobs[i], faults, attempt > 0 || jobs[i].spare_first_faults));
    WorkerOptions w;
    w.parallel = options.parallel;
    w.timeout_s = options.timeout_s;
    w.on_done = [&](size_t job, const WorkerResult& r) {
      results[pending[job]] = r;
      if (options.on_done) options.on_done(pending[job], r);
    };
    run_workers(batch, w);
    std::vector<size_t> retried;
    if (attempt == 0 && options.retry)
      for (size_t i : pending) {
        if (results[i].ok) continue;
        if (std::optional<CompileJob> again = options.retry(i, results[i])) {
          jobs[i] = std::move(*again);
          retried.push_back(i);
        }
      }
    pending = retried;
  }
  return results;
}

void link_shared_library(const SharedLibraryLink& link, const std::string& what) {
  std::vector<std::string> argv = {link.cc, "-shared"};
  argv.insert(argv.end(), link.compile_flags.begin(), link.compile_flags.end());
  argv.insert(argv.end(), {"-o", link.output});
  for (const std::string& dir : link.include_dirs) argv.push_back("-I" + dir);
  argv.insert(argv.end(), link.inputs.begin(), link.inputs.end());
  if (!link.whole_archives.empty()) {
    argv.push_back("-Wl,--whole-archive");
    argv.insert(argv.end(), link.whole_archives.begin(), link.whole_archives.end());
    argv.push_back("-Wl,--no-whole-archive");
  }
  argv.push_back(link.halide_runtime);
  argv.insert(argv.end(), link.link_flags.begin(), link.link_flags.end());
  argv.insert(argv.end(), {"-lpthread", "-ldl", "-lm"});
  run_program(argv, what);
}

}  // namespace padfold
