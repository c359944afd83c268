// `padfold run`: runs one kernel of a compiled bundle on .npy files, through the C runtime.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <memory>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

#include "commands.h"
#include "padfold_runtime.h"

namespace {

struct RunArgs {
  std::string bundle, layer, input, weights, bias, output;
};

struct BundleCloser {
  void operator()(pf_bundle* b) const { pf_bundle_close(b); }
};

xt::xarray<float> load(const std::string& path, const std::string& flag) {
  try {
    return xt::load_npy<float>(path);
  } catch (const std::exception& e) {
    throw std::runtime_error(
        fmt::format("{} {}: cannot read a float32 .npy file ({})", flag, path, e.what()));
  }
}

void run(const RunArgs& a) {
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
  std::vector<xt::xarray<float>> arrays(static_cast<size_t>(k->num_buffers));
  std::vector<pf_tensor> tensors;
  for (int i = 0; i < k->num_buffers; ++i) {
    const pf_buffer_desc& b = k->buffers[i];
    const std::vector<size_t> want(b.shape, b.shape + b.rank);
    xt::xarray<float>& arr = arrays[static_cast<size_t>(i)];
    if (b.role == PF_ROLE_OUTPUT) {
      arr = xt::xarray<float>::from_shape(want);
    } else {
      const auto& [flag, path] = files.at(b.name);
      if (path.empty())
        throw std::runtime_error(fmt::format("layer '{}' needs {} (buffer '{}', {} {})", a.layer,
                                             flag, b.name, b.layout, fmt::join(want, "x")));
      arr = load(path, flag);
      const std::vector<size_t> got(arr.shape().begin(), arr.shape().end());
      if (got != want)
        throw std::runtime_error(fmt::format(
            "{} {}: shape {} does not match kernel '{}' buffer '{}' ({} {})", flag, path,
            fmt::join(got, "x"), a.layer, b.name, b.layout, fmt::join(want, "x")));
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
  if (pf_run(k, tensors.data(), static_cast<int>(tensors.size()), err, sizeof err) != PF_OK)
    throw std::runtime_error(err);
  xt::dump_npy(a.output, arrays.back());
  fmt::print("ran {} ({}) on target {}; wrote {}\n", a.layer, k->op, pf_bundle_target(bundle.get()),
             a.output);
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
  cmd->add_option("--output", args->output, "where to write the output (.npy)")->required();
  cmd->callback([args] { run(*args); });
}
