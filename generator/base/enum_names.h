// Enum <-> string tables. Each enum that has names gets one static array of {value, name, spelling}
// entries; to_string, parsing and the lists of accepted names in error messages are all derived
// from that array, so a name is written once.
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace padfold {

enum class Spelling {
  Name,   // a canonical name: to_string gives a value's first Name; listed in messages
  Alias,  // another accepted spelling, listed in messages as an alias
  Quiet,  // another accepted spelling, never listed
};

template <typename E>
struct EnumName {
  E value;
  const char* name;
  Spelling spelling = Spelling::Name;
};

// A table is a C array or a std::array of EnumName<E>; E is its enum.
template <typename Table>
using EnumOf = std::remove_cv_t<decltype(std::begin(std::declval<const Table&>())->value)>;

// The canonical name of `value`, or nullptr when the table has none.
template <typename Table>
const char* find_name(const Table& table, EnumOf<Table> value) {
  for (const auto& e : table)
    if (e.value == value && e.spelling == Spelling::Name) return e.name;
  return nullptr;
}

// The canonical name of `value`; "?" for a value missing from the table.
template <typename Table>
std::string name_of(const Table& table, EnumOf<Table> value) {
  const char* name = find_name(table, value);
  return name ? name : "?";
}

// The value spelt `name` (any spelling, exact match), or nullopt.
template <typename Table>
std::optional<EnumOf<Table>> value_of(const Table& table, std::string_view name) {
  for (const auto& e : table)
    if (name == e.name) return e.value;
  return std::nullopt;
}

// The names of one spelling in table order, joined by `sep`; the last two joined by `last` when it
// is given ("a, b or c").
template <typename Table>
std::string names_of(const Table& table, Spelling spelling, const char* sep = ", ",
                     const char* last = nullptr) {
  size_t count = 0;
  for (const auto& e : table) count += e.spelling == spelling;
  std::string text;
  size_t i = 0;
  for (const auto& e : table) {
    if (e.spelling != spelling) continue;
    if (i > 0) text += last && i + 1 == count ? last : sep;
    text += e.name;
    ++i;
  }
  return text;
}

}  // namespace padfold
