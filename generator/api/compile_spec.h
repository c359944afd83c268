// padfold compile as a call: a spec (file or JSON text) -> a bundle directory, with the CLI's
// checks and messages. The CLI prints the result; the Python package returns it (padfold.compile).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "emit/bundle.h"
#include "emit/bundle_plan.h"
#include "frontend/layer.h"

namespace padfold {

struct CompileRequest {
  std::string spec_path;   // the spec file; or, when empty,
  std::string spec_text;   // the spec's JSON text, its relative weight_files read from the
  std::string spec_label;  // current directory; spec_label names it in messages
  std::string out;         // the bundle directory (replaced only once the bundle is complete)
  std::vector<std::string> targets{"host"};  // best first
  std::string schedules;                     // a --schedules JSON file, or empty
  std::string db;                            // a tuning database, or empty
  bool db_any_machine = false;
  bool emit_stmt = false, emit_device_code = false, embed_weights = false;
  bool prepare_entry = false;  // CompileOptions::prepare_entry
  std::string fuse = "auto";   // auto, none or a list of blocks (parse_fuse_option)
  int jobs = 0;                // kernels compiled at once; 0: one per core
  double kernel_timeout_s = 600;
};

struct CompiledBundle {
  std::unique_ptr<Model> model;  // the plan points into it
  BundlePlan plan;
  std::vector<KernelReport> reports;  // one per kernel and target, in plan order
  std::vector<std::string> warnings;  // channels_first_cost_warning, with a CPU target
};

// --target's value split at its commas; an empty name is an error naming the value.
std::vector<std::string> target_list(const std::string& text);

// Loads the spec, refuses inputs inside `out`, plans and compiles the bundle. Throws
// std::runtime_error with the CLI's messages; when compiling fails, the message ends with "no
// bundle written; <out> is as it was". on_kernel sees each kernel as it is compiled, with the plan.
using KernelProgress = std::function<void(const BundlePlan&, const KernelReport&)>;
CompiledBundle compile_spec(const CompileRequest& request, const KernelProgress& on_kernel = {});

}  // namespace padfold
