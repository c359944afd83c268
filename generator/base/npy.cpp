// The checked .npy reader and writer (npy.h).
#include "base/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include "base/atomic_file.h"

namespace padfold {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr uint64_t kAlign = 64;  // numpy's ARRAY_ALIGN: the data starts at a multiple of it

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
constexpr bool kBigEndianHost = true;
#else
constexpr bool kBigEndianHost = false;
#endif

[[noreturn]] void fail(const std::string& label, const std::string& what) {
  throw std::runtime_error(label + ": " + what);
}

std::string sys_error(int err) {
  return std::strerror(err);
}

// Printable, for messages: other bytes as \xNN, at most `max` bytes shown.
std::string escaped(std::string_view s, size_t max = 80) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

std::string shape_repr(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// Number of elements, or nullopt when shape * esize bytes would reach kNpyMaxDataBytes.
std::optional<uint64_t> checked_numel(const std::vector<int64_t>& shape, size_t esize) {
  const uint64_t kMaxElems = kNpyMaxDataBytes / esize;
  uint64_t n = 1;
  bool too_large = false;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    const auto u = static_cast<uint64_t>(d);
    // Every dimension alone must fit, so that n (< kMaxElems or 0) * u cannot overflow 64 bits,
    // even after a zero dimension.
    if (u >= kMaxElems) too_large = true;
    n = too_large ? 0 : n * u;
    if (n >= kMaxElems) too_large = true;
  }
  if (too_large) return std::nullopt;
  return n;
}

const char* dtype_name(char kind, std::string_view size) {
  struct Known {
    char kind;
    const char* size;
    const char* name;
  };
  static const Known kKnown[] = {
      {'f', "2", "float16"},     {'f', "4", "float32"},     {'f', "8", "float64"},
      {'f', "16", "float128"},   {'f', "12", "float96"},    {'i', "1", "int8"},
      {'i', "2", "int16"},       {'i', "4", "int32"},       {'i', "8", "int64"},
      {'u', "1", "uint8"},       {'u', "2", "uint16"},      {'u', "4", "uint32"},
      {'u', "8", "uint64"},      {'b', "1", "bool"},        {'c', "8", "complex64"},
      {'c', "16", "complex128"}, {'c', "32", "complex256"}, {'O', "8", "object"},
  };
  for (const Known& k : kKnown)
    if (k.kind == kind && size == k.size) return k.name;
  switch (kind) {
    case 'S':
    case 'a':
      return "a byte string";
    case 'U':
      return "a unicode string";
    case 'V':
      return "raw bytes (void)";
    case 'M':
      return "datetime64";
    case 'm':
      return "timedelta64";
    default:
      return nullptr;
  }
}

// The dtype a 'descr' names: numpy's '|i1' and '|u1', or '<i1' and '<u1' (which numpy reads the
// same), '<f4', '<i4'; the runtime's C reader (runtime/npy_load.c) accepts exactly these.
std::optional<NpyDType> descr_dtype(const std::string& descr) {
  if (descr == "<f4") return NpyDType::F32;
  if (descr == "|i1" || descr == "<i1") return NpyDType::I8;
  if (descr == "|u1" || descr == "<u1") return NpyDType::U8;
  if (descr == "<i4") return NpyDType::I32;
  return std::nullopt;
}

// Why a descr is refused, in words: what it is, and what `expected` names.
std::string describe_descr(const std::string& descr, const std::string& expected) {
  const std::string shown = "'" + escaped(descr, 40) + "'";
  if (descr.size() >= 2 && std::strchr("<>|=", descr[0]) != nullptr) {
    const char* name = dtype_name(descr[1], std::string_view(descr).substr(2));
    if (name != nullptr) {
      std::string order;
      if (descr[0] == '>') order = "big-endian ";
      if (descr[0] == '=') order = "native-order (not portable) ";
      if (descr[0] == '|' && descr[1] != 'b' && descr.substr(1) != "u1" && descr.substr(1) != "i1")
        order = "byte-order-less ('|') ";
      return "dtype " + shown + " is " + order + name + ", expected " + expected;
    }
  }
  return "dtype " + shown + " is not supported, expected " + expected;
}

constexpr char kExpectF32[] = "little-endian float32 ('<f4')";
constexpr char kExpectAny[] =
    "little-endian float32 ('<f4'), int8 ('|i1'), uint8 ('|u1') or int32 ('<i4')";

// The header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (1, 7, 7, 3), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& label) : s_(text), label_(label) {}

