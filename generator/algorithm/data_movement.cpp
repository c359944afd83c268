// Data movement: transpose, gather_channels, resize, concat (builders.h).
#include <algorithm>
#include <vector>

#include "algorithm/access.h"
#include "algorithm/builders.h"
#include "padding/resize.h"

namespace padfold {

using namespace Halide;

// Output axis k is input axis perm[k] (outermost first); Halide's orders are the reverse.
void build_transpose(Algorithm& a) {
  const Layer& L = *a.layer;
  const size_t rank = L.perm.size();
  std::vector<Expr> args(rank);
  for (size_t k = 0; k < rank; ++k)
    args[rank - 1 - static_cast<size_t>(L.perm[k])] = a.vars[rank - 1 - k];
  a.output(a.vars) = a.input(args);
}

// Output channel k reads input channel channels[k]: at an offset and step where the channels are a
// run (a Split or Slice: plain loads, and bounds inference asks for the run alone), else through a
// table embedded in the kernel, its entries promised inside the input.
void build_gather_channels(Algorithm& a) {
  const Layer& L = *a.layer;
  const std::vector<int64_t>& ch = L.channels;
  const int64_t step = ch.size() > 1 ? ch[1] - ch[0] : 1;
  bool run = true;
  for (size_t k = 0; k < ch.size(); ++k)
    run = run && ch[k] == ch[0] + step * static_cast<int64_t>(k);
  Expr source;
  if (run) {
    source = a.c * static_cast<int>(step) + static_cast<int>(ch[0]);
  } else {
    Buffer<int32_t> table(static_cast<int>(ch.size()), L.name + "_channels");
    for (size_t k = 0; k < ch.size(); ++k) table(static_cast<int>(k)) = static_cast<int32_t>(ch[k]);
    source = unsafe_promise_clamped(table(a.c), 0, static_cast<int>(L.in_channels) - 1);
  }
  // a.vars is c, W, H, (D,) n channels last, else W, H, (D,) c, n.
  std::vector<Expr> at(a.vars.begin(), a.vars.end());
  at[L.layout.channels_last ? 0 : L.in_spatial.size()] = source;
  a.output(a.vars) = a.input(at);
}

// Each spatial axis reads through a table of its taps (padding/resize.h's resize_taps, computed
// here for the fixed sizes and embedded in the kernel): nearest one index, linear two indices and
// their weights, clamped to the input, so the edge is folded in and no read leaves the input.
// Linear sums the 2^dims neighbours, the outermost axis's first neighbour first, as ONNX Runtime
// does. tf_crop_and_resize also tables, per axis, the outputs that read outside the input: they
// are extrapolation_value.
void build_resize(Algorithm& a) {
  const Layer& L = *a.layer;
  const size_t dims = L.in_spatial.size();
  const bool linear = L.resize.mode == ResizeMode::Linear;
  std::vector<Buffer<int32_t>> index;  // per axis, outermost first: (output index, neighbour)
  std::vector<Buffer<float>> weight;
  std::vector<Buffer<uint8_t>> outside;
  const bool crop = L.resize.coordinates == ResizeCoordinates::TfCropAndResize;
  std::vector<size_t> var_of;  // the position of the axis's Var in a.vars
  for (size_t i = 0; i < dims; ++i) {
    const std::vector<ResizeTap> taps = resize_taps(L.resize, i, L.in_spatial[i]);
    const int out = static_cast<int>(taps.size());
    const std::string axis = L.name + "_" + std::string(1, spatial_letters(L.spatial_dims)[i]);
    Buffer<int32_t> ix(out, 2, axis + "_taps");
    Buffer<float> w(out, 2, axis + "_weights");
    Buffer<uint8_t> away(out, axis + "_outside");
    for (int x = 0; x < out; ++x) {
      const ResizeTap& t = taps[static_cast<size_t>(x)];
      ix(x, 0) = static_cast<int32_t>(t.first);
      ix(x, 1) = static_cast<int32_t>(t.second);
      w(x, 0) = t.first_weight;
      w(x, 1) = t.second_weight;
      away(x) = t.outside ? 1 : 0;
    }
    index.push_back(ix);
    weight.push_back(w);
    outside.push_back(away);
    // a.vars is (c,) W, H, (D,) (c,) n: spatial axis i (outermost first) is the (dims - 1 - i)th.
    var_of.push_back(dims - 1 - i + (L.layout.channels_last ? 1 : 0));
  }
  const int corners = linear ? 1 << dims : 1;
  Expr sum;
  for (int corner = 0; corner < corners; ++corner) {
    std::vector<Expr> at(a.vars.begin(), a.vars.end());
    Expr w;
    for (size_t k = dims; k-- > 0;) {  // innermost axis first: x's weight times y's
      const int side = (corner >> (dims - 1 - k)) & 1;
      const Expr v = a.vars[var_of[k]];
      // The table holds indices inside the input: promised, so bounds are the input's.
      at[var_of[k]] =
          unsafe_promise_clamped(index[k](v, side), 0, static_cast<int>(L.in_spatial[k]) - 1);
      if (linear) w = w.defined() ? w * weight[k](v, side) : weight[k](v, side);
    }
    const Expr term = linear ? w * a.input(at) : a.input(at);
    sum = sum.defined() ? sum + term : term;
  }
  if (crop) {
    Expr away;
    for (size_t k = 0; k < dims; ++k) {
      const Expr here = outside[k](a.vars[var_of[k]]) != 0;
      away = away.defined() ? (away || here) : here;
    }
    sum = select(away, cast(sum.type(), L.resize.extrapolation_value), sum);
  }
  a.output(a.vars) = sum;
}

// One update per input, writing its channel block (the pure definition writes nothing): each
// element is read once, from its own input, where a select over the inputs read every input,
// clamped, for every output element (a gather per input and vector: 20x a copy at 24 inputs).
void build_concat(Algorithm& a) {
  const Layer& L = *a.layer;
  const size_t ch = L.layout.channels_last ? 0 : a.vars.size() - 2;  // Halide order
  a.output(a.vars) = undef(a.inputs[0].type());
  int start = 0;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const int channels = static_cast<int>(L.input_channels[i]);
    const RDom r(0, channels, L.name + "_in" + std::to_string(i));
    std::vector<Expr> at(a.vars.begin(), a.vars.end()), from = at;
    at[ch] = r.x + start;
    from[ch] = r.x;
    a.output(at) = a.inputs[i](from);
    start += channels;
  }
}

std::vector<VarOrRVar> concat_loops(const Algorithm& a, int u) {
  const RVar r = a.output.rvars(u)[0];
  std::vector<VarOrRVar> loops;
  for (const Var& v : a.vars) loops.push_back(v.name() == a.c.name() ? VarOrRVar(r) : VarOrRVar(v));
  return loops;
}

}  // namespace padfold
