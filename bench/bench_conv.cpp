// padfold against oneDNN, side by side in one process, on the layers of
// bench/layers.json.
//
// For every layer and thread count, four ways of computing the same convolution are timed in
// interleaved blocks (so that noise from a shared machine hits them alike):
//   padfold   the bundle's kernel for the layer (padding folded into the kernel), via pf_run
//   oneDNN    convolution_forward with the layer's (asymmetric) pads given natively; src/dst NHWC,
//             weights in the layout oneDNN picks (format any, reordered once outside timing)
//   pad+conv  an explicit zero-pad copy into a padded NHWC buffer, then oneDNN on it with zero
//             padding (the F.pad + conv way); both steps timed
//   prepadded padfold's "<name>_prepadded" kernel (VALID on the already padded input), for the
//             border tax of the asymmetric SAME layers
// and, for information, oneDNN with src/dst in the blocked layouts it prefers (format any; the
// reorders into and out of them are outside timing).
//
// Timing: per layer and thread count, each method is warmed up (3 calls, then ~20 ms), then the
// methods run round robin in blocks of ~25 ms, every call timed on its own (steady clock), until
// each has run --min-time seconds and 30 calls; the figure is the median call. Before each block
// the harness sleeps --settle seconds so that the previous library's worker threads go idle
// (libgomp's threads spin a few ms after each parallel region, Halide's briefly), then makes one
// untimed call. All layers run at the first thread count before the next (Halide's thread pool
// does not shrink back once it has grown). oneDNN primitives are created after
// omp_set_num_threads (they fix their thread count when created), with a user-managed scratchpad
// allocated once.
//
// Before timing, every output is checked against oneDNN's (NHWC) output: max |diff| / max |out|
// must be below 1e-4, else the program fails. The pads padfold resolved (manifest.json) must be
// layers.json's "resolved" pads.
//
// usage: bench_conv --bundle DIR --layers layers.json [--threads 1,2] [--min-time 0.3]
//                   [--only a,b] [--markdown results.md] [--no-blocked]
//                   [--max-other-load 0.3] [--min-probe 0.85] [--retries 5] [--retry-wait 10]
//                   [--settle 0.01]
// A layer is timed again (up to --retries times, --retry-wait seconds apart) while other processes
// used more than --max-other-load cores during its timing, or while a probe of plain arithmetic
// (just before and after the timing) ran at less than --min-probe of its best speed on one thread
// or, at several threads, got less than --min-probe x as many cores: other tenants of the virtual
// machine's host slow or take cores without showing in /proc/stat. All are reported per row.
#include <omp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench_common.h"
#include "padfold_runtime.h"

namespace {

using json = nlohmann::json;
using dnnl::memory;
using namespace bench;

// The explicit zero-pad copy of an NHWC tensor (what F.pad does), rows spread over OpenMP threads.
void pad_nhwc(const float* in, float* out, int N, int H, int W, int C, int top, int bottom,
              int left, int right) {
  const int PH = H + top + bottom, PW = W + left + right;
  const size_t row = static_cast<size_t>(PW) * C;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < N * PH; ++r) {
    const int n = r / PH, y = r % PH - top;
    float* o = out + static_cast<size_t>(r) * row;
    if (y < 0 || y >= H) {
      std::memset(o, 0, row * sizeof(float));
      continue;
    }
    std::memset(o, 0, static_cast<size_t>(left) * C * sizeof(float));
    std::memcpy(o + static_cast<size_t>(left) * C,
                in + (static_cast<size_t>(n) * H + y) * static_cast<size_t>(W) * C,
                static_cast<size_t>(W) * C * sizeof(float));
    std::memset(o + static_cast<size_t>(left + W) * C, 0,
                static_cast<size_t>(right) * C * sizeof(float));
  }
}

// ---------------------------------------------------------------------------------------------
// Layers

struct LayerSpec {
  std::string name;
  int N, H, W, C, OC, G, KH, KW, SH, SW, DH, DW;
  int pt, pl, pb, pr;  // resolved pads: top, left (before), bottom, right (after)
  int OH, OW;
  double mflop;
  std::string padding;
  bool asymmetric_same() const { return padding == "same_upper" && (pt != pb || pl != pr); }
  bool padded() const { return pt || pl || pb || pr; }
  bool depthwise() const { return G > 1 && G == C; }
  std::string pads() const {
    std::ostringstream s;
    s << "(" << pt << "," << pb << ")";
    if (pt != pl || pb != pr) s << "x(" << pl << "," << pr << ")";
    return s.str();
  }
};

