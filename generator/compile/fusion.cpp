#include "compile/fusion.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "padding/padding.h"
#include "schedules/block.h"
#include "schedules/schedule.h"

namespace padfold {

namespace {

bool is_dw(const Layer& L) {
  return L.op == Op::Conv && classify(L) == OpClass::Depthwise;
}
bool is_pw(const Layer& L) {
  return L.op == Op::Conv && classify(L) == OpClass::Pointwise && L.groups == 1;
}
bool is_pool(const Layer& L) {
  return L.op == Op::MaxPool || L.op == Op::AvgPool;
}

// An add of a conv's output (c[0]) and one other tensor of the same shape and layout: the conv's
// epilogue computes it.
bool is_residual_add(const Layer& conv, const Layer& add) {
  return conv.op == Op::Conv && add.op == Op::Add && add.inputs.size() == 2 &&
         add.inputs[0] != add.inputs[1] &&
         (add.inputs[0] == conv.name || add.inputs[1] == conv.name) &&
         add.layout.name() == conv.layout.name() &&
         add.output_shape_full() == conv.output_shape_full();
}

// Whether `chain` is a block kind padfold fuses; "" when it is, else why not.
std::string unfusible(const std::vector<const Layer*>& chain) {
  // A quantized conv takes its residual add (same dtype) into its epilogue; no other fusion.
  const bool quantized_residual = chain.size() == 2 && chain[0]->quantized() &&
                                  chain[1]->dtype == chain[0]->dtype &&
                                  is_residual_add(*chain[0], *chain[1]);
  for (const Layer* L : chain)
    if (L->quantized() && !quantized_residual)
      return "layer '" + L->name + "' is " + to_string(L->dtype) +
             ": a quantized layer is a kernel of its own, but a conv with its residual add";
  for (size_t i = 1; i < chain.size(); ++i)
    if (chain[i]->relayout_input)
      return "layer '" + chain[i]->name + "' reads its input in another layout (" +
             chain[i]->input_layout.name() + "): only a block's first layer may";
  std::vector<const Layer*> c = chain;
  if (c.size() >= 2 && is_residual_add(*c[c.size() - 2], *c.back())) {
    c.pop_back();
    if (c.size() == 1) return "";
  }
  if (c.size() == 2 && is_dw(*c[0]) && is_pw(*c[1])) return "";
  if (c.size() == 3 && is_pw(*c[0]) && is_dw(*c[1]) && is_pw(*c[2])) return "";
  if (c.size() == 2 && c[0]->op == Op::Conv && is_pool(*c[1])) return "";
  return "not a fused kind (dw->pw, pw->dw->pw, conv->max_pool, conv->avg_pool, each of the convs "
         "or dw->pw and pw->dw->pw followed by a residual add)";
}

double bytes_of(const std::vector<int64_t>& shape) {
  double b = 4;
  for (int64_t e : shape) b *= static_cast<double>(e);
  return b;
}

// Producer points a consumer tile of `tile` outputs needs along one axis, over the points it
// would compute alone (tile * stride): > 1 is recomputed halo, < 1 points a stride skips.
double halo_factor(const Layer& consumer, size_t axis, int64_t tile) {
  const int64_t out = consumer.out_spatial[axis];
  const int64_t t = std::max<int64_t>(1, std::min(tile, out));
  const AxisParams a = consumer.axes()[axis];
  return static_cast<double>(window_extent(a, t)) / static_cast<double>(t * a.stride);
}

// The nominal consumer tile: 8 columns by 2 rows (a register tile of the CPU families).
double tile_factor(const Layer& consumer) {
  double f = 1;
  const size_t D = consumer.out_spatial.size();
  for (size_t ax = 0; ax < D; ++ax) f *= halo_factor(consumer, ax, ax + 1 == D ? 8 : 2);
  return f;
}

}  // namespace

FuseOptions parse_fuse_option(const std::string& text) {
  FuseOptions o;
  if (text == "auto") return o;
  if (text == "none") {
    o.mode = FuseOptions::Mode::None;
    return o;
  }
  o.mode = FuseOptions::Mode::Listed;
  std::stringstream blocks(text);
  std::string block;
  while (std::getline(blocks, block, ',')) {
    std::vector<std::string> names;
    std::stringstream parts(block);
    std::string name;
    while (std::getline(parts, name, '+')) names.push_back(name);
    if (names.size() < 2 ||
        std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.empty(); }))
      throw std::invalid_argument("--fuse: '" + block +
                                  "' is not a block; expected auto, none or layers joined by + "
                                  "(blocks separated by commas), e.g. dw1+pw1,conv2+pool2");
    o.listed.push_back(names);
  }
  if (o.listed.empty()) throw std::invalid_argument("--fuse: no block given");
  return o;
}

