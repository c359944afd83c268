// Fused blocks against the same layers run one by one, side by side in one process, on the chains
// of a spec (examples/inverted_residual_blocks.json).
//
// For every chain and thread count these are timed in interleaved blocks:
//   fused       the chain as one padfold kernel (a bundle compiled with --fuse listing every
//               chain), one pf_run
//   unfused     the `--fuse none` bundle's kernels one after another on preallocated
//               intermediates
//   oneDNN      convolution_forward / pooling_forward layer by layer: src/dst NHWC, weights
//               format any (reordered once outside timing), bias, activations as eltwise
//               post-ops, intermediates preallocated
//   oneDNN dw   where oneDNN's depthwise post-op applies (a 1x1 conv followed by a depthwise 3x3
//               with pad 1 on every side, stride 1 or 2): the 1x1 and the depthwise as one
//               primitive, then the rest layer by layer
// and PyTorch's medians (bench/bench_blocks_torch.py, a separate process) are merged into the
// table when --torch names its JSON.
//
// Before timing, the outputs of fused, oneDNN and oneDNN dw are compared element-wise with the
// unfused padfold output (max |diff| / max |out| < 1e-4), else the program fails. Timing, load
// probes and retries are bench_conv's (bench_common.h): warm-up, ~25 ms blocks round robin, every
// call timed on its own, medians.
//
// usage: bench_blocks --fused DIR --unfused DIR --spec SPEC [--auto DIR] [--torch torch.json]
//                     [--threads 1,2] [--min-time 0.3] [--markdown results-blocks.md]
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "bench_common.h"

