// The quantized layers' dtypes (docs/int8.md: int8/uint8 activations, int8 weights, int32 bias)
// through the runtime: names and sizes, pf_buffer_bytes, the Halide types pf_run hands a kernel,
// tensor checks, whole-model runs whose intermediates and arena are sized by dtype, the manifest's
// dtype names, and .npy weight files of int8, uint8 and int32 (pf_npy_load_weights, and the C++
// reader it must agree with) with their dtype mismatches. The emitter's dtype tables
// (emit/dtypes.h, frontend/layer.h's pf_dtype_of, base/npy_dtype.h) are checked against the
// runtime's.
#include <HalideRuntime.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/npy.h"
#include "base/npy_dtype.h"
#include "emit/dtypes.h"
#include "frontend/layer.h"
#include "runtime_test_util.h"

extern "C" {
#include "internal.h"
}

namespace {

const pf_dtype kAll[] = {PF_F32, PF_F16, PF_I8, PF_U8, PF_I32};

pf_buffer_desc Desc(const char* name, pf_role role, pf_dtype dtype, std::vector<int64_t> shape,
                    const char* source = nullptr) {
  pf_buffer_desc d{};
  d.name = name;
  d.role = role;
  d.dtype = dtype;
  d.layout = shape.size() == 1 ? "C" : shape.size() == 2 ? "HW" : "NHWC";
  d.rank = static_cast<int>(shape.size());
  int64_t stride = 1;
  for (int i = d.rank - 1; i >= 0; --i) {
    d.shape[i] = shape[static_cast<size_t>(i)];
    d.strides[i] = stride;
    stride *= d.shape[i];
  }
  d.source = source;
  return d;
}

TEST(Dtypes, NamesAndSizes) {
  EXPECT_STREQ(pf_dtype_name(PF_F32), "float32");
  EXPECT_STREQ(pf_dtype_name(PF_F16), "float16");
  EXPECT_STREQ(pf_dtype_name(PF_I8), "int8");
  EXPECT_STREQ(pf_dtype_name(PF_U8), "uint8");
  EXPECT_STREQ(pf_dtype_name(PF_I32), "int32");
  EXPECT_EQ(pf_dtype_name(static_cast<pf_dtype>(5)), nullptr);
  EXPECT_EQ(pf_dtype_size(PF_F32), 4u);
  EXPECT_EQ(pf_dtype_size(PF_F16), 2u);
  EXPECT_EQ(pf_dtype_size(PF_I8), 1u);
  EXPECT_EQ(pf_dtype_size(PF_U8), 1u);
  EXPECT_EQ(pf_dtype_size(PF_I32), 4u);
  EXPECT_EQ(pf_dtype_size(static_cast<pf_dtype>(5)), 0u);
}

TEST(Dtypes, BufferBytesCountTheElementSize) {
  pf_buffer_desc b = Desc("input", PF_ROLE_INPUT, PF_I8, {1, 3, 5, 7});
  EXPECT_EQ(pf_buffer_bytes(&b), 105u);
  b.dtype = PF_U8;
  EXPECT_EQ(pf_buffer_bytes(&b), 105u);
  b.dtype = PF_I32;
  EXPECT_EQ(pf_buffer_bytes(&b), 420u);
  b.dtype = PF_F32;
  EXPECT_EQ(pf_buffer_bytes(&b), 420u);
  // Strided: (1 + sum (extent - 1) * stride) elements.
  pf_buffer_desc s = Desc("bias", PF_ROLE_BIAS, PF_I8, {2, 3});
  s.strides[0] = 8;
  s.strides[1] = 2;
  EXPECT_EQ(pf_buffer_bytes(&s), 13u);
  s.dtype = PF_I32;
  EXPECT_EQ(pf_buffer_bytes(&s), 52u);
}

// The generator writes the manifest and registry.c from its own tables, and reads and writes .npy
// files through base/npy.h: the same names and sizes as the runtime's.
TEST(Dtypes, EmitterTablesAgreeWithTheRuntime) {
  for (pf_dtype t : kAll) {
    SCOPED_TRACE(pf_dtype_name(t));
    EXPECT_EQ(padfold::name_of(padfold::kDtypeNames, t), pf_dtype_name(t));
    EXPECT_EQ(static_cast<size_t>(padfold::dtype_size(t)), pf_dtype_size(t));
    EXPECT_EQ(padfold::name_of(padfold::kDtypeConstants, t).rfind("PF_", 0), 0u);
    if (const auto n = padfold::npy_dtype_of(t)) {
      EXPECT_EQ(padfold::pf_dtype_of(*n), t);
      EXPECT_STREQ(padfold::npy_dtype_name(*n), pf_dtype_name(t));
      EXPECT_EQ(padfold::npy_dtype_size(*n), pf_dtype_size(t));
    } else {
      EXPECT_EQ(t, PF_F16);
    }
  }
  EXPECT_EQ(padfold::pf_dtype_of(padfold::DType::I8), PF_I8);
  EXPECT_EQ(padfold::pf_dtype_of(padfold::DType::U8), PF_U8);
  EXPECT_EQ(padfold::pf_dtype_of(padfold::DType::F32), PF_F32);
}

// ---- a quantized kernel in Halide's argv form: output uint8 = clamp(input int8 + bias int32) ----

struct SeenType {
  int code = -1, bits = -1, lanes = -1;
};
thread_local SeenType g_seen[3];

int Requant(void** args) {  // input int8 [n], bias int32 [1], output uint8 [n]
  const auto* in = static_cast<halide_buffer_t*>(args[0]);
  const auto* bias = static_cast<halide_buffer_t*>(args[1]);
  const auto* out = static_cast<halide_buffer_t*>(args[2]);
  for (int i = 0; i < 3; ++i) {
    const auto* b = static_cast<halide_buffer_t*>(args[i]);
    g_seen[i] = {b->type.code, b->type.bits, b->type.lanes};
  }
  const int32_t add = reinterpret_cast<const int32_t*>(bias->host)[0];
  for (int i = 0; i < in->dim[0].extent; ++i) {
    const int32_t v = reinterpret_cast<const int8_t*>(in->host)[i] + add;
    out->host[i] = static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
  }
  return 0;
}

int Narrow(void** args) {  // input uint8 [n], output int8 [n] = input - 128
  const auto* in = static_cast<halide_buffer_t*>(args[0]);
  const auto* out = static_cast<halide_buffer_t*>(args[1]);
  for (int i = 0; i < in->dim[0].extent; ++i)
    reinterpret_cast<int8_t*>(out->host)[i] = static_cast<int8_t>(in->host[i] - 128);
  return 0;
}

const int32_t kBias[1] = {100};

// x (int8 [n]) -> q = requant(x, bias 100) (uint8) -> r = narrow(q) (int8); output r. The memory
// plan puts q at 0 of an arena of `arena` bytes.
struct QuantGraph {
  int64_t n;
  std::vector<pf_buffer_desc> inputs, q, r;
  pf_kernel_desc kernels[2];
  const char* outputs[1] = {"r"};
  int64_t offsets[2] = {0, -1};
  pf_registry reg{};

