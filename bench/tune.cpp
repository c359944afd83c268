// Schedule exploration: JIT-compiles layers of a spec with the default schedule overridden by one
// or more parameter sets and times them (median of many calls), checking that every variant
// computes the same output as the first. Not part of the benchmark; a tool for choosing the rows
// of schedules/cpu_table.cpp.
//
// usage: tune --spec bench_spec.json [--layer a,b] [--min-time 0.3] [--target host]
//             [--params '{"tile_x": 4}' ...]     (none: the default schedule only)
//             [--cpu-time]   time with the thread's CPU clock (single thread only)
// Threads: HL_NUM_THREADS (e.g. HL_NUM_THREADS=1).
#include <Halide.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "algorithm/algorithm.h"
#include "compile/lower.h"
#include "compile/target.h"
#include "frontend/spec.h"

namespace {

using Clock = std::chrono::steady_clock;

Halide::Buffer<float> random_buffer(const std::vector<int64_t>& shape, std::mt19937& rng) {
  std::vector<int> sizes(shape.rbegin(), shape.rend());
  Halide::Buffer<float> b(sizes);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  b.for_each_value([&](float& v) { v = dist(rng); });
  return b;
}

// Wall time, or with cpu_time this thread's CPU time: on a loaded machine it leaves out the time
// the thread waited for a core (single-thread runs only: HL_NUM_THREADS=1).
double now(bool cpu_time) {
  if (!cpu_time) return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec_path, target_name = "host";
  std::vector<std::string> layer_names, params;
  double min_time = 0.3;
  bool cpu_time = false;
  CLI::App app(
      "Times layers of a spec under schedule parameter sets (JIT), checking that every variant "
      "computes the same output as the first. Threads: HL_NUM_THREADS.",
      "padfold_tune");
  app.add_option("--spec", spec_path, "the spec file (e.g. bench_spec.json)")->required();
  app.add_option("--layer", layer_names, "only these layers: a,b (default: every layer)")
      ->delimiter(',');
  app.add_option("--params", params,
                 "a schedule parameter set as JSON, e.g. '{\"tile_x\": 4}'; repeat for more "
                 "(none: the default schedule only)")
      ->allow_extra_args(false);  // one JSON value per --params
  app.add_option("--min-time", min_time, "seconds timed per variant")->capture_default_str();
  app.add_flag("--cpu-time", cpu_time, "time with the thread's CPU clock (single thread only)");
  app.add_option("--target", target_name, "padfold target")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (params.empty()) params.push_back("{}");
  const padfold::Model model = padfold::load_spec(spec_path);
  const Halide::Target target = padfold::resolve_target(target_name);
  bool ok = true;
  for (const padfold::Layer& L : model.layers) {
    if (!layer_names.empty() &&
        std::find(layer_names.begin(), layer_names.end(), L.name) == layer_names.end())
      continue;
    std::mt19937 rng(1234);
    Halide::Buffer<float> in = random_buffer(L.input_shape(), rng);
    Halide::Buffer<float> w = random_buffer(L.weight_shape(), rng);
    Halide::Buffer<float> b = random_buffer({L.out_channels}, rng);
    std::vector<int64_t> os = L.output_shape_full();
    Halide::Buffer<float> out(std::vector<int>(os.rbegin(), os.rend()));
    // Compile every variant, check it against the first, then time them round robin in blocks
    // (so that noise from a shared machine hits them alike) and report medians.
    struct Variant {
      std::string json, name;
      padfold::Kernel kernel;
      std::vector<double> samples;
      double total = 0, compile_s = 0, diff = 0;
    };
    std::vector<Variant> variants(params.size());
    Halide::Buffer<float> first;
    for (size_t v = 0; v < params.size(); ++v) {
      Variant& V = variants[v];
      V.json = params[v];
      V.kernel = padfold::lower(L, target, nlohmann::json::parse(V.json));
      V.name = V.kernel.schedule.name;
      V.kernel.param("input").set(in);
      if (L.has_weights()) V.kernel.param("weights").set(w);
      if (L.bias) V.kernel.param("bias").set(b);
      const auto c0 = Clock::now();
      V.kernel.pipeline.compile_jit(padfold::codegen_target(target));
      V.compile_s = std::chrono::duration<double>(Clock::now() - c0).count();
      V.kernel.pipeline.realize(out, padfold::codegen_target(target));
      if (!first.defined()) {
        first = out.copy();
      } else {
        double scale = 0;
        out.for_each_element([&](const int* pos) {
          V.diff = std::max(V.diff, (double)std::fabs(out(pos) - first(pos)));
          scale = std::max(scale, (double)std::fabs(first(pos)));
        });
        V.diff /= std::max(scale, 1e-30);
      }
      for (int i = 0; i < 3; ++i) V.kernel.pipeline.realize(out, padfold::codegen_target(target));
    }
    bool done = false;
    while (!done) {
      done = true;
      for (Variant& V : variants) {
        if (V.total >= min_time && V.samples.size() >= 20) continue;
        done = false;
        const auto b0 = Clock::now();
        do {
          const double t0 = now(cpu_time);
          V.kernel.pipeline.realize(out, padfold::codegen_target(target));
          const double dt = now(cpu_time) - t0;
          V.samples.push_back(dt);
          V.total += dt;
        } while (std::chrono::duration<double>(Clock::now() - b0).count() < 0.02);
      }
    }
    for (const Variant& V : variants) {
      const double ms = 1e3 * median(V.samples);
      const double best = 1e3 * *std::min_element(V.samples.begin(), V.samples.end());
      std::printf("%-24s %8.4f ms %6.1f GF/s (best %6.1f)  diff %.0e  %.1fs  %s %s\n",
                  L.name.c_str(), ms, L.flops() / ms * 1e-6, L.flops() / best * 1e-6, V.diff,
                  V.compile_s, V.name.c_str(), V.json.c_str());
      if (!(V.diff < 1e-4)) ok = false;
    }
    std::fflush(stdout);
  }
  return ok ? 0 : 1;
}
