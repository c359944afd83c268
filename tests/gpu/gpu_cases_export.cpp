// Writes the GPU tests' case sets for a machine with a GPU but no Halide: each set compiled for a
// GPU target into OUT/<set>/ (a bundle), with every layer's inputs and reference output (the naive
// reference, as gpu_kernels_test compares on PoCL) as raw float32 files under OUT/<set>/cases/,
// listed in OUT/<set>/cases.json. bench/gpu/check_cases.py runs them there.
//
// usage: gpu_cases_export OUT_DIR [TARGET [SETS]]
//   TARGET: default x86-64-linux-sse41-cuda-cuda_capability_86; SETS: matrix,wide,knobs (default)
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "emit/bundle.h"
#include "gpu_cases.h"
#include "gpu_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace padfold;
using namespace padfold::testing;

namespace {

json write_tensor(const ref::Tensor& t, const fs::path& dir, const std::string& name) {
  std::ofstream f(dir / "cases" / name, std::ios::binary);
  f.write(reinterpret_cast<const char*>(t.data.data()),
          static_cast<std::streamsize>(t.data.size() * sizeof(float)));
  if (!f) throw std::runtime_error("cannot write " + (dir / "cases" / name).string());
  return {{"file", "cases/" + name}, {"shape", t.shape}};
}

void export_set(const CaseSet& set, const fs::path& out, const std::string& target) {
  const fs::path dir = out / set.name;
  const Model model = parse_spec(set.spec, set.name + ".json");
  CompileOptions opt;
  opt.targets = {target};
  opt.out_dir = dir.string();
  opt.schedule_overrides = set.overrides;
  compile_bundle(model, opt);
  fs::create_directories(dir / "cases");
  json index = json::array();
  unsigned seed = 1;  // as gpu_kernels_test draws them
  for (const Layer& L : model.layers) {
    const LayerCase c = make_layer_case(L, seed++);
    json entry = {{"layer", L.name}, {"describe", set.describe(L)}, {"inputs", json::array()}};
    for (size_t i = 0; i < c.inputs.size(); ++i)
      entry["inputs"].push_back(
          write_tensor(c.inputs[i], dir, L.name + ".in" + std::to_string(i) + ".f32"));
    entry["reference"] = write_tensor(c.reference, dir, L.name + ".ref.f32");
    index.push_back(entry);
  }
  std::ofstream(dir / "cases.json") << index.dump(1) << "\n";
  std::cout << set.name << ": " << set.layers << " layers for " << target << " in " << dir.string()
            << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::cerr << "usage: gpu_cases_export OUT_DIR [TARGET [SETS]]\n";
    return 2;
  }
  const fs::path out = argv[1];
  const std::string target = argc > 2 ? argv[2] : "x86-64-linux-sse41-cuda-cuda_capability_86";
  const std::string sets = "," + std::string(argc > 3 ? argv[3] : "matrix,wide,knobs") + ",";
  auto wanted = [&](const char* name) {
    return sets.find(std::string(",") + name + ",") != std::string::npos;
  };
  try {
    if (wanted("matrix")) export_set(matrix_cases(), out, target);
    if (wanted("wide")) export_set(wide_window_cases(48, 2026), out, target);
    if (wanted("knobs")) export_set(random_knob_cases(99), out, target);
  } catch (const std::exception& e) {
    std::cerr << "gpu_cases_export: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