  QuantGraph(int64_t n_, int64_t arena) : n(n_) {
    inputs = {Desc("x", PF_ROLE_INPUT, PF_I8, {n})};
    q = {Desc("input", PF_ROLE_INPUT, PF_I8, {n}, "x"), Desc("bias", PF_ROLE_BIAS, PF_I32, {1}),
         Desc("output", PF_ROLE_OUTPUT, PF_U8, {n})};
    q[1].data = kBias;
    r = {Desc("input", PF_ROLE_INPUT, PF_U8, {n}, "q"), Desc("output", PF_ROLE_OUTPUT, PF_I8, {n})};
    kernels[0] = {"q", "pf_q", "requant", Requant, 3, q.data(), nullptr};
    kernels[1] = {"r", "pf_r", "narrow", Narrow, 2, r.data(), nullptr};
    reg = pf_registry{PF_FORMAT_VERSION,
                      "quant",
                      FAKE_TARGET,
                      2,
                      kernels,
                      {},
                      1,
                      inputs.data(),
                      1,
                      outputs,
                      {arena, PF_ARENA_ALIGNMENT, offsets, nullptr},
                      0,
                      nullptr};
  }
};

class Quant : public testing::Test {
 protected:
  void TearDown() override {
    pf_model_close(model_);
    pf_bundle_close(bundle_);
  }
  pf_status Open(const pf_registry* reg, const pf_model_options* opts = nullptr) {
    pf_status s = pf_registry_open(reg, nullptr, &bundle_, err_, sizeof err_);
    return s != PF_OK ? s : pf_model_open(bundle_, opts, &model_, err_, sizeof err_);
  }
  pf_bundle* bundle_ = nullptr;
  pf_model* model_ = nullptr;
  char err_[PF_ERRLEN] = "";
};

TEST_F(Quant, KernelsGetTheHalideTypeOfEachDtype) {
  QuantGraph g(4, 64);
  ASSERT_EQ(pf_registry_open(&g.reg, nullptr, &bundle_, err_, sizeof err_), PF_OK) << err_;
  const pf_kernel_desc* k = nullptr;
  ASSERT_EQ(pf_bundle_find(bundle_, "q", &k, err_, sizeof err_), PF_OK) << err_;
  int8_t x[4] = {-128, -1, 0, 127};
  alignas(4) int32_t bias[1] = {100};
  uint8_t y[4] = {};
  pf_tensor t[3] = {pf_tensor_of(&k->buffers[0], x, sizeof x),
                    pf_tensor_of(&k->buffers[1], bias, sizeof bias),
                    pf_tensor_of(&k->buffers[2], y, sizeof y)};
  ASSERT_EQ(pf_run(k, t, 3, err_, sizeof err_), PF_OK) << err_;
  EXPECT_EQ(g_seen[0].code, halide_type_int);
  EXPECT_EQ(g_seen[0].bits, 8);
  EXPECT_EQ(g_seen[1].code, halide_type_int);
  EXPECT_EQ(g_seen[1].bits, 32);
  EXPECT_EQ(g_seen[2].code, halide_type_uint);
  EXPECT_EQ(g_seen[2].bits, 8);
  for (const SeenType& s : g_seen) EXPECT_EQ(s.lanes, 1);
  const uint8_t want[4] = {0, 99, 100, 227};
  EXPECT_EQ(std::memcmp(y, want, 4), 0);

  // The checks count bytes and alignment by dtype.
  pf_tensor bad[3] = {t[0], t[1], t[2]};
  bad[2].bytes = 3;
  EXPECT_EQ(pf_check(k, bad, 3, err_, sizeof err_), PF_ERR_SIZE);
  EXPECT_HAS(err_, "buffer 'output': the kernel accesses 4 bytes, the allocation has 3");
  bad[2] = t[2];
  bad[0].dtype = PF_U8;
  EXPECT_EQ(pf_check(k, bad, 3, err_, sizeof err_), PF_ERR_DTYPE);
  EXPECT_HAS(err_, "buffer 'input': expected dtype int8, got uint8");
  bad[0] = t[0];
  bad[1].dtype = PF_F32;
  EXPECT_EQ(pf_check(k, bad, 3, err_, sizeof err_), PF_ERR_DTYPE);
  EXPECT_HAS(err_, "buffer 'bias': expected dtype int32, got float32");
  alignas(4) unsigned char raw[8] = {};
  bad[1] = t[1];
  bad[1].data = raw + 1;
  EXPECT_EQ(pf_check(k, bad, 3, err_, sizeof err_), PF_ERR_ALIGNMENT);
  EXPECT_HAS(err_, "is not aligned to 4 bytes (int32)");
  bad[1] = t[1];
  bad[0].data = raw + 1;  // one byte: any address
  bad[0].bytes = 4;
  EXPECT_EQ(pf_check(k, bad, 3, err_, sizeof err_), PF_OK) << err_;
}

// The uint8 intermediate q takes n bytes: an arena of 128 holds q of 100 elements (as float32 it
// would need 400), and the runs write the same values.
TEST_F(Quant, ModelRunsSizeIntermediatesByDtype) {
  QuantGraph g(100, 128);
  size_t intermediate_bytes = 0;
  pf_model_options opts{[](void* uc, size_t n) -> void* {
                          if (n == 100) *static_cast<size_t*>(uc) = n;
                          return std::malloc(n);
                        },
                        [](void*, void* p) { std::free(p); }, &intermediate_bytes, 1, 0};
  ASSERT_EQ(Open(&g.reg, &opts), PF_OK) << err_;
  EXPECT_EQ(pf_model_arena_bytes(model_), 128u);
  EXPECT_EQ(pf_model_input(model_, 0)->dtype, PF_I8);
  EXPECT_EQ(pf_model_output(model_, 0)->dtype, PF_I8);
  int8_t x[100], y[100], y2[100];
  for (int i = 0; i < 100; ++i) x[i] = static_cast<int8_t>(i * 37 - 128);
  pf_tensor in = pf_tensor_of(pf_model_input(model_, 0), x, sizeof x);
  pf_tensor out = pf_tensor_of(pf_model_output(model_, 0), y, sizeof y);
  ASSERT_EQ(pf_model_run(model_, &in, 1, &out, 1, err_, sizeof err_), PF_OK) << err_;
  EXPECT_EQ(intermediate_bytes, 100u);  // per-run allocation: q's 100 bytes
  for (int i = 0; i < 100; ++i) {
    const int q = std::min(255, std::max(0, x[i] + 100));
    EXPECT_EQ(y[i], static_cast<int8_t>(q - 128)) << i;
  }
  alignas(PF_ARENA_ALIGNMENT) unsigned char arena[128];
  out.data = y2;
  ASSERT_EQ(pf_model_run_static(model_, arena, sizeof arena, &in, 1, &out, 1, err_, sizeof err_),
            PF_OK)
      << err_;
  EXPECT_EQ(std::memcmp(y, y2, sizeof y), 0);
  // The caller's tensors are checked by dtype and bytes.
  pf_tensor wrong = in;
  wrong.dtype = PF_U8;
  EXPECT_EQ(pf_model_run(model_, &wrong, 1, &out, 1, err_, sizeof err_), PF_ERR_DTYPE);
  EXPECT_HAS(err_, "model 'quant': input 'x': expected dtype int8, got uint8");
  wrong = out;
  wrong.bytes = 99;
  EXPECT_EQ(pf_model_run(model_, &in, 1, &wrong, 1, err_, sizeof err_), PF_ERR_SIZE);
  EXPECT_HAS(err_, "the kernel accesses 100 bytes, the allocation has 99");
}

TEST_F(Quant, PlanTooSmallForTheDtypesBytesIsRefused) {
  QuantGraph g(100, 64);
  EXPECT_EQ(Open(&g.reg), PF_ERR_MISMATCH);
  EXPECT_HAS(err_,
             "memory plan puts kernel 'q' (an intermediate, 100 bytes) at offset 0 of an "
             "arena of 64 bytes");
}

TEST_F(Quant, FeedOfAnotherDtypeIsRefused) {
  QuantGraph g(4, 64);
  g.r[0].dtype = PF_I8;  // q writes uint8
  EXPECT_EQ(Open(&g.reg), PF_ERR_GRAPH);
  EXPECT_HAS(err_, "kernel 'r' buffer 'input' is int8, the tensor 'q' feeding it is uint8");
}

// ---- the manifest's dtype names ----

class DtypeManifest : public ScratchBundle {};

// "int32" is a dtype the manifest parser knows: the fake library's float32 bias then differs.
TEST_F(DtypeManifest, NamesTheNewDtypes) {
  for (const char* name : {"int8", "uint8", "int32"}) {
    manifest_["kernels"][1]["buffers"][1]["dtype"] = name;
    pf_bundle_close(bundle_);
    bundle_ = nullptr;
    EXPECT_EQ(Open(), PF_ERR_MISMATCH) << name;
    EXPECT_HAS(err_, (std::string("kernel 'add_bias' buffer 1 ('bias') dtype: manifest has ") +
                      name + ", library has float32")
                         .c_str());
  }
  manifest_["kernels"][1]["buffers"][1]["dtype"] = "int16";
  EXPECT_EQ(Open(), PF_ERR_MANIFEST);
  EXPECT_HAS(err_, "dtype: unknown value 'int16'");
}

// ---- .npy weight files of each dtype ----

// A v1.0 .npy file with the given descr (spelt as is), shape text and data.
std::string NpyFile(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ').push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {  // little-endian (the test machines are)
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

class NpyWeights : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("padfold_rt_npy_" + std::to_string(getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
  }
  // Loads file `name` into a dense buffer of dtype and shape; dst holds pf_buffer_bytes.
  pf_status Load(const char* name, pf_dtype dtype, std::vector<int64_t> shape,
                 std::vector<unsigned char>& dst) {
    const pf_buffer_desc b = Desc("weights", PF_ROLE_WEIGHTS, dtype, std::move(shape), name);
    dst.assign(pf_buffer_bytes(&b), 0xee);
    return pf_npy_load_weights(dir_.c_str(), "q", &b, dst.data(), dst.size(), err_, sizeof err_);
  }
  fs::path dir_;
  char err_[PF_ERRLEN] = "";
};

TEST_F(NpyWeights, Int8Uint8AndInt32FilesLoad) {
  const std::vector<int8_t> w = {-128, -1, 0, 1, 64, 127};
  const std::vector<uint8_t> u = {0, 1, 128, 200, 254, 255};
  const std::vector<int32_t> b = {std::numeric_limits<int32_t>::min(), -1, 0, 123456789,
                                  std::numeric_limits<int32_t>::max()};
  padfold::write_npy((dir_ / "w.npy").string(), {2, 3}, padfold::NpyDType::I8, w.data());
  padfold::write_npy((dir_ / "u.npy").string(), {2, 3}, padfold::NpyDType::U8, u.data());
  padfold::write_npy((dir_ / "b.npy").string(), {5}, padfold::NpyDType::I32, b.data());
  // numpy writes '|i1' and '|u1'; '<i1' and '<u1' (which numpy reads the same) are accepted.
  Write("w_lt.npy", NpyFile("<i1", "(2, 3)", Bytes(w)));
  Write("u_lt.npy", NpyFile("<u1", "(2, 3)", Bytes(u)));
  std::vector<unsigned char> got;
  for (const char* f : {"w.npy", "w_lt.npy"}) {
    ASSERT_EQ(Load(f, PF_I8, {2, 3}, got), PF_OK) << err_;
    EXPECT_EQ(std::memcmp(got.data(), w.data(), 6), 0) << f;
  }
  for (const char* f : {"u.npy", "u_lt.npy"}) {
    ASSERT_EQ(Load(f, PF_U8, {2, 3}, got), PF_OK) << err_;
    EXPECT_EQ(std::memcmp(got.data(), u.data(), 6), 0) << f;
  }
  ASSERT_EQ(Load("b.npy", PF_I32, {5}, got), PF_OK) << err_;
  ASSERT_EQ(got.size(), 20u);
  EXPECT_EQ(std::memcmp(got.data(), b.data(), 20), 0);
  // What the header parser says of each.
  const std::string text = NpyFile("|u1", "(2, 3)", Bytes(u));
  pf_npy_header h;
  ASSERT_EQ(pf_npy_parse_header(text.data(), text.size(), text.size(), "u", &h, err_, sizeof err_),
            PF_OK)
      << err_;
  EXPECT_EQ(h.dtype, PF_U8);
  EXPECT_EQ(h.data_bytes, 6u);
  EXPECT_EQ(h.data_offset, text.size() - 6);
  EXPECT_EQ(h.data_offset % 64, 0u);
}

TEST_F(NpyWeights, DtypeMismatchNamesTheFileAndBothDtypes) {
  padfold::write_npy((dir_ / "w.npy").string(), {3}, padfold::NpyDType::I8,
                     std::vector<int8_t>{1, 2, 3}.data());
  padfold::write_npy((dir_ / "u.npy").string(), {3}, padfold::NpyDType::U8,
                     std::vector<uint8_t>{1, 2, 3}.data());
  padfold::write_npy((dir_ / "b.npy").string(), {3}, padfold::NpyDType::I32,
                     std::vector<int32_t>{1, 2, 3}.data());
  padfold::write_npy_f32((dir_ / "f.npy").string(), {3}, std::vector<float>{1, 2, 3}.data());
  struct Case {
    const char* file;
    pf_dtype buffer;
    const char* message;
  };
  for (const Case& c : {
           Case{"w.npy", PF_I32, "dtype int8 ('|i1'), expected int32 ('<i4'), the buffer's dtype"},
           Case{"b.npy", PF_I8, "dtype int32 ('<i4'), expected int8 ('|i1'), the buffer's dtype"},
           // The same size, another dtype: refused all the same.
           Case{"u.npy", PF_I8, "dtype uint8 ('|u1'), expected int8 ('|i1'), the buffer's dtype"},
           Case{"w.npy", PF_U8, "dtype int8 ('|i1'), expected uint8 ('|u1'), the buffer's dtype"},
           Case{"f.npy", PF_I32,
                "dtype float32 ('<f4'), expected int32 ('<i4'), the buffer's dtype"},
           Case{"b.npy", PF_F32,
                "dtype int32 ('<i4'), expected float32 ('<f4'), the buffer's dtype"},
       }) {
    std::vector<unsigned char> got;
    EXPECT_EQ(Load(c.file, c.buffer, {3}, got), PF_ERR_IO) << c.file;
    EXPECT_HAS(err_, ("kernel 'q' buffer 'weights': " + (dir_ / c.file).string() + ": ").c_str());
    EXPECT_HAS(err_, c.message);
    EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](unsigned char v) { return v == 0xee; }));
  }
}