LayerSpec parse_layer(const json& j) {
  LayerSpec L;
  L.name = j.at("name");
  const auto in = j.at("input").get<std::vector<int>>();
  L.N = in[0], L.H = in[1], L.W = in[2], L.C = in[3];
  L.OC = j.at("out_channels");
  L.G = j.at("groups");
  L.KH = j.at("kernel")[0], L.KW = j.at("kernel")[1];
  L.SH = j.at("stride")[0], L.SW = j.at("stride")[1];
  L.DH = j.at("dilation")[0], L.DW = j.at("dilation")[1];
  const json& r = j.at("resolved");
  L.pt = r.at("pads_before")[0], L.pl = r.at("pads_before")[1];
  L.pb = r.at("pads_after")[0], L.pr = r.at("pads_after")[1];
  L.OH = r.at("output")[1], L.OW = r.at("output")[2];
  L.mflop = j.at("mflop");
  L.padding = j.at("padding").is_string() ? j.at("padding").get<std::string>()
                                          : std::to_string(j.at("padding").get<int>());
  return L;
}

// ---------------------------------------------------------------------------------------------
// oneDNN

struct DnnlConv {
  dnnl::convolution_forward prim;
  std::unordered_map<int, memory> args;
  memory src_user, dst_user;  // NHWC user memories (for reorders when the primitive's differ)
  memory src, dst;            // the primitive's
  memory scratch;
  std::string impl;

  // src_buf (NHWC, [N, IH, IW, C]) -> dst_buf (NHWC). blocked: src/dst in the layouts oneDNN
  // picks (format any), else NHWC.
  DnnlConv(const dnnl::engine& eng, dnnl::stream& strm, const LayerSpec& L, int IH, int IW, int pt,
           int pl, int pb, int pr, Buffer& src_buf, Buffer& w_hwio, Buffer& dst_buf, bool blocked) {
    const memory::dims src_dims{L.N, L.C, IH, IW}, dst_dims{L.N, L.OC, L.OH, L.OW};
    const memory::dims strides{L.SH, L.SW}, dil{L.DH - 1, L.DW - 1}, pad_l{pt, pl}, pad_r{pb, pr};
    // The user's weights are HWIO: [KH][KW][I/G][O] with O = g * O/G + o.
    const int64_t O = L.OC, IG = L.C / L.G, KW = L.KW;
    memory::desc w_user_md;
    memory::desc w_any_md;
    if (L.G == 1) {
      w_user_md = memory::desc({O, IG, L.KH, L.KW}, memory::data_type::f32,
                               memory::dims{1, O, KW * IG * O, IG * O});
      w_any_md = memory::desc({O, IG, L.KH, L.KW}, memory::data_type::f32, memory::format_tag::any);
    } else {
      const int64_t OG = O / L.G;
      w_user_md = memory::desc({L.G, OG, IG, L.KH, L.KW}, memory::data_type::f32,
                               memory::dims{OG, 1, O, KW * IG * O, IG * O});
      w_any_md =
          memory::desc({L.G, OG, IG, L.KH, L.KW}, memory::data_type::f32, memory::format_tag::any);
    }
    const auto tag = blocked ? memory::format_tag::any : memory::format_tag::nhwc;
    const memory::desc src_md(src_dims, memory::data_type::f32, tag);
    const memory::desc dst_md(dst_dims, memory::data_type::f32, tag);
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, src_md, w_any_md, dst_md,
                                      strides, dil, pad_l, pad_r);
    // A user-managed scratchpad, allocated once here, so that no allocation falls inside a timed
    // call.
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
    impl = pd.impl_info_str();
    prim = dnnl::convolution_forward(pd);
    scratch = memory(pd.scratchpad_desc(), eng);

