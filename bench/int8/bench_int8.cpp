// padfold's int8 conv kernels against oneDNN's int8 convolution and XNNPACK's per-channel int8
// (qc8) convolution on the same layers, timed side by side in interleaved blocks
// (generator/measure/timing.h: medians, warm-up, retries while the machine is busy).
//
// The layers come from an int8 spec (bench/int8/run.py) and its bundle (padfold compile): each
// conv2d layer, NHWC, weights HWIO, per-channel weight scales, zero points on the input and the
// output, bias, ReLU6. oneDNN 2.6 computes the same layer as an s8 x s8 convolution with the
// input's zero point (a runtime value), per-channel output scales, an s32 bias, clip(0, 6) and the
// output's zero point, its pads given natively; src and dst NHWC, weights in the layout it picks
// (reordered once, outside timing). XNNPACK (Debian's 2022 snapshot, the operator TFLite's
// XNNPACK delegate runs for per-channel int8 convs) takes the four pads natively, the weights
// repacked to its [groups][out][kh][kw][in] once, and ReLU6 as its output range; its threads are
// a pthreadpool of the thread count. The arithmetic differs in its rounding (float scales against
// TFLite's fixed point): this times, it does not compare values.
//
// usage: bench_int8 --bundle DIR --spec int8.json [--threads 1,2] [--min-time 0.3] [--json OUT]
#include <omp.h>
#include <xnnpack.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>

#include "frontend/spec.h"
#include "measure/timing.h"
#include "padfold_runtime.h"

namespace {

using json = nlohmann::json;
using dnnl::memory;
using padfold::Layer;

[[noreturn]] void fail(const std::string& msg) {
  std::cerr << "bench_int8: " << msg << "\n";
  std::exit(1);
}

// Random bytes (int8/uint8 activations and weights) or small int32 values (bias), 64-byte aligned.
struct Bytes {
  void* data = nullptr;
  size_t size = 0;
  Bytes(size_t n, std::mt19937& rng, bool int32) : size(n) {
    data = std::aligned_alloc(64, ((n + 63) / 64) * 64);
    if (!data) fail("out of memory");
    auto* b = static_cast<uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(rng());
    if (int32)
      for (size_t i = 0; i < n / 4; ++i) static_cast<int32_t*>(data)[i] %= 4096;
  }
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  ~Bytes() { std::free(data); }
};

struct Buffers {
  Bytes input, weights, bias, out_pf, out_dnnl, out_xnn;
};

size_t elems(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

struct PadfoldRun {
  const pf_kernel_desc* desc = nullptr;
  std::vector<pf_tensor> tensors;
  PadfoldRun(pf_bundle* bundle, const Layer& L, Buffers& b) {
    char err[PF_ERRLEN];
    if (pf_bundle_find(bundle, L.name.c_str(), &desc, err, sizeof err) != PF_OK)
      fail(std::string("pf_bundle_find: ") + err);
    for (int i = 0; i < desc->num_buffers; ++i) {
      const pf_buffer_desc& d = desc->buffers[i];
      const std::string name = d.name;
      Bytes* mem = name == "input"     ? &b.input
                   : name == "weights" ? &b.weights
                   : name == "bias"    ? &b.bias
                   : name == "output"  ? &b.out_pf
                                       : nullptr;
      if (!mem || pf_buffer_bytes(&d) != mem->size)
        fail(L.name + ": buffer " + name + " is not the benchmark's");
      tensors.push_back(pf_tensor_of(&d, mem->data, mem->size));
    }
  }
  void run() {
    char err[PF_ERRLEN];
    if (pf_run(desc, tensors.data(), static_cast<int>(tensors.size()), err, sizeof err) != PF_OK)
      fail(std::string("pf_run: ") + err);
  }
};

struct DnnlRun {
  dnnl::convolution_forward prim;
  std::unordered_map<int, memory> args;
  std::string impl;
  DnnlRun(const dnnl::engine& eng, dnnl::stream& strm, const Layer& L, Buffers& b) {
    const auto s8 = memory::data_type::s8, s32 = memory::data_type::s32;
    const int64_t N = 1, C = L.in_channels, O = L.out_channels, G = L.groups, IG = C / G;
    const int64_t H = L.in_spatial[0], W = L.in_spatial[1], KH = L.kernel[0], KW = L.kernel[1];
    const int64_t OH = L.out_spatial[0], OW = L.out_spatial[1];
    const memory::dims src_dims{N, C, H, W}, dst_dims{N, O, OH, OW};
    const memory::dims strides{L.stride[0], L.stride[1]}, dil{L.dilation[0] - 1, L.dilation[1] - 1},
        pad_l{L.pads.axes[0].before, L.pads.axes[1].before},
        pad_r{L.pads.axes[0].after, L.pads.axes[1].after};
    memory::desc w_user, w_any;
    if (G == 1) {  // HWIO: [KH][KW][I][O]
      w_user = memory::desc({O, IG, KH, KW}, s8, memory::dims{1, O, KW * IG * O, IG * O});
      w_any = memory::desc({O, IG, KH, KW}, s8, memory::format_tag::any);
    } else {
      const int64_t OG = O / G;
      w_user = memory::desc({G, OG, IG, KH, KW}, s8, memory::dims{OG, 1, O, KW * IG * O, IG * O});
      w_any = memory::desc({G, OG, IG, KH, KW}, s8, memory::format_tag::any);
    }
    const memory::desc src_md(src_dims, s8, memory::format_tag::nhwc);
    const memory::desc dst_md(dst_dims, s8, memory::format_tag::nhwc);
    const memory::desc bias_md({O}, s32, memory::format_tag::x);
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, src_md, w_any, bias_md,
                                      dst_md, strides, dil, pad_l, pad_r);
    dnnl::primitive_attr attr;
    std::vector<float> scales(static_cast<size_t>(O));
    const padfold::LayerQuant& q = *L.quant;
    for (int64_t o = 0; o < O; ++o)
      scales[static_cast<size_t>(o)] =
          q.inputs[0].scale * q.weight_scales[q.weight_scales.size() == 1 ? 0 : o] / q.output.scale;
    attr.set_output_scales(2, scales);
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    dnnl::post_ops ops;  // ReLU6 in output units: clip to the range of [0, 6] quantized
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f, 6.f / q.output.scale);
    attr.set_post_ops(ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
    impl = pd.impl_info_str();
    prim = dnnl::convolution_forward(pd);
    memory w_src(w_user, eng, b.weights.data), w(pd.weights_desc(), eng);
    dnnl::reorder(w_src, w).execute(strm, w_src, w);
    auto zero_point = [&](int32_t v) {
      memory m({{1}, s32, memory::format_tag::x}, eng);
      *static_cast<int32_t*>(m.get_data_handle()) = v;
      return m;
    };
    args = {{DNNL_ARG_SRC, memory(src_md, eng, b.input.data)},
            {DNNL_ARG_WEIGHTS, w},
            {DNNL_ARG_BIAS, memory(bias_md, eng, b.bias.data)},
            {DNNL_ARG_DST, memory(dst_md, eng, b.out_dnnl.data)},
            {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), eng)},
            {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zero_point(q.inputs[0].zero_point)},
            {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, zero_point(q.output.zero_point)}};
    strm.wait();
  }
  void run(dnnl::stream& strm) {
    prim.execute(strm, args);
    strm.wait();
  }
};

