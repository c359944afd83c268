// `padfold run`: runs one kernel of a compiled bundle on .npy files, through the C runtime, or
// with --model the whole model (pf_model_run: every kernel in order, weights from the bundle).
//
// The .npy files are read and written by npy.h (checked: sizes, header, dtype; errors name the
// flag and the file), each of its buffer's dtype: float32, or a quantized layer's int8/uint8
// activations, int8 weights and int32 bias (docs/int8.md). The output is computed in memory, the
// bundle is closed, and only then is the output written, atomically (a temporary file renamed over
// the path), so a failed run leaves no partial output; --model writes its outputs all or none. An
// --output inside the bundle directory, or naming one of the bundle's files through a link, is
// refused before anything runs: replacing the bundle's shared library or manifest would destroy the
// bundle.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/npy.h"
#include "base/npy_dtype.h"
#include "base/text.h"
#include "commands.h"
#include "padfold_runtime.h"

namespace {

namespace fs = std::filesystem;

struct RunArgs {
  std::string bundle, layer, weights, bias;
  std::vector<std::string> inputs, outputs;
  bool model = false, partial = false;
};

struct BundleCloser {
  void operator()(pf_bundle* b) const { pf_bundle_close(b); }
};
struct ModelCloser {
  void operator()(pf_model* m) const { pf_model_close(m); }
};

std::string shape_str(const std::vector<int64_t>& shape) {
  return shape.empty() ? std::string("()") : padfold::join(shape, "x");
}

// The .npy dtype of buffer b (`what` names it: "kernel 'stem' buffer 'input'"); a buffer of another
// dtype (float16) is refused.
padfold::NpyDType npy_dtype(const pf_buffer_desc& b, const std::string& what) {
  if (const auto t = padfold::npy_dtype_of(b.dtype)) return *t;
  const char* name = pf_dtype_name(b.dtype);
  throw std::runtime_error(
      fmt::format("{} is {}: padfold run reads and writes float32, int8, uint8 and int32 .npy "
                  "files only",
                  what, name ? name : "of an unknown dtype"));
}

// "int8 ('|i1')"
std::string dtype_str(padfold::NpyDType t) {
  return fmt::format("{} ('{}')", padfold::npy_dtype_name(t), padfold::npy_descr(t));
}

// Reads `path` (given by `flag`) for buffer b, which `owner` names in messages ("kernel 'stem'
// buffer 'input'", "model input 'x'"); the file must hold b's dtype.
padfold::NpyData read_input_npy(const std::string& path, const std::string& flag,
                                const pf_buffer_desc& b, const std::string& owner) {
  const padfold::NpyDType want = npy_dtype(b, owner);
  padfold::NpyData a;
  try {
    a = padfold::read_npy(path);
  } catch (const std::exception& e) {
    // e.what() starts with the path.
    throw std::runtime_error(fmt::format("{} {}", flag, e.what()));
  }
  if (a.dtype != want)
    throw std::runtime_error(fmt::format(
        "{} {}: dtype {} does not match {}, which is {}: give a .npy file of {}", flag, path,
        dtype_str(a.dtype), owner, padfold::npy_dtype_name(want), dtype_str(want)));
  return a;
}

// A zeroed array of a kernel buffer's dtype and shape, refused when its data would not fit a .npy
// file.
padfold::NpyData zeros(const pf_buffer_desc& b, const std::string& layer) {
  const std::vector<int64_t> shape(b.shape, b.shape + b.rank);
  padfold::NpyData a;
  a.dtype = npy_dtype(b, fmt::format("kernel '{}' buffer '{}'", layer, b.name));
  const uint64_t esize = padfold::npy_dtype_size(a.dtype);
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > padfold::kNpyMaxDataBytes / esize / static_cast<uint64_t>(d)))
      throw std::runtime_error(fmt::format(
          "kernel '{}' buffer '{}' has shape {}: too large for a .npy file (limit {} bytes)", layer,
          b.name, shape_str(shape), padfold::kNpyMaxDataBytes));
    n *= static_cast<uint64_t>(d);
  }
  a.shape = shape;
  a.bytes.assign(static_cast<size_t>(n * esize), 0);
  return a;
}