FusionEstimate estimate_fusion(const std::vector<const Layer*>& layers) {
  Block b{layers, ""};
  if (b.residual()) {
    // The conv's output is never written nor read back, and the add is no kernel of its own:
    // nothing is recomputed, so it pays whenever the chain before it does.
    const std::vector<const Layer*> chain = b.chain();
    FusionEstimate e;
    if (chain.size() > 1) e = estimate_fusion(chain);
    const double saved = bytes_of(b.consumer().output_shape_full());
    e.kind = b.kind();
    e.intermediate_bytes += saved;
    e.pays = chain.size() == 1 || e.pays;
    e.reason =
        fmt::format("{}: the add in {}'s epilogue saves {:.1f} KB of writes and reads{}", e.kind,
                    b.consumer().name, 2 * saved / 1024, chain.size() > 1 ? "; " + e.reason : "");
    return e;
  }
  const std::vector<const Layer*>& chain = layers;
  FusionEstimate e;
  e.kind = b.kind();
  for (size_t i = 0; i + 1 < chain.size(); ++i)
    e.intermediate_bytes += bytes_of(chain[i]->output_shape_full());
  // A producer feeding a windowed consumer slides along the rows of the block's row strips
  // (fused_strips; at most max_block_strips): each strip recomputes the k - stride rows above its
  // first row, and columns are never recomputed. Without strips it would be recomputed over every
  // tile's halo (tile_factor).
  const int strips = std::min(kNominalStrips, max_block_strips(chain));
  const Layer& last = *chain.back();
  const size_t y = last.out_spatial.size() >= 2 ? last.out_spatial.size() - 2 : 0;
  bool windowed = false;
  for (size_t i = 1; i < chain.size(); ++i) {
    const Layer& consumer = *chain[i];
    if (is_pw(consumer)) continue;  // reads each producer point once
    windowed = true;
    const Layer& producer = *chain[i - 1];
    if (last.spatial_dims < 2) {
      e.recompute_flops += producer.flops() * (tile_factor(consumer) - 1);
      continue;
    }
    const AxisParams a = consumer.axes()[y];
    const int64_t k = window_extent(a), s = a.stride;
    const double rows = static_cast<double>(producer.out_spatial[y]);
    e.recompute_flops +=
        producer.flops() * static_cast<double>(std::max<int64_t>(0, k - s) * strips) / rows;
  }
  const double per_byte =
      e.intermediate_bytes <= kCachedIntermediateBytes ? kFlopsPerByte / 4 : kFlopsPerByte;
  const double worth = 2 * e.intermediate_bytes * per_byte;
  // One strip (a window too tall for the rows): the block would run on one thread.
  const bool serial = windowed && strips < 2 && last.spatial_dims >= 2;
  e.pays =
      worth > e.recompute_flops && e.intermediate_bytes >= kMinFusedIntermediateBytes && !serial;
  e.reason = fmt::format(
      "{}: saves {:.1f} KB of intermediate writes and reads ({:.2f} MFLOP-equivalent), "
      "recomputes {:.2f} MFLOP of halo",
      e.kind, 2 * e.intermediate_bytes / 1024, worth / 1e6, e.recompute_flops / 1e6);
  if (e.intermediate_bytes < kMinFusedIntermediateBytes)
    e.reason += fmt::format("; an intermediate under {:.0f} KB stays in cache",
                            kMinFusedIntermediateBytes / 1024);
  if (serial)
    e.reason += fmt::format("; its window allows a single row strip of {} rows (one thread)",
                            last.out_spatial[y]);
  return e;
}