  void parse(std::string& descr, bool& fortran_order, std::vector<int64_t>& shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    expect('{', "'{' opening the header dict");
    for (;;) {
      skip_ws();
      if (peek() == '}') break;
      const size_t key_at = pos_;
      const std::string key = string_literal("a key (a quoted string)");
      skip_ws();
      expect(':', "':' after key '" + key + "'");
      skip_ws();
      bool* seen = nullptr;
      if (key == "descr") {
        seen = &have_descr;
        if (peek() == '[') error("'descr' is a list (a structured dtype); expected '<f4'");
        descr = string_literal("a quoted string for 'descr'");
      } else if (key == "fortran_order") {
        seen = &have_order;
        fortran_order = boolean("True or False for 'fortran_order'");
      } else if (key == "shape") {
        seen = &have_shape;
        shape = tuple();
      } else {
        pos_ = key_at;
        error("unexpected key '" + escaped(key, 40) +
              "' (a .npy header has exactly 'descr', 'fortran_order' and 'shape')");
      }
      if (*seen) {
        pos_ = key_at;
        error("key '" + key + "' appears twice");
      }
      *seen = true;
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') break;
      error("expected ',' or '}' after the value of '" + key + "'");
    }
    ++pos_;  // '}'
    // numpy pads with spaces and ends the header with a newline.
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r'))
      ++pos_;
    if (pos_ != s_.size()) error("unexpected bytes after the header dict");
    std::string missing;
    if (!have_descr) missing += " 'descr'";
    if (!have_order) missing += " 'fortran_order'";
    if (!have_shape) missing += " 'shape'";
    if (!missing.empty()) fail(label_, "bad .npy header: missing key(s)" + missing);
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    std::string_view shown = s_;  // without numpy's padding
    while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n' || shown.back() == '\t' ||
                              shown.back() == '\r'))
      shown.remove_suffix(1);
    fail(label_, "bad .npy header at byte " + std::to_string(pos_) + ": " + what + "; header: \"" +
                     escaped(shown, 120) + "\"");
  }
  int peek() const { return pos_ < s_.size() ? static_cast<unsigned char>(s_[pos_]) : -1; }
  void skip_ws() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r') ++pos_;
  }
  void expect(char c, const std::string& what) {
    if (peek() != static_cast<unsigned char>(c)) error("expected " + what);
    ++pos_;
  }
  std::string string_literal(const std::string& what) {
    const int q = peek();
    if (q != '\'' && q != '"') error("expected " + what);
    const size_t start = ++pos_;
    for (;;) {
      const int c = peek();
      if (c == q) break;
      if (c < 0x20 || c >= 0x7f) error("unterminated string or a non-ASCII byte in a string");
      if (c == '\\') error("escape sequences are not supported in a .npy header string");
      ++pos_;
    }
    std::string out(s_.substr(start, pos_ - start));
    ++pos_;
    return out;
  }
  bool boolean(const std::string& what) {
    const size_t start = pos_;
    while (std::isalnum(peek()) || peek() == '_') ++pos_;
    const std::string_view word = s_.substr(start, pos_ - start);
    if (word == "True") return true;
    if (word == "False") return false;
    pos_ = start;
    error("expected " + what);
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(', "a tuple '(...)' for 'shape'");
    skip_ws();
    bool trailing_comma = false;
    while (peek() != ')') {
      if (dims.size() == kNpyMaxRank)
        error("'shape' has more than " + std::to_string(kNpyMaxRank) + " dimensions");
      dims.push_back(integer());
      skip_ws();
      trailing_comma = false;
      if (peek() == ',') {
        ++pos_;
        trailing_comma = true;
        skip_ws();
      } else if (peek() != ')') {
        error("expected ',' or ')' in 'shape'");
      }
    }
    // "(5)" is the integer 5 in Python, not a tuple.
    if (dims.size() == 1 && !trailing_comma) error("'shape' (n) is not a tuple; expected (n,)");
    ++pos_;
    return dims;
  }
  int64_t integer() {
    if (peek() == '-') error("negative dimension in 'shape'");
    if (!std::isdigit(peek())) error("expected a non-negative integer in 'shape'");
    const size_t start = pos_;
    uint64_t v = 0;
    while (std::isdigit(peek())) {
      if (v > (uint64_t{INT64_MAX} - 9) / 10) error("dimension too large in 'shape'");
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      ++pos_;
    }
    if (pos_ - start > 1 && s_[start] == '0') {
      pos_ = start;
      error("integer with a leading zero in 'shape'");
    }
    if (std::isalpha(peek()) || peek() == '_' || peek() == '.')
      error("expected a plain integer in 'shape'");
    return static_cast<int64_t>(v);
  }

  std::string_view s_;
  const std::string& label_;
  size_t pos_ = 0;
};

