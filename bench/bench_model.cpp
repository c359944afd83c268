// Whole-model runs: pf_model_run (intermediates allocated per run) against pf_model_run_static
// (every intermediate in one arena, no allocation), side by side in one process, one thread,
// warm-up and medians (bench_common.h); and, with --rss, the peak resident memory one static run
// of a freshly opened bundle adds to the process; with --open, what opening costs: pf_bundle_open
// + pf_model_open and the first run after them, weight files mapped (the default) against read
// (read_weights), alternating. bench/run_model.sh runs it (bench/README.md).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench_common.h"

namespace {

using json = nlohmann::json;

bool read_all(int fd, void* dst, size_t bytes) {
  auto* p = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t n = read(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

long max_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

struct Model {
  pf_bundle* b = nullptr;
  pf_model* m = nullptr;
  std::vector<std::unique_ptr<bench::Buffer>> in, out, static_out;
  std::vector<pf_tensor> ti, to, tso;
  void* arena = nullptr;
  size_t arena_bytes = 0;
  char err[PF_ERRLEN] = "";

  double open_s = 0;  // pf_bundle_open + pf_model_open

  explicit Model(const std::string& dir, const pf_model_options* options = nullptr) {
    const auto t0 = bench::Clock::now();
    if (pf_bundle_open(dir.c_str(), nullptr, &b, err, sizeof err) != PF_OK) bench::fail(err);
    if (pf_bundle_set_num_threads(b, 1, nullptr, err, sizeof err) != PF_OK) bench::fail(err);
    if (pf_model_open(b, options, &m, err, sizeof err) != PF_OK) bench::fail(err);
    open_s = std::chrono::duration<double>(bench::Clock::now() - t0).count();
    std::mt19937 rng(3);
    for (int i = 0; i < pf_model_num_inputs(m); ++i) {
      const pf_buffer_desc* d = pf_model_input(m, i);
      in.push_back(std::make_unique<bench::Buffer>(pf_buffer_bytes(d) / sizeof(float)));
      bench::fill_random(*in.back(), rng);
      ti.push_back(pf_tensor_of(d, in.back()->data, in.back()->bytes()));
    }
    for (int i = 0; i < pf_model_num_outputs(m); ++i) {
      const pf_buffer_desc* d = pf_model_output(m, i);
      out.push_back(std::make_unique<bench::Buffer>(pf_buffer_bytes(d) / sizeof(float)));
      static_out.push_back(std::make_unique<bench::Buffer>(pf_buffer_bytes(d) / sizeof(float)));
      to.push_back(pf_tensor_of(d, out.back()->data, out.back()->bytes()));
      tso.push_back(pf_tensor_of(d, static_out.back()->data, static_out.back()->bytes()));
    }
    arena_bytes = pf_model_arena_bytes(m);
    if (arena_bytes && !(arena = std::aligned_alloc(PF_ARENA_ALIGNMENT, arena_bytes)))
      bench::fail("out of memory");
  }
  ~Model() {
    std::free(arena);
    pf_model_close(m);
    pf_bundle_close(b);
  }
  void run() {
    if (pf_model_run(m, ti.data(), static_cast<int>(ti.size()), to.data(),
                     static_cast<int>(to.size()), err, sizeof err) != PF_OK)
      bench::fail(err);
  }
  void run_static() {
    if (pf_model_run_static(m, arena, arena_bytes, ti.data(), static_cast<int>(ti.size()),
                            tso.data(), static_cast<int>(tso.size()), err, sizeof err) != PF_OK)
      bench::fail(err);
  }
  bool outputs_equal() const {
    for (size_t i = 0; i < out.size(); ++i)
      if (std::memcmp(out[i]->data, static_out[i]->data, out[i]->bytes()) != 0) return false;
    return true;
  }
};

double seconds_of(const std::function<void()>& fn) {
  const auto t0 = bench::Clock::now();
  fn();
  return std::chrono::duration<double>(bench::Clock::now() - t0).count();
}

// In a new process, as a user's program meets it (no allocator state left by earlier opens): open
// dir's model with the weight files mapped or read, and run it: {open, first run, median of the
// next five runs} seconds.
std::array<double, 3> open_in_new_process(const std::string& dir, int read) {
  int fds[2];
  if (pipe(fds) != 0) bench::fail("pipe");
  const pid_t child = fork();
  if (child < 0) bench::fail("fork");
  if (child == 0) {
    pf_model_options o{};
    o.read_weights = read;
    Model model(dir, &o);
    const double first = seconds_of([&] { model.run(); });
    std::vector<double> later;
    for (int i = 0; i < 5; ++i) later.push_back(seconds_of([&] { model.run(); }));
    const std::array<double, 3> t{model.open_s, first, bench::median(later)};
    _exit(write(fds[1], t.data(), sizeof t) == sizeof t ? 0 : 1);
  }
  close(fds[1]);
  std::array<double, 3> t{};
  const bool got = read_all(fds[0], t.data(), sizeof t);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    bench::fail(dir + ": the process timing the open failed");
  return t;
}

// Rounds of: the model opened and run once in a new process with the weights mapped, then read.
std::string open_rows(const std::vector<std::string>& bundles, int rounds) {
  std::string rows;
  for (const std::string& dir : bundles) {
    std::vector<double> open[2], first[2], later[2];
    for (int r = 0; r < rounds; ++r) {
      for (int read = 0; read < 2; ++read) {
        const std::array<double, 3> t = open_in_new_process(dir, read);
        open[read].push_back(t[0]);
        first[read].push_back(t[1]);
        later[read].push_back(t[2]);
      }
    }
    const json manifest = json::parse(std::ifstream(dir + "/manifest.json"));
    char row[512];
    const double mo = bench::median(open[0]) * 1e3, ro = bench::median(open[1]) * 1e3;
    const double mf = bench::median(first[0]) * 1e3, rf = bench::median(first[1]) * 1e3;
    const double ml = bench::median(later[0]) * 1e3, rl = bench::median(later[1]) * 1e3;
    std::snprintf(row, sizeof row, "| %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f |\n",
                  manifest.at("model").get<std::string>().c_str(), mo, ro, mf, rf,
                  (ro + rf) / (mo + mf), ml, rl);
    rows += row;
    std::fputs(row, stdout);
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pf_model_run against pf_model_run_static (bench/run_model.sh)"};
  std::vector<std::string> bundles;
  double min_time = 1.0;
  bool rss = false;
  int open_rounds = 0;
  std::string markdown;
  app.add_option("--bundle", bundles, "model bundles (padfold compile)")->required();
  app.add_option("--min-time", min_time, "seconds timed per method and model");
  app.add_flag("--rss", rss, "print the peak RSS one static run of the first bundle adds, only");
  app.add_option("--open", open_rounds,
                 "time opening instead: this many rounds of each way to take the weight files");
  app.add_option("--markdown", markdown, "append the table to this file");
  CLI11_PARSE(app, argc, argv);

  if (rss) {  // the bundle opened, its weights read, one static run: the process's growth
    const long before = max_rss_kb();
    Model model(bundles.front());
    model.run_static();
    std::printf("%ld\n", (max_rss_kb() - before) * 1024);
    return 0;
  }
  if (open_rounds > 0) {
    const std::string table =
        "| model | open ms, mapped | open ms, read | first run ms, mapped | first run ms, read | "
        "read/mapped, open + first run | later runs ms, mapped | later runs ms, read |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|\n" +
        open_rows(bundles, open_rounds);
    if (!markdown.empty()) std::ofstream(markdown, std::ios::app) << table;
    return 0;
  }
  std::string table =
      "| model | arena bytes | lower bound | all intermediates | pf_model_run ms | "
      "pf_model_run_static ms | static/run | other load | probe speed |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const std::string& dir : bundles) {
    const json manifest = json::parse(std::ifstream(dir + "/manifest.json"));
    Model model(dir);
    model.run();
    model.run_static();
    if (!model.outputs_equal())
      bench::fail(dir + ": pf_model_run_static differs from pf_model_run");
    model.tso = model.to;  // timed on the same output buffers: only the intermediates differ
    bench::Method run{"pf_model_run", [&] { model.run(); }, {}, 0};
    bench::Method run_static{"pf_model_run_static", [&] { model.run_static(); }, {}, 0};
    std::vector<bench::Method*> methods{&run, &run_static};
    bench::QuietLimits limits;
    limits.min_time = min_time;
    limits.settle = 0;  // one thread: no worker threads to let sleep
    const bench::Quietness q = bench::time_while_quiet(methods, 1, limits, dir);
    const double t_run = bench::median(run.samples) * 1e3;
    const double t_static = bench::median(run_static.samples) * 1e3;
    const json& plan = manifest.at("memory_plan");
    char row[512];
    std::snprintf(
        row, sizeof row, "| %s | %lld | %lld | %lld | %.3f | %.3f | %.3f | %.2f | %.2f |\n",
        manifest.at("model").get<std::string>().c_str(), plan.at("arena_bytes").get<long long>(),
        plan.at("lower_bound").get<long long>(), plan.at("intermediates_bytes").get<long long>(),
        t_run, t_static, t_static / t_run, q.load, q.seen.speed);
    table += row;
    std::fputs(row, stdout);
  }
  if (!markdown.empty()) std::ofstream(markdown, std::ios::app) << table;
  return 0;
}
