// plan_bundle: the targets, kernels, knobs, buffers and names of a bundle, decided once.
#include "emit/bundle_plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/identifiers.h"
#include "compile/lower.h"
#include "compile/target.h"
#include "emit/dtypes.h"
#include "schedules/schedule.h"

namespace padfold {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Every layer of the overrides ({layer: {knob: value}}) is in the model, every knob exists and is
// in range.
void validate_schedule_overrides(const Model& model, const json& overrides) {
  if (!overrides.is_object())
    throw ScheduleOverrideError("schedule overrides: expected an object of layer names");
  for (const auto& item : overrides.items()) {
    const std::string& layer = item.key();
    const json& knobs = item.value();
    const auto it = std::find_if(model.layers.begin(), model.layers.end(),
                                 [&](const Layer& L) { return L.name == layer; });
    if (it == model.layers.end())
      throw ScheduleOverrideError("layer '" + layer + "' is not in the model (" + model.file + ")");
    try {
      ScheduleParams probe;
      update_from_json(probe, knobs);
    } catch (const KnobError& e) {
      throw ScheduleOverrideError("layer '" + layer + "': " + e.what());
    }
  }
}

// The targets in order, each once (two names may resolve to one target).
std::vector<TargetPlan> resolve_targets(const std::vector<std::string>& names) {
  std::vector<TargetPlan> targets;
  for (const std::string& name : names) {
    const Halide::Target target = resolve_target(name);
    const std::string dir = target.to_string();
    if (std::none_of(targets.begin(), targets.end(),
                     [&](const TargetPlan& p) { return p.name == dir; }))
      targets.push_back({target, dir});
  }
  return targets;
}

// Whether the bundle's kernels may be fused blocks. A bundle's kernels are the same on every
// target, so one schedule family that fuses nothing (the GPU's) makes every layer a kernel of its
// own on all of them.
bool targets_fuse(const std::vector<TargetPlan>& targets) {
  return std::all_of(targets.begin(), targets.end(),
                     [](const TargetPlan& t) { return capabilities(t.target).fuses; });
}

std::vector<Block> plan_blocks(const Model& model, FuseOptions fuse,
                               const std::vector<TargetPlan>& targets) {
  if (!targets_fuse(targets)) {
    if (fuse.mode == FuseOptions::Mode::Listed)
      throw std::runtime_error("--fuse: fused blocks are not generated for GPU targets");
    fuse.mode = FuseOptions::Mode::None;
  }
  try {
    return plan_fusion(model, fuse).blocks;
  } catch (const std::invalid_argument& e) {
    throw FuseListError(e.what());
  }
}

// A fused block's knobs are given under its last layer.
void check_overrides_of_blocks(const std::vector<Block>& blocks, const json& overrides) {
  for (const Block& b : blocks)
    for (size_t i = 0; i + 1 < b.layers.size(); ++i)
      if (overrides.contains(b.layers[i]->name))
        throw std::runtime_error(
            "schedule overrides: layer '" + b.layers[i]->name + "' is fused into block " +
            b.names() + ": give the block's knobs under its last layer, '" + b.last().name + "'");
}

// The layer of the block a buffer belongs to.
const Layer& layer_of(const Block& block, const BufferInfo& b) {
  for (const Layer* L : block.layers)
    if (L->name == b.layer) return *L;
  throw std::logic_error("buffer '" + b.name + "' belongs to no layer of block " + block.names());
}

int find_weight_file(const std::vector<WeightFile>& files, const Layer& L, pf_role role) {
  for (size_t i = 0; i < files.size(); ++i)
    if (files[i].layer == &L && files[i].role == role) return static_cast<int>(i);
  return -1;
}

// The form a kernel's weights are stored in: prepared for the kernel where the spec names their
// file (the values are known now) or the caller prepares them (prepare_entry), and every target
// computes the kernel the same way. A quantized conv's bias with its file takes the zero point's
// term where every target's products see the same zero point.
WeightForm plan_weight_form(const KernelPlan& k, const std::vector<TargetPlan>& targets,
                            const std::vector<WeightFile>& files, bool prepare_entry,
                            bool& forms_differ) {
  const Block& b = k.block;
  const Layer& L = b.consumer();
  const bool weights_file = find_weight_file(files, L, PF_ROLE_WEIGHTS) >= 0;
  if (b.chain().size() != 1 || (!weights_file && !prepare_entry) || !L.has_weights()) return {};
  std::vector<WeightForm> forms;
  std::vector<std::optional<int32_t>> folds;
  const bool bias_file = weights_file && find_weight_file(files, L, PF_ROLE_BIAS) >= 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    forms.push_back(weight_form_for(L, targets[i].target, k.schedules[i].resolved));
    folds.push_back(bias_file ? foldable_zero_point(L, targets[i].target) : std::nullopt);
  }
  const auto all_same = [](const auto& v) {
    return std::all_of(v.begin(), v.end(), [&](const auto& x) { return x == v.front(); });
  };
  forms_differ = weights_file && !all_same(forms);
  WeightForm form = all_same(forms) ? forms.front() : WeightForm{};
  if (all_same(folds) && folds.front()) {
    form.zero_point_in_bias = true;
    form.folded_zero_point = *folds.front();
  }
  return form;
}