// Reverses each esize-byte element (esize 4: float32, int32; 1: nothing to do).
void swap_elements(unsigned char* p, size_t bytes, size_t esize) {
  if (esize != 4) return;
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    std::swap(p[i], p[i + 3]);
    std::swap(p[i + 1], p[i + 2]);
  }
}

std::string to_little_endian(const void* data, size_t n, size_t esize) {
  std::string out(n * esize, '\0');
  if (n == 0) return out;
  std::memcpy(out.data(), data, out.size());
  if (kBigEndianHost)
    swap_elements(reinterpret_cast<unsigned char*>(out.data()), out.size(), esize);
  return out;
}

void from_little_endian(void* data, size_t bytes, size_t esize) {
  if (kBigEndianHost) swap_elements(static_cast<unsigned char*>(data), bytes, esize);
}

// Sizes the array for the header's data; returns where the data goes.
void* take(NpyData& a, NpyHeader&& h) {
  a.shape = std::move(h.shape);
  a.dtype = h.dtype;
  a.bytes.resize(static_cast<size_t>(h.data_bytes));
  return a.bytes.data();
}
void* take(NpyArray& a, NpyHeader&& h) {
  a.shape = std::move(h.shape);
  a.data.resize(static_cast<size_t>(h.data_bytes / sizeof(float)));
  return a.data.data();
}

