// padfold import: an ONNX model -> a padfold spec, its weights and the list of nodes left to the
// caller (generator/frontend/onnx), written into a directory that appears only when complete;
// --emit-onnx also writes the model with every auto_pad rewritten to explicit pads.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "base/atomic_file.h"
#include "base/npy.h"
#include "commands.h"
#include "emit/bundle_dir.h"
#include "frontend/onnx/import.h"

namespace {

namespace fs = std::filesystem;
namespace oi = padfold::onnx_import;

struct ImportArgs {
  std::string model, out, emit_onnx, name;
  std::vector<std::string> inputs;
};

void run_import(const ImportArgs& a) {
  if (a.out.empty()) throw std::runtime_error("no output directory given");
  padfold::refuse_inputs_inside(a.out, {{"model", a.model}, {"--emit-onnx", a.emit_onnx}});
  oi::ImportOptions options;
  options.model_name = a.name;
  const oi::ImportOutput out =
      oi::import_onnx(oi::read_model(a.model), a.inputs, a.model, options, !a.emit_onnx.empty());
  const oi::ImportResult& result = out.result;

  // Everything is known: write the directory aside, then the normalized model, then move the
  // directory into place. A failure before the move leaves -o as it was.
  try {
    padfold::StagedDirectory staged(a.out, padfold::kImportDirectory);
    fs::create_directory(staged.path() / "weights");
    for (const oi::WeightFile& w : result.weights)
      padfold::write_npy_f32((staged.path() / w.path).string(), w.shape, w.data.data());
    padfold::write_file_replacing((staged.path() / (result.model_name + ".json")).string(),
                                  out.spec_text);
    padfold::write_file_replacing((staged.path() / "import-report.json").string(), out.report_text);
    if (out.normalized) padfold::write_file_replacing(a.emit_onnx, out.onnx_bytes);
    staged.commit();
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(e.what()) + "\nnothing imported; " + a.out +
                             " is as it was");
  }

  fmt::print("{}", oi::summary_text(result));
  fmt::print("wrote {}: {}.json, import-report.json, {} weight file(s) in weights/\n", a.out,
             result.model_name, result.weights.size());
  if (out.normalized) {
    for (const std::string& c : out.normalized->changes) fmt::print("normalized {}\n", c);
    for (const std::string& w : out.normalized->warnings) fmt::print(stderr, "warning: {}\n", w);
    fmt::print("wrote {} ({} auto_pad rewrite(s))\n", a.emit_onnx, out.normalized->changes.size());
  }
}

}  // namespace

void add_import_command(CLI::App& app) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import",
      "Turn an ONNX model into a padfold spec, its weights and the list of nodes left to the "
      "caller.\nExample: padfold import model.onnx -o out/model --input x=1x3x224x224");
  cmd->add_option("model", args->model, "the .onnx file")->required();
  cmd->add_option("-o,--out", args->out,
                  "directory to write: <model>.json, weights/, import-report.json")
      ->required();
  cmd->add_option("--input", args->inputs,
                  "NAME=SIZES (e.g. x=1x3x224x224): the size of a graph input with dynamic dims; "
                  "repeat for each")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--emit-onnx", args->emit_onnx,
                  "also write the model with every auto_pad rewritten to explicit pads");
  cmd->add_option("--name", args->name, "the spec's model name (default: from the file name)");
  cmd->callback([args] { run_import(*args); });
}