// Refuses an --output inside the bundle directory, or one that is a file of the bundle under
// another name (a symbolic or hard link): writing it would replace a file of the bundle.
void check_output_outside_bundle(const std::string& bundle, const std::string& output) {
  std::error_code ec;
  const fs::path dir = fs::canonical(bundle, ec);
  if (ec) return;  // pf_bundle_open says what is wrong with it
  const fs::path out = fs::weakly_canonical(fs::absolute(output, ec), ec);
  if (!ec && std::mismatch(dir.begin(), dir.end(), out.begin(), out.end()).first == dir.end())
    throw std::runtime_error(
        fmt::format("--output {}: is inside the bundle directory {}; writing there could replace "
                    "the bundle's own files, choose a path outside it",
                    output, bundle));
  struct stat os {};
  if (::stat(output.c_str(), &os) != 0 || !S_ISREG(os.st_mode)) return;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    struct stat bs {};
    if (::stat(it->path().c_str(), &bs) == 0 && bs.st_dev == os.st_dev && bs.st_ino == os.st_ino)
      throw std::runtime_error(
          fmt::format("--output {}: is the bundle's file {} (a link to it); writing it would "
                      "replace the bundle's own file, choose another path",
                      output, it->path().string()));
  }
}

// Refuses a weights file of the bundle that a symbolic link (the file's, or a directory's on the
// way) takes out of the bundle, as pf_model_open does for --model.
void check_bundle_file_inside(const std::string& bundle, const std::string& path) {
  std::error_code ec;
  const fs::path dir = fs::canonical(bundle, ec);
  if (ec) return;
  const fs::path file = fs::canonical(path, ec);
  if (ec) return;  // missing: the .npy reader says so
  if (std::mismatch(dir.begin(), dir.end(), file.begin(), file.end()).first != dir.end())
    throw std::runtime_error(
        fmt::format("bundle file {}: leads out of the bundle through a symbolic link (to {}); "
                    "expected a file inside the bundle (a link leaving it is refused)",
                    path, file.string()));
}

// The weights `raw` (as the spec lays them out) in the form kernel k reads them, written by its
// prepare kernel p.
padfold::NpyData prepared_weights(const pf_kernel_desc* p, padfold::NpyData& raw) {
  padfold::NpyData out = zeros(p->buffers[1], p->layer);
  const pf_tensor tensors[2] = {pf_tensor_of(&p->buffers[0], raw.data(), raw.bytes.size()),
                                pf_tensor_of(&p->buffers[1], out.data(), out.bytes.size())};
  char err[PF_ERRLEN];
  if (pf_run(p, tensors, 2, err, sizeof err) != PF_OK) throw std::runtime_error(err);
  return out;
}

