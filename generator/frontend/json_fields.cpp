#include "frontend/json_fields.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/limits.h"
#include "frontend/json_text.h"
#include "frontend/layer.h"

namespace padfold {
namespace {

using json = nlohmann::json;

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string suggestion(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = std::max<size_t>(2, key.size() / 3) + 1;
  for (const auto& k : known) {
    const size_t d = edit_distance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  return best;
}

void Ctx::fail(const std::string& field, const std::string& what) const {
  std::string where = file + ": ";
  if (layer) where += fmt::format("layer '{}' (#{}): ", *layer, index);
  throw SpecError(fmt::format("{}field '{}': {}", where, field, what));
}
void Ctx::fail(const std::string& field, const std::string& found,
               const std::string& expected) const {
  fail(field, found + "; expected " + expected);
}

void Ctx::check_keys(const json& obj, const std::vector<std::string>& known,
                     const std::string& prefix) const {
  for (const auto& item : obj.items())
    if (std::find(known.begin(), known.end(), item.key()) == known.end()) {
      const std::string key = shorten(item.key());
      const std::string guess = suggestion(key, known);
      if (!guess.empty()) fail(prefix + key, "unknown field; did you mean '" + guess + "'?");
      fail(prefix + key, "unknown field", fmt::format("one of {}", fmt::join(known, ", ")));
    }
}

std::string Ctx::get_string(const json& j, const std::string& field, const char* expected) const {
  if (!j.is_string()) fail(field, describe(j), expected);
  return j.get<std::string>();
}
bool Ctx::get_bool(const json& j, const std::string& field) const {
  if (!j.is_boolean()) fail(field, describe(j), "true or false");
  return j.get<bool>();
}
int64_t Ctx::get_int(const json& j, const std::string& field, const std::string& expected) const {
  if (!j.is_number_integer()) fail(field, describe(j), expected);
  const bool in_range = j.is_number_unsigned()
                            ? j.get<uint64_t>() <= static_cast<uint64_t>(kMaxSize)
                            : j.get<int64_t>() >= -kMaxSize && j.get<int64_t>() <= kMaxSize;
  if (!in_range)
    fail(field,
         fmt::format("{} is out of range (sizes are at most {}, the int32 limit)", describe(j),
                     kMaxSize),
         expected);
  return j.get<int64_t>();
}
int64_t Ctx::get_positive(const json& j, const std::string& field) const {
  const int64_t v = get_int(j, field, "a positive integer");
  if (v <= 0) fail(field, describe(j), "a positive integer");
  return v;
}
std::vector<int64_t> Ctx::get_per_dim(const json& j, const std::string& field, int dims) const {
  const std::string expected =
      fmt::format("an integer or a list of {} integers (one per spatial dim)", dims);
  if (j.is_number_integer()) return std::vector<int64_t>(dims, get_int(j, field, expected));
  if (!j.is_array() || j.size() != static_cast<size_t>(dims)) fail(field, describe(j), expected);
  std::vector<int64_t> v;
  for (const auto& e : j) v.push_back(get_int(e, field, expected));
  return v;
}
float Ctx::get_number(const json& j, const std::string& field) const {
  if (!j.is_number()) fail(field, describe(j), "a number");
  const double v = j.get<double>();
  const float max = std::numeric_limits<float>::max();
  if (!std::isfinite(v) || std::fabs(v) > static_cast<double>(max))
    fail(field, describe(j) + " is beyond the float32 range",
         fmt::format("a number from {} to {}", -max, max));
  return static_cast<float>(v);
}

}  // namespace padfold
