// `padfold compile` never dies with the compiler and never leaves a half-written bundle: a crash
// or hang injected into one kernel's worker (PADFOLD_INJECT_COMPILE_FAULT) becomes a fallback to
// the conservative schedule, recorded in the report and the manifest, or a clear error that
// leaves an existing bundle at the same path exactly as it was. Also: `host` can be overridden
// (PADFOLD_HOST_TARGET), and tuning-only target parts are not CPU requirements.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/fault_injection.h"
#include "base/process.h"
#include "bundle_util.h"
#include "compile/target.h"
#include "emit/bundle.h"
#include "padfold_runtime.h"

namespace padfold {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path work_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir =
      fs::temp_directory_path() / ("padfold_worker_" + std::to_string(getpid())) / info->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_.empty())
      unsetenv(name_);
    else
      setenv(name_, old_.c_str(), 1);
  }

 private:
  const char* name_;
  std::string old_;
};

const Model& tiny() {
  static const Model model = load_spec(PF_TINY_SPEC);
  return model;
}

CompileOptions options(const fs::path& out) {
  CompileOptions opt;
  opt.out_dir = out.string();
  opt.targets = {"x86-64-linux-avx2-fma"};
  opt.jobs = 2;
  return opt;
}

// Every file under `dir` with its size and modification time: "unchanged" means equal.
std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file())
      files[fs::relative(e.path(), dir).string()] = {e.file_size(), e.last_write_time()};
  return files;
}

int entries_beside(const fs::path& out) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(out.parent_path())) n += e.path() != out;
  return n;
}

TEST(CompileWorkers, CrashInTunedScheduleFallsBackToConservative) {
  const fs::path out = work_dir() / "bundle";
  for (const char* fault : {"sigfpe", "sigsegv", "abort"}) {
    SCOPED_TRACE(fault);
    ScopedEnv env(kInjectFaultVariable, std::string("dw:") + fault);
    const auto reports = compile_bundle(tiny(), options(out));
    ASSERT_EQ(reports.size(), tiny().layers.size());
    for (const KernelReport& r : reports) {
      if (r.layer == "dw") {
        EXPECT_EQ(r.schedule, "avx2.conservative");
        EXPECT_EQ(r.fallback_from, "avx2.depthwise");
        EXPECT_NE(r.fallback_reason.find("crashed with SIG"), std::string::npos)
            << r.fallback_reason;
      } else {
        EXPECT_TRUE(r.fallback_from.empty()) << r.layer;
      }
    }
    const json m = read_json(out / "manifest.json");
    const json& s = m["targets"][0]["schedules"];
    EXPECT_EQ(s["dw"]["name"], "avx2.conservative");
    EXPECT_EQ(s["dw"]["fallback"]["from"], "avx2.depthwise");
    EXPECT_FALSE(s["stem"].contains("fallback"));
  }
  // The fallback kernel is a real kernel: the bundle opens and runs.
  char err[PF_ERRLEN];
  pf_bundle* b = nullptr;
  ASSERT_EQ(pf_bundle_open(out.c_str(), nullptr, &b, err, sizeof err), PF_OK) << err;
  const pf_kernel_desc* k = nullptr;
  EXPECT_EQ(pf_bundle_find(b, "dw", &k, err, sizeof err), PF_OK) << err;
  pf_bundle_close(b);
}

TEST(CompileWorkers, HangIsKilledAfterTheTimeout) {
  const fs::path out = work_dir() / "bundle";
  ScopedEnv env(kInjectFaultVariable, "pool:hang");
  CompileOptions opt = options(out);
  opt.kernel_timeout_s = 2;
  const auto reports = compile_bundle(tiny(), opt);
  bool seen = false;
  for (const KernelReport& r : reports) {
    if (r.layer != "pool") continue;
    seen = true;
    EXPECT_EQ(r.schedule, "avx2.conservative");
    EXPECT_NE(r.fallback_reason.find("did not finish within 2 s"), std::string::npos)
        << r.fallback_reason;
  }
  EXPECT_TRUE(seen);
}