void run_layer(const RunArgs& a) {
  if (a.outputs.size() != 1)
    throw std::runtime_error(
        fmt::format("--layer {}: give one --output (several are for --model)", a.layer));
  const std::string& output_path = a.outputs[0];
  check_output_outside_bundle(a.bundle, output_path);

  char err[PF_ERRLEN];
  pf_bundle* raw = nullptr;
  if (pf_bundle_open(a.bundle.c_str(), nullptr, &raw, err, sizeof err) != PF_OK)
    throw std::runtime_error(err);
  std::unique_ptr<pf_bundle, BundleCloser> bundle(raw);
  const pf_kernel_desc* k = nullptr;
  if (pf_bundle_find(bundle.get(), a.layer.c_str(), &k, err, sizeof err) != PF_OK)
    throw std::runtime_error(err);

  // One --input per input buffer, in order (add and concat read several).
  std::vector<std::string> input_names;
  for (int i = 0; i < k->num_buffers; ++i)
    if (k->buffers[i].role == PF_ROLE_INPUT) input_names.push_back(k->buffers[i].name);
  if (a.inputs.size() != input_names.size())
    throw std::runtime_error(fmt::format(
        "--layer {}: kernel '{}' ({}) reads {} input(s) ({}): give as many --input, in that "
        "order; got {}",
        a.layer, k->layer, k->op, input_names.size(), fmt::join(input_names, ", "),
        a.inputs.size()));
  std::map<std::string, std::pair<std::string, std::string>> files = {
      {"weights", {"--weights", a.weights}}, {"bias", {"--bias", a.bias}}};
  for (size_t i = 0; i < input_names.size(); ++i) files[input_names[i]] = {"--input", a.inputs[i]};
  std::vector<padfold::NpyData> arrays(static_cast<size_t>(k->num_buffers));
  std::vector<pf_tensor> tensors;
  int output = -1;
  for (int i = 0; i < k->num_buffers; ++i) {
    const pf_buffer_desc& b = k->buffers[i];
    const std::vector<int64_t> want(b.shape, b.shape + b.rank);
    padfold::NpyData& arr = arrays[static_cast<size_t>(i)];
    if (b.role == PF_ROLE_OUTPUT) {
      arr = zeros(b, a.layer);
      output = i;
    } else {
      // A fused block's weights and bias (<layer>_weights) come from the bundle, as do a layer's
      // when the command line gives none and the spec named its files.
      const auto given = files.find(b.name);
      std::string flag = given != files.end() ? given->second.first : "",
                  path = given != files.end() ? given->second.second : "";
      if (path.empty() && b.data) {
        arr = zeros(b, a.layer);
        std::memcpy(arr.data(), b.data, arr.bytes.size());
        tensors.push_back(pf_tensor_of(&b, arr.data(), arr.bytes.size()));
        continue;
      }
      if (path.empty() && b.source) {
        flag = "bundle file";
        path = (fs::path(a.bundle) / b.source).string();
        check_bundle_file_inside(a.bundle, path);
      }
      if (path.empty() && given == files.end())
        throw std::runtime_error(fmt::format(
            "kernel '{}' is the fused block {}; its buffer '{}' ({} {}) comes from the bundle's "
            "weight files, and this bundle has none: compile a spec whose layers name "
            "weight_files, or compile with --fuse none to run the layers one by one",
            k->layer, k->op, b.name, b.layout, shape_str(want)));
      if (path.empty())
        throw std::runtime_error(fmt::format("layer '{}' needs {} (buffer '{}', {} {})", a.layer,
                                             flag, b.name, b.layout, shape_str(want)));
      padfold::NpyData loaded =
          read_input_npy(path, flag, b, fmt::format("kernel '{}' buffer '{}'", a.layer, b.name));
      // Weights as the spec lays them out, for a kernel reading them prepared: prepared here.
      const pf_kernel_desc* p =
          b.role == PF_ROLE_WEIGHTS ? pf_bundle_prepare_kernel(bundle.get(), k) : nullptr;
      const pf_buffer_desc* raw_desc = p ? &p->buffers[0] : nullptr;
      if (raw_desc &&
          loaded.shape == std::vector<int64_t>(raw_desc->shape, raw_desc->shape + raw_desc->rank))
        loaded = prepared_weights(p, loaded);
      if (loaded.shape != want)
        throw std::runtime_error(fmt::format(
            "{} {}: shape {} does not match kernel '{}' buffer '{}' ({} {}{})", flag, path,
            shape_str(loaded.shape), a.layer, b.name, b.layout, shape_str(want),
            raw_desc ? fmt::format(", or {} {} to prepare", raw_desc->layout,
                                   shape_str(std::vector<int64_t>(
                                       raw_desc->shape, raw_desc->shape + raw_desc->rank)))
                     : ""));
      arr = std::move(loaded);
    }
    tensors.push_back(pf_tensor_of(&b, arr.data(), arr.bytes.size()));
  }
  for (const auto& [name, flag_path] : files) {
    bool used = false;
    for (int i = 0; i < k->num_buffers; ++i) used = used || name == k->buffers[i].name;
    if (!used && !flag_path.second.empty())
      throw std::runtime_error(fmt::format("layer '{}' takes no {} (it has no '{}' buffer)",
                                           a.layer, flag_path.first, name));
  }
  if (output < 0)
    throw std::runtime_error(fmt::format("kernel '{}' has no output buffer", a.layer));
  if (pf_run(k, tensors.data(), static_cast<int>(tensors.size()), err, sizeof err) != PF_OK)
    throw std::runtime_error(err);

  // Everything needed from the bundle is copied out before it is closed (its strings live in the
  // shared library); the output is written with no file of the bundle mapped.
  const padfold::NpyData& out = arrays[static_cast<size_t>(output)];
  const std::string op = k->op, target = pf_bundle_target(bundle.get());
  bundle.reset();
  try {
    padfold::write_npy(output_path, out.shape, out.dtype, out.data());
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("--output {}", e.what()));
  }
  fmt::print("ran {} ({}) on target {}; wrote {}\n", a.layer, op, target, output_path);
}

