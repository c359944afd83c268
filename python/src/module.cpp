// padfold._core: the Python package's one extension module. The pads report, compile and import
// are the CLI's own calls (generator/api); bundles run through the C runtime (bundle.h). Every
// padfold failure is raised as padfold.Error with the CLI's message.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <exception>

#include "api/compile_spec.h"
#include "api/import_model.h"
#include "api/pads_report.h"
#include "api/port.h"
#include "api/resize_report.h"
#include "api/version.h"
#include "bundle.h"
#include "emit/data_dir.h"
#include "errors.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace padfold::python {
namespace {

// Runs f without the GIL; any padfold failure becomes padfold.Error.
template <typename F>
auto released(F&& f) {
  nb::gil_scoped_release unlocked;
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
}

std::string pads_json(const std::string& input, const std::string& kernel,
                      const std::string& stride, const std::string& dilation,
                      const std::string& padding, const std::string& convention, bool ceil_mode,
                      bool transposed, const std::string& output_padding) {
  PadsRequest r;
  r.input = input;
  r.kernel = kernel;
  r.stride = stride;
  r.dilation = dilation;
  r.padding = padding;
  r.convention = convention;
  r.ceil_mode = ceil_mode;
  r.transposed = transposed;
  r.output_padding = output_padding;
  r.json = true;
  return released([&] { return pads_report(r); });
}

std::string resize_json(const std::string& input, const std::string& output,
                        const std::string& scales, const std::string& mode,
                        const std::string& coordinates, const std::string& rounding,
                        const std::string& roi, float extrapolation_value) {
  ResizeRequest r;
  r.input = input;
  r.output = output;
  r.scales = scales;
  r.mode = mode;
  r.coordinates = coordinates;
  r.rounding = rounding;
  r.roi = roi;
  r.extrapolation_value = extrapolation_value;
  r.json = true;
  return released([&] { return resize_report(r); });
}

nb::dict report_dict(const KernelReport& r) {
  nb::dict d;
  d["target"] = r.target;
  d["layer"] = r.fused.empty() ? r.layer : r.fused;
  d["schedule"] = r.schedule;
  d["knobs"] = r.source;
  d["compile_seconds"] = r.compile_seconds;
  d["object_bytes"] = r.object_bytes;
  if (!r.fallback_from.empty()) {
    d["fallback_from"] = r.fallback_from;
    d["fallback_reason"] = r.fallback_reason;
  }
  return d;
}

nb::list compile(const std::string& spec_path, const std::string& spec_text, const std::string& out,
                 const std::string& targets, const std::string& fuse, int jobs,
                 double kernel_timeout, const std::string& schedules, const std::string& db,
                 bool db_any_machine, bool embed_weights, bool emit_stmt, bool emit_device_code,
                 bool prepare_entry) {
  CompileRequest r;
  r.spec_path = spec_path;
  r.spec_text = spec_text;
  r.spec_label = "the spec (a Python dict)";
  r.out = out;
  r.fuse = fuse;
  r.jobs = jobs;
  r.kernel_timeout_s = kernel_timeout;
  r.schedules = schedules;
  r.db = db;
  r.db_any_machine = db_any_machine;
  r.embed_weights = embed_weights;
  r.emit_stmt = emit_stmt;
  r.emit_device_code = emit_device_code;
  r.prepare_entry = prepare_entry;
  const CompiledBundle compiled = released([&] {
    r.targets = target_list(targets);
    return compile_spec(r);
  });
  for (const std::string& w : compiled.warnings)
    if (PyErr_WarnEx(PyExc_UserWarning, w.c_str(), 1) != 0) throw nb::python_error();
  nb::list reports;
  for (const KernelReport& k : compiled.reports) reports.append(report_dict(k));
  return reports;
}

std::pair<std::string, std::string> import_onnx(const std::string& model, const std::string& out,
                                                const std::vector<std::string>& inputs,
                                                const std::string& name, const std::string& layout,
                                                const std::string& io_layout) {
  ImportRequest r;
  r.model = model;
  r.out = out;
  r.inputs = inputs;
  r.name = name;
  r.layout = layout;
  r.io_layout = io_layout;
  return released([&] {
    const onnx_import::ImportOutput imported = import_model(r);
    return std::make_pair(imported_spec_path(r, imported),
                          onnx_import::summary_text(imported.result));
  });
}

std::string port_json(const std::string& model, const std::string& to,
                      const std::vector<std::string>& inputs, const std::string& emit) {
  PortRequest r;
  r.model = model;
  r.to = to;
  r.inputs = inputs;
  r.emit = emit;
  r.json = true;
  r.with_module = true;
  return released([&] { return port_model(r).report; });
}

std::string host() {
  std::string text(pf_host_describe(nullptr, 0) + 1, '\0');
  pf_host_describe(text.data(), text.size());
  text.pop_back();
  return text;
}

}  // namespace
}  // namespace padfold::python

