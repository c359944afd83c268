// Enum <-> string tables. Each enum that has names gets one static array of {value, name, spelling}
// entries; to_string, parsing and the lists of accepted names in error messages are all derived
// from that array, so a name is written once.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

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

// The canonical name of `value`, or nullptr when the table has none.
template <typename E, size_t N>
const char* find_name(const EnumName<E> (&table)[N], E value) {
  for (const EnumName<E>& e : table)
    if (e.value == value && e.spelling == Spelling::Name) return e.name;
  return nullptr;
}

// The canonical name of `value`; "?" for a value missing from the table.
template <typename E, size_t N>
std::string name_of(const EnumName<E> (&table)[N], E value) {
  const char* name = find_name(table, value);
  return name ? name : "?";
}

// The value spelt `name` (any spelling, exact match), or nullopt.
template <typename E, size_t N>
std::optional<E> value_of(const EnumName<E> (&table)[N], std::string_view name) {
  for (const EnumName<E>& e : table)
    if (name == e.name) return e.value;
  return std::nullopt;
}

// The names of one spelling in table order, joined by `sep`; the last two joined by `last` when it
// is given ("a, b or c").
template <typename E, size_t N>
std::string names_of(const EnumName<E> (&table)[N], Spelling spelling, const char* sep = ", ",
                     const char* last = nullptr) {
  size_t count = 0;
  for (const EnumName<E>& e : table) count += e.spelling == spelling;
  std::string text;
  size_t i = 0;
  for (const EnumName<E>& e : table) {
    if (e.spelling != spelling) continue;
    if (i > 0) text += last && i + 1 == count ? last : sep;
    text += e.name;
    ++i;
  }
  return text;
}

}  // namespace padfold