std::string desc_str(const pf_buffer_desc& b) {
  return fmt::format("{} {}", b.layout, shape_str(std::vector<int64_t>(b.shape, b.shape + b.rank)));
}

// Whether `s` before a '=' reads as a NAME rather than as part of a path.
bool looks_like_name(const std::string& s) {
  return !s.empty() && s.find_first_of("/\\") == std::string::npos &&
         s.find(".npy") == std::string::npos;
}

// "name=path" where name is one of `names`; a bare path when there is exactly one name.
// Returns the index of the name and the path.
// `others` are names that are not `what`s (the layers that are not outputs): refused by name.
std::pair<size_t, std::string> bind_arg(const std::string& flag, const std::string& arg,
                                        const std::vector<std::string>& names,
                                        const std::string& what,
                                        const std::vector<std::string>& others) {
  const size_t eq = arg.find('=');
  if (eq != std::string::npos) {
    const std::string name = arg.substr(0, eq);
    if (std::find(others.begin(), others.end(), name) != others.end() &&
        std::find(names.begin(), names.end(), name) == names.end())
      throw std::runtime_error(
          fmt::format("{} {}: layer '{}' is not a model {} (the model's {}s: {})", flag, arg, name,
                      what, what, fmt::join(names, ", ")));
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) {
        if (eq + 1 == arg.size())
          throw std::runtime_error(fmt::format("{} {}: no file after '='", flag, arg));
        return {i, arg.substr(eq + 1)};
      }
  }
  // A bare FILE with a '=' in it would be taken for a mistyped NAME=FILE: "scores=y.npy" for an
  // output named otherwise must not write a file named "scores=y.npy" (./a=b.npy is a file).
  if (names.size() == 1 && (eq == std::string::npos || !looks_like_name(arg.substr(0, eq))))
    return {0, arg};
  if (names.size() == 1)
    throw std::runtime_error(fmt::format(
        "{} {}: '{}' is not the model's {} (it has one: {}); expected {}=FILE or a bare FILE "
        "(./{} for a file named so)",
        flag, arg, arg.substr(0, eq), what, names[0], names[0], arg));
  throw std::runtime_error(fmt::format("{} {}: expected NAME=FILE, NAME one of the model's {}s: {}",
                                       flag, arg, what, fmt::join(names, ", ")));
}

// Each of `names` bound to exactly one file.
std::vector<std::string> bind_all(const std::string& flag, const std::vector<std::string>& args,
                                  const std::vector<std::string>& names, const std::string& what,
                                  const std::vector<std::string>& others = {}) {
  std::vector<std::string> paths(names.size());
  for (const std::string& arg : args) {
    auto [i, path] = bind_arg(flag, arg, names, what, others);
    if (!paths[i].empty())
      throw std::runtime_error(fmt::format("{}: model {} '{}' is given twice ({} and {})", flag,
                                           what, names[i], paths[i], path));
    paths[i] = path;
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < names.size(); ++i)
    if (paths[i].empty()) missing.push_back(names[i]);
  if (!missing.empty())
    throw std::runtime_error(fmt::format("missing {} for model {}{} {} (give {} NAME=FILE)", flag,
                                         what, missing.size() > 1 ? "s" : "",
                                         fmt::join(missing, ", "), flag));
  return paths;
}

// What the manifest's graph says of the model outputs beyond the runtime's buffers: the ops
// outside padfold that read them (graph.read_by) and the shape each is read in where it is not
// its buffer's (graph.output_shapes), and what an integer output's q stand for (graph.quant:
// scale * (q - zero_point)).
struct OutputNotes {
  std::map<std::string, std::string> read_by;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::pair<float, int64_t>> quant;
};
OutputNotes output_notes(const std::string& bundle) {
  const std::string path = (fs::path(bundle) / "manifest.json").string();
  try {
    std::ifstream f(path);
    const nlohmann::json m = nlohmann::json::parse(f);
    OutputNotes notes;
    const auto graph = m.find("graph");
    if (graph == m.end()) return notes;
    if (graph->contains("read_by"))
      for (const auto& [name, ops] : graph->at("read_by").items())
        notes.read_by[name] = ops.get<std::string>();
    if (graph->contains("output_shapes"))
      for (const auto& [name, shape] : graph->at("output_shapes").items())
        notes.shapes[name] = shape.get<std::vector<int64_t>>();
    if (graph->contains("quant"))
      for (const auto& [name, q] : graph->at("quant").items())
        notes.quant[name] = {q.at("scale").get<float>(), q.at("zero_point").get<int64_t>()};
    return notes;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{}: graph: {}", path, e.what()));
  }
}

