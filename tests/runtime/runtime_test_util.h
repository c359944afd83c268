// Shared by the runtime tests: a scratch bundle directory per test, made from the fake bundle the
// build wrote (FAKE_BUNDLE_DIR), whose manifest each test may edit before opening it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "padfold_runtime.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

extern "C" const pf_registry* fake_static_registry(void);

// EXPECT_HAS(text, "part"): text contains part.
inline testing::AssertionResult HasPart(const char* text_expr, const char*, const char* text,
                                        const char* part) {
  if (std::getenv("PF_SHOW_MESSAGES")) std::printf("[message] %s\n", text);
  if (std::string(text).find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << text_expr << " = \"" << text << "\" lacks \"" << part << "\"";
}
#define EXPECT_HAS(text, part) EXPECT_PRED_FORMAT2(HasPart, text, part)

inline bool IsX86() {
  return std::string(FAKE_TARGET).rfind("x86", 0) == 0;
}

class ScratchBundle : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = fs::temp_directory_path() / ("padfold_rt_" + std::to_string(getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A copy, not a link: the runtime refuses a library that resolves outside the bundle.
    fs::copy(fs::path(FAKE_BUNDLE_DIR) / FAKE_TARGET, dir_ / FAKE_TARGET,
             fs::copy_options::recursive);
    std::ifstream in(fs::path(FAKE_BUNDLE_DIR) / "manifest.json");
    manifest_ = json::parse(in);
  }
  void TearDown() override {
    pf_bundle_close(bundle_);
    fs::remove_all(dir_);
  }
  void WriteManifest(const std::string& text) { std::ofstream(dir_ / "manifest.json") << text; }
  // Writes manifest_ and opens the directory; cpu_flags overrides CPU detection.
  pf_status Open(const char* cpu_flags = nullptr) {
    WriteManifest(manifest_.dump(2));
    return OpenAsIs(cpu_flags);
  }
  pf_status OpenAsIs(const char* cpu_flags = nullptr) {
    pf_open_options opts = {cpu_flags, 0};
    return pf_bundle_open(dir_.c_str(), &opts, &bundle_, err_, sizeof err_);
  }
  const pf_kernel_desc* Kernel(const char* layer) {
    const pf_kernel_desc* k = nullptr;
    EXPECT_EQ(pf_bundle_find(bundle_, layer, &k, err_, sizeof err_), PF_OK) << err_;
    return k;
  }

  fs::path dir_;
  json manifest_;
  pf_bundle* bundle_ = nullptr;
  char err_[PF_ERRLEN] = "";
};
