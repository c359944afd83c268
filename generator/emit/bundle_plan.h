// The plan of a bundle, made once before anything is compiled or written: the targets, the kernels
// (the fusion plan in effect), each kernel's symbol, buffers and knobs per target with where they
// came from, and the bundle's file names. The kernel jobs, the manifest and the registry all read
// it.
#pragma once

#include <Halide.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "compile/block.h"
#include "compile/fusion.h"
#include "emit/memory_plan.h"
#include "emit/weights.h"
#include "frontend/spec.h"
#include "padfold_registry.h"
#include "schedules/knobs.h"

namespace padfold {

// Knobs from a tuning database, with where they came from (the manifest records it).
struct TunedSchedule {
  nlohmann::json knobs;       // resolved knobs
  nlohmann::json provenance;  // database, candidate, machine, toolchain, speedup
};

struct CompileOptions {
  std::vector<std::string> targets{"host"};  // target names (resolve_target), best first
  std::string out_dir;
  bool emit_stmt = false;  // also write each kernel's lowered statement (<target>/<layer>.stmt)
  // GPU targets: also write each kernel's device code (<target>/<layer>.ptx, or .cl for OpenCL)
  bool emit_device_code = false;
  nlohmann::json schedule_overrides = nlohmann::json::object();  // layer name -> parameters
  int jobs = 0;                   // compile workers at once; 0 = one per core
  double kernel_timeout_s = 600;  // a kernel still compiling after this long has failed
  // Bake the spec's weight_files into every target's library (registry data pointers) instead of
  // copying them into the bundle's weights/ folder.
  bool embed_weights = false;
  // A layer kernel whose weights the caller passes (no weight file) computes with them in the
  // form its schedule prepares (as with a file) and the bundle gets a prepare kernel that writes
  // that form from the caller's weights, to run once (pf_bundle_prepare_kernel). Off: such a
  // kernel takes the weights as the spec lays them out and transforms them on each call.
  bool prepare_entry = false;
  FuseOptions fuse;  // which layers become one kernel (default: auto, the cost model decides)
  // Tuned knobs for a single-layer kernel on a target (padfold compile --db), or null: the
  // default. Explicit schedule_overrides of the layer win over it.
  std::function<std::optional<TunedSchedule>(const Layer&, const Halide::Target&)> tuned;
};

// Bad schedule overrides: a layer not in the model, an unknown knob or a value out of range. The
// message names the layer and the knob (padfold compile adds the schedules file).
struct ScheduleOverrideError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A --fuse list that is not a set of fusible chains (plan_fusion's message, "--fuse a+b: ...").
struct FuseListError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct TargetPlan {
  Halide::Target target;
  std::string name;  // the target string: directory name and manifest key
};

// One buffer of a kernel, in manifest order.
struct BufferPlan {
  std::string name;  // as block_buffers names it ("input", "dw_weights", ...)
  pf_role role;
  pf_dtype dtype = PF_F32;  // quantized layers: int8/uint8 activations, int8 weights, int32 bias
  std::string layout;
  std::vector<int64_t> shape;  // outermost first; dense strides
  // pf_buffer_desc.source: the tensor feeding an input, the bundle's .npy file of weights and
  // bias (none when embedded or when the spec names no file), none for the output.
  std::optional<std::string> source;
  int weight_file = -1;  // index into BundlePlan::weight_files, or -1
};

// A kernel's knobs on one target.
struct KernelSchedule {
  ScheduleParams requested;        // what the worker compiles with
  ScheduleParams resolved;         // the knobs in effect (resolved_schedule), for the manifest
  std::string source = "default";  // where they came from: default, overrides, tuned (db)
  nlohmann::json tuning;           // a tuned schedule's provenance, else null
};

// One kernel: a block of layers, the same on every target.
struct KernelPlan {
  Block block;
  std::string function;                   // the C symbol (kernel_function_name)
  std::vector<BufferPlan> buffers;        // manifest order (block_buffers)
  std::vector<KernelSchedule> schedules;  // per target, in BundlePlan::targets order
  WeightForm weight_form;                 // how its weights are stored (prepared at compile)
  // Where its output lives in pf_model_run_static's arena; none for a model output (the caller's
  // buffer).
  std::optional<int64_t> arena_offset;
  // Its weights have a file, but its targets want them in different prepared forms: the bundle
  // stores them as the file holds them, and some target's kernel transforms them on each call.
  bool forms_differ = false;
  // The C symbol of the kernel preparing its weights from the caller's (prepare_entry and a
  // prepared weight_form with no weights file), else empty.
  std::string prepare_function;
};

struct BundlePlan {
  const Model* model = nullptr;  // the plan points into it: it must outlive the plan
  CompileOptions options;        // what it was planned from
  std::vector<TargetPlan> targets;
  std::vector<KernelPlan> kernels;       // in model order, each layer in exactly one
  std::vector<WeightFile> weight_files;  // every file the spec names, in layer order
  bool embedded_weights = false;
  // The arena of a whole-model run: every intermediate (a kernel's output that is no model
  // output) from the step its kernel runs to its last reader; offsets in KernelPlan::arena_offset.
  MemoryPlan arena;

  // Names inside the bundle directory.
  std::string model_id;         // c_identifier(model name)
  std::string static_library;   // libpadfold_<id>.a, in each target's directory
  std::string shared_library;   // libpadfold_<id>.so, beside it where a C compiler links one
  std::string halide_runtime;   // halide_runtime.a, in each target's directory
  std::string registry_symbol;  // padfold_registry_<id>
  std::string umbrella_header;  // padfold_<id>.h, in include/ (every kernel's header)
  std::string consumer_cmake;   // padfold_<id>.cmake

  size_t kernel_count() const { return kernels.size() * targets.size(); }  // (kernel, target)s
};

// Plans the bundle: checks the overrides, resolves every target, plans the fusion (none with a GPU
// target), reads each kernel's knobs (overrides, else the tuning database, else the default) and
// resolves them, lays out every kernel's buffers and plans the intermediates' arena. Nothing is
// read from the weight files or written. Throws ScheduleOverrideError, FuseListError, or another
// std::exception for anything else (an unknown target, --fuse blocks with a GPU target, overrides
// of a fused-away layer, bad knobs from the tuning database).
BundlePlan plan_bundle(const Model& model, const CompileOptions& options);

std::string kernel_function_name(const Model& model, const Layer& layer);

// Paths inside a bundle directory `root`.
std::filesystem::path target_dir(const std::filesystem::path& root, const TargetPlan& t);
// A kernel's object file while the target's library is built (obj/ is removed afterwards).
std::filesystem::path object_path(const std::filesystem::path& root, const TargetPlan& t,
                                  const KernelPlan& k);
// Its prepare kernel's (KernelPlan::prepare_function).
std::filesystem::path prepare_object_path(const std::filesystem::path& root, const TargetPlan& t,
                                          const KernelPlan& k);

}  // namespace padfold
