#include "tune/transfer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "tune/signature.h"

namespace padfold {

using json = nlohmann::json;

namespace {

constexpr double kFar = std::numeric_limits<double>::infinity();

// The shape's product over the axes `layout` names other than N and C (its spatial size), and
// its channel count.
struct ShapeView {
  double channels = 1, pixels = 1;
};

ShapeView view(const json& shape, const std::string& layout) {
  if (!shape.is_array() || shape.size() != layout.size())
    throw std::invalid_argument("shape and layout differ in rank");
  ShapeView v;
  for (size_t i = 0; i < layout.size(); ++i) {
    const double d = shape[i].get<double>();
    if (!(d > 0)) throw std::invalid_argument("an empty shape");
    if (layout[i] == 'C')
      v.channels = d;
    else if (layout[i] != 'N')
      v.pixels *= d;
  }
  return v;
}

double product(const json& values) {
  double p = 1;
  for (const json& v : values) p *= v.get<double>();
  return p;
}

double log_ratio(double a, double b) {
  return std::abs(std::log2(a / b));
}

double distance(const json& a, const json& b) {
  for (const char* same : {"op", "dtype", "layout", "weight_layout"})
    if (a.value(same, json()) != b.value(same, json())) return kFar;
  const std::string layout = a.at("layout").get<std::string>();
  const ShapeView ai = view(a.at("inputs").at(0), layout), bi = view(b.at("inputs").at(0), layout);
  const ShapeView ao = view(a.at("output"), layout), bo = view(b.at("output"), layout);
  const auto depthwise = [](const json& s, const ShapeView& in) {
    const double groups = s.at("groups").get<double>();
    return groups > 1 && groups == in.channels;
  };
  if (depthwise(a, ai) != depthwise(b, bi)) return kFar;
  return log_ratio(ai.channels, bi.channels) + log_ratio(ao.channels, bo.channels) +
         log_ratio(ao.pixels, bo.pixels) +
         log_ratio(product(a.at("kernel")), product(b.at("kernel"))) +
         (a.at("stride") != b.at("stride")) + (a.at("dilation") != b.at("dilation"));
}

}  // namespace

double signature_distance(const std::string& a, const std::string& b) {
  try {
    return distance(json::parse(a), json::parse(b));
  } catch (const std::exception&) {
    return kFar;  // a damaged or foreign record transfers nothing
  }
}

std::vector<TransferCandidate> transfer_candidates(const TuneDb& db, const TuneScope& scope,
                                                   size_t count) {
  std::vector<TransferCandidate> out;
  // Other signatures' records of this knob scope, whatever implementations could compute them
  // (a signature's records under two versions of one are two candidates): their knobs are
  // starting points, measured again here.
  for (const auto& [sig, toolchain] :
       db.signatures(scope.target, toolchain_space(scope.toolchain), scope.machine)) {
    if (sig == scope.signature) continue;
    const double d = signature_distance(scope.signature, sig);
    if (!std::isfinite(d)) continue;
    const auto best = db.best(sig, scope.target, toolchain, scope.machine, false);
    if (!best || !(best->vs_default > 1)) continue;
    try {
      out.push_back({sig, best->layer, d, best->vs_default, knobs_from_text(best->knobs)});
    } catch (const std::exception&) {
      // knobs that no longer parse (another schedule space) carry nothing over
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) {
    return x.distance < y.distance || (x.distance == y.distance && x.vs_default > y.vs_default);
  });
  if (out.size() > count) out.resize(count);
  return out;
}

}  // namespace padfold