namespace {

using json = nlohmann::json;
using dnnl::memory;
using namespace bench;

// ---------------------------------------------------------------------------------------------
// Layers and chains

struct Lay {
  std::string name, op, act;  // op: conv, max_pool; act: none, relu, relu6
  bool bias = false;
  int N, H, W, C, OC, OH, OW, KH, KW, SH, SW, G;
  int pt, pl, pb, pr;
  double flops = 0;
  size_t in_count() const { return static_cast<size_t>(N) * H * W * C; }
  size_t out_count() const { return static_cast<size_t>(N) * OH * OW * OC; }
  size_t w_count() const { return static_cast<size_t>(KH) * KW * (C / G) * OC; }
  bool depthwise() const { return op == "conv" && G > 1 && G == C; }
  bool pointwise() const { return op == "conv" && G == 1 && KH == 1 && KW == 1; }
  bool symmetric_pad1() const { return pt == 1 && pl == 1 && pb == 1 && pr == 1; }
};

std::vector<int> pair_of(const json& j, int dflt) {
  if (j.is_null()) return {dflt, dflt};
  if (j.is_number()) return {j.get<int>(), j.get<int>()};
  return j.get<std::vector<int>>();
}

const json& manifest_kernel(const json& manifest, const std::string& layer) {
  for (const json& k : manifest.at("kernels"))
    if (k.at("layer") == layer) return k;
  fail("no kernel for layer " + layer + " in the manifest");
}

const json& buffer_of(const json& kernel, const std::string& name) {
  for (const json& b : kernel.at("buffers"))
    if (b.at("name") == name) return b;
  fail("kernel " + kernel.at("layer").get<std::string>() + " has no buffer " + name);
}

// A layer from the spec (op, kernel, stride, activation, bias) and the unfused bundle's manifest
// (shapes and the pads padfold resolved).
Lay layer_of(const json& spec_layer, const json& unfused_manifest) {
  Lay L;
  L.name = spec_layer.at("name");
  const std::string op = spec_layer.at("op");
  L.op = op == "conv2d" ? "conv" : op;
  if (L.op != "conv" && L.op != "max_pool") fail(L.name + ": op " + op + " is not benchmarked");
  L.act = spec_layer.value("activation", "none");
  if (L.act != "none" && L.act != "relu" && L.act != "relu6")
    fail(L.name + ": activation " + L.act + " is not benchmarked");
  L.bias = spec_layer.value("bias", false);
  const json& k = manifest_kernel(unfused_manifest, L.name);
  const auto in = buffer_of(k, "input").at("shape").get<std::vector<int>>();
  const auto out = buffer_of(k, "output").at("shape").get<std::vector<int>>();
  L.N = in[0], L.H = in[1], L.W = in[2], L.C = in[3];
  L.OH = out[1], L.OW = out[2], L.OC = out[3];
  const auto kern = pair_of(spec_layer.value("kernel", json()), 1);
  const auto stride = pair_of(spec_layer.value("stride", json()), 1);
  L.KH = kern[0], L.KW = kern[1], L.SH = stride[0], L.SW = stride[1];
  L.G = 1;
  if (L.op == "conv") {
    const auto w = buffer_of(k, "weights").at("shape").get<std::vector<int>>();  // HWIO
    L.G = L.C / w[2];
    if (w[0] != L.KH || w[1] != L.KW) fail(L.name + ": kernel size differs from the manifest's");
  }
  L.pt = k.at("pads_before")[0], L.pl = k.at("pads_before")[1];
  L.pb = k.at("pads_after")[0], L.pr = k.at("pads_after")[1];
  L.flops = k.value("flops", 0.0);
  return L;
}

struct Chain {
  std::string name;   // "b1", "stem": the first layer's name up to its first '_'
  std::string block;  // the layers joined by "+"
  std::string kind;   // the fused manifest's op: "dw->pw", ...
  std::string reason;
  std::vector<Lay> layers;
  double intermediate_bytes() const {
    double b = 0;
    for (size_t i = 0; i + 1 < layers.size(); ++i) b += 4.0 * layers[i].out_count();
    return b;
  }
  double flops() const {
    double f = 0;
    for (const Lay& L : layers) f += L.flops;
    return f;
  }
  // oneDNN's depthwise post-op: the first 1x1 conv followed by a depthwise 3x3 with pad 1
  // everywhere, stride 1 or 2, and no bigger output than it gives. "" when it applies.
  std::string no_dw_fusion() const {
    for (size_t i = 0; i + 1 < layers.size(); ++i) {
      const Lay &a = layers[i], &b = layers[i + 1];
      if (!a.pointwise()) continue;
      if (!b.depthwise()) continue;
      if (b.KH != 3 || b.KW != 3)
        return "depthwise " + std::to_string(b.KH) + "x" + std::to_string(b.KW) +
               " (the post-op is 3x3 only)";
      if (!b.symmetric_pad1())
        return "SAME pads (" + std::to_string(b.pt) + "," + std::to_string(b.pb) + ")x(" +
               std::to_string(b.pl) + "," + std::to_string(b.pr) +
               ") are asymmetric (the post-op pads 1 on every side)";
      if (b.SH != b.SW || (b.SH != 1 && b.SH != 2)) return "stride is not 1 or 2";
      return "";
    }
    if (layers.size() == 2 && layers[0].depthwise() && layers[1].pointwise())
      return "dw->pw order (the post-op fuses a 1x1 conv followed by a depthwise, not the reverse)";
    if (layers.back().op != "conv") return "no conv->pool fusion in oneDNN";
    return "no 1x1 conv -> depthwise pair";
  }
};

// ---------------------------------------------------------------------------------------------
// padfold

const pf_kernel_desc* find_kernel(pf_bundle* b, const std::string& layer) {
  char err[PF_ERRLEN];
  const pf_kernel_desc* d = nullptr;
  if (pf_bundle_find(b, layer.c_str(), &d, err, sizeof err) != PF_OK)
    fail(std::string("pf_bundle_find: ") + err);
  return d;
}

// ---------------------------------------------------------------------------------------------
// oneDNN

memory::desc nhwc_md(int N, int C, int H, int W) {
  return memory::desc({N, C, H, W}, memory::data_type::f32, memory::format_tag::nhwc);
}

// The user's HWIO weights ([KH][KW][I/G][O], O = g * O/G + o) as a oneDNN (g)oihw descriptor.
memory::desc hwio_md(const Lay& L) {
  const int64_t O = L.OC, IG = L.C / L.G, KW = L.KW;
  if (L.G == 1)
    return memory::desc({O, IG, L.KH, L.KW}, memory::data_type::f32,
                        memory::dims{1, O, KW * IG * O, IG * O});
  const int64_t OG = O / L.G;
  return memory::desc({L.G, OG, IG, L.KH, L.KW}, memory::data_type::f32,
                      memory::dims{OG, 1, O, KW * IG * O, IG * O});
}

memory::desc any_weights_md(const Lay& L) {
  if (L.G == 1)
    return memory::desc({L.OC, L.C, L.KH, L.KW}, memory::data_type::f32, memory::format_tag::any);
  return memory::desc({L.G, L.OC / L.G, L.C / L.G, L.KH, L.KW}, memory::data_type::f32,
                      memory::format_tag::any);
}

void append_act(dnnl::post_ops& po, const std::string& act) {
  if (act == "relu") po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  if (act == "relu6") po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f, 6.f);
}

