#include "tune/signature.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "compile/target.h"
#include "schedules/schedule.h"

namespace padfold {

using json = nlohmann::json;

std::string layer_signature(const Layer& L) {
  json pads = json::array();
  for (const AxisPads& p : L.pads.axes) pads.push_back({p.before, p.after, p.output});
  json inputs = json::array();
  for (size_t i = 0; i < L.inputs.size(); ++i) inputs.push_back(L.input_shape(i));
  json j = {{"op", to_string(L.op)},
            {"dtype", to_string(L.dtype)},
            {"layout", L.layout.name()},
            {"inputs", inputs},
            {"output", L.output_shape_full()},
            {"kernel", L.kernel},
            {"stride", L.stride},
            {"dilation", L.dilation},
            {"groups", L.groups},
            {"pads", pads},
            {"border", to_string(L.border)},
            {"bias", L.bias},
            {"activation", to_string(L.activation)}};
  if (L.has_weights()) j["weight_layout"] = L.weight_layout.order;
  if (L.border == Border::Constant) j["border_value"] = L.border_value;
  const int params = activation_def(L.activation).params;
  if (params >= 1) j["activation_alpha"] = L.activation_alpha;
  if (params >= 2) j["activation_beta"] = L.activation_beta;
  if (L.op == Op::AvgPool) j["count_include_pad"] = L.count_include_pad;
  return j.dump();  // nlohmann's object keys are sorted: the text is canonical
}

std::string target_key(const Halide::Target& t) {
  std::vector<std::string> features = cpu_feature_names(t);
  std::sort(features.begin(), features.end());
  std::string key = Halide::Target(t.os, t.arch, t.bits).to_string();
  for (const std::string& f : features) key += "-" + f;
  const std::string tune = tuning_name(t);
  if (!tune.empty()) key += "@" + tune;
  return key;
}

std::string toolchain_key(const std::string& scope,
                          const std::vector<std::pair<std::string, int>>& implementations) {
  std::string key =
      fmt::format("halide-{}.{}.{}/{}-space-{}", HALIDE_VERSION_MAJOR, HALIDE_VERSION_MINOR,
                  HALIDE_VERSION_PATCH, scope, schedule_space_version(scope));
  for (size_t i = 0; i < implementations.size(); ++i)
    key += fmt::format("{}{}-{}", i == 0 ? "/" : "+", implementations[i].first,
                       implementations[i].second);
  return key;
}

std::string toolchain_space(const std::string& toolchain) {
  const size_t scope = toolchain.find('/');
  const size_t end = scope == std::string::npos ? scope : toolchain.find('/', scope + 1);
  return end == std::string::npos ? toolchain + "/" : toolchain.substr(0, end + 1);
}

std::string toolchain_key(const Layer& layer, const Halide::Target& target) {
  std::vector<std::pair<std::string, int>> implementations;
  for (const Implementation* i : applicable_implementations(layer, target))
    implementations.emplace_back(i->name, i->version);
  return toolchain_key(knob_scope(target), implementations);
}

namespace {

std::string first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? "" : line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "";
}

}  // namespace

std::string machine_id() {
  if (const char* id = std::getenv("PADFOLD_MACHINE_ID"); id && *id) return id;
  std::string id = first_line("/etc/machine-id");
  if (id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    id = host;
  }
  const std::string cpu = cpu_model();
  return cpu.empty() ? id : id + " (" + cpu + ")";
}

std::string knobs_text(const ScheduleParams& resolved) {
  json j = to_json(resolved);
  j.erase("name");
  j.erase("implementation");  // the knobs choose it
  for (const Knob& k : knobs())
    if (k.get(resolved) == k.default_value) j.erase(k.name);
  return j.dump();
}

ScheduleParams knobs_from_text(const std::string& text) {
  ScheduleParams p;
  update_from_json(p, json::parse(text));
  return p;
}

uint64_t stable_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string candidate_key(const ScheduleParams& resolved) {
  return fmt::format("{:016x}", stable_hash(knobs_text(resolved)));
}

}  // namespace padfold