NpyHeader parse_header(std::string_view prefix, uint64_t file_size, const std::string& label,
                       bool f32_only) {
  if (prefix.size() > file_size) fail(label, "internal error: prefix longer than the file");
  if (prefix.substr(0, kMagicLen) != std::string_view(kMagic, kMagicLen).substr(0, prefix.size()))
    fail(label, "not a .npy file: it does not start with \"\\x93NUMPY\" (it starts with \"" +
                    escaped(prefix.substr(0, kMagicLen)) + "\")");
  if (file_size < kMagicLen + 2)
    fail(label, "truncated .npy file: " + std::to_string(file_size) +
                    " bytes, too short for the magic and version");
  if (prefix.size() < kMagicLen + 2)
    fail(label, "internal error: the prefix given ends inside the version");
  const auto major = static_cast<unsigned char>(prefix[6]);
  const auto minor = static_cast<unsigned char>(prefix[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(label, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                    " (supported: 1.0, 2.0, 3.0)");
  const size_t len_bytes = major == 1 ? 2 : 4;
  const uint64_t header_start = kMagicLen + 2 + len_bytes;
  if (file_size < header_start)
    fail(label, "truncated .npy file: " + std::to_string(file_size) +
                    " bytes, too short for the header length field of version " +
                    std::to_string(major) + ".0");
  if (prefix.size() < header_start)
    fail(label, "internal error: the prefix given ends inside the header length field");
  uint64_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i)  // little-endian, unsigned
    header_len |= uint64_t{static_cast<unsigned char>(prefix[8 + i])} << (8 * i);
  if (header_len > kNpyMaxHeaderBytes)
    fail(label, ".npy header length " + std::to_string(header_len) + " exceeds the limit of " +
                    std::to_string(kNpyMaxHeaderBytes) + " bytes");
  if (header_len > file_size - header_start)
    fail(label, "truncated .npy file: the header length is " + std::to_string(header_len) +
                    " bytes but the file has only " + std::to_string(file_size - header_start) +
                    " bytes after the length field");
  if (header_start + header_len > prefix.size())
    fail(label, "internal error: the prefix given ends inside the header");
  const std::string_view header = prefix.substr(header_start, header_len);

  std::string descr;
  bool fortran_order = false;
  NpyHeader h;
  HeaderParser(header, label).parse(descr, fortran_order, h.shape);
  const std::optional<NpyDType> dtype = descr_dtype(descr);
  if (!dtype || (f32_only && *dtype != NpyDType::F32))
    fail(label, describe_descr(descr, f32_only ? kExpectF32 : kExpectAny));
  h.dtype = *dtype;
  if (fortran_order)
    fail(label, "fortran_order True (a Fortran-order array) is not supported; expected C order");
  const size_t esize = npy_dtype_size(h.dtype);
  const std::optional<uint64_t> numel = checked_numel(h.shape, esize);
  if (!numel)
    fail(label, "shape " + shape_repr(h.shape) + " is too large: its " + npy_dtype_name(h.dtype) +
                    " data would take " + std::to_string(kNpyMaxDataBytes) +
                    " bytes or more (the limit is below " + std::to_string(kNpyMaxDataBytes) +
                    ", 2 GiB)");
  h.data_offset = header_start + header_len;
  h.data_bytes = *numel * esize;
  const uint64_t have = file_size - h.data_offset;
  if (have != h.data_bytes)
    fail(label,
         "file has " + std::to_string(have) + " bytes of data, header promises " +
             std::to_string(h.data_bytes) + " (shape " + shape_repr(h.shape) + ", " +
             npy_dtype_name(h.dtype) + ")" +
             (have > h.data_bytes ? ": extra bytes after the data" : ": the file is truncated"));
  return h;
}

// Out: NpyData (any dtype) or NpyArray (float32 only).
template <typename Out>
Out parse_data(std::string_view bytes, const std::string& label) {
  NpyHeader h = parse_header(bytes, bytes.size(), label, std::is_same_v<Out, NpyArray>);
  const uint64_t offset = h.data_offset, n = h.data_bytes;
  const size_t esize = npy_dtype_size(h.dtype);
  Out a;
  void* dst = take(a, std::move(h));
  if (n != 0) std::memcpy(dst, bytes.data() + offset, static_cast<size_t>(n));
  from_little_endian(dst, static_cast<size_t>(n), esize);
  return a;
}

template <typename Out>
Out read_data(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below anyway.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) fail(path, "cannot open: " + sys_error(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail(path, "cannot stat: " + sys_error(errno));
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory, not a .npy file");
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  const auto file_size = static_cast<uint64_t>(st.st_size);

  std::string prefix(static_cast<size_t>(std::min(file_size, kNpyMaxPreambleBytes)), '\0');
  if (pread_fully(fd.get(), prefix.data(), prefix.size(), 0, path) != prefix.size())
    fail(path, "the file shrank while being read");
  NpyHeader h = parse_header(prefix, file_size, path, std::is_same_v<Out, NpyArray>);
  prefix = std::string();

  const uint64_t offset = h.data_offset;
  const size_t want = static_cast<size_t>(h.data_bytes), esize = npy_dtype_size(h.dtype);
  Out a;
  void* dst = take(a, std::move(h));
  if (pread_fully(fd.get(), dst, want, offset, path) != want)
    fail(path, "the file shrank while being read");
  char extra;
  if (pread_fully(fd.get(), &extra, 1, offset + want, path) != 0)
    fail(path, "the file grew while being read");
  from_little_endian(dst, want, esize);
  return a;
}

}  // namespace

const char* npy_descr(NpyDType t) {
  switch (t) {
    case NpyDType::F32:
      return "<f4";
    case NpyDType::I8:
      return "|i1";
    case NpyDType::U8:
      return "|u1";
    case NpyDType::I32:
      return "<i4";
  }
  return "?";
}

const char* npy_dtype_name(NpyDType t) {
  switch (t) {
    case NpyDType::F32:
      return "float32";
    case NpyDType::I8:
      return "int8";
    case NpyDType::U8:
      return "uint8";
    case NpyDType::I32:
      return "int32";
  }
  return "?";
}

size_t npy_dtype_size(NpyDType t) {
  return t == NpyDType::I8 || t == NpyDType::U8 ? 1 : 4;
}

NpyHeader parse_npy_header(std::string_view prefix, uint64_t file_size, const std::string& label) {
  return parse_header(prefix, file_size, label, false);
}

NpyHeader parse_npy_header_f32(std::string_view prefix, uint64_t file_size,
                               const std::string& label) {
  return parse_header(prefix, file_size, label, true);
}

NpyData parse_npy(std::string_view bytes, const std::string& label) {
  return parse_data<NpyData>(bytes, label);
}

NpyArray parse_npy_f32(std::string_view bytes, const std::string& label) {
  return parse_data<NpyArray>(bytes, label);
}

NpyData read_npy(const std::string& path) {
  return read_data<NpyData>(path);
}

NpyArray read_npy_f32(const std::string& path) {
  return read_data<NpyArray>(path);
}

std::string npy_preamble(const std::vector<int64_t>& shape, NpyDType dtype) {
  std::string header = std::string("{'descr': '") + npy_descr(dtype) +
                       "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
  // As numpy's _wrap_header: spaces, then a newline, so that the data starts aligned.
  const uint64_t unpadded = kMagicLen + 2 + 2 + header.size() + 1;
  header.append(static_cast<size_t>(kAlign - unpadded % kAlign), ' ');
  header += '\n';
  if (header.size() > 0xffff) throw std::runtime_error("npy: header too long for version 1.0");
  std::string out(kMagic, kMagicLen);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header;
}

std::string npy_preamble_f32(const std::vector<int64_t>& shape) {
  return npy_preamble(shape, NpyDType::F32);
}

FileContents npy_file(const std::string& path, const std::vector<int64_t>& shape, NpyDType dtype,
                      const void* data) {
  const size_t esize = npy_dtype_size(dtype);
  const std::optional<uint64_t> numel = checked_numel(shape, esize);
  if (!numel) fail(path, "cannot write shape " + shape_repr(shape) + ": negative or too large");
  if (shape.size() > kNpyMaxRank)
    fail(path, "cannot write shape " + shape_repr(shape) + ": too many dimensions");
  return {path, npy_preamble(shape, dtype),
          to_little_endian(data, static_cast<size_t>(*numel), esize)};
}

FileContents npy_file_f32(const std::string& path, const std::vector<int64_t>& shape,
                          const float* data) {
  return npy_file(path, shape, NpyDType::F32, data);
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape, NpyDType dtype,
               const void* data) {
  const FileContents f = npy_file(path, shape, dtype, data);
  write_file_replacing(f.path, f.preamble, f.bytes);
}

void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  write_npy(path, shape, NpyDType::F32, data);
}

}  // namespace padfold