std::vector<BufferPlan> plan_buffers(const Block& block, const WeightForm& form,
                                     const std::vector<WeightFile>& files, bool embedded) {
  std::vector<BufferPlan> buffers;
  const std::vector<std::string> sources = block_input_sources(block);
  size_t inputs = 0;
  for (const BufferInfo& b : block_buffers(block, form)) {
    BufferPlan p{b.name, b.role, b.dtype, b.layout, b.shape, std::nullopt, -1};
    if (b.role == PF_ROLE_INPUT) {
      p.source = sources.at(inputs++);
    } else if (b.role != PF_ROLE_OUTPUT) {
      p.weight_file = find_weight_file(files, layer_of(block, b), b.role);
      if (p.weight_file >= 0 && !embedded)
        p.source = files[static_cast<size_t>(p.weight_file)].bundle_path();
    }
    buffers.push_back(p);
  }
  return buffers;
}

// The kernel's knobs on `t`: its overrides, else (a single layer) the tuning database's, else the
// default.
KernelSchedule plan_schedule(const Block& b, const TargetPlan& t, const CompileOptions& opt) {
  const std::string& name = b.last().name;
  const json overrides =
      opt.schedule_overrides.contains(name) ? opt.schedule_overrides.at(name) : json::object();
  KernelSchedule s;
  json knobs = overrides;
  if (!overrides.empty()) {
    s.source = "overrides";
  } else if (opt.tuned && b.chain().size() == 1) {  // a residual add changes only the epilogue
    if (const auto tuned = opt.tuned(b.consumer(), t.target)) {
      knobs = tuned->knobs;
      s.source = "tuned (db)";
      s.tuning = tuned->provenance;
    }
  }
  s.requested = requested_schedule(b, t.target, knobs);
  s.resolved = resolved_schedule(b, t.target, s.requested);
  return s;
}

// A prepare kernel's symbol (<kernel>_prepare) is no other kernel's: a layer named after another
// one with "_prepare" appended would give both the same symbol.
void check_prepare_symbols(const std::vector<KernelPlan>& kernels) {
  std::set<std::string> functions;
  for (const KernelPlan& k : kernels) functions.insert(k.function);
  for (const KernelPlan& k : kernels)
    if (!k.prepare_function.empty() && functions.count(k.prepare_function))
      throw std::runtime_error("layer '" + k.block.last().name + "': its prepare kernel's symbol " +
                               k.prepare_function +
                               " is another layer's kernel; rename that layer or compile without "
                               "--prepare-entry");
}