struct XnnpackRun {
  xnn_operator_t op = nullptr;
  pthreadpool_t pool = nullptr;
  XnnpackRun(const Layer& L, Buffers& b, int threads) {
    const size_t C = L.in_channels, O = L.out_channels, G = L.groups, IG = C / G, OG = O / G;
    const size_t KH = L.kernel[0], KW = L.kernel[1];
    // HWIO [kh][kw][in][out] -> [group][out in group][kh][kw][in in group]
    const auto* w = static_cast<const int8_t*>(b.weights.data);
    std::vector<int8_t> kernel(O * KH * KW * IG);
    for (size_t o = 0; o < O; ++o)
      for (size_t kh = 0; kh < KH; ++kh)
        for (size_t kw = 0; kw < KW; ++kw)
          for (size_t i = 0; i < IG; ++i)
            kernel[((o * KH + kh) * KW + kw) * IG + i] = w[((kh * KW + kw) * IG + i) * O + o];
    const padfold::LayerQuant& q = *L.quant;
    std::vector<float> scales(O);
    for (size_t o = 0; o < O; ++o) scales[o] = q.weight_scales[q.weight_scales.size() == 1 ? 0 : o];
    const int32_t zy = q.output.zero_point;
    const int32_t hi =
        std::min<int32_t>(127, zy + static_cast<int32_t>(std::lround(6.f / q.output.scale)));
    pool = pthreadpool_create(static_cast<size_t>(threads));
    const auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
    const xnn_status created = xnn_create_convolution2d_nhwc_qc8(
        u32(L.pads.axes[0].before), u32(L.pads.axes[1].after), u32(L.pads.axes[0].after),
        u32(L.pads.axes[1].before), u32(KH), u32(KW), u32(L.stride[0]), u32(L.stride[1]),
        u32(L.dilation[0]), u32(L.dilation[1]), u32(G), IG, OG, C, O,
        static_cast<int8_t>(q.inputs[0].zero_point), q.inputs[0].scale, scales.data(),
        kernel.data(), static_cast<const int32_t*>(b.bias.data), static_cast<int8_t>(zy),
        q.output.scale, static_cast<int8_t>(std::max<int32_t>(-128, zy)), static_cast<int8_t>(hi),
        0, &op);
    if (created != xnn_status_success)
      fail(L.name + ": xnn_create_convolution2d_nhwc_qc8 failed (" + std::to_string(created) + ")");
    if (xnn_setup_convolution2d_nhwc_qc8(
            op, 1, static_cast<size_t>(L.in_spatial[0]), static_cast<size_t>(L.in_spatial[1]),
            static_cast<const int8_t*>(b.input.data), static_cast<int8_t*>(b.out_xnn.data),
            pool) != xnn_status_success)
      fail(L.name + ": xnn_setup_convolution2d_nhwc_qc8 failed");
  }
  XnnpackRun(const XnnpackRun&) = delete;
  XnnpackRun& operator=(const XnnpackRun&) = delete;
  ~XnnpackRun() {
    xnn_delete_operator(op);
    pthreadpool_destroy(pool);
  }
  void run() {
    if (xnn_run_operator(op, pool) != xnn_status_success) fail("xnn_run_operator failed");
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"padfold int8 conv kernels against oneDNN and XNNPACK int8, side by side"};
  std::string bundle_dir, spec_path, json_out;
  std::vector<int> threads{1, 2};
  padfold::measure::QuietLimits limits;
  app.add_option("--bundle", bundle_dir, "the int8 bundle (padfold compile)")->required();
  app.add_option("--spec", spec_path, "the int8 spec it was compiled from")->required();
  app.add_option("--threads", threads, "thread counts, increasing")->delimiter(',');
  app.add_option("--min-time", limits.min_time, "seconds timed per method");
  app.add_option("--json", json_out, "write the results here");
  CLI11_PARSE(app, argc, argv);

