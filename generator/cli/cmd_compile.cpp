#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "api/compile_spec.h"
#include "commands.h"
#include "emit/size_report.h"

namespace {

// The request as the options fill it, and what only the CLI takes.
struct CompileArgs {
  padfold::CompileRequest request;
  std::string targets = "host";  // comma-separated
  bool report_size = false;
};

std::string size_row(const std::string& what, const padfold::SectionSizes& s) {
  return fmt::format("  {:<30} {:>10} {:>10} {:>10}\n", what, s.text, s.data, s.bss);
}

// Per target a line of totals, and with `full` (--report-size) the table of every kernel.
void print_sizes(const padfold::SizeReport& r, bool full) {
  const std::string weights =
      fmt::format("weights {} bytes ({} buffers{})", r.weights_bytes, r.weight_buffers,
                  r.weight_buffers == 0 ? ""
                  : r.weights_embedded  ? ", embedded: read-only data of registry.c"
                                        : ", files in weights/");
  const std::string arena = fmt::format("arena {} bytes (pf_model_run_static, lower bound {})",
                                        r.arena.arena_bytes, r.arena.lower_bound);
  for (const padfold::TargetSizes& t : r.targets) {
    fmt::print(
        "size {}: kernels {} text + {} data, Halide runtime {} text + {} data + {} bss, {}, "
        "{}\n",
        t.target, t.kernels_total.text, t.kernels_total.data, t.halide_runtime.text,
        t.halide_runtime.data, t.halide_runtime.bss, weights, arena);
    if (!full) continue;
    fmt::print("size report, target {} (bytes; text: code and read-only data)\n", t.target);
    fmt::print("  {:<30} {:>10} {:>10} {:>10}\n", "", "text", "data", "bss");
    for (const padfold::KernelSize& k : t.kernels) fmt::print("{}", size_row(k.kernel, k.sizes));
    fmt::print("{}", size_row("all kernels", t.kernels_total));
    fmt::print("{}", size_row("Halide runtime", t.halide_runtime));
    fmt::print("  {}\n  {}\n", weights, arena);
    if (t.runtime_core)
      fmt::print("{}    ({} -O2 of runtime/status.c core.c cpu.c model.c)\n",
                 size_row("padfold runtime core", *t.runtime_core), t.runtime_core_compiler);
    else
      fmt::print("  padfold runtime core: not measured (no C compiler for the target here)\n");
  }
}

// Kernels' weights by form, as counted into `forms`: "3 kernel(s) (winograd_f4_u 2, ...)".
std::string form_counts(int kernels, const std::map<std::string, int>& forms) {
  std::vector<std::string> counts;
  for (const auto& [form, n] : forms) counts.push_back(fmt::format("{} {}", form, n));
  return fmt::format("{} kernel(s) ({})", kernels, fmt::join(counts, ", "));
}

// The kernels whose weights the compile prepared, by form: "prepared weights: 3 kernels
// (winograd_f4_u 2, winograd_f2_u 1), ...", and those whose prepare kernel the caller runs.
void print_prepared_weights(const padfold::BundlePlan& plan) {
  std::map<std::string, int> forms, entries;
  int kernels = 0, entry_kernels = 0;
  std::vector<std::string> differ;
  for (const padfold::KernelPlan& k : plan.kernels) {
    if (k.forms_differ) differ.push_back(k.block.last().name);
    if (!k.prepare_function.empty()) {
      ++entry_kernels;
      ++entries[padfold::weight_form_layout(k.block.consumer(), k.weight_form)];
      continue;
    }
    if (!k.weight_form.prepared() && !k.weight_form.zero_point_in_bias) continue;
    ++kernels;
    if (k.weight_form.prepared())
      ++forms[padfold::weight_form_layout(k.block.consumer(), k.weight_form)];
    if (k.weight_form.zero_point_in_bias) ++forms["bias " + bias_form_layout(k.weight_form)];
  }
  if (kernels > 0)
    fmt::print(
        "prepared weights: {}, transformed once here instead of on every call "
        "(docs/prepared-weights.md)\n",
        form_counts(kernels, forms));
  if (entry_kernels > 0)
    fmt::print(
        "prepare kernels: {} read the caller's weights prepared: run each one's prepare kernel "
        "once (pf_bundle_prepare_kernel; Python: Layer.prepare)\n",
        form_counts(entry_kernels, entries));
  if (differ.empty()) return;
  const size_t shown = std::min<size_t>(differ.size(), 5);
  fmt::print(
      "weights as their files hold them for {} kernel(s) whose targets want different forms "
      "({}{}): some target transforms them on every call; a bundle per target prepares them\n",
      differ.size(), fmt::join(differ.begin(), differ.begin() + static_cast<long>(shown), ", "),
      differ.size() > shown ? ", ..." : "");
}

// Per target: the largest kernel's Halide stack (one kernel runs at a time) and the kernels that
// would allocate on Halide's heap during pf_model_run_static.
void print_halide_scratch(const std::vector<padfold::KernelReport>& reports) {
  for (size_t i = 0; i < reports.size();) {
    const std::string& target = reports[i].target;
    int64_t stack = 0;
    std::string heap;
    for (; i < reports.size() && reports[i].target == target; ++i) {
      stack = std::max(stack, reports[i].memory.stack_bytes);
      if (!reports[i].memory.heap_buffers.empty())
        heap += fmt::format("{}{} ({} bytes)", heap.empty() ? "" : ", ", reports[i].layer,
                            reports[i].memory.heap_bytes);
    }
    fmt::print("halide scratch {}: stack up to {} bytes per thread, {}\n", target, stack,
               heap.empty() ? std::string("no heap (pf_model_run_static allocates nothing)")
                            : "heap in " + heap +
                                  " (pf_model_run_static allocates through Halide for them)");
  }
}

void run_compile(const CompileArgs& a) {
  padfold::CompileRequest request = a.request;
  request.targets = padfold::target_list(a.targets);
  const bool live = isatty(fileno(stderr)) != 0;
  size_t done = 0;
  padfold::CompiledBundle compiled;
  try {
    compiled = padfold::compile_spec(request, [&](const padfold::BundlePlan& plan,
                                                  const padfold::KernelReport& r) {
      if (live)
        fmt::print(stderr, "\r[{}/{}] {} {}\x1b[K", ++done, plan.kernel_count(), r.target, r.layer);
    });
  } catch (const std::exception&) {
    if (live && done) fmt::print(stderr, "\r\x1b[K");
    throw;
  }
  if (live && done) fmt::print(stderr, "\r\x1b[K");
  const padfold::BundlePlan& plan = compiled.plan;
  const std::vector<padfold::KernelReport>& reports = compiled.reports;
  double total_seconds = 0;
  std::string current_target;
  for (const padfold::KernelReport& r : reports) {
    if (r.target != current_target) {
      current_target = r.target;
      fmt::print("target {}\n  {:<30} {:<22} {:<11} {:>9} {:>10}\n", r.target, "layer", "schedule",
                 "knobs", "compile", "object");
    }
    fmt::print("  {:<30} {:<22} {:<11} {:>8.2f}s {:>8.1f}KB\n", r.fused.empty() ? r.layer : r.fused,
               r.schedule, r.source, r.compile_seconds,
               static_cast<double>(r.object_bytes) / 1024.0);
    if (!r.fallback_from.empty())
      fmt::print("    fallback: schedule {} failed ({}); compiled with {} instead\n",
                 r.fallback_from, r.fallback_reason, r.schedule);
    total_seconds += r.compile_seconds;
  }
  for (const padfold::KernelPlan& k : plan.kernels)
    if (k.block.fused()) fmt::print("fused {}: {}\n", k.block.names(), k.block.reason);
  print_prepared_weights(plan);
  print_sizes(padfold::bundle_size_report(plan, request.out, a.report_size), a.report_size);
  fmt::print(
      "memory plan: arena {} bytes for pf_model_run_static (lower bound {}, all intermediates {}; "
      "{}-byte aligned)\n",
      plan.arena.arena_bytes, plan.arena.lower_bound, plan.arena.total_bytes,
      padfold::kArenaAlignment);
  print_halide_scratch(reports);
  fmt::print("{} kernels in {:.1f}s of compile time; bundle written to {} (manifest.json, {})\n",
             reports.size(), total_seconds, request.out, plan.consumer_cmake);
  for (const std::string& w : compiled.warnings) fmt::print(stderr, "warning: {}\n", w);
}

}  // namespace