TEST_F(NpyWeights, BadIntegerFilesAreRefused) {
  Write("short.npy", NpyFile("|i1", "(2, 3)", std::string(5, '\1')));
  Write("long.npy", NpyFile("<i4", "(2,)", std::string(9, '\1')));
  Write("i2.npy", NpyFile("<i2", "(3,)", std::string(6, '\1')));
  Write("be.npy", NpyFile(">i4", "(3,)", std::string(12, '\1')));
  Write("shape.npy", NpyFile("|i1", "(3, 2)", std::string(6, '\1')));
  std::vector<unsigned char> got;
  EXPECT_EQ(Load("short.npy", PF_I8, {2, 3}, got), PF_ERR_IO);
  EXPECT_HAS(err_, "file has 5 bytes of data, header promises 6 (truncated)");
  EXPECT_EQ(Load("long.npy", PF_I32, {2}, got), PF_ERR_IO);
  EXPECT_HAS(err_, "file has 9 bytes of data, header promises 8 (extra bytes at the end)");
  EXPECT_EQ(Load("i2.npy", PF_I32, {3}, got), PF_ERR_IO);
  EXPECT_HAS(err_,
             "dtype '<i2' is not supported, expected little-endian float32 ('<f4'), int8 "
             "('|i1'), uint8 ('|u1') or int32 ('<i4')");
  EXPECT_EQ(Load("be.npy", PF_I32, {3}, got), PF_ERR_IO);
  EXPECT_HAS(err_, "dtype '>i4' is not supported");
  EXPECT_EQ(Load("shape.npy", PF_I8, {2, 3}, got), PF_ERR_IO);
  EXPECT_HAS(err_, "shape (3, 2), the buffer is HW (2, 3)");
}

