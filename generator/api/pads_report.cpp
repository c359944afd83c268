#include "api/pads_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "api/python_code.h"
#include "base/enum_names.h"
#include "base/text.h"
#include "frontend/spec.h"
#include "padding/padding.h"

namespace padfold {
namespace {

using padfold::AxisParams;
using padfold::PaddingError;
using padfold::PaddingSpec;
using padfold::PadMode;
using padfold::Resolved;
using json = nlohmann::ordered_json;  // keeps fields in the documented order

bool is_int_list(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789x,-") == std::string::npos;
}

std::string axis_name(size_t i, size_t dims) {
  return std::string(1, padfold::spatial_letters(static_cast<int>(dims))[i]);
}

// What each mode is called elsewhere, for titles and the JSON "convention" field.
constexpr padfold::EnumName<PadMode> kModeDescriptions[] = {
    {PadMode::Explicit, "explicit pads"},
    {PadMode::Valid, "no padding (TensorFlow/Keras/ONNX VALID, PyTorch padding=0)"},
    {PadMode::SameUpper, "TensorFlow/Keras SAME, ONNX SAME_UPPER"},
    {PadMode::SameLower, "ONNX SAME_LOWER"},
    {PadMode::TorchSame, "PyTorch padding='same' (stride 1 only)"},
    {PadMode::ScipySame, "SciPy signal.correlate/convolve mode='same' (stride 1 only)"},
    {PadMode::Causal, "Keras Conv1D padding='causal'"},
    {PadMode::Full, "full convolution (SciPy mode='full')"},
};

std::string describe(PadMode mode) {
  return padfold::name_of(kModeDescriptions, mode);
}

struct Request {
  std::vector<AxisParams> axes;
  std::vector<int64_t> output_padding;
  bool transposed = false, ceil_mode = false;