void run_model(const RunArgs& a) {
  if (!a.weights.empty() || !a.bias.empty())
    throw std::runtime_error(
        "--model takes no --weights or --bias: the weights come from the bundle (weight_files in "
        "the spec, or --embed-weights)");
  char err[PF_ERRLEN];
  pf_bundle* raw = nullptr;
  if (pf_bundle_open(a.bundle.c_str(), nullptr, &raw, err, sizeof err) != PF_OK)
    throw std::runtime_error(err);
  std::unique_ptr<pf_bundle, BundleCloser> bundle(raw);
  pf_model* raw_model = nullptr;
  if (pf_model_open(bundle.get(), nullptr, &raw_model, err, sizeof err) != PF_OK)
    throw std::runtime_error(err);
  std::unique_ptr<pf_model, ModelCloser> model(raw_model);

  std::vector<std::string> in_names, out_names;
  for (int i = 0; i < pf_model_num_inputs(model.get()); ++i)
    in_names.push_back(pf_model_input(model.get(), i)->name);
  for (int i = 0; i < pf_model_num_outputs(model.get()); ++i)
    out_names.push_back(pf_model_output_name(model.get(), i));
  const std::vector<std::string> in_paths = bind_all("--input", a.inputs, in_names, "input");
  std::vector<std::string> layers;
  for (int i = 0; i < pf_bundle_num_kernels(bundle.get()); ++i)
    layers.push_back(pf_bundle_kernel(bundle.get(), i)->layer);
  const std::vector<std::string> out_paths =
      bind_all("--output", a.outputs, out_names, "output", layers);
  // An output that a tail left to the caller reads is not the model's result.
  const OutputNotes notes = output_notes(a.bundle);
  const std::map<std::string, std::string>& read_by = notes.read_by;
  if (!read_by.empty() && !a.partial) {
    const auto& [name, ops] = *read_by.begin();
    throw std::runtime_error(
        fmt::format("--model: output '{}' is read by {}, which padfold does not generate: the "
                    "model's result comes from there, not from '{}'; give --partial to write the "
                    "tensors padfold computes",
                    name, ops, name));
  }
  for (size_t i = 0; i < out_paths.size(); ++i) {
    check_output_outside_bundle(a.bundle, out_paths[i]);
    for (size_t j = 0; j < i; ++j)
      if (fs::weakly_canonical(fs::absolute(out_paths[i])) ==
          fs::weakly_canonical(fs::absolute(out_paths[j])))
        throw std::runtime_error(fmt::format("--output: outputs '{}' and '{}' both go to {}",
                                             out_names[j], out_names[i], out_paths[i]));
  }

  std::vector<padfold::NpyData> arrays(in_names.size() + out_names.size());
  std::vector<pf_tensor> ins, outs;
  for (size_t i = 0; i < in_names.size(); ++i) {
    const pf_buffer_desc& b = *pf_model_input(model.get(), static_cast<int>(i));
    const std::string flag = "--input " + in_names[i] + "=";
    padfold::NpyData loaded = read_input_npy(in_paths[i], flag.substr(0, flag.size() - 1), b,
                                             fmt::format("model input '{}'", b.name));
    if (loaded.shape != std::vector<int64_t>(b.shape, b.shape + b.rank))
      throw std::runtime_error(
          fmt::format("--input {}: shape {} does not match model input '{}' ({})", in_paths[i],
                      shape_str(loaded.shape), b.name, desc_str(b)));
    arrays[i] = std::move(loaded);
    ins.push_back(pf_tensor_of(&b, arrays[i].data(), arrays[i].bytes.size()));
  }
  for (size_t i = 0; i < out_names.size(); ++i) {
    const pf_buffer_desc& b = *pf_model_output(model.get(), static_cast<int>(i));
    padfold::NpyData& arr = arrays[in_names.size() + i];
    arr = zeros(b, out_names[i]);
    if (const auto view = notes.shapes.find(out_names[i]); view != notes.shapes.end()) {
      int64_t n = 1;
      for (int64_t d : view->second) n *= d;
      if (n != static_cast<int64_t>(arr.numel()))
        throw std::runtime_error(fmt::format(
            "{}: graph.output_shapes: output '{}' as {} has {} values; its buffer ({}) has {}",
            (fs::path(a.bundle) / "manifest.json").string(), out_names[i], shape_str(view->second),
            n, desc_str(b), arr.numel()));
      arr.shape = view->second;
    }
    outs.push_back(pf_tensor_of(&b, arr.data(), arr.bytes.size()));
  }
  if (pf_model_run(model.get(), ins.data(), static_cast<int>(ins.size()), outs.data(),
                   static_cast<int>(outs.size()), err, sizeof err) != PF_OK)
    throw std::runtime_error(err);

  // As for one layer: nothing of the bundle stays mapped while the outputs are written.
  const std::string model_name = pf_bundle_model(bundle.get()),
                    target = pf_bundle_target(bundle.get());
  const int kernels = pf_bundle_num_kernels(bundle.get());
  model.reset();
  bundle.reset();
  // All outputs or none: a rerun that fails on one never leaves the others of two runs side by
  // side.
  try {
    std::vector<padfold::FileContents> files;
    for (size_t i = 0; i < out_names.size(); ++i) {
      padfold::NpyData& arr = arrays[in_names.size() + i];
      files.push_back(padfold::npy_file(out_paths[i], arr.shape, arr.dtype, arr.data()));
      std::vector<unsigned char>().swap(arr.bytes);  // at most one copy of each output in memory
    }
    padfold::write_files_replacing(files);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("--output {}", e.what()));
  }
  fmt::print("ran model {} ({} kernels) on target {}; wrote {}\n", model_name, kernels, target,
             fmt::join(out_paths, ", "));
  for (const auto& [name, ops] : read_by)
    fmt::print("partial: output '{}' still has to go through {}\n", name, ops);
  for (const std::string& name : out_names)
    if (const auto q = notes.quant.find(name); q != notes.quant.end())
      fmt::print("output '{}': integers q standing for {} * (q - {})\n", name, q->second.first,
                 q->second.second);
}

