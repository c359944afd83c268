// Every graph input gets an --input size: a fixed dim keeps its value; a dynamic dim takes its
// dim_param when that is a number from 1 to 64 (so the fuzzer picks sizes), else 1 for N, 3 for C
// and 8 for the rest; an input without a shape gets 1x3x8x8.
#include "onnx_import_check.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "frontend/onnx/import.h"
#include "frontend/spec.h"

namespace padfold::fuzz {

namespace {

namespace oi = padfold::onnx_import;

std::string dim_size(const onnx::TensorShapeProto::Dimension& d, int i) {
  if (d.has_dim_value() && d.dim_value() > 0) return std::to_string(d.dim_value());
  const std::string& p = d.dim_param();
  if (!p.empty() && p.size() <= 2 && p.find_first_not_of("0123456789") == std::string::npos) {
    const int v = std::stoi(p);
    if (v >= 1 && v <= 64) return p;
  }
  return i == 0 ? "1" : i == 1 ? "3" : "8";
}

// NAME=SIZES for every graph input that is no initializer, as a user would give them.
std::vector<std::string> input_sizes(const onnx::ModelProto& m) {
  std::vector<std::string> out;
  for (const auto& in : m.graph().input()) {
    bool init = false;
    for (const auto& t : m.graph().initializer()) init = init || t.name() == in.name();
    if (init || in.name().empty() || out.size() >= 16) continue;
    const auto& tt = in.type().tensor_type();
    std::string sizes;
    if (!tt.has_shape()) {
      sizes = "1x3x8x8";
    } else {
      for (int i = 0; i < tt.shape().dim_size(); ++i)
        sizes += (i ? "x" : "") + dim_size(tt.shape().dim(i), i);
    }
    if (sizes.empty()) continue;  // a scalar: nothing to give
    out.push_back(in.name() + "=" + sizes);
  }
  return out;
}

// FUZZ_ONNX_VERBOSE=1: print each input's outcome (to see what the seeds reach).
const bool verbose = std::getenv("FUZZ_ONNX_VERBOSE") != nullptr;

}  // namespace

void finding(const char* target, const std::string& what) {
  std::fprintf(stderr, "%s finding: %s\n", target, what.c_str());
  std::abort();
}

void import_and_check(const uint8_t* data, size_t size, const char* target) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    onnx::ModelProto model = oi::parse_model(bytes, "fuzz.onnx");
    const std::vector<std::string> inputs = input_sizes(model);
    const oi::ImportOutput out =
        oi::import_onnx(std::move(model), inputs, "fuzz.onnx", {}, /*emit_onnx=*/true);

    // The import succeeded: what it would write must hold.
    padfold::Model m;
    try {
      m = padfold::parse_spec(out.spec_text, out.result.model_name + ".json");
    } catch (const padfold::SpecError& e) {
      finding(target,
              std::string("the imported spec does not parse: ") + e.what() + "\n" + out.spec_text);
    }
    // What `padfold check` reads from weights/: every file the spec names, of the buffer's shape.
    auto weight_shape = [&](const std::string& path) -> std::vector<int64_t> {
      for (const oi::WeightFile& w : out.result.weights)
        if (w.path == path) {
          size_t n = 1;
          for (int64_t d : w.shape) n *= static_cast<size_t>(d);
          const size_t values = w.ints.empty() ? w.data.size() : w.ints.size();  // int8, int32
          if (n != values) finding(target, path + ": data does not match its shape");
          return w.shape;
        }
      finding(target, "the spec names " + path + ", which the import does not write");
    };
    for (const padfold::Layer& L : m.layers) {
      if (!L.weights_file.empty() && weight_shape(L.weights_file) != L.weight_shape())
        finding(target, "layer '" + L.name + "': the weights do not have the layer's shape");
      if (!L.bias_file.empty() && weight_shape(L.bias_file) != std::vector<int64_t>{L.out_channels})
        finding(target, "layer '" + L.name + "': the bias does not have the layer's shape");
    }
    (void)oi::summary_text(out.result);
    try {
      (void)oi::parse_model(out.onnx_bytes, "normalized.onnx");
    } catch (const oi::ImportError& e) {
      finding(target, std::string("the --emit-onnx model does not read back: ") + e.what());
    }
    if (verbose) std::fprintf(stderr, "imported: %zu layer(s)\n", m.layers.size());
  } catch (const oi::ImportError& e) {
    if (std::string(e.what()).find(oi::kInternalError) != std::string::npos)
      finding(target, e.what());
    if (verbose) std::fprintf(stderr, "ImportError: %s\n", e.what());
  }
}

}  // namespace padfold::fuzz
