// Typed access to a spec's JSON fields with messages that name the file, the layer and the field,
// and a "did you mean" for misspelt keys. Internal to the frontend's parsers.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace padfold {

// The known key closest to a misspelt one, or "" when none is close.
std::string suggestion(const std::string& key, const std::vector<std::string>& known);

// Where in the file we are, so every message can name the file, the layer and the field. Every
// failure throws SpecError "<file>: [layer '<name>' (#i): ]field '<field>': <what>".
struct Ctx {
  std::string file;
  std::optional<std::string> layer;  // none at the top level
  size_t index = 0;

  [[noreturn]] void fail(const std::string& field, const std::string& what) const;
  [[noreturn]] void fail(const std::string& field, const std::string& found,
                         const std::string& expected) const;
  // Unknown keys of `obj` (field names `prefix` + key) fail, with a suggestion when one is close.
  void check_keys(const nlohmann::json& obj, const std::vector<std::string>& known,
                  const std::string& prefix = "") const;

  std::string get_string(const nlohmann::json& j, const std::string& field,
                         const char* expected) const;
  bool get_bool(const nlohmann::json& j, const std::string& field) const;
  // An integer within +-kMaxSize (base/limits.h); JSON integers beyond int64_t (which nlohmann
  // keeps as unsigned) are out of range too, shown as written.
  int64_t get_int(const nlohmann::json& j, const std::string& field,
                  const std::string& expected) const;
  int64_t get_positive(const nlohmann::json& j, const std::string& field) const;
  // An integer for every spatial dim, or a list of exactly `dims` integers.
  std::vector<int64_t> get_per_dim(const nlohmann::json& j, const std::string& field,
                                   int dims) const;
  // A number that a float32 holds (a larger one would become inf).
  float get_number(const nlohmann::json& j, const std::string& field) const;
};

}  // namespace padfold