void run(const RunArgs& a) {
  if (a.model == !a.layer.empty())
    throw std::runtime_error("give either --layer NAME (one kernel) or --model (the whole model)");
  if (a.partial && !a.model) throw std::runtime_error("--partial is for --model runs");
  if (a.model)
    run_model(a);
  else
    run_layer(a);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run one compiled kernel, or the whole model, on NumPy .npy files (each of its buffer's\n"
      "dtype: float32, or a quantized layer's int8/uint8 activations, int8 weights and int32\n"
      "bias; shapes in the layers' layouts).\n"
      "Example: padfold run out/tiny --layer stem --input x.npy --weights w.npy --output y.npy\n"
      "         padfold run out/tiny --model --input stem.input=x.npy --output avg=y.npy");
  cmd->add_option("bundle", args->bundle, "bundle directory written by padfold compile")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--layer", args->layer, "layer name (one kernel)");
  cmd->add_flag("--model", args->model,
                "run the whole model (pf_model_run), weights from the bundle");
  cmd->add_flag("--partial", args->partial,
                "with --model: run a model whose outputs feed ops left to the caller (import), "
                "writing the tensors those ops read");
  cmd->add_option("--input", args->inputs,
                  "input tensor (.npy); with --model NAME=FILE per model input (FILE alone when "
                  "there is one)")
      ->required();
  cmd->add_option("--weights", args->weights, "weights (.npy), for conv layers");
  cmd->add_option("--bias", args->bias, "bias (.npy), for layers with bias");
  cmd->add_option("--output", args->outputs,
                  "where to write the output (.npy; replaced atomically; not inside the bundle); "
                  "with --model NAME=FILE per model output (FILE alone when there is one)")
      ->required();
  cmd->callback([args] { run(*args); });
}
