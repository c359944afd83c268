// `padfold run`: runs one kernel of a compiled bundle on .npy files, through the C runtime.
//
// The .npy files are read and written by npy.h (checked: sizes, header, dtype; errors name the
// flag and the file). The output is computed in memory, the bundle is closed, and only then is the
// output written, atomically (a temporary file renamed over the path), so a failed run leaves no
// partial output. An --output inside the bundle directory, or naming one of the bundle's files
// through a link, is refused before anything runs: replacing the bundle's shared library or
// manifest would destroy the bundle.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "commands.h"
#include "npy.h"
#include "padfold_runtime.h"

namespace {

namespace fs = std::filesystem;

struct RunArgs {
  std::string bundle, layer, input, weights, bias, output;
};

struct BundleCloser {
  void operator()(pf_bundle* b) const { pf_bundle_close(b); }
};

std::string shape_str(const std::vector<int64_t>& shape) {
  return shape.empty() ? std::string("()") : fmt::format("{}", fmt::join(shape, "x"));
}

padfold::NpyArray load(const std::string& path, const std::string& flag) {
  try {
    return padfold::read_npy_f32(path);
  } catch (const std::exception& e) {
    // e.what() starts with the path.
    throw std::runtime_error(fmt::format("{} {}", flag, e.what()));
  }
}

// Elements of a kernel buffer, refused when its float32 data would not fit a .npy file.
size_t elements(const pf_buffer_desc& b, const std::string& layer) {
  const std::vector<int64_t> shape(b.shape, b.shape + b.rank);
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 ||
        (d > 0 && n > padfold::kNpyMaxDataBytes / sizeof(float) / static_cast<uint64_t>(d)))
      throw std::runtime_error(fmt::format(
          "kernel '{}' buffer '{}' has shape {}: too large for a .npy file (limit {} bytes)", layer,
          b.name, shape_str(shape), padfold::kNpyMaxDataBytes));
    n *= static_cast<uint64_t>(d);
  }
  return static_cast<size_t>(n);
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

void run(const RunArgs& a) {
  check_output_outside_bundle(a.bundle, a.output);

  char err[PF_ERRLEN];
  pf_bundle* raw = nullptr;
  if (pf_bundle_open(a.bundle.c_str(), nullptr, &raw, err, sizeof err) != PF_OK)
    throw std::runtime_error(err);
  std::unique_ptr<pf_bundle, BundleCloser> bundle(raw);
  const pf_kernel_desc* k = nullptr;
  if (pf_bundle_find(bundle.get(), a.layer.c_str(), &k, err, sizeof err) != PF_OK)
    throw std::runtime_error(err);

  const std::map<std::string, std::pair<std::string, std::string>> files = {
      {"input", {"--input", a.input}},
      {"weights", {"--weights", a.weights}},
      {"bias", {"--bias", a.bias}}};
  std::vector<std::vector<float>> arrays(static_cast<size_t>(k->num_buffers));
  std::vector<pf_tensor> tensors;
  int output = -1;
  for (int i = 0; i < k->num_buffers; ++i) {
    const pf_buffer_desc& b = k->buffers[i];
    const std::vector<int64_t> want(b.shape, b.shape + b.rank);
    std::vector<float>& arr = arrays[static_cast<size_t>(i)];
    if (b.role == PF_ROLE_OUTPUT) {
      arr.assign(elements(b, a.layer), 0.0f);
      output = i;
    } else {
      const auto& [flag, path] = files.at(b.name);
      if (path.empty())
        throw std::runtime_error(fmt::format("layer '{}' needs {} (buffer '{}', {} {})", a.layer,
                                             flag, b.name, b.layout, shape_str(want)));
      padfold::NpyArray loaded = load(path, flag);
      if (loaded.shape != want)
        throw std::runtime_error(
            fmt::format("{} {}: shape {} does not match kernel '{}' buffer '{}' ({} {})", flag,
                        path, shape_str(loaded.shape), a.layer, b.name, b.layout, shape_str(want)));
      arr = std::move(loaded.data);
    }
    tensors.push_back(pf_tensor_of(&b, arr.data(), arr.size() * sizeof(float)));
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
  const pf_buffer_desc& ob = k->buffers[output];
  const std::vector<int64_t> out_shape(ob.shape, ob.shape + ob.rank);
  const std::string op = k->op, target = pf_bundle_target(bundle.get());
  bundle.reset();
  try {
    padfold::write_npy_f32(a.output, out_shape, arrays[static_cast<size_t>(output)].data());
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("--output {}", e.what()));
  }
  fmt::print("ran {} ({}) on target {}; wrote {}\n", a.layer, op, target, a.output);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run one compiled kernel on NumPy .npy files (float32, shapes in the layer's layouts).\n"
      "Example: padfold run out/tiny --layer stem --input x.npy --weights w.npy --output y.npy");
  cmd->add_option("bundle", args->bundle, "bundle directory written by padfold compile")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--layer", args->layer, "layer name")->required();
  cmd->add_option("--input", args->input, "input tensor (.npy)")->required();
  cmd->add_option("--weights", args->weights, "weights (.npy), for conv layers");
  cmd->add_option("--bias", args->bias, "bias (.npy), for layers with bias");
  cmd->add_option("--output", args->output,
                  "where to write the output (.npy; replaced atomically; not inside the bundle)")
      ->required();
  cmd->callback([args] { run(*args); });
}