memory reordered(const dnnl::engine& eng, dnnl::stream& strm, const memory::desc& user_md,
                 float* data, const memory::desc& want) {
  memory user(user_md, eng, data);
  memory m(want, eng);
  dnnl::reorder(user, m).execute(strm, user, m);
  strm.wait();
  return m;
}

struct DnnlStep {
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
  memory scratch;
  std::string impl;
  void run(dnnl::stream& strm) { prim.execute(strm, args); }
};

// One layer: src/dst given as memories (NHWC user buffers, or whatever a fused primitive left).
// `dw`: a depthwise layer fused as oneDNN's post-op (its output is then dst).
DnnlStep make_step(const dnnl::engine& eng, dnnl::stream& strm, const Lay& L, const memory& src,
                   const memory& dst, Buffer* w, Buffer* b, const Lay* dw = nullptr,
                   Buffer* dw_w = nullptr, Buffer* dw_b = nullptr) {
  DnnlStep s;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const memory::dims strides{L.SH, L.SW}, pad_l{L.pt, L.pl}, pad_r{L.pb, L.pr};
  if (L.op == "max_pool") {
    dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max,
                                  src.get_desc(), dst.get_desc(), strides, {L.KH, L.KW}, pad_l,
                                  pad_r);
    dnnl::pooling_forward::primitive_desc pd(d, attr, eng);
    s.impl = pd.impl_info_str();
    s.prim = dnnl::pooling_forward(pd);
    s.scratch = memory(pd.scratchpad_desc(), eng);
    s.args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, s.scratch}};
    return s;
  }
  dnnl::post_ops po;
  append_act(po, L.act);
  if (dw) {
    po.append_dw(memory::data_type::f32, memory::data_type::f32, memory::data_type::f32, 3, dw->SH,
                 1, 0, {1.f});
    append_act(po, dw->act);
  }
  attr.set_post_ops(po);
  const memory::desc bias_md({L.OC}, memory::data_type::f32, memory::format_tag::a);
  // With the depthwise post-op, the 1x1's own dst is internal: oneDNN is given its shape.
  const memory::desc conv_dst =
      dw ? memory::desc({L.N, L.OC, L.OH, L.OW}, memory::data_type::f32, memory::format_tag::any)
         : dst.get_desc();
  dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src.get_desc(),
      any_weights_md(L), L.bias ? bias_md : memory::desc(), conv_dst, strides, pad_l, pad_r);
  dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
  s.impl = pd.impl_info_str();
  s.prim = dnnl::convolution_forward(pd);
  s.scratch = memory(pd.scratchpad_desc(), eng);
  s.args = {{DNNL_ARG_SRC, src},
            {DNNL_ARG_WEIGHTS, reordered(eng, strm, hwio_md(L), w->data, pd.weights_desc())},
            {DNNL_ARG_DST, dst},
            {DNNL_ARG_SCRATCHPAD, s.scratch}};
  if (L.bias) s.args[DNNL_ARG_BIAS] = reordered(eng, strm, bias_md, b->data, pd.bias_desc());
  if (dw) {
    if (pd.dst_desc() != dst.get_desc())
      fail(L.name + "+" + dw->name + ": oneDNN's fused dst is not the memory given");
    const int wa = DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS;
    const int ba = DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS;
    s.args[wa] =
        reordered(eng, strm, hwio_md(*dw), dw_w->data, pd.query_md(dnnl::query::exec_arg_md, wa));
    if (dw->bias)
      s.args[ba] = reordered(eng, strm,
                             memory::desc({dw->OC}, memory::data_type::f32, memory::format_tag::a),
                             dw_b->data, pd.query_md(dnnl::query::exec_arg_md, ba));
  }
  return s;
}

