// Helpers shared by the real-bundle and embedded tests (tests/bundle_*_test.cpp,
// tests/e2e/embedded_cross_test.cpp): running commands, comparing kernel outputs with the naive
// reference.
//
// Tolerance: every element must satisfy |got - ref| <= 1e-4 * max|ref| (max over the whole output
// tensor). The kernels accumulate in float32 in a schedule-dependent order (and with FMA where the
// target has it); the reference accumulates in double. Observed errors stay below 1e-6 * max|ref|
// on every target tested (host AVX-512 and AVX2, arm-64, arm-32, riscv-64).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "reference/reference.h"

namespace padfold::testing {

constexpr double kRelativeTolerance = 1e-4;

struct CommandResult {
  int status = -1;     // exit status; -1 if the command could not run or died from a signal
  std::string output;  // stdout and stderr, interleaved
};

// What the shell command line `cmd` writes to its stdout, as given (redirections included).
inline CommandResult run_shell(const std::string& cmd) {
  CommandResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline CommandResult run_command(const std::string& cmd) {
  return run_shell(cmd + " 2>&1");
}

// Single-quoted for /bin/sh.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline bool have_program(const std::string& name) {
  return run_command("command -v " + shell_quote(name) + " >/dev/null").status == 0;
}

// Element-wise comparison of n floats with the reference (same layout, same element count).
inline ::testing::AssertionResult matches_reference(const ref::Tensor& want, const float* got,
                                                    size_t n, const std::string& what) {
  if (static_cast<int64_t>(n) != want.numel())
    return ::testing::AssertionFailure()
           << what << ": " << n << " elements, reference has " << want.numel();
  const double tol = kRelativeTolerance * ref::max_abs(want);
  double worst = 0;
  size_t worst_i = 0, bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want.data[i]);
    if (!(d <= tol)) {  // NaN counts as a mismatch
      if (bad++ == 0 || !(d <= worst)) {
        worst = std::isnan(d) ? INFINITY : d;
        worst_i = i;
      }
    } else if (bad == 0 && d > worst) {
      worst = d;
      worst_i = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << n << " elements differ by more than " << tol
         << " (1e-4 * max|ref| = 1e-4 * " << ref::max_abs(want) << "); worst at flat index "
         << worst_i << ": got " << got[worst_i] << ", reference " << want.data[worst_i];
}

}  // namespace padfold::testing
