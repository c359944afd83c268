#include "algorithm/weight_form.h"

#include <cctype>
#include <stdexcept>

#include "algorithm/access.h"
#include "algorithm/algorithm.h"
#include "algorithm/winograd.h"

namespace padfold {

bool blocked_weights_apply(const Layer& L, int block) {
  const std::string& order = L.weight_layout.order;
  return L.op == Op::Conv && L.dtype == DType::F32 && L.groups == 1 && L.layout.channels_last &&
         order.size() >= 2 && order.compare(order.size() - 2, 2, "IO") == 0 && block > 0 &&
         L.out_channels % block == 0;
}

Halide::Func blocked_weights_view(const Layer& L, int block, const Halide::Func& blocked) {
  // Halide's arguments innermost first: the file's (o, i, taps...), the blocked buffer's
  // (o within its block, i, taps..., block).
  std::vector<Halide::Var> args{Halide::Var("o")};
  for (int j = 0; j + 1 < static_cast<int>(L.weight_layout.order.size()); ++j)
    args.emplace_back("w" + std::to_string(j));
  std::vector<Halide::Expr> at{args[0] % block};
  at.insert(at.end(), args.begin() + 1, args.end());
  at.push_back(args[0] / block);
  Halide::Func view(L.name + "_weights_blocked");
  view(args) = blocked(at);
  return view;
}

Halide::Func define_dot_table(const Layer& L, const Halide::Func& weights) {
  const int D = static_cast<int>(L.in_spatial.size());
  Halide::Var i4("i4"), o("o"), io("io");
  std::vector<Halide::Var> args{i4, o, io};
  std::vector<Halide::Expr> taps;
  for (int j = 0; j < D; ++j) taps.push_back(args.emplace_back("k" + std::to_string(j)));
  const Halide::Expr i = io * 4 + i4;
  const int channels = static_cast<int>(L.in_channels / L.groups);
  const Halide::Expr w = weights(weight_args(L.weight_layout, D, o, min(i, channels - 1), taps));
  Halide::Func table(L.name + kDotTableStage);
  table(args) = select(i < channels, w, cast(w.type(), 0));
  return table;
}

namespace {

// `file` (HWIO: taps, input channels, output channels outermost first) in blocks of `block`
// output channels (blocked_weights_view reads it back).
// The blocked form (block_channels) from `weights` as their weight_layout indexes them: the
// inverse of blocked_weights_view.
Halide::Func define_blocked_weights(const Layer& L, int block, const Halide::Func& weights) {
  std::vector<Halide::Var> args{Halide::Var("ob")};  // (o within its block, i, taps..., block)
  for (int j = 0; j + 1 < static_cast<int>(L.weight_layout.order.size()); ++j)
    args.emplace_back("w" + std::to_string(j));
  args.emplace_back("blk");
  std::vector<Halide::Expr> at{args.back() * block + args.front()};
  at.insert(at.end(), args.begin() + 1, args.end() - 1);
  Halide::Func blocked(L.name + "_blocked_weights");
  blocked(args) = weights(at);
  return blocked;
}

NpyData block_weights(const Layer& L, int block, const NpyData& file) {
  if (!blocked_weights_apply(L, block) || file.dtype != NpyDType::F32 ||
      file.shape != L.weight_shape())
    throw std::logic_error("layer '" + L.name + "': its weights cannot be blocked by " +
                           std::to_string(block) + " output channels");
  const int64_t K = L.out_channels, C = L.in_channels;
  int64_t taps = 1;
  for (size_t j = 0; j + 2 < file.shape.size(); ++j) taps *= file.shape[j];
  NpyData out;
  out.shape = weight_form_shape(L, WeightForm{0, block});
  out.dtype = NpyDType::F32;
  out.bytes.resize(file.bytes.size());
  const auto* src = reinterpret_cast<const float*>(file.bytes.data());
  auto* dst = reinterpret_cast<float*>(out.bytes.data());
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t i = 0; i < C; ++i)
      for (int64_t o = 0; o < K; ++o)
        dst[((o / block * taps + t) * C + i) * block + o % block] = src[(t * C + i) * K + o];
  return out;
}

// A quantized conv with a bias: its input zero point's term can go into the bias.
bool bias_takes_zero_point(const Layer& L) {
  return L.op == Op::Conv && L.quantized() && L.bias;
}

}  // namespace

std::optional<int32_t> foldable_zero_point(const Layer& L, const Halide::Target& target) {
  if (!bias_takes_zero_point(L)) return std::nullopt;
  return dot_zero_point(L, dot_operands(target));
}

std::string bias_form_layout(const WeightForm& form) {
  return form.zero_point_in_bias ? "O_zero_point_folded" : "O";
}

