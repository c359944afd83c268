// The tuner's outcome table and report JSON.
#include "tune/report.h"

#include <fmt/format.h>

#include "tune/build.h"

namespace padfold {

using json = nlohmann::json;

std::string outcome_table(const std::vector<LayerOutcome>& outcomes) {
  std::string head = fmt::format("{:<24} {:>6} {:>6} {:>11} {:>9}", "layer", "layers", "share",
                                 "default ms", "tuned");
  for (const std::string& a : autoscheduler_names()) head += fmt::format(" {:>14}", "vs " + a);
  std::string out = head + "   measured/failed/reused  tuned knobs\n";
  for (const LayerOutcome& o : outcomes) {
    if (o.status != "ok") {
      out += fmt::format("{:<24} {}\n", o.layer, o.status);
      continue;
    }
    out += fmt::format("{:<24} {:>6} {:>5.1f}% {:>11.4f} {:>8.3f}x", o.layer, o.layers,
                       o.share * 100, o.default_s * 1e3, o.tuned_vs_default);
    for (const std::string& a : autoscheduler_names()) {
      double v = -1;
      for (const auto& [name, ratio] : o.baselines)
        if (name == a) v = ratio;
      out +=
          v > 0 ? fmt::format(" {:>13.3f}x", v) : fmt::format(" {:>14}", v == 0 ? "failed" : "-");
    }
    out += fmt::format("   {}/{}/{}  {}{}\n", o.measured, o.failed, o.reused, o.tuned_knobs,
                       o.transferred_from.empty() ? "" : " (from " + o.transferred_from + ")");
  }
  double search = 0, baselines = 0, before = 0, after = 0;
  size_t layers = 0;
  for (const LayerOutcome& o : outcomes) {
    search += o.search_s;
    baselines += o.baselines_s;
    if (o.status != "ok" || !(o.tuned_vs_default > 0)) continue;
    layers += o.layers;
    before += o.default_s * static_cast<double>(o.layers);
    after += o.default_s * static_cast<double>(o.layers) / o.tuned_vs_default;
  }
  if (layers > 0)
    out += fmt::format(
        "the {} layer(s) tuned, 1 thread, summed: default {:.3f} ms, tuned {:.3f} ms ({:.3f}x)\n",
        layers, before * 1e3, after * 1e3, before / after);
  return out +
         fmt::format(
             "layers: sharing the signature; share: of the tuned layers' time with default "
             "knobs; tuned: speedup over the default knobs; vs X: tuned speedup over "
             "autoscheduler X (all measured interleaved, 1 thread)\nwall time: search {:.0f}s, "
             "baselines {:.0f}s\n",
             search, baselines);
}

json to_json(const std::vector<LayerOutcome>& outcomes) {
  json out = json::array();
  for (const LayerOutcome& o : outcomes) {
    json baselines = json::object();
    for (const auto& [name, ratio] : o.baselines) baselines[name] = ratio;
    out.push_back({{"layer", o.layer},
                   {"signature", o.signature},
                   {"status", o.status},
                   {"layers", o.layers},
                   {"share", o.share},
                   {"allotted_s", o.allotted_s},
                   {"transferred", o.transferred},
                   {"transferred_from", o.transferred_from},
                   {"measured", o.measured},
                   {"failed", o.failed},
                   {"reused", o.reused},
                   {"default_s", o.default_s},
                   {"tuned_vs_default", o.tuned_vs_default},
                   {"tuned_knobs", o.tuned_knobs},
                   {"tuned_vs_autoschedulers", baselines},
                   {"search_s", o.search_s},
                   {"baselines_s", o.baselines_s}});
  }
  return out;
}

}  // namespace padfold
