#include "frontend/json_text.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "base/atomic_file.h"
#include "base/enum_names.h"
#include "frontend/layer.h"

namespace padfold {

namespace {

using json = nlohmann::json;

// What a JSON value is called in messages; every other kind is a number.
constexpr EnumName<json::value_t> kJsonKinds[] = {
    {json::value_t::string, "string"}, {json::value_t::boolean, "boolean"},
    {json::value_t::array, "array"},   {json::value_t::object, "object"},
    {json::value_t::null, "null"},
};

// A JSON string literal of s, of at most its first `limit` bytes (a UTF-8 sequence cut there is
// replaced, not rejected).
std::string quoted(const std::string& s, size_t limit) {
  return json(s.size() > limit ? s.substr(0, limit) : s)
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

// Appends j.dump() to `out`, but stops once `out` is longer than `limit`: the same text up to
// there, however large or deep the value (the depth is bounded, kMaxJsonDepth, and each level
// adds at least one character, so the recursion is too).
void dump_bounded(const json& j, size_t limit, std::string& out) {
  if (out.size() > limit) return;
  switch (j.type()) {
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& e : j) {
        if (out.size() > limit) return;
        if (!first) out += ',';
        first = false;
        dump_bounded(e, limit, out);
      }
      out += ']';
      return;
    }
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& item : j.items()) {
        if (out.size() > limit) return;
        if (!first) out += ',';
        first = false;
        out += quoted(item.key(), limit) + ':';
        dump_bounded(item.value(), limit, out);
      }
      out += '}';
      return;
    }
    case json::value_t::string:
      out += quoted(j.get_ref<const std::string&>(), limit);
      return;
    default:
      out += j.dump();
  }
}

std::pair<size_t, size_t> line_col(const std::string& text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

// Rejects, with its line and column, what nlohmann::json would take but a spec must not hold:
// arrays and objects nested deeper than kMaxJsonDepth (parsing, messages and the rest of padfold
// recurse over values), numbers beyond a double (nlohmann would throw without a position), a key
// repeated in one object (nlohmann would keep the last value silently) and NUL bytes (nlohmann
// would end the text there). Anything else that is wrong is left to nlohmann, which reports it;
// this scan only tracks strings, brackets and numbers.
void scan_json(const std::string& text, const std::string& file) {
  struct Container {
    bool object = false;
    bool expect_key = false;  // in an object, after '{' or ','
    std::unordered_set<std::string> keys;
  };
  std::vector<Container> open;
  auto fail = [&](size_t pos, const std::string& what) {
    const auto [line, col] = line_col(text, pos + 1);
    throw SpecError(fmt::format("{}:{}:{}: {}", file, line, col, what));
  };
  auto is_digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  // nlohmann would stop at a NUL byte and ignore the rest of the file.
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    fail(nul, "invalid JSON: a NUL byte (a spec is UTF-8 text)");
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '"') {
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      if (end >= text.size()) return;  // unterminated
      if (!open.empty() && open.back().object && open.back().expect_key) {
        open.back().expect_key = false;
        std::string key = text.substr(i + 1, end - i - 1);
        if (key.find('\\') != std::string::npos) {
          try {
            key = json::parse(text.substr(i, end - i + 1)).get<std::string>();
          } catch (const json::exception&) {
            return;  // a bad escape
          }
        }
        if (!open.back().keys.insert(key).second)
          fail(i, fmt::format("key '{}' appears twice in one object; expected each key once "
                              "(JSON parsers differ on which value they keep)",
                              shorten(key)));
      }
      i = end;
    } else if (ch == '{' || ch == '[') {
      if (open.size() >= static_cast<size_t>(kMaxJsonDepth))
        fail(i, fmt::format("arrays and objects nested deeper than {} levels", kMaxJsonDepth));
      open.push_back({ch == '{', ch == '{', {}});
    } else if (ch == '}' || ch == ']') {
      if (!open.empty()) open.pop_back();
    } else if (ch == ',') {
      if (!open.empty() && open.back().object) open.back().expect_key = true;
    } else if (ch == '-' || is_digit(ch)) {
      size_t end = i + 1;
      while (end < text.size() && (is_digit(text[end]) || text[end] == '.' || text[end] == 'e' ||
                                   text[end] == 'E' || text[end] == '+' || text[end] == '-'))
        ++end;
      const std::string token = text.substr(i, end - i);
      char* stop = nullptr;
      const double v = std::strtod(token.c_str(), &stop);
      if (stop == token.c_str() + token.size() && !std::isfinite(v))
        fail(i, fmt::format("number {} is out of range (beyond a double, about 1.8e308)",
                            shorten(token, 40)));
      i = end - 1;
    }
  }
}

}  // namespace

std::string dump_short(const json& j, size_t limit) {
  std::string text;
  dump_bounded(j, limit, text);
  if (text.size() > limit) text = text.substr(0, limit - 3) + "...";
  return text;
}

// At most `limit` bytes of `s`, else its first limit-3 bytes and "...", for names in messages.
std::string shorten(const std::string& s, size_t limit) {
  return s.size() <= limit ? s : s.substr(0, limit - 3) + "...";
}

// A short description of a JSON value, for "found" parts of messages.
std::string describe(const json& j) {
  if (j.is_null()) return name_of(kJsonKinds, json::value_t::null);
  const char* kind = find_name(kJsonKinds, j.type());
  return std::string(kind ? kind : "number") + " " + dump_short(j, 40);
}

std::string read_spec_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  Fd f(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (f.get() < 0)
    throw SpecError(fmt::format("{}: cannot open the spec file: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.get(), &st) != 0)
    throw SpecError(fmt::format("{}: cannot read the spec file: {}", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode))
    throw SpecError(
        fmt::format("{}: is a directory, not a spec file (expected a JSON file)", path));
  if (!S_ISREG(st.st_mode))
    throw SpecError(fmt::format("{}: not a regular file ({}); expected a JSON spec file", path,
                                file_kind(st.st_mode)));
  const std::string too_large = fmt::format("{}: file larger than {} MiB, the limit of a spec file",
                                            path, kMaxSpecFileBytes >> 20);
  if (st.st_size > kMaxSpecFileBytes) throw SpecError(too_large);
  // Read to the end, but never past the limit (the file may grow meanwhile).
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(f.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw SpecError(fmt::format("{}: cannot read the spec file: {}", path, std::strerror(errno)));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (static_cast<int64_t>(text.size()) > kMaxSpecFileBytes) throw SpecError(too_large);
  }
  return text;
}

json parse_json_text(const std::string& json_text, const std::string& file_label) {
  scan_json(json_text, file_label);
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::parse_error& e) {
    const auto [line, col] = line_col(json_text, e.byte);
    std::string msg = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: ".
    const size_t pos = msg.find(": ", msg.find("parse error"));
    if (pos != std::string::npos) msg = msg.substr(pos + 2);
    throw SpecError(fmt::format("{}:{}:{}: invalid JSON: {}", file_label, line, col, msg));
  } catch (const json::exception& e) {
    // Any other failure of the parser (scan_json catches the known ones first, with a position).
    std::string msg = e.what();
    const size_t pos = msg.find("] ");
    if (msg.rfind("[json.exception.", 0) == 0 && pos != std::string::npos)
      msg = msg.substr(pos + 2);
    throw SpecError(fmt::format("{}: invalid JSON: {}", file_label, msg));
  }
  return root;
}

}  // namespace padfold