NpyData prepare_bias(const Layer& L, const WeightForm& form, const NpyData& weights,
                     const NpyData& bias) {
  if (!form.zero_point_in_bias) return bias;
  const std::vector<int64_t> shape = L.weight_shape();
  const size_t o_axis = L.weight_layout.order.find('O');
  if (!bias_takes_zero_point(L) || weights.dtype != NpyDType::I8 || weights.shape != shape ||
      bias.dtype != NpyDType::I32 || bias.shape != std::vector<int64_t>{L.out_channels} ||
      o_axis == std::string::npos)
    throw std::logic_error("layer '" + L.name + "': no zero point to fold into its bias");
  int64_t inner = 1;  // elements between two output channels' weights (C order)
  for (size_t j = o_axis + 1; j < shape.size(); ++j) inner *= shape[j];
  std::vector<int64_t> sums(static_cast<size_t>(L.out_channels), 0);
  const auto* w = reinterpret_cast<const int8_t*>(weights.bytes.data());
  for (size_t e = 0; e < weights.bytes.size(); ++e)
    sums[static_cast<size_t>((static_cast<int64_t>(e) / inner) % L.out_channels)] += w[e];
  NpyData out = bias;
  auto* b = reinterpret_cast<int32_t*>(out.bytes.data());
  for (size_t o = 0; o < sums.size(); ++o) {
    const int64_t v = int64_t{b[o]} - int64_t{form.folded_zero_point} * sums[o];
    b[o] = static_cast<int32_t>(static_cast<uint32_t>(v));
  }
  return out;
}

std::string weight_form_layout(const Layer& L, const WeightForm& form) {
  if (form.dot_table) return spatial_letters(static_cast<int>(L.in_spatial.size())) + "IO4i";
  if (form.block_channels > 0) {
    std::string taps = L.weight_layout.order.substr(0, L.weight_layout.order.size() - 2);
    for (char& c : taps) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return "O" + taps + "i" + std::to_string(form.block_channels) + "o";
  }
  if (!form.prepared()) return L.weight_layout.order;
  return "winograd_f" + std::to_string(form.winograd_m) + "_u";
}

std::vector<int64_t> weight_form_shape(const Layer& L, const WeightForm& form) {
  if (form.dot_table) {
    std::vector<int64_t> shape = L.kernel;
    shape.insert(shape.end(), {reduction_channels(L) / 4, L.out_channels, 4});
    return shape;
  }
  if (form.block_channels > 0) {
    std::vector<int64_t> shape = L.weight_shape();  // taps..., in, out
    shape.back() = form.block_channels;
    shape.insert(shape.begin(), L.out_channels / form.block_channels);
    return shape;
  }
  if (!form.prepared()) return L.weight_shape();
  const int64_t t = winograd_matrices(form.winograd_m).t;
  return {t, t, L.in_channels, L.out_channels};
}

namespace {

// A Halide buffer over `data` (Halide's dimensions are innermost first, the file's outermost
// first).
template <typename T>
Halide::Buffer<T> buffer_over(const NpyData& data) {
  std::vector<int> sizes(data.shape.rbegin(), data.shape.rend());
  return Halide::Buffer<T>(reinterpret_cast<T*>(const_cast<unsigned char*>(data.bytes.data())),
                           sizes);
}

// `prepared`, the Halide definition of the form over the file's values, realized on the host.
template <typename T>
NpyData realize_form(const Layer& L, const WeightForm& form, NpyDType dtype,
                     Halide::Func prepared) {
  NpyData out;
  out.shape = weight_form_shape(L, form);
  out.dtype = dtype;
  int64_t n = 1;
  for (int64_t d : out.shape) n *= d;
  out.bytes.resize(static_cast<size_t>(n) * sizeof(T));
  Halide::Buffer<T> buffer = buffer_over<T>(out);
  prepared.realize(buffer, Halide::get_host_target());
  return out;
}

}  // namespace

Halide::Func define_prepared_weights(const Layer& L, const WeightForm& form,
                                     const Halide::Func& weights) {
  if (form.block_channels > 0) {
    if (!blocked_weights_apply(L, form.block_channels))
      throw std::logic_error("layer '" + L.name + "': its weights cannot be blocked by " +
                             std::to_string(form.block_channels) + " output channels");
    return define_blocked_weights(L, form.block_channels, weights);
  }
  if (form.dot_table) {
    if (!quantized_dot_product(L))
      throw std::logic_error("layer '" + L.name + "': its weights cannot be a dot-product table");
    return define_dot_table(L, weights);
  }
  if (form.winograd_m > 0) {
    if (!winograd_applies(L))
      throw std::logic_error("layer '" + L.name + "': its weights cannot be prepared for Winograd");
    WinogradStages s;
    define_winograd_weights(s, L, form.winograd_m, weights);
    return s.weights;
  }
  throw std::logic_error("layer '" + L.name + "': its weight form needs no preparation");
}

NpyData prepare_weights(const Layer& L, const WeightForm& form, const NpyData& file) {
  // Blocks are the file's values moved: a loop here, not a JIT compile per layer.
  if (form.block_channels > 0) return block_weights(L, form.block_channels, file);
  if (!form.prepared()) return file;
  const NpyDType want = form.dot_table ? NpyDType::I8 : NpyDType::F32;
  if (file.dtype != want || file.shape != L.weight_shape())
    throw std::logic_error("layer '" + L.name + "': its weights file is not the layer's weights");
  if (form.dot_table) {
    Halide::Buffer<int8_t> raw = buffer_over<int8_t>(file);
    return realize_form<int8_t>(L, form, want, define_prepared_weights(L, form, Halide::Func(raw)));
  }
  Halide::Buffer<float> raw = buffer_over<float>(file);
  return realize_form<float>(L, form, want, define_prepared_weights(L, form, Halide::Func(raw)));
}

}  // namespace padfold