FusionPlan plan_fusion(const Model& model, const FuseOptions& options) {
  // Readers of every tensor, and model outputs: an intermediate must have one reader and be no
  // output. Every lookup is indexed: a spec may have 100k layers.
  std::unordered_map<std::string, int> readers;
  std::unordered_map<std::string, const Layer*> first_reader;
  for (const Layer& L : model.layers)
    for (const std::string& in : L.inputs) {
      ++readers[in];
      first_reader.emplace(in, &L);
    }
  const std::unordered_set<std::string> outputs(model.outputs.begin(), model.outputs.end());
  auto chainable = [&](const Layer& producer, const Layer& consumer) {
    const auto r = readers.find(producer.name);
    const bool reads = (consumer.inputs.size() == 1 && consumer.inputs[0] == producer.name) ||
                       is_residual_add(producer, consumer);
    return reads && r != readers.end() && r->second == 1 && !outputs.count(producer.name);
  };
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < model.layers.size(); ++i) index[model.layers[i].name] = i;
  // The one layer that can chain after L: its only reader.
  auto reader_of = [&](const Layer& L) -> const Layer* {
    const auto it = first_reader.find(L.name);
    return it != first_reader.end() && chainable(L, *it->second) ? it->second : nullptr;
  };

  FusionPlan plan;
  std::vector<bool> taken(model.layers.size(), false);
  std::vector<std::vector<const Layer*>> chosen;
  if (options.mode == FuseOptions::Mode::Listed) {
    for (const auto& names : options.listed) {
      std::vector<const Layer*> chain;
      const std::string text = fmt::format("{}", fmt::join(names, "+"));
      for (const std::string& n : names) {
        const auto it = index.find(n);
        if (it == index.end())
          throw std::invalid_argument("--fuse " + text + ": '" + n + "' is not a layer");
        if (taken[it->second])
          throw std::invalid_argument("--fuse " + text + ": '" + n + "' is in another block");
        chain.push_back(&model.layers[it->second]);
      }
      for (size_t i = 0; i + 1 < chain.size(); ++i)
        if (!chainable(*chain[i], *chain[i + 1]))
          throw std::invalid_argument(fmt::format(
              "--fuse {}: '{}' is not read by '{}' alone (a fused intermediate has one reader and "
              "is no model output)",
              text, chain[i]->name, chain[i + 1]->name));
      if (const std::string why = unfusible(chain); !why.empty())
        throw std::invalid_argument("--fuse " + text + ": " + why);
      for (const Layer* L : chain) taken[index[L->name]] = true;
      chosen.push_back(chain);
    }
  } else if (options.mode == FuseOptions::Mode::Auto) {
    for (size_t i = 0; i < model.layers.size(); ++i) {
      if (taken[i]) continue;
      // The longest fusible chain from layer i (pw->dw->pw->add before pw->dw->pw, dw->pw and
      // conv->pool).
      std::vector<const Layer*> chain{&model.layers[i]};
      for (const Layer* next = reader_of(model.layers[i]); next && chain.size() < 4;
           next = reader_of(*next))
        chain.push_back(next);
      for (size_t n = chain.size(); n >= 2; --n) {
        std::vector<const Layer*> c(chain.begin(), chain.begin() + static_cast<long>(n));
        if (!unfusible(c).empty()) continue;
        if (std::any_of(c.begin(), c.end(), [&](const Layer* L) { return taken[index[L->name]]; }))
          continue;
        const FusionEstimate e = estimate_fusion(c);
        if (!e.pays) {
          plan.notes.push_back(Block{c, ""}.names() + " not fused: " + e.reason);
          continue;
        }
        for (const Layer* L : c) taken[index[L->name]] = true;
        chosen.push_back(c);
        break;
      }
    }
  }
  // Every layer in model order: a block where its first layer is (a block ending in a residual add
  // where the add is: the add's other input may come later than the block's first layer), singles
  // elsewhere.
  std::unordered_map<const Layer*, const std::vector<const Layer*>*> block_at;
  for (const auto& c : chosen) block_at.emplace(Block{c, ""}.residual() ? c.back() : c.front(), &c);
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const Layer& L = model.layers[i];
    if (const auto it = block_at.find(&L); it != block_at.end()) {
      const std::vector<const Layer*>& c = *it->second;
      const std::string reason = options.mode == FuseOptions::Mode::Listed
                                     ? "listed in --fuse; " + estimate_fusion(c).reason
                                     : estimate_fusion(c).reason;
      plan.blocks.push_back(Block{c, reason});
    } else if (!taken[i]) {
      plan.blocks.push_back(Block{{&L}, ""});
    }
  }
  return plan;
}

}  // namespace padfold