  const padfold::Model model = padfold::load_spec(spec_path);
  char err[PF_ERRLEN];
  pf_bundle* bundle = nullptr;
  if (pf_bundle_open(bundle_dir.c_str(), nullptr, &bundle, err, sizeof err) != PF_OK)
    fail(std::string("pf_bundle_open: ") + err);
  if (xnn_initialize(nullptr) != xnn_status_success) fail("xnn_initialize failed");
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  json out = {{"runs", json::array()}};
  for (int n : threads) {
    if (pf_bundle_set_num_threads(bundle, n, nullptr, err, sizeof err) != PF_OK)
      fail(std::string("pf_bundle_set_num_threads: ") + err);
    omp_set_num_threads(n);
    json run = {{"threads", n}, {"layers", json::array()}};
    for (const Layer& L : model.layers) {
      if (L.op != padfold::Op::Conv || L.in_spatial.size() != 2 || !L.layout.channels_last ||
          L.dtype != padfold::DType::I8 || !L.bias)
        fail(L.name + ": the benchmark times int8 NHWC conv2d layers with a bias");
      std::mt19937 rng(20261204);
      Buffers b{Bytes(elems(L.input_shape()), rng, false),
                Bytes(elems(L.weight_shape()), rng, false),
                Bytes(4 * static_cast<size_t>(L.out_channels), rng, true),
                Bytes(elems(L.output_shape_full()), rng, false),
                Bytes(elems(L.output_shape_full()), rng, false),
                Bytes(elems(L.output_shape_full()), rng, false)};
      PadfoldRun pf(bundle, L, b);
      DnnlRun dn(eng, strm, L, b);
      XnnpackRun xn(L, b, n);
      // Two pairs, each timed interleaved: padfold against oneDNN, then against XNNPACK. Three
      // thread pools interleaved on two cores starve each other (OpenMP's and pthreadpool's
      // workers spin a while after each call), which no user running one of them sees.
      padfold::measure::Method m_pf{"padfold", [&] { pf.run(); }, {}, 0};
      padfold::measure::Method m_dn{"oneDNN", [&] { dn.run(strm); }, {}, 0};
      padfold::measure::Method m_pf2{"padfold", [&] { pf.run(); }, {}, 0};
      padfold::measure::Method m_xn{"XNNPACK", [&] { xn.run(); }, {}, 0};
      std::vector<padfold::measure::Method*> with_dnnl{&m_pf, &m_dn}, with_xnn{&m_pf2, &m_xn};
      const auto q1 = padfold::measure::time_while_quiet(with_dnnl, n, limits, L.name);
      const auto q2 = padfold::measure::time_while_quiet(with_xnn, n, limits, L.name);
      const auto ms = [](const padfold::measure::Method& m) {
        return 1e3 * padfold::measure::median(m.samples);
      };
      std::cout << n << "T " << L.name << ": padfold " << ms(m_pf) << " ms, oneDNN " << ms(m_dn)
                << " ms (" << dn.impl << "); padfold " << ms(m_pf2) << " ms, XNNPACK " << ms(m_xn)
                << " ms" << (q1.met && q2.met ? "" : " (busy)") << std::endl;
      run["layers"].push_back({{"layer", L.name},
                               {"padfold_ms", ms(m_pf)},
                               {"onednn_ms", ms(m_dn)},
                               {"onednn_impl", dn.impl},
                               {"onednn_quiet", q1.met},
                               {"padfold_vs_xnnpack_ms", ms(m_pf2)},
                               {"xnnpack_ms", ms(m_xn)},
                               {"xnnpack_quiet", q2.met}});
    }
    out["runs"].push_back(run);
  }
  pf_bundle_close(bundle);
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(1) << "\n";
  return 0;
}
