// JSON text in and out of the spec parser, bounded: reading a spec file (a regular file of at most
// kMaxSpecFileBytes), parsing it with the checks nlohmann::json does not make (nesting depth,
// numbers beyond a double, repeated keys, NUL bytes), and describing values in messages without
// dumping them whole. Errors are SpecError naming the file and, where known, line and column.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/limits.h"

namespace padfold {

// The whole spec file at `path`.
std::string read_spec_file(const std::string& path);

// The JSON value of `text` (named `file` in messages).
nlohmann::json parse_json_text(const std::string& text, const std::string& file);

// A short description of a value for the "found" part of messages: its kind and at most 40
// characters of its text ("string \"NCWH\"", "array [1,2,3]", "null").
std::string describe(const nlohmann::json& j);

// The first `limit` characters of j.dump(), "..." marking a cut; never dumps the whole value.
std::string dump_short(const nlohmann::json& j, size_t limit);

// At most `limit` bytes of `s`, else its first limit-3 bytes and "...", for names in messages.
std::string shorten(const std::string& s, size_t limit = kMaxNameLength);

}  // namespace padfold