void add_compile_command(CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  CLI::App* cmd = app.add_subcommand("compile",
                                     "Generate ahead-of-time kernels for every layer of a spec.\n"
                                     "Example: padfold compile examples/tiny.json -o out/tiny "
                                     "--target host,x86-64-linux-avx2-fma");
  cmd->add_option("spec", args->request.spec_path, "layer spec (JSON)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--out", args->request.out, "bundle directory to write")->required();
  cmd->add_option("--target", args->targets,
                  "comma-separated Halide targets, best first: host, x86-64-linux-avx2-fma, "
                  "x86-64-linux-avx512_skylake, arm-64-linux, arm-32-linux ...; GPUs: "
                  "host-cuda (sm_86 PTX), host-cuda-cuda_capability_<N>, host-opencl, with a CPU "
                  "fallback after them (host-cuda,host)")
      ->capture_default_str();
  cmd->add_option("--schedules", args->request.schedules,
                  "JSON file: {layer: {knob: value}} overriding the default knobs (padfold knobs "
                  "lists them)");
  cmd->add_option("-j,--jobs", args->request.jobs,
                  "kernels compiled at once, each in its own worker process (default: one per "
                  "core)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kernel-timeout", args->request.kernel_timeout_s,
                  "seconds one kernel may take to compile before its worker is killed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--db", args->request.db,
                  "tuning database (padfold tune): each layer's best record for its signature on "
                  "the target, measured with this toolchain on this machine")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--db-any-machine", args->request.db_any_machine,
                "with --db, also use records of other machines or toolchains (the manifest "
                "records whose)");
  cmd->add_flag("--emit-stmt", args->request.emit_stmt,
                "also write each kernel's lowered Halide statement (<target>/<layer>.stmt)");
  cmd->add_flag("--emit-device-code", args->request.emit_device_code,
                "GPU targets: also write each kernel's device code (<target>/<layer>.ptx for "
                "CUDA, .cl for OpenCL), e.g. to check the PTX with ptxas");
  cmd->add_option("--fuse", args->request.fuse,
                  "auto (fuse dw->pw, pw->dw->pw and conv->pool chains where the cost model says "
                  "it pays, and residual adds into the conv before them; padfold check shows the "
                  "choice), none, or blocks such as dw1+pw1,c2+p2,c3+add3")
      ->capture_default_str();
  cmd->add_flag("--embed-weights", args->request.embed_weights,
                "bake the spec's weight_files into every target's library (for embedded builds "
                "with no file system) instead of copying them into the bundle's weights/");
  cmd->add_flag("--prepare-entry", args->request.prepare_entry,
                "a layer whose weights the caller passes (no weight file) computes with them "
                "prepared as with a file (Winograd's transform, an int8 dot-product table, "
                "channel blocks), and the bundle gets a kernel writing that form from the "
                "caller's weights, to run once (pf_bundle_prepare_kernel)");
  cmd->add_flag("--report-size", args->report_size,
                "print each target's size report: every kernel's text, data and bss, the Halide "
                "runtime's, the weights and the whole-model arena");
  cmd->callback([args] { run_compile(*args); });
}
