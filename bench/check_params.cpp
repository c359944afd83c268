// Schedule options against the naive reference: every kernel test case (tests/kernel_cases.h:
// every op x convention x border x layout on small random shapes), JIT-compiled with the default
// schedule overridden by each given parameter set, element-wise against the reference with the
// tolerance of kernels_test. kernels_test covers the default rows; this covers the options a row
// may turn on (fit_tiles, channels_outer_kb, parallel_channels, taps_inner, unroll_channels,
// unroll_taps_outer) on shapes the benchmark does not have.
//
// usage: check_params [--target host] [--seed 20261130] '{"fit_tiles": true}' ...
#include <Halide.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "algorithm.h"
#include "bundle.h"
#include "kernel_cases.h"
#include "kernel_runner.h"
#include "schedule.h"

namespace {

using namespace padfold;

int64_t taps_per_output(const Layer& L) {
  int64_t taps = 1;
  for (int64_t k : L.kernel) taps *= k;
  if (L.has_weights()) taps *= L.in_channels / L.groups;
  return taps;
}

Halide::Buffer<float> as_buffer(const ref::Tensor& t) {
  std::vector<int> sizes(t.shape.rbegin(), t.shape.rend());
  return Halide::Buffer<float>(const_cast<float*>(t.data.data()), sizes);
}

}  // namespace

int main(int argc, char** argv) {
  std::string target_name = "host";
  unsigned seed = 20261130;
  std::vector<std::string> variants;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--target" && i + 1 < argc)
      target_name = argv[++i];
    else if (a == "--seed" && i + 1 < argc)
      seed = static_cast<unsigned>(std::stoul(argv[++i]));
    else
      variants.push_back(a);
  }
  if (variants.empty()) variants.push_back("{}");
  const Halide::Target target(resolve_target(target_name));
  int failures = 0, runs = 0;
  for (const testing::KernelCase& c : testing::make_kernel_cases(seed, 1)) {
    const Model model = parse_spec(c.spec, c.name);
    const Layer& L = model.layers.at(0);
    const testing::LayerData data = testing::random_data(L, 1234);
    const ref::Tensor expected = testing::reference_output(L, data);
    const double scale = std::max(ref::max_abs(expected), 1.0);
    const double tol = 1e-5 * static_cast<double>(taps_per_output(L) + 1) * scale;
    for (const std::string& v : variants) {
      Algorithm a = build_algorithm(L);
      ScheduleParams p = default_schedule(L, target);
      update_from_json(p, nlohmann::json::parse(v));
      try {
        apply_schedule(a, p, target);
        a.input.set(as_buffer(data.input));
        if (L.has_weights()) a.weights.set(as_buffer(data.weights));
        if (L.bias) a.bias.set(as_buffer(data.bias));
        ref::Tensor out(L.output_shape_full());
        Halide::Buffer<float> out_buf = as_buffer(out);
        Halide::Pipeline(a.output).realize(out_buf, target);
        ++runs;
        for (size_t i = 0; i < expected.data.size(); ++i) {
          if (!(std::fabs(out.data[i] - expected.data[i]) <= tol)) {
            std::printf("FAIL %s %s: element %zu: %g, expected %g\n", c.name.c_str(), v.c_str(), i,
                        out.data[i], expected.data[i]);
            ++failures;
            break;
          }
        }
      } catch (const std::exception& e) {
        std::printf("FAIL %s %s: %s\n", c.name.c_str(), v.c_str(), e.what());
        ++failures;
      }
    }
  }
  std::printf("%d kernels checked (%s), %d failures\n", runs, target.to_string().c_str(), failures);
  return failures ? 1 : 0;
}
