// The whole kernel-case matrix compiled (not run) for every CPU target family, whatever this CPU
// is: a Halide or LLVM crash on any family's schedules fails here on every machine. Each family is
// one bundle compiled through `padfold compile`'s workers, so a crash is reported with the layer
// rather than killing the test; the conservative fallback must not have been needed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "emit/bundle.h"
#include "kernel_cases.h"
#include "kernel_runner.h"

namespace padfold::testing {
namespace {

namespace fs = std::filesystem;

class CompileMatrix : public ::testing::TestWithParam<TargetFamilyCase> {};

TEST_P(CompileMatrix, EveryCaseCompilesWithItsTunedSchedule) {
  Model model;
  model.name = "matrix";
  model.file = "kernel cases";
  for (const KernelCase& c : make_kernel_cases(GetParam().seed, 1)) {
    Model one = parse_spec(c.spec, c.name);
    Layer L = one.layers.at(0);
    L.name = c.name;
    model.layers.push_back(L);
  }
  ASSERT_GT(model.layers.size(), 300u);
  CompileOptions opt;
  opt.targets = {GetParam().target};
  opt.out_dir = (fs::temp_directory_path() /
                 ("padfold_matrix_" + GetParam().name + "_" + std::to_string(getpid())))
                    .string();
  opt.jobs = 1;  // ctest runs the families side by side
  std::vector<KernelReport> reports;
  try {
    reports = compile_bundle(model, opt);
  } catch (const std::exception& e) {
    fs::remove_all(opt.out_dir);
    FAIL() << e.what();
  }
  fs::remove_all(opt.out_dir);
  ASSERT_EQ(reports.size(), model.layers.size());
  for (const KernelReport& r : reports) {
    EXPECT_TRUE(r.fallback_from.empty())
        << r.layer << ": schedule " << r.fallback_from << " failed: " << r.fallback_reason;
    EXPECT_GT(r.object_bytes, 0) << r.layer;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CompileMatrix, ::testing::ValuesIn(cpu_target_families()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace padfold::testing
