#include "api/import_model.h"

#include <filesystem>

#include "base/atomic_file.h"
#include "base/npy.h"
#include "emit/bundle_dir.h"

namespace padfold {

namespace fs = std::filesystem;
namespace oi = onnx_import;

oi::ImportOutput import_model(const ImportRequest& a) {
  if (a.out.empty()) throw std::runtime_error("no output directory given");
  oi::ImportOptions options;
  options.model_name = a.name;
  options.layout = onnx_import::parse_import_layout(a.layout);
  options.io_layout = onnx_import::parse_import_layout(a.io_layout, "--io-layout");
  oi::ImportOutput out =
      oi::import_onnx(oi::read_model(a.model), a.inputs, a.model, options, !a.emit_onnx.empty());
  write_import(a, out);
  return out;
}

void write_import(const ImportRequest& a, const oi::ImportOutput& out) {
  refuse_inputs_inside(a.out, {{"model", a.model}, {"--emit-onnx", a.emit_onnx}});
  const oi::ImportResult& result = out.result;

  // Everything is known: write the directory aside, then the normalized model, then move the
  // directory into place. A failure before the move leaves -o as it was.
  try {
    StagedDirectory staged(a.out, kImportDirectory);
    fs::create_directory(staged.path() / "weights");
    for (const oi::WeightFile& w : result.weights) {
      const std::string path = (staged.path() / w.path).string();
      if (w.dtype == NpyDType::F32) {
        write_npy_f32(path, w.shape, w.data.data());
      } else if (w.dtype == NpyDType::I8) {
        const std::vector<int8_t> bytes(w.ints.begin(), w.ints.end());
        write_npy(path, w.shape, w.dtype, bytes.data());
      } else {
        write_npy(path, w.shape, w.dtype, w.ints.data());
      }
    }
    write_file_replacing((staged.path() / (result.model_name + ".json")).string(), out.spec_text);
    write_file_replacing((staged.path() / "import-report.json").string(), out.report_text);
    if (out.normalized) write_file_replacing(a.emit_onnx, out.onnx_bytes);
    staged.commit();
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(e.what()) + "\nnothing imported; " + a.out +
                             " is as it was");
  }
}

std::string imported_spec_path(const ImportRequest& request, const oi::ImportOutput& imported) {
  return (fs::path(request.out) / (imported.result.model_name + ".json")).string();
}

}  // namespace padfold
