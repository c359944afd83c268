#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "base/atomic_file.h"
#include "base/limits.h"
#include "commands.h"
#include "compile/stmt_check.h"

namespace {

namespace fs = std::filesystem;

struct StmtCheckArgs {
  std::vector<std::string> paths;
  bool verbose = false;
  bool no_weight_transforms = false;  // a kernel transforming its weights per call fails too
};

std::vector<fs::path> stmt_files(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const std::string& p : paths) {
    if (!fs::is_directory(p)) {
      files.emplace_back(p);
      continue;
    }
    std::vector<fs::path> found;  // a bundle: every target's statements
    for (const auto& target : fs::directory_iterator(p))
      if (target.is_directory())
        for (const auto& f : fs::directory_iterator(target.path()))
          if (f.path().extension() == ".stmt") found.push_back(f.path());
    if (found.empty())
      throw std::runtime_error(p + ": no <target>/<layer>.stmt files (compile with --emit-stmt)");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

void run_stmt_check(const StmtCheckArgs& a) {
  bool failed = false;
  for (const fs::path& path : stmt_files(a.paths)) {
    const std::string text = padfold::read_regular_file(path.string(), padfold::kMaxStmtFileBytes);
    if (text.rfind("module name=", 0) != 0)
      throw std::runtime_error(path.string() +
                               ": not a Halide .stmt file (expected a lowered statement as "
                               "padfold compile --emit-stmt writes it, starting \"module name=\")");
    const padfold::StmtReport r = padfold::check_stmt(text);
    const std::vector<std::string> transforms = padfold::per_call_weight_stages(text);
    const bool ok = r.interior_is_clean() && (transforms.empty() || !a.no_weight_transforms);
    failed = failed || !ok;
    fmt::print(
        "{:<4} {}/{}: steady-state innermost loops {:3d}, with tests {:2d} | border: loops "
        "{:3d}, with tests {:2d}\n",
        ok ? "ok" : "FAIL", path.parent_path().filename().string(), path.filename().string(),
        r.steady_loops(), r.steady_loops_with_tests(), r.border_loops(),
        r.border_loops_with_tests());
    if (!transforms.empty())
      fmt::print("     weights transformed on each call: {}\n", fmt::join(transforms, ", "));
    if (a.verbose || !r.interior_is_clean())
      for (const padfold::StmtLoop& l : r.innermost)
        if (!l.test.empty() && (a.verbose || l.steady))
          fmt::print("     line {} ({}, {:.0f} iterations): {}\n       test: ...{}...\n", l.line,
                     l.steady ? "steady" : "border", l.iterations, l.header, l.test);
  }
  if (failed)
    throw std::runtime_error(
        a.no_weight_transforms
            ? "boundary tests in the steady state, or weights transformed on each call, in the "
              "kernels marked FAIL"
            : "boundary tests in the steady state of the kernels marked FAIL");
}

}  // namespace

void add_stmt_check_command(CLI::App& app) {
  auto args = std::make_shared<StmtCheckArgs>();
  CLI::App* cmd = app.add_subcommand(
      "stmt-check",
      "Check that kernels' steady-state loops are free of boundary tests (reads the statements\n"
      "`padfold compile --emit-stmt` writes). Example: padfold stmt-check out/tiny");
  cmd->add_option("paths", args->paths, "bundle directories or .stmt files")->required();
  cmd->add_flag("-v,--verbose", args->verbose, "list every innermost loop with a test");
  cmd->add_flag("--no-weight-transforms", args->no_weight_transforms,
                "also fail a kernel that puts its weights in another form on each call (a "
                "Winograd U, an int8 table or weight sums, weight blocks copied): what a bundle "
                "whose weights are in files should not do (docs/prepared-weights.md)");
  cmd->callback([args] { run_stmt_check(*args); });
}