TEST(CompileWorkers, FailureBothWaysIsAClearErrorAndKeepsTheOldBundle) {
  const fs::path out = work_dir() / "bundle";
  compile_bundle(tiny(), options(out));
  const auto before = snapshot(out);
  ASSERT_FALSE(before.empty());
  ScopedEnv env(kInjectFaultVariable, "stem:sigsegv:every");
  try {
    compile_bundle(tiny(), options(out));
    FAIL() << "compile should fail";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("layer 'stem'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("x86-64-linux-avx2-fma"), std::string::npos) << msg;
    EXPECT_NE(msg.find("avx2.stem"), std::string::npos) << msg;
    EXPECT_NE(msg.find("avx2.conservative"), std::string::npos) << msg;
    EXPECT_NE(msg.find("SIGSEGV"), std::string::npos) << msg;
  }
  EXPECT_EQ(snapshot(out), before) << "the existing bundle was changed";
  EXPECT_EQ(entries_beside(out), 0) << "a staging directory or the lock was left behind";
}

TEST(CompileWorkers, FailedFirstCompileLeavesNothing) {
  const fs::path out = work_dir() / "bundle";
  ScopedEnv env(kInjectFaultVariable, "avg:abort:every");
  EXPECT_THROW(compile_bundle(tiny(), options(out)), std::runtime_error);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(entries_beside(out), 0);
}

TEST(CompileWorkers, ReplacesABundleButNotOtherDirectories) {
  const fs::path dir = work_dir();
  const fs::path out = dir / "bundle";
  compile_bundle(tiny(), options(out));
  // Inside what the bundle consists of (a file a user adds beside them is refused: HostilePaths).
  std::ofstream(out / "include" / "stale.h") << "from an older bundle";
  compile_bundle(tiny(), options(out));
  EXPECT_FALSE(fs::exists(out / "include" / "stale.h"))
      << "the new bundle replaces the old one whole";
  EXPECT_TRUE(fs::exists(out / "manifest.json"));

  const fs::path precious = dir / "precious";
  fs::create_directories(precious);
  std::ofstream(precious / "notes.txt") << "keep me";
  try {
    compile_bundle(tiny(), options(precious));
    FAIL() << "compile should refuse a directory that is not a bundle";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a padfold bundle"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(precious / "notes.txt"));
}

// Starts `padfold compile` of tiny.json into `out` with the pool kernel hanging, and returns its
// pid once its lock and staging directory exist beside `out` and a worker runs.
pid_t start_hanging_compile(const fs::path& out) {
  const pid_t pid = fork();
  if (pid == 0) {
    setenv(kInjectFaultVariable, "pool:hang:every", 1);
    execl(PADFOLD_BIN, PADFOLD_BIN, "compile", PF_TINY_SPEC, "-o", out.c_str(), "--target",
          "x86-64-linux-avx2-fma", static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 200 && entries_beside(out) < 2; ++i) usleep(20000);
  EXPECT_EQ(entries_beside(out), 2) << "no lock and staging directory seen";
  usleep(300000);
  return pid;
}

// `padfold compile` interrupted (Ctrl-C, kill, a closed terminal) while a kernel compiles: the
// workers are stopped, the staging directory removed and the existing bundle left as it was.
TEST(CompileWorkers, InterruptedCompileKeepsTheOldBundle) {
  const fs::path out = work_dir() / "bundle";
  compile_bundle(tiny(), options(out));
  const auto before = snapshot(out);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    const pid_t pid = start_hanging_compile(out);
    ASSERT_GE(pid, 0);
    kill(pid, sig);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status)) << "padfold died of signal " << sig << " instead of cleaning up";
    EXPECT_EQ(WEXITSTATUS(status), 1);
    EXPECT_EQ(snapshot(out), before) << "the existing bundle was changed";
    EXPECT_EQ(entries_beside(out), 0) << "a staging directory or the lock was left behind";
  }
}

// A compile killed with SIGKILL cannot clean up: the next compile into the same -o removes its
// staging directory, and nothing of other directories beside it.
TEST(CompileWorkers, NextCompileRemovesAKilledCompilesStaging) {
  const fs::path out = work_dir() / "bundle";
  compile_bundle(tiny(), options(out));
  const pid_t pid = start_hanging_compile(out);
  ASSERT_GE(pid, 0);
  kill(pid, SIGKILL);
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  EXPECT_EQ(entries_beside(out), 2) << "the killed compile's staging directory and lock";
  const fs::path other = out.parent_path() / ".other.partial-1-0";
  const fs::path unlike = out.parent_path() / ".bundle.partial-keep";
  fs::create_directories(other);
  fs::create_directories(unlike);
  // Its workers die with it (and with them the lock they share).
  const int fd = open((out.parent_path() / ".bundle.lock").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 500 && flock(fd, LOCK_EX | LOCK_NB) != 0; ++i) usleep(10000);
  close(fd);
  compile_bundle(tiny(), options(out));
  EXPECT_EQ(entries_beside(out), 2) << "only the unrelated directories are left";
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(unlike));
}

TEST(CompileWorkers, WorkersReportExceptionsAndSignals) {
  std::vector<WorkerJob> jobs = {{"ok", [] {}},
                                 {"throws", [] { throw std::runtime_error("bad schedule"); }},
                                 {"fpe", [] { raise(SIGFPE); }}};
  WorkerOptions opt;
  opt.parallel = 2;
  const auto r = run_workers(jobs, opt);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].ok);
  EXPECT_FALSE(r[1].ok);
  EXPECT_EQ(r[1].error, "bad schedule");
  EXPECT_FALSE(r[2].ok);
  EXPECT_NE(r[2].error.find("SIGFPE"), std::string::npos) << r[2].error;
}

