// Small writers shared by the bundle's files: whole files, templates, strides, C string literals.
#pragma once

#include <cstdint>
#include <filesystem>
#include <kainjow/mustache.hpp>
#include <string>
#include <vector>

namespace padfold {

// Writes `text` to `path` (binary); throws std::runtime_error naming the path.
void write_file(const std::filesystem::path& path, const std::string& text);

// A mustache template (padfold_templates.h) rendered with `data`.
std::string render(const char* tmpl, const kainjow::mustache::data& data);

// The strides of a dense row-major buffer of `shape` (outermost first), in elements.
std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape);

// A C string literal of any text (a produced_by note is the user's).
std::string c_string(const std::string& text);

}  // namespace padfold