// The dst descriptor a fused 1x1 + depthwise primitive produces (queried with dst format any).
memory::desc fused_dst_desc(const dnnl::engine& eng, const Lay& L, const memory::desc& src,
                            const Lay& dw) {
  dnnl::primitive_attr attr;
  dnnl::post_ops po;
  append_act(po, L.act);
  po.append_dw(memory::data_type::f32, memory::data_type::f32, memory::data_type::f32, 3, dw.SH, 1,
               0, {1.f});
  append_act(po, dw.act);
  attr.set_post_ops(po);
  const memory::desc bias_md({L.OC}, memory::data_type::f32, memory::format_tag::a);
  dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
      any_weights_md(L), L.bias ? bias_md : memory::desc(),
      memory::desc({L.N, L.OC, L.OH, L.OW}, memory::data_type::f32, memory::format_tag::any),
      {L.SH, L.SW}, {L.pt, L.pl}, {L.pb, L.pr});
  dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
  return pd.dst_desc();
}

// ---------------------------------------------------------------------------------------------
// Results

struct Row {
  double fused = NAN, unfused = NAN, dnnl = NAN, dnnl_dw = NAN, torch = NAN, autos = NAN;  // ms
  std::string dnnl_impls, dnnl_dw_impls;
  double other_load = 0, probe_speed = 1, capacity = 1;
};

std::string f(const char* format, double v) {
  if (std::isnan(v)) return "—";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail("cannot read " + path);
  return json::parse(f);
}

}  // namespace