  Resolved resolve(const PaddingSpec& spec) const {
    return transposed ? padfold::resolve_transposed(spec, axes, output_padding)
                      : padfold::resolve_forward(spec, axes, ceil_mode);
  }
  size_t dims() const { return axes.size(); }
};

struct Row {
  std::string label;
  PaddingSpec spec;
  std::optional<Resolved> pads;
  std::string error;
  bool chosen = false;
};

// Messages from the padding module, shortened to their first clause for a table cell.
std::string short_reason(const std::string& msg) {
  std::string m = msg;
  if (m.rfind("spatial axis ", 0) == 0) m = m.substr(m.find(": ") + 2);
  return m.substr(0, m.find(';'));
}

std::vector<Row> compare_rows(const Request& r, const PaddingSpec& chosen) {
  std::vector<Row> rows;
  auto add = [&](std::string label, const std::function<PaddingSpec()>& make) {
    Row row{std::move(label), {}, std::nullopt, "", false};
    try {
      row.spec = make();
      padfold::validate_keras_causal(row.spec, r.dims());
      row.pads = r.resolve(row.spec);
      row.chosen = row.spec.mode == chosen.mode && row.spec.mode != PadMode::Explicit;
    } catch (const PaddingError& e) {
      row.error = short_reason(e.what());
    }
    rows.push_back(std::move(row));
  };
  auto named = [](const char* name) {
    return [name] { return padfold::parse_padding_name(name); };
  };
  add("TensorFlow/Keras SAME (= ONNX SAME_UPPER)", named("same_upper"));
  add("ONNX SAME_LOWER", named("same_lower"));
  add("PyTorch padding='same'", named("torch_same"));
  add("SciPy signal.correlate mode='same'", named("scipy_same"));
  add("Keras causal", named("causal"));
  add("naive k//2 both sides (PyTorch int padding)", [&] {
    std::vector<int64_t> half;
    for (const auto& a : r.axes) half.push_back(a.kernel / 2);
    return padfold::explicit_padding(half, static_cast<int>(r.dims()));
  });
  return rows;
}

// Pad pairs innermost dim first, as F.pad and nn.ZeroPad*d take them.
std::string torch_pad_order(const Resolved& p) {
  return padfold::torch_pad_order(pads_before(p), pads_after(p));
}

std::string pair_list(const Resolved& p, bool with_batch_channel) {
  std::vector<std::string> pairs;
  if (with_batch_channel) pairs = {"(0, 0)", "(0, 0)"};
  for (const auto& a : p.axes) pairs.push_back(fmt::format("({}, {})", a.before, a.after));
  return fmt::format("({})", fmt::join(pairs, ", "));
}

struct Snippets {
  std::string pytorch, keras, onnx, numpy;
};

Snippets forward_snippets(const Request& r, const PaddingSpec& spec, const Resolved& p) {
  const size_t d = r.dims();
  std::vector<int64_t> kernel, stride, dilation;
  for (const auto& a : r.axes) {
    kernel.push_back(a.kernel);
    stride.push_back(a.stride);
    dilation.push_back(a.dilation);
  }
  const bool dilated =
      std::any_of(dilation.begin(), dilation.end(), [](int64_t x) { return x != 1; });
  const std::string torch_args =
      fmt::format("kernel_size={}, stride={}{}", python_ints(kernel), python_ints(stride),
                  dilated ? ", dilation=" + python_ints(dilation) : "");
  const std::string keras_args =
      fmt::format("kernel_size={}, strides={}{}", python_ints(kernel), python_ints(stride),
                  dilated ? ", dilation_rate=" + python_ints(dilation) : "");
  Snippets s;
  const std::string conv = fmt::format("Conv{}d", d), keras_conv = fmt::format("Conv{}D", d);
  if (!p.asymmetric) {
    s.pytorch =
        fmt::format("nn.{}(..., {}, padding={})", conv, torch_args, python_ints(pads_before(p)));
  } else {
    const std::string pad = d == 3 ? fmt::format("nn.ConstantPad3d({}, 0.0)", torch_pad_order(p))
                                   : fmt::format("nn.ZeroPad{}d({})", d, torch_pad_order(p));
    s.pytorch = fmt::format("{}  # F.pad order: last dim first\nnn.{}(..., {}, padding=0)", pad,
                            conv, torch_args);
  }
  const bool zero = std::all_of(p.axes.begin(), p.axes.end(),
                                [](auto& a) { return a.before == 0 && a.after == 0; });
  // SAME may be beyond a limit where the chosen padding is not (a larger padded input).
  std::optional<Resolved> tf;
  try {
    tf = r.resolve(padfold::parse_padding_name("same_upper"));
  } catch (const PaddingError&) {
  }
  const bool is_tf_same =
      tf && pads_before(*tf) == pads_before(p) && pads_after(*tf) == pads_after(p);
  if (spec.mode == PadMode::Causal && padfold::keras_has_causal(d))
    s.keras = fmt::format("layers.{}(..., {}, padding='causal')", keras_conv, keras_args);
  else if (zero)
    s.keras = fmt::format("layers.{}(..., {}, padding='valid')", keras_conv, keras_args);
  else if (is_tf_same)
    s.keras = fmt::format("layers.{}(..., {}, padding='same')", keras_conv, keras_args);
  else
    s.keras = fmt::format(
        "layers.ZeroPadding{}D({})\nlayers.{}(..., {}, padding='valid')", d,
        d == 1 ? python_tuple({p.axes[0].before, p.axes[0].after}) : pair_list(p, false),
        keras_conv, keras_args);
  std::vector<int64_t> onnx_pads = pads_before(p);
  for (const auto& a : p.axes) onnx_pads.push_back(a.after);
  std::string note;
  if (spec.mode == PadMode::SameUpper || spec.mode == PadMode::SameLower)
    note = fmt::format("  # or auto_pad='{}'",
                       spec.mode == PadMode::SameUpper ? "SAME_UPPER" : "SAME_LOWER");
  else if (zero)
    note = "  # or auto_pad='VALID'";
  s.onnx = fmt::format("Conv(kernel_shape={}, strides={}{}, pads={}){}",
                       padfold::shape_text(kernel), padfold::shape_text(stride),
                       dilated ? ", dilations=" + padfold::shape_text(dilation) : "",
                       padfold::shape_text(onnx_pads), note);
  s.numpy = fmt::format("np.pad(x, {})  # NCHW-style; channels-last: move the channel (0, 0) last",
                        pair_list(p, true));
  return s;
}

Snippets transposed_snippets(const Request& r, const PaddingSpec& spec, const Resolved& p) {
  const size_t d = r.dims();
  std::vector<int64_t> kernel, stride, dilation, full, onnx_pads;
  for (size_t i = 0; i < d; ++i) {
    kernel.push_back(r.axes[i].kernel);
    stride.push_back(r.axes[i].stride);
    dilation.push_back(r.axes[i].dilation);
    full.push_back(p.axes[i].output + p.axes[i].before + p.axes[i].after);
    onnx_pads.push_back(p.axes[i].before);
  }
  for (const auto& a : p.axes) onnx_pads.push_back(a.after);
  auto is_one = [](int64_t x) { return x == 1; };
  auto is_zero = [](int64_t x) { return x == 0; };
  const bool dilated = !std::all_of(dilation.begin(), dilation.end(), is_one);
  const bool has_op = !std::all_of(r.output_padding.begin(), r.output_padding.end(), is_zero);
  const bool extends =
      std::any_of(p.axes.begin(), p.axes.end(), [](auto& a) { return a.after < 0; });
  const std::string common =
      fmt::format("kernel_size={}, {{}}={}{}", python_ints(kernel), python_ints(stride),
                  dilated ? ", dilation{}=" + python_ints(dilation) : "");
  const std::string torch_args = fmt::format(common, "stride", ""),
                    keras_args = fmt::format(common, "strides", "_rate");
  const std::string op_arg = has_op ? ", output_padding=" + python_ints(r.output_padding) : "";
  Snippets s;
  std::string note;
  if (spec.mode == PadMode::SameUpper || spec.mode == PadMode::SameLower)
    note = fmt::format("  # or auto_pad='{}'",
                       spec.mode == PadMode::SameUpper ? "SAME_UPPER" : "SAME_LOWER");
  s.onnx = fmt::format("ConvTranspose(kernel_shape={}, strides={}{}, ", padfold::shape_text(kernel),
                       padfold::shape_text(stride),
                       dilated ? ", dilations=" + padfold::shape_text(dilation) : "");
  s.onnx += extends ? fmt::format("output_shape={})", padfold::shape_text(output_sizes(p)))
                    : fmt::format(
                          "pads={}{}){}", padfold::shape_text(onnx_pads),
                          has_op ? ", output_padding=" + padfold::shape_text(r.output_padding) : "",
                          note);
  std::vector<std::string> slices = {":", ":"}, ext = {"(0, 0)", "(0, 0)"};
  for (size_t i = 0; i < d; ++i) {
    const auto& a = p.axes[i];
    slices.push_back(fmt::format("{}:{}", a.before, full[i] - std::max<int64_t>(a.after, 0)));
    ext.push_back(fmt::format("(0, {})", std::max<int64_t>(-a.after, 0)));
  }
  const std::string crop = fmt::format("y_full[{}]", fmt::join(slices, ", "));
  s.numpy = extends ? fmt::format("np.pad({}, ({}))", crop, fmt::join(ext, ", ")) : crop;
  s.numpy += fmt::format("  # y_full: the uncropped output (NCHW-style), spatial size {}",
                         python_ints(full));
  if (!p.asymmetric && !extends)
    s.pytorch = fmt::format("nn.ConvTranspose{}d(..., {}, padding={}{})", d, torch_args,
                            python_ints(pads_before(p)), op_arg);
  else
    s.pytorch = fmt::format("nn.ConvTranspose{}d(..., {}, padding=0{}), then crop as in NumPy", d,
                            torch_args, op_arg);
  if (spec.mode == PadMode::SameUpper && !has_op)
    s.keras = fmt::format("layers.Conv{}DTranspose(..., {}, padding='same')", d, keras_args);
  else
    s.keras =
        fmt::format("layers.Conv{}DTranspose(..., {}, padding='valid'{}), then crop as in NumPy", d,
                    keras_args, op_arg);
  return s;
}

json axes_json(const Resolved& p) {
  json a = json::array();
  for (size_t i = 0; i < p.axes.size(); ++i)
    a.push_back({{"axis", axis_name(i, p.axes.size())},
                 {"before", p.axes[i].before},
                 {"after", p.axes[i].after},
                 {"output", p.axes[i].output}});
  return a;
}

std::string cell(const padfold::AxisPads& a) {
  return fmt::format("({},{})->{}", a.before, a.after, a.output);
}

// The option a padding-module field comes from.
std::string option_of(const std::string& field) {
  if (field == "input_shape") return "--input";
  if (field == "output_padding") return "--output-padding";
  if (field == "kernel" || field == "stride" || field == "dilation" || field == "padding")
    return "--" + field;
  return field;
}

std::string pads_report_checked(const PadsRequest& o) {
  std::string text;
  Request r;
  const auto input = parse_sizes(o.input, "--input", 0);
  if (input.size() > 3) throw std::runtime_error("--input has more than 3 dims");
  const size_t d = input.size();
  const auto kernel = parse_sizes(o.kernel, "--kernel", d);
  const auto stride = parse_sizes(o.stride, "--stride", d);
  const auto dilation = parse_sizes(o.dilation, "--dilation", d);
  for (size_t i = 0; i < d; ++i) r.axes.push_back({input[i], kernel[i], stride[i], dilation[i]});
  r.transposed = o.transposed;
  r.ceil_mode = o.ceil_mode;
  if (!o.output_padding.empty()) {
    if (!o.transposed) throw std::runtime_error("--output-padding needs --transposed");
    r.output_padding = parse_sizes(o.output_padding, "--output-padding", d);
  }
  if (o.ceil_mode && o.transposed)
    throw std::runtime_error("--ceil-mode is a pooling option; it does not apply to --transposed");

  const PaddingSpec spec =
      is_int_list(o.padding) && o.convention.empty()
          ? padfold::explicit_padding(parse_sizes(o.padding, "--padding", 0), static_cast<int>(d))
          : padfold::parse_padding_name(o.padding, o.convention);
  const Resolved p = r.resolve(spec);
  std::string written = spec.written;
  if (spec.mode == PadMode::SameUpper && o.padding == "same" && o.convention.empty())
    written = "same (default convention: tensorflow)";
  const std::string mode = padfold::to_string(spec.mode);
  const std::string title =
      fmt::format("{}{}: {}", written, written == mode ? "" : " = " + mode, describe(spec.mode));
  const auto rows = compare_rows(r, spec);
  const Snippets code =
      o.transposed ? transposed_snippets(r, spec, p) : forward_snippets(r, spec, p);
  const auto output = output_sizes(p);

  if (o.json) {
    json j = {{"input", input},
              {"kernel", kernel},
              {"stride", stride},
              {"dilation", dilation},
              {"transposed", o.transposed},
              {"ceil_mode", o.ceil_mode},
              {"padding", spec.written},
              {"mode", mode},
              {"convention", describe(spec.mode)},
              {"axes", axes_json(p)},
              {"output", output},
              {"asymmetric", p.asymmetric},
              {"input_dependent", p.input_dependent}};
    if (o.transposed) j["output_padding"] = r.output_padding;
    j["compare"] = json::array();
    for (const auto& row : rows) {
      json c = {{"convention", row.label}, {"chosen", row.chosen}};
      if (row.pads) {
        c["mode"] = padfold::to_string(row.spec.mode);
        c["axes"] = axes_json(*row.pads);
      } else {
        c["error"] = row.error;
      }
      j["compare"].push_back(c);
    }
    j["reproduce"] = {{"pytorch", code.pytorch},
                      {"keras", code.keras},
                      {"onnx", code.onnx},
                      {"numpy", code.numpy}};
    return j.dump(2) + "\n";
  }

  text += fmt::format("padding: {}\n", title);
  text += fmt::format("{}input {}, kernel {}, stride {}, dilation {}\n\n",
                      o.transposed ? "transposed conv, " : "", fmt::join(input, "x"),
                      fmt::join(kernel, "x"), fmt::join(stride, "x"), fmt::join(dilation, "x"));
  const char* before = o.transposed ? "crop_before" : "pad_before";
  const char* after = o.transposed ? "crop_after" : "pad_after";
  text += fmt::format("axis  {:>11}  {:>11}  {:>6}\n", before, after, "output");
  for (size_t i = 0; i < d; ++i)
    text += fmt::format("{:<4}  {:>11}  {:>11}  {:>6}\n", axis_name(i, d), p.axes[i].before,
                        p.axes[i].after, p.axes[i].output);
  text += fmt::format("\noutput size: {}\n", fmt::join(output, "x"));
  text += fmt::format("asymmetric: {}\n",
                      p.asymmetric ? "yes (pad_before != pad_after on some axis)" : "no");
  text += fmt::format("input-dependent: {}\n",
                      p.input_dependent ? "yes (the pads change with the input size)" : "no");
  if (o.transposed)
    text += fmt::format(
        "(transposed: pads are cropped from the full output; a negative crop extends it)\n");
  if (!o.compare) return text;

  text += fmt::format(
      "\nThe same layer under each convention, per axis (pad_before,pad_after)->output:\n");
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.label.size());
  for (const auto& row : rows) {
    std::string cells;
    if (row.pads)
      for (const auto& a : row.pads->axes) cells += fmt::format("{:<12}", cell(a));
    else
      cells = "n/a: " + row.error;
    cells.erase(cells.find_last_not_of(' ') + 1);
    text += fmt::format("{} {:<{}}  {}\n", row.chosen ? '*' : ' ', row.label, width, cells);
  }
  if (std::none_of(rows.begin(), rows.end(), [](const Row& row) { return row.chosen; })) {
    std::string cells;
    for (const auto& a : p.axes) cells += fmt::format("{:<12}", cell(a));
    cells.erase(cells.find_last_not_of(' ') + 1);
    text += fmt::format("* {:<{}}  {}\n", written + " (chosen)", width, cells);
  }
  text += fmt::format(
      "\nReproduce {} elsewhere{}:\n", written,
      o.ceil_mode ? " (as a convolution; pools also need ceil_mode=True / ceil_mode=1)" : "");
  auto show = [&text](const char* who, const std::string& code_text) {
    std::string indented = code_text;
    for (size_t pos = 0; (pos = indented.find('\n', pos)) != std::string::npos; pos += 12)
      indented.replace(pos, 1, "\n           ");
    text += fmt::format("  {:<9}{}\n", who, indented);
  };
  show("PyTorch:", code.pytorch);
  show("Keras:", code.keras);
  show("ONNX:", code.onnx);
  show("NumPy:", code.numpy);
  return text;
}

}  // namespace

std::vector<int64_t> parse_sizes(const std::string& text, const std::string& option, size_t dims) {
  return parse_dims_option<int64_t>(text, option, dims, [&](const std::string& item) {
    size_t used = 0;
    int64_t v = 0;
    bool out_of_range = false;
    try {
      v = std::stoll(item, &used);
    } catch (const std::out_of_range&) {
      out_of_range = true;
    } catch (const std::exception&) {
      used = std::string::npos;
    }
    if (!out_of_range && (used != item.size() || item.empty()))
      throw std::runtime_error(
          fmt::format("{} '{}': expected sizes such as 7x7, 7,7 or 7", option, text));
    if (out_of_range || v > padfold::kMaxSize || v < -padfold::kMaxSize)
      throw std::runtime_error(
          fmt::format("{} '{}': {} is out of range; sizes must be at most {} (the int32 limit)",
                      option, text, item, padfold::kMaxSize));
    return v;
  });
}

std::string pads_report(const PadsRequest& request) {
  // A size over a limit names the option to change; other messages read as before.
  try {
    return pads_report_checked(request);
  } catch (const PaddingLimitError& e) {
    throw std::runtime_error(option_of(e.field) + ": " + e.what());
  }
}

}  // namespace padfold
