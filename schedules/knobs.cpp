#include "schedules/knobs.h"

#include <algorithm>
#include <type_traits>

namespace padfold {

namespace {

constexpr KnobScale kScale_linear = KnobScale::Linear;
constexpr KnobScale kScale_pow2 = KnobScale::Pow2;

template <typename T>
constexpr KnobType knob_type() {
  static_assert(std::is_same_v<T, int> || std::is_same_v<T, bool>, "knobs are int or bool");
  return std::is_same_v<T, bool> ? KnobType::Bool : KnobType::Int;
}

std::string describe(const nlohmann::json& v) {
  if (v.is_string()) return "the string " + v.dump();
  if (v.is_boolean()) return v.dump();
  if (v.is_number()) return v.dump();
  if (v.is_null()) return "null";
  return v.is_array() ? "an array" : "an object";
}

// The knob's value from JSON; throws KnobError naming the knob and what it expects.
int64_t parse_value(const Knob& k, const nlohmann::json& v) {
  const std::string what = "schedule knob '" + std::string(k.name) + "': ";
  if (k.type == KnobType::Bool) {
    if (!v.is_boolean()) throw KnobError(what + "expected true or false, got " + describe(v));
    return v.get<bool>() ? 1 : 0;
  }
  if (!v.is_number_integer())
    throw KnobError(what + "expected an integer in " + k.range() + ", got " + describe(v));
  const bool negative = v.is_number_unsigned() ? false : v.get<int64_t>() < 0;
  const int64_t value = negative ? v.get<int64_t>()
                                 : static_cast<int64_t>(std::min<uint64_t>(
                                       v.get<uint64_t>(), static_cast<uint64_t>(INT64_MAX)));
  if (value < k.min || value > k.max)
    throw KnobError(what + "expected an integer in " + k.range() + ", got " + v.dump());
  return value;
}

}  // namespace

int schedule_space_version(const std::string& scope) {
#define PADFOLD_SCOPE_VERSION(name, version) \
  if (scope == #name) return version;
  PADFOLD_KNOB_SCOPES(PADFOLD_SCOPE_VERSION)
#undef PADFOLD_SCOPE_VERSION
  throw std::invalid_argument("no knob scope '" + scope + "'");
}

bool ScheduleParams::operator==(const ScheduleParams& o) const {
  if (name != o.name || implementation != o.implementation) return false;
  return std::all_of(knobs().begin(), knobs().end(),
                     [&](const Knob& k) { return k.get(*this) == k.get(o); });
}

std::string Knob::range() const {
  if (type == KnobType::Bool) return "true or false";
  return "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

std::vector<int64_t> Knob::search_values() const {
  std::vector<int64_t> values;
  if (type == KnobType::Bool) return {0, 1};
  if (scale == KnobScale::Linear && max - min <= 16) {
    for (int64_t v = min; v <= max; ++v) values.push_back(v);
    return values;
  }
  if (min == 0) values.push_back(0);
  for (int64_t v = 1; v <= max; v *= 2)
    if (v >= min) values.push_back(v);
  return values;
}

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> table = {
#define PADFOLD_KNOB_ROW(type, id, def, lo, hi, scale, scope, doc)         \
  Knob{#id,                                                                \
       knob_type<type>(),                                                  \
       static_cast<int64_t>(def),                                          \
       knob_type<type>() == KnobType::Bool ? 0 : (lo),                     \
       knob_type<type>() == KnobType::Bool ? 1 : (hi),                     \
       kScale_##scale,                                                     \
       #scope,                                                             \
       doc,                                                                \
       [](const ScheduleParams& p) { return static_cast<int64_t>(p.id); }, \
       [](ScheduleParams& p, int64_t v) { p.id = static_cast<type>(v); }},
      PADFOLD_SCHEDULE_KNOBS(PADFOLD_KNOB_ROW)
#undef PADFOLD_KNOB_ROW
  };
  return table;
}

const Knob* find_knob(const std::string& name) {
  for (const Knob& k : knobs())
    if (name == k.name) return &k;
  return nullptr;
}

nlohmann::json to_json(const ScheduleParams& p) {
  nlohmann::json j = {{"name", p.name}};
  if (!p.implementation.empty()) j["implementation"] = p.implementation;
  for (const Knob& k : knobs()) {
    if (k.type == KnobType::Bool)
      j[k.name] = k.get(p) != 0;
    else
      j[k.name] = k.get(p);
  }
  return j;
}

void update_from_json(ScheduleParams& params, const nlohmann::json& j) {
  if (!j.is_object())
    throw KnobError("schedule knobs: expected a JSON object of knob names, got " + describe(j));
  ScheduleParams p = params;
  for (const auto& [key, value] : j.items()) {
    if (key == "name" || key == "implementation") {
      if (!value.is_string()) throw KnobError("schedule '" + key + "': expected a string");
      (key == "name" ? p.name : p.implementation) = value.get<std::string>();
      continue;
    }
    const Knob* k = find_knob(key);
    if (!k) {
      std::string names;
      for (const Knob& kn : knobs()) names += std::string(names.empty() ? "" : ", ") + kn.name;
      throw KnobError("unknown schedule knob '" + key + "'; the knobs are " + names);
    }
    k->set(p, parse_value(*k, value));
  }
  params = p;
}

ScheduleParams with_knobs(ScheduleParams base,
                          std::initializer_list<std::pair<const char*, int64_t>> values) {
  for (const auto& [name, value] : values) {
    const Knob* k = find_knob(name);
    if (!k) throw std::logic_error(std::string("schedule table: unknown knob '") + name + "'");
    if (value < k->min || value > k->max)
      throw std::logic_error(std::string("schedule table: knob '") + name +
                             "' = " + std::to_string(value) + " is outside " + k->range());
    k->set(base, value);
  }
  return base;
}

std::string knobs_markdown() {
  std::string md =
      "<!-- Generated by `padfold knobs --markdown` from schedules/knobs.h. Do not edit. -->\n"
      "# Schedule knobs\n\n"
      "Every knob a schedule reads, as `padfold compile --schedules` overrides it, the manifest\n"
      "records it (the values in effect) and a tuner searches it. Defaults per target family and\n"
      "op class are the rows of `schedules/cpu/table.cpp` and `schedules/gpu/table.cpp`; the\n"
      "value below is the fallback.\n\n"
      "| knob | type | range | default | family | what it does |\n"
      "|---|---|---|---|---|---|\n";
  for (const Knob& k : knobs()) {
    const bool b = k.type == KnobType::Bool;
    const std::string def =
        b ? (k.default_value ? "true" : "false") : std::to_string(k.default_value);
    md += std::string("| `") + k.name + "` | " + (b ? "bool" : "int") + " | " + k.range() +
          (k.scale == KnobScale::Pow2 ? " (searched as powers of two)" : "") + " | " + def + " | " +
          k.scope + " | " + k.doc + " |\n";
  }
  return md;
}

}  // namespace padfold
