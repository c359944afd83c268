#include "gpu_util.h"

#include <dlfcn.h>
#include <unistd.h>

#include <random>
#include <stdexcept>

#include "emit/bundle.h"

namespace padfold::testing {

namespace fs = std::filesystem;

namespace {

// This process's bundles, removed when it exits.
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / ("padfold_gpu_" + std::to_string(getpid()));
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

const fs::path& scratch_dir() {
  static const ScratchDir dir;
  return dir.path;
}

}  // namespace

fs::path compile_test_bundle(const std::string& name, const std::string& spec_json,
                             const std::vector<std::string>& targets, bool device_code,
                             const nlohmann::json& overrides) {
  const fs::path dir = scratch_dir() / name;
  fs::remove_all(dir);
  fs::create_directories(dir.parent_path());
  const Model model = parse_spec(spec_json, name + ".json");
  CompileOptions opt;
  opt.targets = targets;
  opt.out_dir = dir.string();
  opt.emit_device_code = device_code;
  opt.schedule_overrides = overrides;
  compile_bundle(model, opt);
  return dir;
}

namespace {

ref::Tensor random_tensor(const std::vector<int64_t>& shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  ref::Tensor t(shape);
  for (float& v : t.data) v = dist(rng);
  return t;
}

// Concatenation along the channel axis: for every index of the axes before it, the inputs'
// [channels x inner] blocks one after the other.
ref::Tensor concat_reference(const Layer& L, const std::vector<ref::Tensor>& in) {
  const std::vector<int64_t> shape = L.output_shape_full();
  const size_t axis = L.layout.channels_last ? shape.size() - 1 : 1;
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  ref::Tensor out(shape);
  size_t k = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const ref::Tensor& t : in) {
      const int64_t block = t.shape[axis] * inner;
      for (int64_t i = 0; i < block; ++i) out.data[k++] = t.data[o * block + i];
    }
  return out;
}

}  // namespace

LayerCase make_layer_case(const Layer& L, unsigned seed) {
  LayerCase c;
  c.layer = &L;
  if (!L.is_join()) {
    ref::LayerData d = ref::random_data(L, seed);
    c.reference = ref::reference_output(L, d);
    c.inputs.push_back(d.input);
    if (L.has_weights()) c.inputs.push_back(d.weights);
    if (L.bias) c.inputs.push_back(d.bias);
    return c;
  }
  if (L.activation != Activation::None)
    throw std::logic_error("layer '" + L.name + "': test joins have no activation");
  std::mt19937 rng(seed);
  for (size_t i = 0; i < L.inputs.size(); ++i)
    c.inputs.push_back(random_tensor(L.input_shape(i), rng));
  if (L.op == Op::Concat) {
    c.reference = concat_reference(L, c.inputs);
  } else if (L.op == Op::Mul) {  // input 1: one value per (batch, channel)
    const ref::Tensor& x = c.inputs[0];
    c.reference = x;
    const int64_t channels = L.in_channels;
    const int64_t pixels = static_cast<int64_t>(x.data.size()) / (L.batch * channels);
    for (int64_t k = 0; k < static_cast<int64_t>(x.data.size()); ++k) {
      const int64_t n = k / (pixels * channels);
      const int64_t ch = L.layout.channels_last ? k % channels : k / pixels % channels;
      c.reference.data[static_cast<size_t>(k)] *=
          c.inputs[1].data[static_cast<size_t>(n * channels + ch)];
    }
  } else {
    c.reference = ref::Tensor(L.output_shape_full());
    for (const ref::Tensor& t : c.inputs)
      for (size_t i = 0; i < t.data.size(); ++i) c.reference.data[i] += t.data[i];
  }
  return c;
}

pf_status run_case(const pf_kernel_desc* k, const LayerCase& c, std::vector<float>& out,
                   std::string& message) {
  std::vector<pf_tensor> t;
  size_t next = 0;
  for (int i = 0; i < k->num_buffers; ++i) {
    const pf_buffer_desc* b = &k->buffers[i];
    if (b->role == PF_ROLE_OUTPUT) {
      out.assign(pf_buffer_bytes(b) / sizeof(float), -12345.f);
      t.push_back(pf_tensor_of(b, out.data(), out.size() * sizeof(float)));
    } else {
      const ref::Tensor& src = c.inputs.at(next++);
      t.push_back(
          pf_tensor_of(b, const_cast<float*>(src.data.data()), src.data.size() * sizeof(float)));
    }
  }
  char err[PF_ERRLEN] = "";
  const pf_status s = pf_run(k, t.data(), static_cast<int>(t.size()), err, sizeof err);
  message = err;
  return s;
}

}  // namespace padfold::testing
