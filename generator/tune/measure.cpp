#include "tune/measure.h"

#include <Halide.h>
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <functional>

namespace padfold {

namespace {

constexpr double kRelativeTolerance = 1e-4;  // as the kernel tests (tests/support/bundle_util.h)

Halide::Buffer<float> as_buffer(const ref::Tensor& t) {
  std::vector<int> sizes(t.shape.rbegin(), t.shape.rend());
  return Halide::Buffer<float>(const_cast<float*>(t.data.data()), sizes);
}

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  const double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

// What a candidate's Halide runtime reported as an error (instead of printing it).
std::string halide_errors;
void collect_halide_error(void*, const char* msg) {
  halide_errors += msg;
}

// A loaded candidate: its argv entry point, called with the layer's buffers.
class Loaded {
 public:
  Loaded(const Variant& v) {
    handle_ = dlopen(v.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw std::runtime_error(std::string("dlopen: ") + dlerror());
    fn_ = reinterpret_cast<int (*)(void**)>(dlsym(handle_, (v.function + "_argv").c_str()));
    if (!fn_) throw std::runtime_error("no function " + v.function + "_argv in " + v.so_path);
    using Handler = void (*)(void*, const char*);
    if (auto set =
            reinterpret_cast<Handler (*)(Handler)>(dlsym(handle_, "halide_set_error_handler")))
      set(collect_halide_error);
  }
  ~Loaded() {
    if (handle_) dlclose(handle_);
  }
  Loaded(const Loaded&) = delete;
  Loaded& operator=(const Loaded&) = delete;
  int call(void** args) const { return fn_(args); }

 private:
  void* handle_ = nullptr;
  int (*fn_)(void**) = nullptr;
};

void pin_to_core(int core) {
  if (core < 0) core = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) - 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  sched_setaffinity(0, sizeof set, &set);  // best effort: a restricted cpuset keeps its own
}

}  // namespace

TuneData make_tune_data(const Layer& L) {
  TuneData d;
  d.data = padfold::ref::random_data(L, 1234);
  d.expected = padfold::ref::reference_output(L, d.data);
  return d;
}

MeasureResult measure_candidate(const Layer& L, const TuneData& data, const Variant& candidate,
                                const Variant& incumbent, const Variant& default_variant,
                                const MeasureOptions& opt) {
  pin_to_core(opt.core);
  MeasureResult r;
  Halide::Buffer<float> in = as_buffer(data.data.input), w, b;
  std::vector<void*> args{in.raw_buffer()};
  if (L.has_weights()) {
    w = as_buffer(data.data.weights);
    args.push_back(w.raw_buffer());
  }
  if (L.bias) {
    b = as_buffer(data.data.bias);
    args.push_back(b.raw_buffer());
  }
  ref::Tensor got(data.expected.shape);
  std::fill(got.data.begin(), got.data.end(), NAN);
  Halide::Buffer<float> out = as_buffer(got);
  args.push_back(out.raw_buffer());

  // Variant 0 is the candidate; the incumbent and the default follow unless they are it.
  std::vector<const Variant*> variants{&candidate};
  for (const Variant* v : {&incumbent, &default_variant})
    if (std::none_of(variants.begin(), variants.end(),
                     [&](const Variant* u) { return u->so_path == v->so_path; }))
      variants.push_back(v);
  std::vector<std::unique_ptr<Loaded>> loaded;
  for (const Variant* v : variants) loaded.push_back(std::make_unique<Loaded>(*v));

  if (int err = loaded[0]->call(args.data()); err != 0) {
    r.reason = "the kernel returned error " + std::to_string(err) +
               (halide_errors.empty() ? "" : ": " + halide_errors);
    while (!r.reason.empty() && r.reason.back() == '\n') r.reason.pop_back();
    return r;
  }
  const double tol = kRelativeTolerance * std::max(ref::max_abs(data.expected), 1e-30);
  for (size_t i = 0; i < got.data.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got.data[i]) - data.expected.data[i]);
    if (!(d <= tol)) {
      r.status = "wrong";
      r.reason = "element " + std::to_string(i) + " is " + std::to_string(got.data[i]) +
                 ", the reference " + std::to_string(data.expected.data[i]);
      return r;
    }
  }

  // Warm-up, and calls per block so that a block takes about 2 ms.
  std::vector<int> reps(variants.size(), 1);
  for (size_t v = 0; v < variants.size(); ++v) {
    double t = 0;
    for (int i = 0; i < 3; ++i) {
      const double t0 = thread_seconds();
      loaded[v]->call(args.data());
      t = thread_seconds() - t0;
    }
    reps[v] = std::clamp(static_cast<int>(2e-3 / std::max(t, 1e-7)), 1, 10000);
  }
  // Rounds: each variant one block, in a rotating order, so drift hits them alike.
  std::vector<std::vector<double>> per_call(variants.size());
  double timed = 0;
  for (int round = 0; round < opt.min_rounds || (timed < opt.min_time_s && round < 200); ++round) {
    for (size_t k = 0; k < variants.size(); ++k) {
      const size_t v = (k + static_cast<size_t>(round)) % variants.size();
      const double t0 = thread_seconds();
      for (int i = 0; i < reps[v]; ++i) loaded[v]->call(args.data());
      const double dt = thread_seconds() - t0;
      per_call[v].push_back(dt / reps[v]);
      if (v == 0) timed += dt;
    }
  }
  const auto index_of = [&](const Variant& v) {
    for (size_t i = 0; i < variants.size(); ++i)
      if (variants[i]->so_path == v.so_path) return i;
    return size_t{0};
  };
  const auto ratios = [&](size_t other) {
    std::vector<double> q;
    for (size_t i = 0; i < per_call[0].size(); ++i)
      q.push_back(per_call[other][i] / per_call[0][i]);
    return q;
  };
  const std::vector<double> vs_inc = ratios(index_of(incumbent));
  const std::vector<double> vs_def = ratios(index_of(default_variant));
  r.status = "ok";
  r.samples = per_call[0];
  r.median_s = quantile(per_call[0], 0.5);
  r.vs_incumbent = quantile(vs_inc, 0.5);
  r.vs_default = quantile(vs_def, 0.5);
  r.noise = 1.58 * (quantile(vs_inc, 0.75) - quantile(vs_inc, 0.25)) /
            std::sqrt(static_cast<double>(vs_inc.size())) / std::max(r.vs_incumbent, 1e-9);
  return r;
}

nlohmann::json to_json(const MeasureResult& r) {
  return {{"status", r.status},
          {"reason", r.reason},
          {"median_s", r.median_s},
          {"vs_default", r.vs_default},
          {"vs_incumbent", r.vs_incumbent},
          {"noise", r.noise},
          {"samples", r.samples}};
}

MeasureResult measure_result_from_json(const nlohmann::json& j) {
  MeasureResult r;
  r.status = j.at("status").get<std::string>();
  r.reason = j.at("reason").get<std::string>();
  r.median_s = j.at("median_s").get<double>();
  r.vs_default = j.at("vs_default").get<double>();
  r.vs_incumbent = j.at("vs_incumbent").get<double>();
  r.noise = j.at("noise").get<double>();
  r.samples = j.at("samples").get<std::vector<double>>();
  return r;
}

}  // namespace padfold