    memory w_user(w_user_md, eng, w_hwio.data);
    memory w(pd.weights_desc(), eng);
    dnnl::reorder(w_user, w).execute(strm, w_user, w);
    src_user = memory(memory::desc(src_dims, memory::data_type::f32, memory::format_tag::nhwc), eng,
                      src_buf.data);
    dst_user = memory(memory::desc(dst_dims, memory::data_type::f32, memory::format_tag::nhwc), eng,
                      dst_buf.data);
    src = pd.src_desc() == src_user.get_desc() ? src_user : memory(pd.src_desc(), eng);
    dst = pd.dst_desc() == dst_user.get_desc() ? dst_user : memory(pd.dst_desc(), eng);
    args = {{DNNL_ARG_SRC, src},
            {DNNL_ARG_WEIGHTS, w},
            {DNNL_ARG_DST, dst},
            {DNNL_ARG_SCRATCHPAD, scratch}};
    strm.wait();
  }
  bool reorders() const { return src != src_user || dst != dst_user; }
  void src_in(dnnl::stream& strm) {  // user NHWC -> primitive layout (outside timing)
    if (src != src_user) dnnl::reorder(src_user, src).execute(strm, src_user, src);
    strm.wait();
  }
  void dst_out(dnnl::stream& strm) {
    if (dst != dst_user) dnnl::reorder(dst, dst_user).execute(strm, dst, dst_user);
    strm.wait();
  }
  void run(dnnl::stream& strm) {
    prim.execute(strm, args);
    strm.wait();
  }
};

// ---------------------------------------------------------------------------------------------
// Results

struct Row {
  std::string name, kind, pads;
  double mflop = 0;
  bool asym = false, depthwise = false;
  double pf = NAN, dnnl = NAN, padconv = NAN, pre = NAN, blocked = NAN;  // ms
  std::string dnnl_impl, blocked_impl;
  double other_load = 0;   // cores used by other processes while this row was timed
  double probe_speed = 1;  // probe: one thread's speed against its best in the run
  double capacity = 1;     // probe: cores' worth of arithmetic the threads got
};

std::string fmt(const char* f, double v) {
  if (std::isnan(v)) return "—";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

double gflops(double mflop, double ms) {
  return mflop / ms;
}  // MFLOP / ms = GFLOP/s

std::string kind_of(const LayerSpec& L) {
  if (L.depthwise()) return "depthwise";
  if (L.KH == 1 && L.KW == 1) return "pointwise";
  if (L.C / L.G <= 4) return "stem";
  return "dense";
}

}  // namespace