NB_MODULE(_core, m) {
  using namespace padfold::python;
  m.doc() = "padfold's extension module; use the padfold package, not this.";
  nb::object error = nb::exception<Error>(m, "Error", PyExc_RuntimeError);
  nb::exception<TensorError>(m, "TensorError", error);
  m.attr("__version__") = padfold::version();
  m.def("set_data_dir", [](const std::string& dir) { padfold::set_data_dir(dir); });
  m.def("pads_json", &pads_json, "input"_a, "kernel"_a, "stride"_a, "dilation"_a, "padding"_a,
        "convention"_a, "ceil_mode"_a, "transposed"_a, "output_padding"_a);
  m.def("resize_json", &resize_json, "input"_a, "output"_a, "scales"_a, "mode"_a,
        "coordinate_transformation_mode"_a, "nearest_mode"_a, "roi"_a, "extrapolation_value"_a);
  m.def("compile", &compile, "spec_path"_a, "spec_text"_a, "out"_a, "targets"_a, "fuse"_a, "jobs"_a,
        "kernel_timeout"_a, "schedules"_a, "db"_a, "db_any_machine"_a, "embed_weights"_a,
        "emit_stmt"_a, "emit_device_code"_a, "prepare_entry"_a);
  m.def("import_onnx", &import_onnx, "model"_a, "out"_a, "inputs"_a, "name"_a, "layout"_a,
        "io_layout"_a);
  m.def("port_json", &port_json, "model"_a, "to"_a, "inputs"_a, "emit"_a);
  m.def("host", &host);

  nb::class_<Bundle>(m, "Bundle")
      .def(nb::init<const std::string&, const std::optional<std::string>&>(), "dir"_a,
           "cpu_flags"_a = nb::none())
      .def("close", &Bundle::close)
      .def_prop_ro("closed", &Bundle::closed)
      .def_prop_ro("dir", &Bundle::dir)
      .def_prop_ro("target", &Bundle::target)
      .def_prop_ro("model_name", &Bundle::model_name)
      .def("num_kernels", &Bundle::num_kernels)
      .def("kernel", &Bundle::kernel, "index"_a)
      .def("find", &Bundle::find, "layer"_a)
      .def("prepare_of", &Bundle::prepare_of, "index"_a)
      .def("run_kernel", &Bundle::run_kernel, "index"_a, "inputs"_a, "outputs"_a)
      .def("model", &Bundle::model)
      .def("run_model", &Bundle::run_model, "inputs"_a, "outputs"_a)
      .def("set_num_threads", &Bundle::set_num_threads, "n"_a)
      .def("use_pool", &Bundle::use_pool, "pool"_a.none());

  nb::class_<Pool>(m, "Pool")
      .def(nb::init<int, int>(), "threads"_a, "spin_us"_a)
      .def_prop_ro("threads", &Pool::threads)
      .def("park", &Pool::park);
}