// The tuner measures a candidate (a run of its own) in on_done while the other compiles go on.
TEST(CompileWorkers, ARunInsideOnDoneOverlapsTheJobsStillRunning) {
  const fs::path dir = work_dir();
  const fs::path started = dir / "slow_started", ended = dir / "slow_ended";
  const std::vector<WorkerJob> outer = {{"fast", [] {}}, {"slow", [&] {
                                                            std::ofstream(started) << 1;
                                                            usleep(1500 * 1000);
                                                            std::ofstream(ended) << 1;
                                                          }}};
  std::vector<WorkerResult> inner;
  WorkerOptions opt;
  opt.parallel = 2;
  opt.on_done = [&](size_t job, const WorkerResult&) {
    if (job != 0) return;
    const fs::path seen = dir / "inner_saw";
    inner = run_workers({{"inner",
                          [&] {
                            // The slow outer job is running beside this one, not done.
                            for (int i = 0; i < 200 && !fs::exists(started); ++i) usleep(10 * 1000);
                            std::ofstream(seen) << fs::exists(started) << fs::exists(ended);
                          }}},
                        WorkerOptions{});
    std::ifstream f(seen);
    std::string text;
    f >> text;
    EXPECT_EQ(text, "10");
  };
  const auto r = run_workers(outer, opt);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_TRUE(inner[0].ok) << inner[0].error;
  EXPECT_TRUE(r[0].ok && r[1].ok);
  EXPECT_TRUE(fs::exists(ended));
}

// An interrupt while a nested run starts stops both runs (no child is left) and the handlers found
// before the outer run are back afterwards.
TEST(CompileWorkers, AnInterruptInANestedRunStopsEveryLevelAndRestoresTheHandlers) {
  struct sigaction before {};
  sigaction(SIGINT, nullptr, &before);
  const fs::path dir = work_dir();
  const fs::path pid_file = dir / "outer_pid";
  const std::vector<WorkerJob> outer = {{"fast", [] {}}, {"slow", [&] {
                                                            std::ofstream(pid_file) << getpid();
                                                            sleep(30);
                                                          }}};
  WorkerOptions opt;
  opt.parallel = 2;
  opt.on_done = [&](size_t job, const WorkerResult&) {
    if (job != 0) return;
    for (int i = 0; i < 200 && !fs::exists(pid_file); ++i) usleep(10 * 1000);
    raise(SIGINT);  // before the nested run starts: it must not forget it
    run_workers({{"inner", [] { sleep(30); }}}, WorkerOptions{});
  };
  try {
    run_workers(outer, opt);
    ADD_FAILURE() << "the interrupt was lost";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "interrupted");
  }
  pid_t slow = 0;
  std::ifstream(pid_file) >> slow;
  ASSERT_GT(slow, 0);
  EXPECT_NE(kill(slow, 0), 0) << "the outer run's slow job is still running";
  struct sigaction after {};
  sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

TEST(Targets, HostCanBeOverridden) {
  const std::string zen3 = "x86-64-linux-tune_znver3-avx-avx2-f16c-fma-sse41";
  {
    ScopedEnv env(kHostTargetVariable, zen3);
    EXPECT_EQ(resolve_target("host").to_string(), zen3);
  }
  {
    ScopedEnv env(kHostTargetVariable, "x86-64-linux-avx9000");
    try {
      resolve_target("host");
      FAIL();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(kHostTargetVariable), std::string::npos) << e.what();
    }
  }
}

TEST(Targets, TuningIsNotACpuRequirement) {
  const Halide::Target t("x86-64-linux-tune_znver3-avx-avx2-f16c-fma-sse41");
  const std::vector<std::string> want = {"avx", "avx2", "f16c", "fma", "sse41"};
  EXPECT_EQ(cpu_feature_names(t), want);
  EXPECT_EQ(tuning_name(t), "znver3");
  EXPECT_EQ(tuning_name(Halide::Target("x86-64-linux-avx2")), "");
  EXPECT_THROW(resolve_target("riscv-64-linux"), std::runtime_error);
  EXPECT_THROW(resolve_target("host-metal"), std::runtime_error);  // GPUs: CUDA and OpenCL only
}

TEST(Targets, Zen3BundleOpensOnAnAvx2Cpu) {
  const fs::path out = work_dir() / "bundle";
  CompileOptions opt = options(out);
  opt.targets = {"x86-64-linux-tune_znver3-avx-avx2-f16c-fma-sse41"};
  compile_bundle(tiny(), opt);
  const json m = read_json(out / "manifest.json");
  EXPECT_EQ(m["targets"][0]["tuned_for"], "znver3");
  for (const auto& f : m["targets"][0]["features"])
    EXPECT_EQ(f.get<std::string>().rfind("tune_", 0), std::string::npos) << f;
  pf_open_options o{};
  o.cpu_flags = "sse41 ssse3 sse4_2 popcnt avx avx2 fma f16c bmi1 bmi2 abm movbe";  // a Zen 3
  char err[PF_ERRLEN];
  pf_bundle* b = nullptr;
  ASSERT_EQ(pf_bundle_open(out.c_str(), &o, &b, err, sizeof err), PF_OK) << err;
  pf_bundle_close(b);
}

}  // namespace
}  // namespace padfold
