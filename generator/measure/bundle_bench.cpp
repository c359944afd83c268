#include "measure/bundle_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>

#include "padfold_runtime.h"

namespace padfold::measure {
namespace {

using json = nlohmann::ordered_json;

// 64-byte aligned memory of a buffer, filled with random values of its dtype: float32 uniform in
// [-1, 1); int8 and uint8 uniform over their whole range (a quantized layer's activations and
// weights); int32 (a quantized layer's bias) uniform in [-2^16, 2^16], the size of a bias of
// real scales, which keeps the accumulators far from overflow.
struct Memory {
  std::unique_ptr<void, decltype(&std::free)> data{nullptr, &std::free};
  size_t bytes = 0;
  Memory(const pf_buffer_desc& b, std::mt19937& rng) : bytes(pf_buffer_bytes(&b)) {
    data.reset(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    if (!data) throw std::runtime_error("out of memory for buffer " + std::string(b.name));
    switch (b.dtype) {
      case PF_F32: {
        std::uniform_real_distribution<float> dist(-1.f, 1.f);
        for (size_t i = 0; i < bytes / 4; ++i) static_cast<float*>(data.get())[i] = dist(rng);
        break;
      }
      case PF_I8: {
        std::uniform_int_distribution<int> dist(-128, 127);
        for (size_t i = 0; i < bytes; ++i)
          static_cast<int8_t*>(data.get())[i] = static_cast<int8_t>(dist(rng));
        break;
      }
      case PF_U8: {
        std::uniform_int_distribution<int> dist(0, 255);
        for (size_t i = 0; i < bytes; ++i)
          static_cast<uint8_t*>(data.get())[i] = static_cast<uint8_t>(dist(rng));
        break;
      }
      case PF_I32: {
        std::uniform_int_distribution<int32_t> dist(-(1 << 16), 1 << 16);
        for (size_t i = 0; i < bytes / 4; ++i) static_cast<int32_t*>(data.get())[i] = dist(rng);
        break;
      }
      case PF_F16:  // small normal halves (sign, exponent 14 or 15: [0.5, 2)), never NaN or Inf
        for (size_t i = 0; i < bytes / 2; ++i)
          static_cast<uint16_t*>(data.get())[i] =
              static_cast<uint16_t>((rng() & 0x83ff) | (rng() & 1 ? 0x3800 : 0x3c00));
        break;
    }
  }
};

struct Bundle {
  pf_bundle* b = nullptr;
  pf_model* m = nullptr;
  pf_model* per_run = nullptr;  // the same model with per_run_allocation
  pf_pool* pool = nullptr;
  ~Bundle() {
    pf_model_close(per_run);
    pf_model_close(m);
    if (pool) pf_bundle_use_pool(b, nullptr, nullptr, 0);
    pf_pool_destroy(pool);
    pf_bundle_close(b);
  }
};

// A method timing pf_model_run of m (which a first run has checked).
Method model_method(const char* name, const pf_model* m, std::vector<pf_tensor>& in,
                    std::vector<pf_tensor>& out) {
  return {name,
          [m, &in, &out] {
            char e[PF_ERRLEN];
            pf_model_run(m, in.data(), static_cast<int>(in.size()), out.data(),
                         static_cast<int>(out.size()), e, sizeof e);
          },
          {},
          0};
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

std::string host_text() {
  std::string text(pf_host_describe(nullptr, 0) + 1, '\0');
  pf_host_describe(text.data(), text.size());
  text.pop_back();
  return text;
}

// A kernel's flops as the manifest states them: a finite count >= 0, else none (a damaged or
// hostile manifest the runtime, which does not read them, accepted).
std::optional<double> manifest_flops(const json& manifest, const std::string& layer) {
  const json kernels = manifest.is_object() ? manifest.value("kernels", json::array()) : json();
  if (!kernels.is_array()) return std::nullopt;
  for (const json& k : kernels) {
    if (!k.is_object() || k.value("layer", "") != layer || !k.contains("flops")) continue;
    if (!k["flops"].is_number()) return std::nullopt;
    const double f = k["flops"].get<double>();
    if (!std::isfinite(f) || f < 0 || f > 1e18) return std::nullopt;
    return f;
  }
  return std::nullopt;
}

std::map<std::string, std::string> manifest_read_by(const json& manifest) {
  std::map<std::string, std::string> out;
  if (!manifest.is_object() || !manifest.contains("graph") || !manifest["graph"].is_object())
    return out;
  const json& g = manifest["graph"];
  if (g.contains("read_by") && g["read_by"].is_object())
    for (const auto& [name, ops] : g["read_by"].items())
      out[name] = ops.is_string() ? ops.get<std::string>() : ops.dump();
  return out;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void check(pf_status s, const char* err, const std::string& what) {
  if (s != PF_OK) throw std::runtime_error(what + ": " + err);
}

// pf_bundle_open + pf_model_open of dir and closing both, a few times: the median open.
double reopen_median_s(const std::string& dir) {
  std::vector<double> samples;
  char err[PF_ERRLEN];
  for (int i = 0; i < 5; ++i) {
    Bundle again;
    const auto t0 = Clock::now();
    check(pf_bundle_open(dir.c_str(), nullptr, &again.b, err, sizeof err), err, "bundle " + dir);
    check(pf_model_open(again.b, nullptr, &again.m, err, sizeof err), err, "model of " + dir);
    samples.push_back(seconds_since(t0));
  }
  return median(samples);
}

}  // namespace

BenchResult bench_bundle(const std::string& dir, const BenchOptions& o) {
  BenchResult r;
  r.bundle = dir;
  r.cpu = cpu_model();
  r.host = host_text();
  char err[PF_ERRLEN];
  Bundle h;
  OpenTiming open;
  auto t0 = Clock::now();
  check(pf_bundle_open(dir.c_str(), nullptr, &h.b, err, sizeof err), err, "bundle " + dir);
  open.bundle_s = seconds_since(t0);
  r.target = pf_bundle_target(h.b);
  // Halide's thread pool keeps the workers it has started (a pool set back from 2 threads to 1
  // still runs on 2): the counts go in increasing order, the first set before anything runs.
  std::vector<int> threads = o.threads;
  std::sort(threads.begin(), threads.end());
  threads.erase(std::unique(threads.begin(), threads.end()), threads.end());
  if (threads.empty()) throw std::runtime_error("no thread count given");
  if (o.pool != "padfold" && o.pool != "halide" && o.pool != "both")
    throw std::runtime_error("pool '" + o.pool + "': expected padfold, halide or both");
  r.pool = o.pool;
  auto use_threads = [&](int n) {
    if (o.pool != "padfold")
      check(pf_bundle_set_num_threads(h.b, n, nullptr, err, sizeof err), err, "threads");
    if (o.pool == "halide") return;
    if (h.pool) pf_bundle_use_pool(h.b, nullptr, nullptr, 0);
    pf_pool_destroy(h.pool);
    h.pool = nullptr;
    const pf_pool_options po{n, o.spin_us};
    check(pf_pool_create(&po, &h.pool, err, sizeof err), err, "worker pool");
    check(pf_bundle_use_pool(h.b, h.pool, err, sizeof err), err, "worker pool");
  };
  use_threads(threads.front());
  json manifest;
  {
    std::ifstream f(dir + "/manifest.json");
    manifest = json::parse(f, nullptr, false);
  }
  r.peak = fma_peak(r.target);

  std::mt19937 rng(1);
  std::vector<std::unique_ptr<Memory>> memory;
  auto tensor_of = [&](const pf_buffer_desc& b) {
    memory.push_back(std::make_unique<Memory>(b, rng));
    return pf_tensor_of(&b, memory.back()->data.get(), memory.back()->bytes);
  };

  std::vector<Method> methods;
  std::vector<KernelTiming> kernels;
  std::vector<std::vector<pf_tensor>> bound;  // each kernel's tensors; methods point into it
  const int n = pf_bundle_num_kernels(h.b);
  bound.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const pf_kernel_desc* k = pf_bundle_kernel(h.b, i);
    if ((!o.layer.empty() && o.layer != k->layer) || o.model_only) continue;
    std::vector<pf_tensor>& t = bound.emplace_back();
    for (int j = 0; j < k->num_buffers; ++j) t.push_back(tensor_of(k->buffers[j]));
    // A first run names a kernel that fails before anything is timed.
    check(pf_run(k, t.data(), static_cast<int>(t.size()), err, sizeof err), err,
          std::string("kernel '") + k->layer + "'");
    double bytes = 0;
    for (int j = 0; j < k->num_buffers; ++j)
      bytes += static_cast<double>(pf_buffer_bytes(&k->buffers[j]));
    kernels.push_back({k->layer, k->op, manifest_flops(manifest, k->layer), bytes, 0});
    const std::vector<pf_tensor>* tp = &t;
    methods.push_back({k->layer,
                       [k, tp] {
                         char e[PF_ERRLEN];
                         pf_run(k, tp->data(), static_cast<int>(tp->size()), e, sizeof e);
                       },
                       {},
                       0});
  }
  if (!o.layer.empty() && kernels.empty()) {
    std::string names;
    for (int i = 0; i < n; ++i)
      names += std::string(i ? ", " : "") + pf_bundle_kernel(h.b, i)->layer;
    throw std::runtime_error("bundle " + dir + " has no kernel '" + o.layer + "'; it has " + names);
  }

  std::vector<pf_tensor> model_in, model_out;
  if (o.layer.empty()) {
    t0 = Clock::now();
    const pf_status opened = pf_model_open(h.b, nullptr, &h.m, err, sizeof err);
    open.model_s = seconds_since(t0);
    if (opened != PF_OK) {
      if (o.model_only)
        throw std::runtime_error("--model-only: bundle " + dir + " does not run whole: " + err);
      r.model_note = err;
    } else {
      for (int i = 0; i < pf_model_num_inputs(h.m); ++i)
        model_in.push_back(tensor_of(*pf_model_input(h.m, i)));
      for (int i = 0; i < pf_model_num_outputs(h.m); ++i)
        model_out.push_back(tensor_of(*pf_model_output(h.m, i)));
      pf_model_options per_run{};
      per_run.per_run_allocation = 1;
      check(pf_model_open(h.b, &per_run, &h.per_run, err, sizeof err), err, "model of " + dir);
      for (const pf_model* m : {h.m, h.per_run})
        check(pf_model_run(m, model_in.data(), static_cast<int>(model_in.size()), model_out.data(),
                           static_cast<int>(model_out.size()), err, sizeof err),
              err, "model of bundle " + dir);
      open.reopen_median_s = reopen_median_s(dir);
      r.open = open;
      r.model_read_by = manifest_read_by(manifest);
      methods.push_back(model_method("(model)", h.m, model_in, model_out));
      methods.push_back(
          model_method("(model, per-run allocation)", h.per_run, model_in, model_out));
      if (o.pool == "both") {
        // Every other method selects padfold's pool first (a pointer swap), this one Halide's.
        for (Method& m : methods)
          m.fn = [&h, fn = m.fn] {
            pf_bundle_use_pool(h.b, h.pool, nullptr, 0);
            fn();
          };
        Method halide = model_method("(model, Halide's pool)", h.m, model_in, model_out);
        halide.fn = [&h, fn = halide.fn] {
          pf_bundle_use_pool(h.b, nullptr, nullptr, 0);
          fn();
        };
        methods.push_back(std::move(halide));
      }
    }
  }

  std::vector<Method*> order;
  for (Method& m : methods) order.push_back(&m);
  QuietLimits limits = o.limits;
  limits.min_time = o.min_time_s;
  for (int n : threads) {
    use_threads(n);
    ThreadRun run;
    run.threads = n;
    if (!kernels.empty()) run.bandwidth_gbps = memory_bandwidth_gbps(n);
    run.quiet = time_while_quiet(order, n, limits, dir);
    run.kernels = kernels;
    for (size_t i = 0; i < kernels.size(); ++i)
      run.kernels[i].median_s = median(methods[i].samples);
    if (h.m) {
      const size_t first = kernels.size();
      run.model_median_s = median(methods[first].samples);
      run.model_per_run_median_s = median(methods[first + 1].samples);
      if (o.pool == "both") run.model_halide_pool_median_s = median(methods[first + 2].samples);
    }
    r.runs.push_back(std::move(run));
  }
  return r;
}

namespace {
std::optional<double> gflops(const KernelTiming& k) {
  if (!k.flops) return std::nullopt;
  return k.median_s > 0 ? *k.flops / k.median_s / 1e9 : 0;
}
std::optional<double> peak_share(const BenchResult& r, const ThreadRun& run,
                                 const KernelTiming& k) {
  const double peak = r.peak.gflops * run.threads;
  const std::optional<double> g = gflops(k);
  if (!g) return std::nullopt;
  return peak > 0 ? *g / peak : 0;
}
double gbps(const KernelTiming& k) {
  return k.median_s > 0 ? k.bytes / k.median_s / 1e9 : 0;
}
double bandwidth_share(const ThreadRun& run, const KernelTiming& k) {
  return run.bandwidth_gbps > 0 ? gbps(k) / run.bandwidth_gbps : 0;
}
// The roofline: a kernel doing fewer flops per byte than the machine's peak flops per byte of
// bandwidth (at this thread count) cannot reach the FMA peak; the memory bounds it. A kernel
// without a flop count is taken as memory-bound.
bool memory_bound(const BenchResult& r, const ThreadRun& run, const KernelTiming& k) {
  if (!k.flops || k.bytes <= 0 || run.bandwidth_gbps <= 0) return true;
  return *k.flops / k.bytes < r.peak.gflops * run.threads / run.bandwidth_gbps;
}
json or_null(std::optional<double> v, double scale = 1) {
  return v ? json(*v * scale) : json(nullptr);
}
std::string cell(std::optional<double> v, double scale, int width, int digits) {
  return v ? fmt::format("{:>{}.{}f}", *v * scale, width, digits)
           : fmt::format("{:>{}}", "n/a", width);
}
std::string partial_text(const BenchResult& r) {
  std::string s;
  for (const auto& [name, ops] : r.model_read_by)
    s += fmt::format("{}output '{}' still goes through {}", s.empty() ? "" : "; ", name, ops);
  return s;
}
}  // namespace

json to_json(const BenchResult& r) {
  json j = {{"bundle", r.bundle},
            {"target", r.target},
            {"cpu", r.cpu},
            {"host", r.host},
            {"pool", r.pool},
            {"fma_peak", {{"isa", r.peak.isa}, {"gflops_per_core", r.peak.gflops}}}};
  if (r.open)
    j["open_ms"] = {{"first_bundle", r.open->bundle_s * 1e3},
                    {"first_model", r.open->model_s * 1e3},
                    {"reopen_median", r.open->reopen_median_s * 1e3}};
  if (!r.model_note.empty()) j["model_not_timed"] = r.model_note;
  if (!r.model_read_by.empty()) j["model_partial"] = r.model_read_by;
  j["runs"] = json::array();
  for (const ThreadRun& run : r.runs) {
    json t = {{"threads", run.threads},
              {"quiet", run.quiet.met},
              {"other_load_cores", run.quiet.load},
              {"probe_speed", run.quiet.seen.speed},
              {"probe_cores", run.quiet.seen.cores}};
    t["memory_bandwidth_gbps"] = run.bandwidth_gbps;
    t["model_median_ms"] = run.model_median_s ? json(*run.model_median_s * 1e3) : json(nullptr);
    t["model_per_run_allocation_median_ms"] =
        run.model_per_run_median_s ? json(*run.model_per_run_median_s * 1e3) : json(nullptr);
    if (run.model_halide_pool_median_s)
      t["model_halide_pool_median_ms"] = *run.model_halide_pool_median_s * 1e3;
    t["kernels"] = json::array();
    for (const KernelTiming& k : run.kernels)
      t["kernels"].push_back({{"layer", k.layer},
                              {"op", k.op},
                              {"mflops", or_null(k.flops, 1e-6)},
                              {"median_ms", k.median_s * 1e3},
                              {"gflops", or_null(gflops(k))},
                              {"peak_share", or_null(peak_share(r, run, k))},
                              {"mbytes", k.bytes / 1e6},
                              {"gbps", gbps(k)},
                              {"bandwidth_share", bandwidth_share(run, k)},
                              {"bound", memory_bound(r, run, k) ? "memory" : "compute"}});
    j["runs"].push_back(t);
  }
  return j;
}

std::string to_text(const BenchResult& r) {
  std::string s = fmt::format(
      "bundle {} (target {})\nCPU: {} ({})\nFMA peak ({}): {:.1f} GFLOP/s per core\n"
      "parallel loops on the thread pool of: {}\n",
      r.bundle, r.target, r.cpu, r.host, r.peak.isa, r.peak.gflops, r.pool);
  if (r.open)
    s += fmt::format(
        "open: {:.1f} ms the first time (pf_bundle_open {:.1f}, pf_model_open {:.1f}), {:.1f} ms "
        "again (median)\n",
        (r.open->bundle_s + r.open->model_s) * 1e3, r.open->bundle_s * 1e3, r.open->model_s * 1e3,
        r.open->reopen_median_s * 1e3);
  if (!r.model_note.empty()) s += fmt::format("whole model not timed: {}\n", r.model_note);
  for (const ThreadRun& run : r.runs) {
    s += fmt::format(
        "\n{} thread(s): other processes {:.2f} cores, probe {:.2f} of best speed, {:.2f} "
        "cores{}\n",
        run.threads, run.quiet.load, run.quiet.seen.speed, run.quiet.seen.cores,
        run.quiet.met ? "" : " (NOT QUIET: the machine stayed busy; compare with care)");
    if (run.model_median_s)
      s += fmt::format("  model{}: median {:.3f} ms per run ({:.3f} allocating per run){}\n",
                       r.model_read_by.empty() ? "" : " (partial)", *run.model_median_s * 1e3,
                       *run.model_per_run_median_s * 1e3,
                       r.model_read_by.empty()
                           ? ""
                           : "; padfold's part only: " + partial_text(r) + ", left to the caller");
    if (run.model_halide_pool_median_s)
      s += fmt::format("  model on Halide's thread pool: median {:.3f} ms per run\n",
                       *run.model_halide_pool_median_s * 1e3);
    if (!run.kernels.empty())
      s += fmt::format(
          "  memory bandwidth ({} thread(s) copying): {:.1f} GB/s; a kernel's bytes are its "
          "buffers "
          "read or written once (above 100% of the bandwidth, they came from the caches); bound: "
          "the roofline's\n",
          run.threads, run.bandwidth_gbps);
    s +=
        fmt::format("  {:<32} {:<18} {:>9} {:>11} {:>9} {:>7} {:>8} {:>7} {:>6} {:>7}\n", "kernel",
                    "op", "MFLOP", "median ms", "GFLOP/s", "% peak", "MB", "GB/s", "% bw", "bound");
    double total = 0;
    for (const KernelTiming& k : run.kernels) {
      total += k.median_s;
      s += fmt::format("  {:<32} {:<18} {} {:>11.4f} {} {} {:>8.2f} {:>7.1f} {:>6.0f} {:>7}\n",
                       k.layer, k.op, cell(k.flops, 1e-6, 9, 2), k.median_s * 1e3,
                       cell(gflops(k), 1, 9, 1), cell(peak_share(r, run, k), 100, 7, 1),
                       k.bytes / 1e6, gbps(k), bandwidth_share(run, k) * 100,
                       memory_bound(r, run, k) ? "memory" : "compute");
    }
    s += fmt::format("  {:<32} {:<18} {:>9} {:>11.4f}\n", "(sum of kernels)", "", "", total * 1e3);
  }
  return s;
}

}  // namespace padfold::measure
