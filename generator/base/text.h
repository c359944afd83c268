// Small text helpers every stage uses for messages and generated files.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace padfold {

// "1, 2, 3" (with `separator` between the values).
inline std::string join(const std::vector<int64_t>& values, std::string_view separator = ", ") {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) s += separator;
    s += std::to_string(values[i]);
  }
  return s;
}

// "[1, 2, 3]", as shapes and integer lists appear in messages. With `unknown_as_question`, a
// negative value (an unknown ONNX dimension) reads "?".
inline std::string shape_text(const std::vector<int64_t>& shape, bool unknown_as_question = false) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += unknown_as_question && shape[i] < 0 ? std::string("?") : std::to_string(shape[i]);
  }
  return s + "]";
}

// ASCII lower case; other bytes unchanged (names of targets, modes and plugins).
inline std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF),
// as every string padfold writes into JSON must be (nlohmann's dump throws on any other).
bool valid_utf8(const std::string& s);

// ASCII upper case; other bytes unchanged (macro names from C identifiers).
inline std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace padfold
