// The tuner's outcome table and report JSON.
#include "tune/report.h"

#include <fmt/format.h>

#include "tune/build.h"

namespace padfold {

using json = nlohmann::json;

std::string outcome_table(const std::vector<LayerOutcome>& outcomes) {
  std::string head = fmt::format("{:<24} {:>11} {:>9}", "layer", "default ms", "tuned");
  for (const std::string& a : autoscheduler_names()) head += fmt::format(" {:>14}", "vs " + a);
  std::string out = head + "   measured/failed/reused  tuned knobs\n";
  for (const LayerOutcome& o : outcomes) {
    if (o.status != "ok") {
      out += fmt::format("{:<24} {}\n", o.layer, o.status);
      continue;
    }
    out +=
        fmt::format("{:<24} {:>11.4f} {:>8.3f}x", o.layer, o.default_s * 1e3, o.tuned_vs_default);
    for (const std::string& a : autoscheduler_names()) {
      double v = -1;
      for (const auto& [name, ratio] : o.baselines)
        if (name == a) v = ratio;
      out +=
          v > 0 ? fmt::format(" {:>13.3f}x", v) : fmt::format(" {:>14}", v == 0 ? "failed" : "-");
    }
    out += fmt::format("   {}/{}/{}  {}\n", o.measured, o.failed, o.reused, o.tuned_knobs);
  }
  double search = 0, baselines = 0;
  for (const LayerOutcome& o : outcomes) {
    search += o.search_s;
    baselines += o.baselines_s;
  }
  return out + fmt::format(
                   "tuned: speedup over the default knobs; vs X: tuned speedup over autoscheduler "
                   "X (all measured interleaved, 1 thread)\nwall time: search {:.0f}s, "
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