// The C reader and the C++ reader of `padfold run` and `padfold compile` accept the same files of
// every dtype, with the same dtype, shape and data; the C++ float32 reader refuses the others.
TEST_F(NpyWeights, CppReaderAgreesAndRoundTrips) {
  const std::vector<int32_t> b = {-7, 0, 7, 1 << 30};
  const std::string i32 = NpyFile("<i4", "(2, 2)", Bytes(b));
  const padfold::NpyData d = padfold::parse_npy(i32, "b");
  EXPECT_EQ(d.dtype, padfold::NpyDType::I32);
  EXPECT_EQ(d.shape, (std::vector<int64_t>{2, 2}));
  ASSERT_EQ(d.numel(), 4u);
  EXPECT_EQ(std::memcmp(d.data(), b.data(), 16), 0);
  try {
    padfold::parse_npy_f32(i32, "b.npy");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_HAS(e.what(), "b.npy: dtype '<i4' is int32, expected little-endian float32 ('<f4')");
  }
  // write_npy then read_npy: the same dtype, shape and bytes, numpy's header.
  const std::vector<uint8_t> u = {0, 7, 255};
  const std::string path = (dir_ / "u.npy").string();
  padfold::write_npy(path, {3}, padfold::NpyDType::U8, u.data());
  const padfold::NpyData r = padfold::read_npy(path);
  EXPECT_EQ(r.dtype, padfold::NpyDType::U8);
  EXPECT_EQ(r.bytes, (std::vector<unsigned char>{0, 7, 255}));
  EXPECT_EQ(padfold::npy_preamble({3}, padfold::NpyDType::I8).substr(10, 57),
            "{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }");

  std::vector<std::string> files;
  for (const char* descr :
       {"<f4", "|i1", "<i1", "|u1", "<u1", "<i4", ">i1", "|i4", "<u4", "<i8", "|b1", "<f2", "i1"}) {
    for (size_t extra : {0, 1}) {
      const size_t esize = std::string(descr).find('4') != std::string::npos   ? 4
                           : std::string(descr).find('8') != std::string::npos ? 8
                           : std::string(descr).find('2') != std::string::npos ? 2
                                                                               : 1;
      files.push_back(NpyFile(descr, "(2, 3)", std::string(6 * esize + extra, 'x')));
    }
  }
  for (const std::string& f : files) {
    bool cpp_ok = true;
    padfold::NpyData cpp;
    try {
      cpp = padfold::parse_npy(f, "f");
    } catch (const std::exception&) {
      cpp_ok = false;
    }
    pf_npy_header h;
    const bool c_ok =
        pf_npy_parse_header(f.data(), f.size(), f.size(), "f", &h, err_, sizeof err_) == PF_OK;
    EXPECT_EQ(c_ok, cpp_ok) << f << ": " << err_;
    if (c_ok && cpp_ok) {
      EXPECT_EQ(h.dtype, padfold::pf_dtype_of(cpp.dtype)) << f;
      EXPECT_EQ(h.data_bytes, cpp.bytes.size()) << f;
      EXPECT_EQ(std::vector<int64_t>(h.shape, h.shape + h.rank), cpp.shape) << f;
    }
  }
}

}  // namespace