int main(int argc, char** argv) {
  std::string bundle_dir, layers_path, markdown;
  std::vector<std::string> only_names, skip;
  std::vector<int> threads{1, 2};
  bool no_blocked = false;
  QuietLimits limits;  // --min-time, --settle and the retry settings
  CLI::App app("padfold against oneDNN, side by side, on the layers of layers.json.", "bench_conv");
  app.add_option("--bundle", bundle_dir, "the bundle (padfold compile of the bench spec)")
      ->required();
  app.add_option("--layers", layers_path, "the layer set (layers.json)")->required();
  app.add_option("--threads", threads, "thread counts, best in increasing order: 1,2")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--min-time", limits.min_time, "seconds timed per method, layer and thread count")
      ->capture_default_str();
  app.add_option("--markdown", markdown, "write the results table to this file");
  app.add_option("--only", only_names, "only these layers: a,b")->delimiter(',');
  app.add_option("--skip", skip,
                 "for diagnosis, methods not to time: padfold,onednn,padconv,prepadded,blocked")
      ->delimiter(',');
  app.add_option("--max-other-load", limits.max_other_load,
                 "time a layer again while other processes used more cores than this")
      ->capture_default_str();
  app.add_option("--settle", limits.settle, "seconds slept before each block")
      ->capture_default_str();
  app.add_option("--min-probe", limits.min_probe,
                 "time a layer again while the arithmetic probe ran slower than this fraction")
      ->capture_default_str();
  app.add_option("--retries", limits.retries, "times a disturbed layer is timed again")
      ->capture_default_str();
  app.add_option("--retry-wait", limits.retry_wait, "seconds between retries")
      ->capture_default_str();
  app.add_flag("--no-blocked", no_blocked, "leave out oneDNN in its preferred blocked layouts");
  CLI11_PARSE(app, argc, argv);
  const bool with_blocked = !no_blocked;

  json layers_json, manifest;
  {
    std::ifstream f(layers_path);
    if (!f) fail("cannot read " + layers_path);
    layers_json = json::parse(f);
    std::ifstream m(bundle_dir + "/manifest.json");
    if (!m) fail("cannot read " + bundle_dir + "/manifest.json");
    manifest = json::parse(m);
  }
  std::map<std::string, json> manifest_kernels;
  for (const json& k : manifest.at("kernels")) manifest_kernels[k.at("layer")] = k;

  char err[PF_ERRLEN];
  pf_bundle* bundle = nullptr;
  if (pf_bundle_open(bundle_dir.c_str(), nullptr, &bundle, err, sizeof err) != PF_OK)
    fail(std::string("pf_bundle_open: ") + err);

  for (int i = 0; i < 10; ++i) probe(1);  // the single-thread probe's best, for reference
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);

  std::vector<LayerSpec> specs;
  for (const json& j : layers_json.at("layers")) {
    LayerSpec L = parse_layer(j);
    if (!only_names.empty() &&
        std::find(only_names.begin(), only_names.end(), L.name) == only_names.end())
      continue;
    specs.push_back(L);
  }

  // rows[t][layer]
  std::vector<std::vector<Row>> rows(threads.size());
  // All layers at one thread count, then at the next: Halide's thread pool keeps the workers it
  // has started, so a bundle set back from 2 threads to 1 still runs on 2 (seen with Halide 14).
  // Thread counts are therefore best given in increasing order.
  for (size_t t = 0; t < threads.size(); ++t) {
    for (size_t li = 0; li < specs.size(); ++li) {
      const LayerSpec& L = specs[li];
      std::mt19937 rng(20261130 + static_cast<unsigned>(li));  // the same data at every count
      // The kernel padfold generated must have layers.json's pads.
      const json& mk = manifest_kernels.at(L.name);
      if (mk.at("pads_before") != json{L.pt, L.pl} || mk.at("pads_after") != json{L.pb, L.pr})
        fail(L.name + ": padfold resolved pads " + mk.at("pads_before").dump() + "/" +
             mk.at("pads_after").dump() + ", layers.json says (" + std::to_string(L.pt) + "," +
             std::to_string(L.pl) + ")/(" + std::to_string(L.pb) + "," + std::to_string(L.pr) +
             ")");

      const int PH = L.H + L.pt + L.pb, PW = L.W + L.pl + L.pr;
      Buffer in(static_cast<size_t>(L.N) * L.H * L.W * L.C);
      Buffer padded(static_cast<size_t>(L.N) * PH * PW * L.C);
      Buffer w(static_cast<size_t>(L.KH) * L.KW * (L.C / L.G) * L.OC);
      const size_t out_count = static_cast<size_t>(L.N) * L.OH * L.OW * L.OC;
      Buffer out_pf(out_count), out_dnnl(out_count), out_padconv(out_count), out_pre(out_count),
          out_blocked(out_count);
      fill_random(in, rng);
      fill_random(w, rng);
      pad_nhwc(in.data, padded.data, L.N, L.H, L.W, L.C, L.pt, L.pb, L.pl, L.pr);

      PfKernel pf, pre;
      if (pf_bundle_find(bundle, L.name.c_str(), &pf.desc, err, sizeof err) != PF_OK)
        fail(std::string("pf_bundle_find: ") + err);
      const std::unique_ptr<Buffer> w_pf = prepared_weights(bundle, pf.desc, w);
      pf.bind({{"input", &in}, {"weights", w_pf ? w_pf.get() : &w}, {"output", &out_pf}});
      const bool has_pre = L.asymmetric_same();
      std::unique_ptr<Buffer> w_pre;
      if (has_pre) {
        const std::string pre_name = L.name + "_prepadded";
        if (pf_bundle_find(bundle, pre_name.c_str(), &pre.desc, err, sizeof err) != PF_OK)
          fail(std::string("pf_bundle_find: ") + err);
        w_pre = prepared_weights(bundle, pre.desc, w);
        pre.bind({{"input", &padded}, {"weights", w_pre ? w_pre.get() : &w}, {"output", &out_pre}});
      }
      {
        const int n = threads[t];
        if (pf_bundle_set_num_threads(bundle, n, nullptr, err, sizeof err) != PF_OK)
          fail(std::string("pf_bundle_set_num_threads: ") + err);
        // oneDNN fixes a primitive's thread count when the primitive is created: create them after
        // setting it.
        omp_set_num_threads(n);
        DnnlConv dn(eng, strm, L, L.H, L.W, L.pt, L.pl, L.pb, L.pr, in, w, out_dnnl, false);
        std::unique_ptr<DnnlConv> dn_pad, dn_blocked;
        if (L.padded())
          dn_pad = std::make_unique<DnnlConv>(eng, strm, L, PH, PW, 0, 0, 0, 0, padded, w,
                                              out_padconv, false);
        if (with_blocked)
          dn_blocked = std::make_unique<DnnlConv>(eng, strm, L, L.H, L.W, L.pt, L.pl, L.pb, L.pr,
                                                  in, w, out_blocked, true);

        // Correctness against oneDNN's NHWC output, before timing.
        for (Buffer* b : {&out_pf, &out_dnnl, &out_padconv, &out_pre, &out_blocked})
          std::memset(b->data, 0, b->bytes());
        pf.run();
        dn.run(strm);
        auto check = [&](const char* what, const Buffer& got) {
          const double d = rel_diff(got.data, out_dnnl.data, out_count);
          if (!(d < 1e-4))
            fail(L.name + ": " + what +
                 " differs from oneDNN: max|diff|/max|out| = " + std::to_string(d));
        };
        check("padfold", out_pf);
        if (has_pre) {
          pre.run();
          check("padfold prepadded", out_pre);
        }
        if (dn_pad) {
          pad_nhwc(in.data, padded.data, L.N, L.H, L.W, L.C, L.pt, L.pb, L.pl, L.pr);
          dn_pad->run(strm);
          check("pad+conv", out_padconv);
        }
        if (dn_blocked) {
          dn_blocked->src_in(strm);
          dn_blocked->run(strm);
          dn_blocked->dst_out(strm);
          check("oneDNN (blocked layouts)", out_blocked);
        }

        Method m_pf{"padfold", [&] { pf.run(); }, {}, 0};
        Method m_dn{"oneDNN", [&] { dn.run(strm); }, {}, 0};
        Method m_pc{"pad+conv",
                    [&] {
                      pad_nhwc(in.data, padded.data, L.N, L.H, L.W, L.C, L.pt, L.pb, L.pl, L.pr);
                      dn_pad->run(strm);
                    },
                    {},
                    0};
        Method m_pre{"prepadded", [&] { pre.run(); }, {}, 0};
        Method m_bl{"oneDNN blocked", [&] { dn_blocked->run(strm); }, {}, 0};
        std::vector<Method*> methods;
        auto want = [&](const char* m) {
          return skip.empty() || std::find(skip.begin(), skip.end(), m) == skip.end();
        };
        if (want("padfold")) methods.push_back(&m_pf);
        if (want("onednn")) methods.push_back(&m_dn);
        if (dn_pad && want("padconv")) methods.push_back(&m_pc);
        if (has_pre && want("prepadded")) methods.push_back(&m_pre);
        if (dn_blocked && want("blocked")) methods.push_back(&m_bl);
        const Quietness quiet = time_while_quiet(methods, n, limits, L.name);
        const double load = quiet.load;
        const Probe seen = quiet.seen;

        Row r;
        r.other_load = load;
        r.probe_speed = seen.speed;
        r.capacity = seen.cores;
        r.name = L.name;
        r.kind = kind_of(L);
        r.pads = L.pads();
        r.mflop = L.mflop;
        r.asym = L.asymmetric_same();
        r.depthwise = L.depthwise();
        r.pf = 1e3 * median(m_pf.samples);
        r.dnnl = 1e3 * median(m_dn.samples);
        if (dn_pad) r.padconv = 1e3 * median(m_pc.samples);
        if (has_pre) r.pre = 1e3 * median(m_pre.samples);
        if (dn_blocked) {
          r.blocked = 1e3 * median(m_bl.samples);
          r.blocked_impl = dn_blocked->impl;
        }
        r.dnnl_impl = dn.impl;
        std::fprintf(stderr,
                     "%-20s %dT  padfold %8.4f ms %6.1f GF/s | oneDNN %8.4f ms %6.1f GF/s (%s) | "
                     "ratio %.2f | pad+conv %s | tax %s | blocked %s | probe %.2f/%.2f\n",
                     r.name.c_str(), n, r.pf, gflops(r.mflop, r.pf), r.dnnl,
                     gflops(r.mflop, r.dnnl), r.dnnl_impl.c_str(), r.dnnl / r.pf,
                     fmt("%.4f", r.padconv).c_str(), fmt("%.3f", r.pf / r.pre).c_str(),
                     fmt("%.4f", r.blocked).c_str(), r.probe_speed, r.capacity);
        rows[t].push_back(r);
      }
    }
  }

  // ------------------------------------------------------------------------------------------
  // Report
  std::ostringstream md;
  char host[512];
  pf_host_describe(host, sizeof host);
  {
    std::string model = "unknown CPU";
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);)
      if (line.rfind("model name", 0) == 0) {
        model = line.substr(line.find(':') + 2);
        break;
      }
    const std::time_t now = std::time(nullptr);
    char date[64];
    std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    md << "Run " << date << " on " << model << " (" << std::thread::hardware_concurrency()
       << " CPUs; " << host << ").\n\n";
  }
  md << "padfold target: `" << pf_bundle_target(bundle) << "`; oneDNN " << dnnl_version()->major
     << "." << dnnl_version()->minor << "." << dnnl_version()->patch
     << " (CPU runtime: " << (dnnl_version()->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other")
     << "); min time per method and layer " << limits.min_time << " s.\n\n";
  md << "Speed ratios are time(peer) / time(padfold): above 1 means padfold is faster. "
        "Border tax = time(padfold SAME kernel) / time(padfold `_prepadded` VALID kernel). "
        "Other load: cores used by other processes while the row was timed. Probes, just before "
        "and after each row (the smaller is shown): speed = one thread's plain arithmetic "
        "against its best in this run; cores (2+ threads) = the cores' worth of arithmetic that "
        "many threads got. A row is timed again, up to "
     << limits.retries << " times, while other load exceeds " << limits.max_other_load
     << ", probe speed is below " << limits.min_probe << " or probe cores below "
     << limits.min_probe << " x the thread count.\n\n";

  const size_t t1 = 0;
  for (size_t t = 0; t < threads.size(); ++t) {
    md << "### " << threads[t] << " thread" << (threads[t] > 1 ? "s" : "") << "\n\n";
    md << "| layer | kind | MFLOP | pads (H)x(W) | padfold ms | GFLOP/s | oneDNN ms | GFLOP/s | "
          "padfold/oneDNN | pad+conv ms | padfold/pad+conv | border tax |";
    if (with_blocked) md << " oneDNN blocked ms | padfold/blocked |";
    if (t != t1) md << " padfold " << threads[t] << "T/1T | oneDNN " << threads[t] << "T/1T |";
    md << " other load | probe speed |";
    if (t != t1) md << " probe cores |";
    md << "\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|";
    if (with_blocked) md << "---:|---:|";
    if (t != t1) md << "---:|---:|";
    md << "---:|---:|";
    if (t != t1) md << "---:|";
    md << "\n";
    for (size_t i = 0; i < rows[t].size(); ++i) {
      const Row& r = rows[t][i];
      md << "| " << r.name << " | " << r.kind << " | " << fmt("%.1f", r.mflop) << " | " << r.pads
         << (r.asym ? " asym" : "") << " | " << fmt("%.4f", r.pf) << " | "
         << fmt("%.1f", gflops(r.mflop, r.pf)) << " | " << fmt("%.4f", r.dnnl) << " | "
         << fmt("%.1f", gflops(r.mflop, r.dnnl)) << " | **" << fmt("%.2f", r.dnnl / r.pf) << "** | "
         << fmt("%.4f", r.padconv) << " | " << fmt("%.2f", r.padconv / r.pf) << " | "
         << fmt("%.3f", r.pf / r.pre) << " |";
      if (with_blocked)
        md << " " << fmt("%.4f", r.blocked) << " | " << fmt("%.2f", r.blocked / r.pf) << " |";
      if (t != t1) {
        const Row& r1 = rows[t1][i];
        md << " " << fmt("%.2f", r1.pf / r.pf) << " | " << fmt("%.2f", r1.dnnl / r.dnnl) << " |";
      }
      md << " " << fmt("%.2f", r.other_load) << " | " << fmt("%.2f", r.probe_speed) << " |";
      if (t != t1) md << " " << fmt("%.2f", r.capacity) << " |";
      md << "\n";
    }
    md << "\n";
  }

  md << "oneDNN implementations (NHWC):";
  for (const Row& r : rows[t1]) md << " " << r.name << "=`" << r.dnnl_impl << "`";
  md << "\n";
  if (with_blocked) {
    md << "\noneDNN implementations (blocked):";
    for (const Row& r : rows[t1]) md << " " << r.name << "=`" << r.blocked_impl << "`";
    md << "\n";
  }

  // Summary and targets (single thread unless stated).
  md << "\n### Summary\n\n";
  auto yes = [](bool b) { return b ? "**met**" : "**not met**"; };
  for (size_t t = 0; t < threads.size(); ++t) {
    double log_sum = 0;
    const Row* worst = nullptr;
    for (const Row& r : rows[t]) {
      log_sum += std::log(r.dnnl / r.pf);
      if (!worst || r.dnnl / r.pf < worst->dnnl / worst->pf) worst = &r;
    }
    const double geo = std::exp(log_sum / static_cast<double>(rows[t].size()));
    md << "- " << threads[t] << " thread(s): geometric mean padfold/oneDNN = **" << fmt("%.3f", geo)
       << "x**; worst layer " << worst->name << " " << fmt("%.2f", worst->dnnl / worst->pf)
       << "x\n";
  }

  const std::vector<Row>& R = rows[t1];
  double log_sum = 0, worst_ratio = 1e9, worst_dw = 1e9, worst_padconv = 1e9, worst_tax = 0;
  std::string dw_list, pc_list, tax_list;
  for (const Row& r : R) {
    const double ratio = r.dnnl / r.pf;
    log_sum += std::log(ratio);
    worst_ratio = std::min(worst_ratio, ratio);
    if (r.depthwise) {
      worst_dw = std::min(worst_dw, ratio);
      dw_list += " " + r.name + " " + fmt("%.2f", ratio) + "x;";
    }
    if (r.asym) {
      worst_padconv = std::min(worst_padconv, r.padconv / r.pf);
      pc_list += " " + r.name + " " + fmt("%.2f", r.padconv / r.pf) + "x;";
      worst_tax = std::max(worst_tax, r.pf / r.pre);
      tax_list += " " + r.name + " " + fmt("%.3f", r.pf / r.pre) + ";";
    }
  }
  const double geo = std::exp(log_sum / static_cast<double>(R.size()));
  md << "\nTargets (issue), single thread:\n\n";
  md << "- geometric mean >= 1.0x oneDNN: " << fmt("%.3f", geo) << "x, " << yes(geo >= 1.0) << "\n";
  md << "- no layer below 0.8x: worst " << fmt("%.2f", worst_ratio) << "x, "
     << yes(worst_ratio >= 0.8) << "\n";
  if (!dw_list.empty())
    md << "- depthwise >= 1.2x:" << dw_list << " " << yes(worst_dw >= 1.2) << "\n";
  if (!pc_list.empty())
    md << "- faster than pad-then-convolve on every asymmetric layer:" << pc_list << " "
       << yes(worst_padconv > 1.0) << "\n";
  if (!tax_list.empty())
    md << "- border tax <= 1.05:" << tax_list << " " << yes(worst_tax <= 1.05) << "\n";
  for (size_t t = 0; t < threads.size(); ++t) {
    if (t == t1) continue;
    std::string list;
    double worst_scale = 1e9;
    for (size_t i = 0; i < rows[t].size(); ++i) {
      if (rows[t][i].mflop < 100) continue;  // "large": the 4 ResNet layers (>= 100 MFLOP)
      const double s = rows[t1][i].pf / rows[t][i].pf;
      worst_scale = std::min(worst_scale, s);
      list += " " + rows[t][i].name + " " + fmt("%.2f", s) + "x;";
    }
    if (!list.empty())
      md << "- " << threads[t]
         << " threads >= 1.8x one thread on the large layers (>= 100 MFLOP):" << list << " "
         << yes(worst_scale >= 1.8) << "\n";
  }

  const std::string text = md.str();
  std::fputs(text.c_str(), stdout);
  if (!markdown.empty()) {
    std::ofstream f(markdown);
    f << "<!-- Generated by bench/bench_conv (bench/run.sh); do not edit. -->\n" << text;
    if (!f) fail("cannot write " + markdown);
  }
  pf_bundle_close(bundle);
  return 0;
}
