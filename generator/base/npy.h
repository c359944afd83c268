// A small, checked reader and writer of NumPy .npy files holding little-endian float32, int8, uint8
// or int32 arrays in C order (what `padfold run` reads and writes; int8/uint8 activations, int8
// weights and int32 bias are a quantized layer's, docs/int8.md). No third-party code.
//
// Reading checks everything before allocating more than the bounded header:
//   - the magic "\x93NUMPY" and version 1.0, 2.0 or 3.0;
//   - the header length (2 bytes for 1.0, 4 for 2.0/3.0), at most kNpyMaxHeaderBytes and within
//     the file;
//   - the header, a Python dict literal with exactly the keys 'descr', 'fortran_order' and 'shape'
//     (any order, spaces, a trailing comma, numpy's padding spaces and final newline), parsed by a
//     strict parser: 'descr' must be one of NpyDType's ('<f4'; '|i1' or '<i1'; '|u1' or '<u1';
//     '<i4'), and '<f4' for the *_f32 functions, 'fortran_order' False, 'shape' a tuple of at
//     most kNpyMaxRank non-negative integers;
//   - the data size (overflow-checked product of the shape times the element size) below
//     kNpyMaxDataBytes, and equal to what the file holds after the header (missing data and extra
//     data are both errors).
// Every error is a std::runtime_error "<label>: <what is wrong>"; none is std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/atomic_file.h"

namespace padfold {

// Largest header accepted (the dict and its padding, after the length field). numpy's own reader
// stops at 10000 bytes unless told otherwise; v1.0 cannot exceed 65535.
inline constexpr uint64_t kNpyMaxHeaderBytes = 64 * 1024;
// The data of one array must be smaller than this (2 GiB).
inline constexpr uint64_t kNpyMaxDataBytes = uint64_t{1} << 31;
// At most this many dimensions (numpy 2's limit).
inline constexpr size_t kNpyMaxRank = 64;
// Magic, version and the 4-byte length field of v2.0/v3.0, plus the largest header.
inline constexpr uint64_t kNpyMaxPreambleBytes = 12 + kNpyMaxHeaderBytes;

// The element types read and written: the runtime's PF_F32, PF_I8, PF_U8 and PF_I32
// (base/npy_dtype.h converts, where padfold_registry.h is on the include path).
enum class NpyDType { F32, I8, U8, I32 };

// "<f4", "|i1", "|u1", "<i4": the 'descr' numpy writes (and these functions write).
const char* npy_descr(NpyDType t);
// "float32", "int8", "uint8", "int32", as numpy and the runtime (pf_dtype_name) name them.
const char* npy_dtype_name(NpyDType t);
// Bytes of one element: 4, 1, 1, 4.
size_t npy_dtype_size(NpyDType t);

// A float32 array.
struct NpyArray {
  std::vector<int64_t> shape;  // () for a scalar
  std::vector<float> data;     // C order, the product of shape elements
};

// An array of any NpyDType.
struct NpyData {
  std::vector<int64_t> shape;  // () for a scalar
  NpyDType dtype = NpyDType::F32;
  // The elements in C order and in this machine's byte order (numel * npy_dtype_size(dtype)
  // bytes); operator new's alignment, enough for every dtype.
  std::vector<unsigned char> bytes;

  size_t numel() const { return bytes.size() / npy_dtype_size(dtype); }
  const void* data() const { return bytes.data(); }
  void* data() { return bytes.data(); }
};

// What the header of a .npy file says, checked against the size of the whole file.
struct NpyHeader {
  std::vector<int64_t> shape;
  NpyDType dtype = NpyDType::F32;
  uint64_t data_offset = 0;  // where the data starts
  uint64_t data_bytes = 0;   // == file_size - data_offset
};

// Parses and checks the preamble and header of a file of any NpyDType. `prefix` holds the first
// bytes of the file, at least through the end of its header (min(file_size, kNpyMaxPreambleBytes)
// bytes always suffice); `file_size` is the size of the whole file. `label` (a path, say) starts
// every error message. No file-system access.
NpyHeader parse_npy_header(std::string_view prefix, uint64_t file_size, const std::string& label);
// The same for a float32 file only ("dtype '|i1' is int8, expected little-endian float32").
NpyHeader parse_npy_header_f32(std::string_view prefix, uint64_t file_size,
                               const std::string& label);

// The whole file in memory (for fuzzers and tests). No file-system access.
NpyData parse_npy(std::string_view bytes, const std::string& label);
NpyArray parse_npy_f32(std::string_view bytes, const std::string& label);

// Reads a regular file: the bounded prefix first, then (once the header is checked against the
// file's size) exactly the data. Errors name the path.
NpyData read_npy(const std::string& path);
NpyArray read_npy_f32(const std::string& path);  // float32 files only

// The magic, version 1.0, length and header numpy writes for a C-order array of this shape and
// dtype: "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" padded with spaces and a
// final newline so that the data starts at a multiple of 64 bytes.
std::string npy_preamble(const std::vector<int64_t>& shape, NpyDType dtype);
std::string npy_preamble_f32(const std::vector<int64_t>& shape);

// The v1.0 .npy file of this array (`data`: the product of shape elements of dtype, in this
// machine's byte order), for write_files_replacing (atomic_file.h); errors name the path.
FileContents npy_file(const std::string& path, const std::vector<int64_t>& shape, NpyDType dtype,
                      const void* data);
FileContents npy_file_f32(const std::string& path, const std::vector<int64_t>& shape,
                          const float* data);

// Writes a v1.0 .npy file with write_file_replacing's rules (atomic_file.h); errors name the path.
void write_npy(const std::string& path, const std::vector<int64_t>& shape, NpyDType dtype,
               const void* data);
void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data);

}  // namespace padfold