// The kernels' intermediates in one arena: kernel i writes its output at step i, and it lives
// until the last kernel reading it (through an input buffer's source) has run.
void plan_arena(BundlePlan& plan) {
  const Model& model = *plan.model;
  std::map<std::string, size_t> producer;  // a kernel's output tensor is named after its layer
  for (size_t i = 0; i < plan.kernels.size(); ++i) producer[plan.kernels[i].block.last().name] = i;
  std::vector<Lifetime> lives(plan.kernels.size());
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    lives[i].first = lives[i].last = i;
    for (const BufferPlan& b : plan.kernels[i].buffers) {
      if (b.role == PF_ROLE_OUTPUT) {
        int64_t elements = 1;
        for (int64_t d : b.shape) elements *= d;
        lives[i].bytes = elements * dtype_size(b.dtype);
      } else if (b.role == PF_ROLE_INPUT && b.source) {
        if (const auto it = producer.find(*b.source); it != producer.end())
          lives[it->second].last = std::max(lives[it->second].last, i);
      }
    }
  }
  std::vector<Lifetime> intermediates;
  std::vector<size_t> kernel_of;
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const std::string& name = plan.kernels[i].block.last().name;
    if (std::find(model.outputs.begin(), model.outputs.end(), name) != model.outputs.end())
      continue;
    intermediates.push_back(lives[i]);
    kernel_of.push_back(i);
  }
  plan.arena = plan_memory(intermediates);
  for (size_t t = 0; t < kernel_of.size(); ++t)
    plan.kernels[kernel_of[t]].arena_offset = plan.arena.offsets[t];
}

}  // namespace

std::string kernel_function_name(const Model& model, const Layer& layer) {
  return kernel_symbol(model.name, layer.name);
}

fs::path target_dir(const fs::path& root, const TargetPlan& t) {
  return root / t.name;
}

fs::path object_path(const fs::path& root, const TargetPlan& t, const KernelPlan& k) {
  return target_dir(root, t) / "obj" / (k.function + ".o");
}

fs::path prepare_object_path(const fs::path& root, const TargetPlan& t, const KernelPlan& k) {
  return target_dir(root, t) / "obj" / (k.prepare_function + ".o");
}

BundlePlan plan_bundle(const Model& model, const CompileOptions& opt) {
  if (opt.targets.empty()) throw std::runtime_error("no target given");
  if (opt.out_dir.empty()) throw std::runtime_error("no output directory given");
  validate_schedule_overrides(model, opt.schedule_overrides);
  BundlePlan plan;
  plan.model = &model;
  plan.options = opt;
  // Every target is resolved before anything is written or compiled.
  plan.targets = resolve_targets(opt.targets);
  const std::vector<Block> blocks = plan_blocks(model, opt.fuse, plan.targets);
  check_overrides_of_blocks(blocks, opt.schedule_overrides);
  plan.weight_files = weight_files(model);
  plan.embedded_weights = opt.embed_weights;
  for (const Block& b : blocks) {
    KernelPlan k{b, kernel_function_name(model, b.last()), {}, {}, {}, std::nullopt, false, {}};
    for (const TargetPlan& t : plan.targets) k.schedules.push_back(plan_schedule(b, t, opt));
    k.weight_form =
        plan_weight_form(k, plan.targets, plan.weight_files, opt.prepare_entry, k.forms_differ);
    if (k.weight_form.prepared() &&
        find_weight_file(plan.weight_files, b.consumer(), PF_ROLE_WEIGHTS) < 0)
      k.prepare_function = k.function + "_prepare";
    for (const pf_role role : {PF_ROLE_WEIGHTS, PF_ROLE_BIAS})
      if (const int w = find_weight_file(plan.weight_files, b.consumer(), role); w >= 0)
        plan.weight_files[static_cast<size_t>(w)].form = k.weight_form;
    k.buffers = plan_buffers(b, k.weight_form, plan.weight_files, plan.embedded_weights);
    plan.kernels.push_back(std::move(k));
  }
  check_prepare_symbols(plan.kernels);
  plan_arena(plan);
  plan.model_id = c_identifier(model.name);
  plan.static_library = "libpadfold_" + plan.model_id + ".a";
  plan.shared_library = "libpadfold_" + plan.model_id + ".so";
  plan.halide_runtime = "halide_runtime.a";
  plan.registry_symbol = "padfold_registry_" + plan.model_id;
  plan.umbrella_header = "padfold_" + plan.model_id + ".h";
  plan.consumer_cmake = "padfold_" + plan.model_id + ".cmake";
  return plan;
}

}  // namespace padfold