int main(int argc, char** argv) {
  std::string fused_dir, unfused_dir, auto_dir, spec_path, torch_path, markdown, command;
  std::vector<int> threads{1, 2};
  std::vector<std::string> only;
  QuietLimits limits;  // --min-time, --settle and the retry settings
  CLI::App app("Fused padfold blocks vs unfused padfold vs oneDNN (vs PyTorch), side by side.",
               "bench_blocks");
  app.add_option("--fused", fused_dir, "bundle compiled with --fuse listing every chain")
      ->required();
  app.add_option("--unfused", unfused_dir, "bundle compiled with --fuse none")->required();
  app.add_option("--auto", auto_dir, "bundle compiled with --fuse auto (to report its choice)");
  app.add_option("--spec", spec_path, "the spec the bundles were compiled from")->required();
  app.add_option("--torch", torch_path, "PyTorch medians (bench_blocks_torch.py --json)");
  app.add_option("--threads", threads, "thread counts, in increasing order")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--only", only, "only these chains: b1,stem")->delimiter(',');
  app.add_option("--min-time", limits.min_time, "seconds timed per method, chain and thread count")
      ->capture_default_str();
  app.add_option("--max-other-load", limits.max_other_load, "retry while others used more cores")
      ->capture_default_str();
  app.add_option("--min-probe", limits.min_probe, "retry while the arithmetic probe ran slower")
      ->capture_default_str();
  app.add_option("--retries", limits.retries, "times a disturbed chain is timed again")
      ->capture_default_str();
  app.add_option("--retry-wait", limits.retry_wait, "seconds between retries")
      ->capture_default_str();
  app.add_option("--settle", limits.settle, "seconds slept before each block")
      ->capture_default_str();
  app.add_option("--markdown", markdown, "write the results table to this file");
  app.add_option("--command", command, "the command line to quote in the report");
  CLI11_PARSE(app, argc, argv);

  const json spec = read_json(spec_path);
  const json fused_manifest = read_json(fused_dir + "/manifest.json");
  const json unfused_manifest = read_json(unfused_dir + "/manifest.json");
  const json auto_manifest = auto_dir.empty() ? json() : read_json(auto_dir + "/manifest.json");
  const json torch = torch_path.empty() ? json() : read_json(torch_path);

  std::map<std::string, json> spec_layers;
  for (const json& l : spec.at("layers")) spec_layers[l.at("name")] = l;

  std::vector<Chain> chains;
  for (const json& k : fused_manifest.at("kernels")) {
    if (!k.contains("fused")) fail(k.at("layer").get<std::string>() + " is not fused in --fused");
    Chain c;
    std::vector<std::string> names;
    for (const json& l : k.at("fused").at("layers")) {
      names.push_back(l.at("layer"));
      c.layers.push_back(layer_of(spec_layers.at(names.back()), unfused_manifest));
    }
    c.block = join(names, "+");
    c.name = names.front().substr(0, names.front().find('_'));
    c.kind = k.at("op");
    c.reason = k.at("fused").value("reason", "");
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    chains.push_back(c);
  }
  // What --fuse auto did with each chain.
  std::map<std::string, std::string> auto_choice;
  std::map<std::string, std::vector<std::vector<std::string>>> auto_groups;
  if (!auto_manifest.is_null())
    for (const Chain& c : chains) {
      std::vector<std::string> parts;
      for (const json& k : auto_manifest.at("kernels")) {
        std::vector<std::string> names;
        if (k.contains("fused"))
          for (const json& l : k.at("fused").at("layers")) names.push_back(l.at("layer"));
        else
          names.push_back(k.at("layer"));
        bool in_chain = false;
        for (const Lay& L : c.layers) in_chain = in_chain || L.name == names.front();
        if (in_chain) {
          parts.push_back(join(names, "+"));
          auto_groups[c.name].push_back(names);
        }
      }
      auto_choice[c.name] = parts.size() == 1 ? "fused" : join(parts, " \\| ");
    }

  char err[PF_ERRLEN];
  pf_bundle *fused_bundle = nullptr, *unfused_bundle = nullptr, *auto_bundle = nullptr;
  if (pf_bundle_open(fused_dir.c_str(), nullptr, &fused_bundle, err, sizeof err) != PF_OK ||
      pf_bundle_open(unfused_dir.c_str(), nullptr, &unfused_bundle, err, sizeof err) != PF_OK ||
      (!auto_dir.empty() &&
       pf_bundle_open(auto_dir.c_str(), nullptr, &auto_bundle, err, sizeof err) != PF_OK))
    fail(std::string("pf_bundle_open: ") + err);

  for (int i = 0; i < 10; ++i) probe(1);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);

  std::vector<std::vector<Row>> rows(threads.size(), std::vector<Row>(chains.size()));
  for (size_t t = 0; t < threads.size(); ++t) {
    const int n = threads[t];
    for (pf_bundle* b : {fused_bundle, unfused_bundle, auto_bundle})
      if (b && pf_bundle_set_num_threads(b, n, nullptr, err, sizeof err) != PF_OK)
        fail(std::string("pf_bundle_set_num_threads: ") + err);
    omp_set_num_threads(n);
    for (size_t ci = 0; ci < chains.size(); ++ci) {
      const Chain& c = chains[ci];
      const size_t L = c.layers.size();
      std::mt19937 rng(20261201 + static_cast<unsigned>(ci));
      Buffer input(c.layers[0].in_count());
      fill_random(input, rng);
      std::vector<std::unique_ptr<Buffer>> w, b, mid_pf, mid_dn, mid_dw, mid_auto;
      for (const Lay& l : c.layers) {
        w.push_back(std::make_unique<Buffer>(l.op == "conv" ? l.w_count() : 0));
        b.push_back(std::make_unique<Buffer>(l.bias ? static_cast<size_t>(l.OC) : 0));
        fill_random(*w.back(), rng);
        fill_random(*b.back(), rng);
        // Scaled so that the activations of deep chains stay in a useful range.
        const float scale = 1.f / std::sqrt(static_cast<float>(l.KH * l.KW * (l.C / l.G)));
        for (size_t i = 0; i < w.back()->count; ++i) w.back()->data[i] *= 3.f * scale;
        mid_pf.push_back(std::make_unique<Buffer>(l.out_count()));
        mid_dn.push_back(std::make_unique<Buffer>(l.out_count()));
        mid_dw.push_back(std::make_unique<Buffer>(l.out_count()));
        mid_auto.push_back(std::make_unique<Buffer>(l.out_count()));
      }
      Buffer out_fused(c.layers.back().out_count());

      // padfold fused: one kernel.
      PfKernel fused;
      fused.desc = find_kernel(fused_bundle, c.layers.back().name);
      {
        std::map<std::string, Buffer*> bufs{{"input", &input}, {"output", &out_fused}};
        for (size_t i = 0; i < L; ++i) {
          if (c.layers[i].op == "conv") bufs[c.layers[i].name + "_weights"] = w[i].get();
          if (c.layers[i].bias) bufs[c.layers[i].name + "_bias"] = b[i].get();
        }
        fused.bind(bufs);
      }
      // padfold unfused: a kernel per layer.
      std::vector<PfKernel> unfused(L);
      for (size_t i = 0; i < L; ++i) {
        unfused[i].desc = find_kernel(unfused_bundle, c.layers[i].name);
        std::map<std::string, Buffer*> bufs{{"input", i ? mid_pf[i - 1].get() : &input},
                                            {"output", mid_pf[i].get()}};
        if (c.layers[i].op == "conv") bufs["weights"] = w[i].get();
        if (c.layers[i].bias) bufs["bias"] = b[i].get();
        unfused[i].bind(bufs);
      }
      // padfold as --fuse auto compiled the chain: its kernels one after another.
      std::vector<PfKernel> autos;
      if (auto_bundle) {
        size_t first = 0;
        for (const std::vector<std::string>& names : auto_groups[c.name]) {
          const size_t last = first + names.size() - 1;
          PfKernel k;
          k.desc = find_kernel(auto_bundle, names.back());
          std::map<std::string, Buffer*> bufs{{"input", first ? mid_auto[first - 1].get() : &input},
                                              {"output", mid_auto[last].get()}};
          for (size_t i = first; i <= last; ++i) {
            const std::string prefix = names.size() > 1 ? c.layers[i].name + "_" : "";
            if (c.layers[i].op == "conv") bufs[prefix + "weights"] = w[i].get();
            if (c.layers[i].bias) bufs[prefix + "bias"] = b[i].get();
          }
          k.bind(bufs);
          autos.push_back(k);
          first = last + 1;
        }
        if (first != L) fail(c.name + ": the auto bundle's kernels do not cover the chain");
      }
      // oneDNN layer by layer, NHWC everywhere.
      std::vector<DnnlStep> dn;
      std::vector<std::string> impls;
      for (size_t i = 0; i < L; ++i) {
        const Lay& l = c.layers[i];
        memory src(nhwc_md(l.N, l.C, l.H, l.W), eng, i ? mid_dn[i - 1]->data : input.data);
        memory dst(nhwc_md(l.N, l.OC, l.OH, l.OW), eng, mid_dn[i]->data);
        dn.push_back(make_step(eng, strm, l, src, dst, w[i].get(), b[i].get()));
        impls.push_back(dn.back().impl);
      }
      // oneDNN with its depthwise post-op where it applies: the pair as one primitive, whose
      // output is in the layout oneDNN picks (the next layer reads it as it is).
      std::vector<DnnlStep> dw;
      std::vector<std::string> dw_impls;
      const std::string no_dw = c.no_dw_fusion();
      if (no_dw.empty()) {
        memory prev(nhwc_md(c.layers[0].N, c.layers[0].C, c.layers[0].H, c.layers[0].W), eng,
                    input.data);
        for (size_t i = 0; i < L; ++i) {
          const Lay& l = c.layers[i];
          const bool pair = i + 1 < L && l.pointwise() && c.layers[i + 1].depthwise();
          const Lay& last = pair ? c.layers[i + 1] : l;
          const size_t out_i = pair ? i + 1 : i;
          memory::desc dst_md = nhwc_md(last.N, last.OC, last.OH, last.OW);
          if (pair && out_i + 1 < L) dst_md = fused_dst_desc(eng, l, prev.get_desc(), last);
          memory dst = dst_md == nhwc_md(last.N, last.OC, last.OH, last.OW)
                           ? memory(dst_md, eng, mid_dw[out_i]->data)
                           : memory(dst_md, eng);
          if (pair)
            dw.push_back(make_step(eng, strm, l, prev, dst, w[i].get(), b[i].get(), &last,
                                   w[i + 1].get(), b[i + 1].get()));
          else
            dw.push_back(make_step(eng, strm, l, prev, dst, w[i].get(), b[i].get()));
          dw_impls.push_back(dw.back().impl);
          prev = dst;
          if (pair) ++i;
        }
      }

      // Correctness: every way against unfused padfold, before timing.
      for (PfKernel& k : unfused) k.run();
      fused.run();
      for (PfKernel& k : autos) k.run();
      for (DnnlStep& s : dn) s.run(strm);
      strm.wait();
      for (DnnlStep& s : dw) s.run(strm);
      strm.wait();
      const Buffer& ref = *mid_pf[L - 1];
      auto check = [&](const char* what, const Buffer& got) {
        const double d = rel_diff(got.data, ref.data, ref.count);
        if (!(d < 1e-4))
          fail(c.name + ": " + what +
               " differs from unfused padfold: max|diff|/max|out| = " + std::to_string(d));
      };
      check("fused padfold", out_fused);
      if (!autos.empty()) check("padfold --fuse auto", *mid_auto[L - 1]);
      check("oneDNN", *mid_dn[L - 1]);
      if (!dw.empty()) check("oneDNN with its depthwise post-op", *mid_dw[L - 1]);

      Method m_fused{"fused", [&] { fused.run(); }, {}, 0};
      Method m_unfused{"unfused",
                       [&] {
                         for (PfKernel& k : unfused) k.run();
                       },
                       {},
                       0};
      Method m_dn{"oneDNN",
                  [&] {
                    for (DnnlStep& s : dn) s.run(strm);
                    strm.wait();
                  },
                  {},
                  0};
      Method m_dw{"oneDNN dw",
                  [&] {
                    for (DnnlStep& s : dw) s.run(strm);
                    strm.wait();
                  },
                  {},
                  0};
      Method m_auto{"auto",
                    [&] {
                      for (PfKernel& k : autos) k.run();
                    },
                    {},
                    0};
      std::vector<Method*> methods{&m_fused, &m_unfused, &m_dn};
      if (!autos.empty()) methods.push_back(&m_auto);
      if (!dw.empty()) methods.push_back(&m_dw);
      const Quietness quiet = time_while_quiet(methods, n, limits, c.name);
      const double load = quiet.load;
      const Probe seen = quiet.seen;
      Row& r = rows[t][ci];
      r.fused = 1e3 * median(m_fused.samples);
      r.unfused = 1e3 * median(m_unfused.samples);
      r.dnnl = 1e3 * median(m_dn.samples);
      if (!dw.empty()) r.dnnl_dw = 1e3 * median(m_dw.samples);
      if (!autos.empty()) r.autos = 1e3 * median(m_auto.samples);
      const std::string tk = std::to_string(n);
      if (torch.is_object() && torch.contains(tk) && torch[tk].contains(c.name))
        r.torch = torch[tk][c.name].get<double>();
      r.dnnl_impls = join(impls, ", ");
      r.dnnl_dw_impls = join(dw_impls, ", ");
      r.other_load = load;
      r.probe_speed = seen.speed;
      r.capacity = seen.cores;
      std::fprintf(stderr,
                   "%-5s %dT fused %.4f | unfused %.4f | auto %s | oneDNN %.4f | oneDNN dw %s | "
                   "torch %s ms | oneDNN/fused %.2f unfused/fused %.2f | load %.2f probe "
                   "%.2f/%.2f\n",
                   c.name.c_str(), n, r.fused, r.unfused, f("%.4f", r.autos).c_str(), r.dnnl,
                   f("%.4f", r.dnnl_dw).c_str(), f("%.4f", r.torch).c_str(), r.dnnl / r.fused,
                   r.unfused / r.fused, load, seen.speed, seen.cores);
    }
  }

  // ------------------------------------------------------------------------------------------
  // Report
  std::ostringstream md;
  {
    std::string model = "unknown CPU", flags;
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);) {
      if (line.rfind("model name", 0) == 0 && model == "unknown CPU")
        model = line.substr(line.find(':') + 2);
      if (line.rfind("flags", 0) == 0 && flags.empty()) flags = line.substr(line.find(':') + 2);
    }
    char host[512];
    pf_host_describe(host, sizeof host);
    const std::time_t now = std::time(nullptr);
    char date[64];
    std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    md << "Run " << date << " on " << model << " (" << std::thread::hardware_concurrency()
       << " CPUs; " << host << ").\n\nCPU flags (`lscpu`): " << flags << "\n\nThreads: "
       << join(
              [&] {
                std::vector<std::string> t;
                for (int n : threads) t.push_back(std::to_string(n));
                return t;
              }(),
              ", ")
       << ".\n\n";
  }
  if (!command.empty()) md << "Command: `" << command << "`\n\n";
  md << "padfold target `" << pf_bundle_target(fused_bundle) << "`; oneDNN "
     << dnnl_version()->major << "." << dnnl_version()->minor << "." << dnnl_version()->patch
     << " (" << (dnnl_version()->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other")
     << "); PyTorch " << (torch.is_object() ? torch.value("version", "?") : "not run")
     << "; batch 1, float32, NHWC; min time per method, chain and thread count " << limits.min_time
     << " s; figures are medians of single calls.\n\n";
  md << "Ratios are time(other) / time(fused): above 1 means the fused kernel is faster. "
        "Traffic saved = the bytes of the chain's intermediates, written once and read back once "
        "when unfused (2 x their size), which the fused kernel keeps in a tile.\n\n";
  for (size_t t = 0; t < threads.size(); ++t) {
    md << "### " << threads[t] << " thread" << (threads[t] > 1 ? "s" : "") << "\n\n";
    md << "| chain | kind | MFLOP | `--fuse auto` | fused ms | unfused ms | auto ms | oneDNN ms | "
          "oneDNN dw-fused ms | PyTorch ms | **oneDNN/fused** | **unfused/fused** | "
          "PyTorch/fused | oneDNN dw-fused/fused | unfused/auto | traffic saved | other load | "
          "probe |\n";
    md << "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
          "\n";
    for (size_t ci = 0; ci < chains.size(); ++ci) {
      const Chain& c = chains[ci];
      const Row& r = rows[t][ci];
      md << "| " << c.name << " | " << c.kind << " | " << f("%.1f", c.flops() / 1e6) << " | "
         << (auto_choice.count(c.name) ? auto_choice[c.name] : "—") << " | " << f("%.4f", r.fused)
         << " | " << f("%.4f", r.unfused) << " | " << f("%.4f", r.autos) << " | "
         << f("%.4f", r.dnnl) << " | " << f("%.4f", r.dnnl_dw) << " | " << f("%.4f", r.torch)
         << " | **" << f("%.2f", r.dnnl / r.fused) << "** | **" << f("%.2f", r.unfused / r.fused)
         << "** | " << f("%.2f", r.torch / r.fused) << " | " << f("%.2f", r.dnnl_dw / r.fused)
         << " | " << f("%.2f", r.unfused / r.autos) << " | "
         << f("%.2f", 2 * c.intermediate_bytes() / 1048576) << " MiB | " << f("%.2f", r.other_load)
         << " | " << f("%.2f", r.probe_speed);
      if (threads[t] > 1) md << " / " << f("%.2f", r.capacity) << " cores";
      md << " |\n";
    }
    md << "\n";
  }
  md << "Chains (`fused` in the auto column: `--fuse auto` fuses the whole chain):\n\n";
  for (const Chain& c : chains) md << "- " << c.name << ": " << c.block << "\n";
  md << "\noneDNN's depthwise post-op:\n\n";
  for (const Chain& c : chains) {
    const std::string why = c.no_dw_fusion();
    md << "- " << c.name << ": "
       << (why.empty() ? "applied (`" + rows[0][&c - &chains[0]].dnnl_dw_impls + "`)"
                       : "not applicable: " + why)
       << "\n";
  }
  md << "\noneDNN implementations (layer by layer, 1 thread):\n\n";
  for (size_t ci = 0; ci < chains.size(); ++ci)
    md << "- " << chains[ci].name << ": `" << rows[0][ci].dnnl_impls << "`\n";
  md << "\nThe cost model's estimate for each chain (the fused bundle's manifest):\n\n";
  for (const Chain& c : chains) md << "- " << c.name << ": " << c.reason << "\n";

  md << "\n### Goals (issue 12)\n\n";
  for (size_t t = 0; t < threads.size(); ++t) {
    std::vector<std::string> a, b;
    bool ok_a = true, ok_b = true;
    for (size_t ci = 0; ci < chains.size(); ++ci) {
      const Chain& c = chains[ci];
      if (c.kind.find("dw->pw") == std::string::npos) continue;  // dw->pw and pw->dw->pw
      const Row& r = rows[t][ci];
      a.push_back(c.name + " " + f("%.2f", r.dnnl / r.fused) + "x");
      b.push_back(c.name + " " + f("%.2f", r.unfused / r.fused) + "x");
      ok_a = ok_a && r.dnnl / r.fused >= 1.3;
      ok_b = ok_b && r.unfused / r.fused >= 1.2;
    }
    md << "- " << threads[t] << " thread(s), blocks with a dw->pw: fused >= 1.3x oneDNN layer by "
       << "layer: " << join(a, "; ") << ": " << (ok_a ? "**met**" : "**not met**") << "\n";
    md << "- " << threads[t]
       << " thread(s), blocks with a dw->pw: fused >= 1.2x unfused padfold: " << join(b, "; ")
       << ": " << (ok_b ? "**met**" : "**not met**") << "\n";
  }
  md << "\n";

  const std::string text = md.str();
  std::fputs(text.c_str(), stdout);
  if (!markdown.empty()) {
    std::ofstream out(markdown);
    out << "<!-- Generated by bench/bench_blocks (bench/run_blocks.sh). -->\n" << text;
    if (!out) fail("cannot write " + markdown);
  }
  pf_bundle_close(fused_bundle);
  pf_bundle_close(unfused_bundle);
  if (auto_bundle) pf_bundle_close(auto_bundle);
  return 0;
}
