// `padfold run` end to end on a real bundle (examples/tiny.json for "host,x86-64-linux-avx2-fma",
// compiled at test time by a ctest fixture): .npy inputs written here, y.npy read back and
// compared element-wise with the naive reference (tolerance: bundle_util.h); and its error paths:
// malformed .npy files (generator/base/npy.h), outputs that cannot be written, and outputs that
// would replace the bundle's own files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

#include "base/npy.h"
#include "bundle_util.h"
#include "frontend/spec.h"
#include "kernel_runner.h"

namespace {

namespace fs = std::filesystem;
using padfold::testing::contains;
using padfold::testing::run_command;
using padfold::testing::shell_quote;

fs::path work_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir =
      fs::path(PF_WORK_DIR) / (std::string(info->test_suite_name()) + "." + info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

template <typename T = float>
std::string write_npy(const fs::path& path, const padfold::ref::Tensor& t) {
  std::vector<size_t> shape(t.shape.begin(), t.shape.end());
  xt::xarray<T> a = xt::adapt(t.data, shape);
  xt::dump_npy(path.string(), a);
  return path.string();
}

padfold::testing::CommandResult run_padfold(const std::string& args,
                                            const std::string& bundle = PF_TINY_BUNDLE) {
  return run_command(shell_quote(PADFOLD_BIN) + " run " + shell_quote(bundle) + " " + args);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

// A .npy file put together by hand: magic, version major.0, the header length field (2 bytes for
// 1.0, 4 for 2.0 and 3.0, little-endian), the header as given, the data.
std::string npy_bytes(int major, const std::string& header, const std::string& data) {
  std::string s("\x93NUMPY", 6);
  s += static_cast<char>(major);
  s += '\0';
  const size_t n = header.size();
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) s += static_cast<char>((n >> (8 * i)) & 0xff);
  return s + header + data;
}

// The dict padded as numpy pads it: spaces, then a newline, to `header_len` bytes in all.
std::string padded(const std::string& dict, size_t header_len) {
  std::string h = dict;
  h.append(header_len - dict.size() - 1, ' ');
  return h + '\n';
}

// float32 data, little-endian (the test machines are).
std::string f32_bytes(const std::vector<float>& v) {
  std::string s(v.size() * sizeof(float), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// Files under dir whose names mark them as temporary files of the .npy writer.
std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (contains(e.path().filename().string(), ".tmp")) found.push_back(e.path().string());
  return found;
}

const padfold::Layer& tiny_layer(const std::string& name) {
  static const padfold::Model model = padfold::load_spec(PF_TINY_SPEC);
  for (const auto& L : model.layers)
    if (L.name == name) return L;
  throw std::runtime_error("no layer " + name);
}

// Every layer: inputs as .npy, `padfold run`, y.npy against the reference.
TEST(PadfoldRun, EveryLayerMatchesReference) {
  const fs::path dir = work_dir();
  const padfold::Model model = padfold::load_spec(PF_TINY_SPEC);
  unsigned seed = 100;
  for (const padfold::Layer& L : model.layers) {
    SCOPED_TRACE("layer " + L.name);
    const auto data = padfold::ref::random_data(L, seed++);
    std::string args = "--layer " + L.name + " --input " +
                       shell_quote(write_npy(dir / (L.name + "_x.npy"), data.input));
    if (L.has_weights())
      args += " --weights " + shell_quote(write_npy(dir / (L.name + "_w.npy"), data.weights));
    if (L.bias) args += " --bias " + shell_quote(write_npy(dir / (L.name + "_b.npy"), data.bias));
    const fs::path y = dir / (L.name + "_y.npy");
    const auto r = run_padfold(args + " --output " + shell_quote(y.string()));
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "ran " + L.name + " (" + L.op_name + ") on target "))
        << r.output;
    const xt::xarray<float> got = xt::load_npy<float>(y.string());
    const std::vector<int64_t> got_shape(got.shape().begin(), got.shape().end());
    EXPECT_EQ(got_shape, L.output_shape_full());
    EXPECT_TRUE(padfold::testing::matches_reference(padfold::ref::reference_output(L, data),
                                                    got.data(), got.size(), L.name));
  }
}

// A knob in range that the layer cannot take as given (three row tiles per task, which divides
// none of the 1, 2 or 4 row tiles stem's 4 output rows make on any host's tile height) is resolved
// at compile time: the manifest records what the kernel does, and the kernel runs and is right.
TEST(PadfoldRun, AKnobTheLayerCannotHonourIsResolvedAndRecorded) {
  const fs::path dir = work_dir();
  const std::string knobs = write_file(dir / "knobs.json", R"({"stem": {"rows_per_task": 3}})");
  const fs::path bundle = dir / "bundle";
  const auto compiled = run_command(
      shell_quote(PADFOLD_BIN) + " compile " + shell_quote(PF_TINY_SPEC) + " -o " +
      shell_quote(bundle.string()) + " --target host -j1 --schedules " + shell_quote(knobs));
  ASSERT_EQ(compiled.status, 0) << compiled.output;
  const auto manifest = nlohmann::json::parse(read_file(bundle / "manifest.json"));
  const auto& stem = manifest.at("targets").at(0).at("schedules").at("stem");
  EXPECT_LT(stem.at("rows_per_task").get<int>(), 3) << stem.dump();
  EXPECT_EQ(stem.at("source"), "overrides") << stem.dump();

  const padfold::Layer& L = tiny_layer("stem");
  const auto data = padfold::ref::random_data(L, 5);
  const fs::path y = dir / "y.npy";
  const auto r = run_padfold(
      "--layer stem --input " + shell_quote(write_npy(dir / "x.npy", data.input)) + " --weights " +
          shell_quote(write_npy(dir / "w.npy", data.weights)) + " --bias " +
          shell_quote(write_npy(dir / "b.npy", data.bias)) + " --output " + shell_quote(y.string()),
      bundle.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const xt::xarray<float> got = xt::load_npy<float>(y.string());
  EXPECT_TRUE(padfold::testing::matches_reference(padfold::ref::reference_output(L, data),
                                                  got.data(), got.size(), "stem"));
}

class PadfoldRunErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = work_dir();
    const padfold::Layer& L = tiny_layer("stem");  // input 1x7x7x3, weights 4x4x3x8, bias 8
    data = padfold::ref::random_data(L, 7);
    x = write_npy(dir / "x.npy", data.input);
    w = write_npy(dir / "w.npy", data.weights);
    b = write_npy(dir / "b.npy", data.bias);
    y = (dir / "y.npy").string();
  }
  // Expects a nonzero exit, a message containing every part, and no output file.
  void expect_error(const std::string& args, const std::vector<std::string>& parts) {
    const auto r = run_padfold(args);
    EXPECT_NE(r.status, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "padfold: error: ")) << r.output;
    for (const auto& p : parts)
      EXPECT_TRUE(contains(r.output, p)) << "no '" << p << "' in:\n" << r.output;
    EXPECT_FALSE(fs::exists(y)) << "wrote " << y << " anyway";
  }
  fs::path dir;
  padfold::ref::LayerData data;
  std::string x, w, b, y;
};

TEST_F(PadfoldRunErrors, WrongShapeNamesFlagFileAndBuffer) {
  padfold::ref::Tensor bad({1, 7, 8, 3}, 0.5f);
  const std::string bad_x = write_npy(dir / "x_wrong_shape.npy", bad);
  expect_error("--layer stem --input " + shell_quote(bad_x) + " --weights " + shell_quote(w) +
                   " --bias " + shell_quote(b) + " --output " + shell_quote(y),
               {"--input", bad_x, "shape 1x7x8x3", "buffer 'input'", "NHWC 1x7x7x3"});
}

TEST_F(PadfoldRunErrors, Float64NpyNamesFlagAndFile) {
  const std::string w64 = write_npy<double>(dir / "w_float64.npy", data.weights);
  expect_error("--layer stem --input " + shell_quote(x) + " --weights " + shell_quote(w64) +
                   " --bias " + shell_quote(b) + " --output " + shell_quote(y),
               {"--weights", w64, "float32"});
}

// A quantized layer's files (int8 activations and weights, int32 bias) given to float32 buffers:
// refused naming the flag, the file, the buffer and both dtypes, before anything runs.
TEST_F(PadfoldRunErrors, IntegerNpyForAFloatBufferNamesBothDtypes) {
  const std::string x8 = write_npy<int8_t>(dir / "x_int8.npy", data.input);
  expect_error("--layer stem --input " + shell_quote(x8) + " --weights " + shell_quote(w) +
                   " --bias " + shell_quote(b) + " --output " + shell_quote(y),
               {"--input " + x8 +
                ": dtype int8 ('|i1') does not match kernel 'stem' buffer "
                "'input', which is float32: give a .npy file of float32 ('<f4')"});
  const std::string xu8 = write_npy<uint8_t>(dir / "x_uint8.npy", data.input);
  expect_error("--layer stem --input " + shell_quote(xu8) + " --weights " + shell_quote(w) +
                   " --bias " + shell_quote(b) + " --output " + shell_quote(y),
               {"--input", xu8, "dtype uint8 ('|u1')", "buffer 'input'", "float32"});
  const std::string b32 = write_npy<int32_t>(dir / "b_int32.npy", data.bias);
  expect_error("--layer stem --input " + shell_quote(x) + " --weights " + shell_quote(w) +
                   " --bias " + shell_quote(b32) + " --output " + shell_quote(y),
               {"--bias", b32, "dtype int32 ('<i4') does not match kernel 'stem' buffer 'bias'"});
}

TEST_F(PadfoldRunErrors, MissingWeightsNamesFlag) {
  expect_error("--layer stem --input " + shell_quote(x) + " --bias " + shell_quote(b) +
                   " --output " + shell_quote(y),
               {"layer 'stem' needs --weights", "buffer 'weights'", "HWIO 4x4x3x8"});
}

TEST_F(PadfoldRunErrors, UnknownLayerNamesItAndListsLayers) {
  expect_error("--layer nope --input " + shell_quote(x) + " --output " + shell_quote(y),
               {"'nope'", "stem, dw, pool, avg"});
}

TEST_F(PadfoldRunErrors, WeightsForPoolingLayer) {
  padfold::ref::Tensor px(tiny_layer("pool").input_shape(), 0.25f);
  expect_error("--layer pool --input " + shell_quote(write_npy(dir / "px.npy", px)) +
                   " --weights " + shell_quote(w) + " --output " + shell_quote(y),
               {"layer 'pool' takes no --weights"});
}

TEST_F(PadfoldRunErrors, MissingFileNamesIt) {
  const std::string missing = (dir / "does_not_exist.npy").string();
  expect_error("--layer stem --input " + shell_quote(missing) + " --weights " + shell_quote(w) +
                   " --bias " + shell_quote(b) + " --output " + shell_quote(y),
               {"--input", missing});
}

// ---- Malformed .npy files: each is refused with a message naming the flag, the file and what is
// wrong, before any allocation the header asks for; no output is written.

class PadfoldRunNpy : public PadfoldRunErrors {
 protected:
  // The stem arguments with `in` as --input, and `out` (y unless given) as --output.
  std::string with_input(const std::string& in, const std::string& out = "") const {
    return "--layer stem --input " + shell_quote(in) + " --weights " + shell_quote(w) + " --bias " +
           shell_quote(b) + " --output " + shell_quote(out.empty() ? y : out);
  }
  // A v1.0 header for a float32 C-order array of stem's input shape, as numpy pads it.
  static std::string stem_header(const std::string& shape = "(1, 7, 7, 3)") {
    return padded("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }", 118);
  }
  std::string x_data() const { return f32_bytes(data.input.data); }  // 147 floats, 588 bytes
};

TEST_F(PadfoldRunNpy, TruncatedDataIsAnError) {
  const std::string full = read_file(x);
  const std::string bad = write_file(dir / "x_truncated.npy", full.substr(0, full.size() - 5));
  expect_error(with_input(bad),
               {"--input", bad, "file has 583 bytes of data, header promises 588", "truncated"});
}

TEST_F(PadfoldRunNpy, HeaderPromisingMoreDataThanTheFileHoldsIsAnError) {
  const std::string bad = write_file(dir / "x_promises_more.npy",
                                     npy_bytes(1, stem_header("(1, 7, 7, 300)"), x_data()));
  expect_error(with_input(bad),
               {"--input", bad, "file has 588 bytes of data, header promises 58800"});
}

TEST_F(PadfoldRunNpy, ExtraTrailingDataIsAnError) {
  const std::string bad = write_file(dir / "x_extra.npy", read_file(x) + std::string(4, '\0'));
  expect_error(with_input(bad), {"--input", bad, "file has 592 bytes of data, header promises 588",
                                 "extra bytes after the data"});
}

// 13 bytes: version 2.0 with a header length of 0xFFFFFFFF. Refused from the length field alone
// (xtensor allocated the 4 GiB it promised first).
TEST_F(PadfoldRunNpy, HugeV2HeaderLengthFailsFromTheLengthField) {
  const std::string bad = write_file(dir / "x_v2_huge_header.npy",
                                     std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff{", 13));
  ASSERT_EQ(fs::file_size(bad), 13u);
  expect_error(with_input(bad),
               {"--input", bad, "header length 4294967295 exceeds the limit of 65536 bytes"});
}

TEST_F(PadfoldRunNpy, HugeShapeIsRefusedBeforeAllocating) {
  const std::string bad = write_file(dir / "x_huge_shape.npy",
                                     npy_bytes(1, stem_header("(100000, 100000, 100000, 3)"), ""));
  expect_error(with_input(bad), {"--input", bad, "shape (100000, 100000, 100000, 3) is too large"});
  // A product that overflows 64 bits is too large as well, not small.
  const std::string wrap =
      write_file(dir / "x_wrapping_shape.npy",
                 npy_bytes(1, stem_header("(4294967296, 4294967296, 1, 1)"), x_data()));
  expect_error(with_input(wrap), {"--input", wrap, "is too large"});
}

TEST_F(PadfoldRunNpy, Float64DescrSaysWhatItFound) {
  const std::string bad = write_file(
      dir / "x_f8.npy",
      npy_bytes(1, padded("{'descr': '<f8', 'fortran_order': False, 'shape': (1, 7, 7, 3), }", 118),
                x_data() + x_data()));
  expect_error(with_input(bad), {"--input", bad, "dtype '<f8' is float64", "expected", "float32"});
  const std::string be = write_file(
      dir / "x_be.npy",
      npy_bytes(1, padded("{'descr': '>f4', 'fortran_order': False, 'shape': (1, 7, 7, 3), }", 118),
                x_data()));
  expect_error(with_input(be), {"--input", be, "dtype '>f4' is big-endian float32"});
}

TEST_F(PadfoldRunNpy, FortranOrderIsAnError) {
  const std::string bad = write_file(
      dir / "x_fortran.npy",
      npy_bytes(1, padded("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 7, 7, 3), }", 118),
                x_data()));
  expect_error(with_input(bad), {"--input", bad, "fortran_order True", "not supported"});
}

TEST_F(PadfoldRunNpy, BadMagicIsAnError) {
  std::string bytes = read_file(x);
  bytes[1] = 'n';
  const std::string bad = write_file(dir / "x_magic.npy", bytes);
  expect_error(with_input(bad), {"--input", bad, "not a .npy file", "\\x93NUMPY"});
  const std::string text = write_file(dir / "x_text.npy", "hello, world\n");
  expect_error(with_input(text), {"--input", text, "not a .npy file"});
}

// Every other way a header can be wrong, each with the words that say what is wrong.
TEST_F(PadfoldRunNpy, MalformedHeadersSayWhatIsWrong) {
  const std::string d = x_data();
  const auto v1 = [&](const std::string& dict) { return npy_bytes(1, padded(dict, 118), d); };
  const struct {
    const char* name;
    std::string bytes;
    const char* message;
  } cases[] = {
      {"empty", "", "truncated .npy file: 0 bytes"},
      {"magic_only", std::string("\x93NUMPY", 6), "truncated .npy file: 6 bytes"},
      {"no_length", std::string("\x93NUMPY\x01\x00\x05", 9), "too short for the header length"},
      {"version_4", npy_bytes(4, stem_header(), d), "unsupported .npy version 4.0"},
      {"version_1_1", "\x93NUMPY\x01\x01" + stem_header().substr(0, 2),
       "unsupported .npy version 1.1"},
      {"header_past_end", npy_bytes(1, stem_header(), d).substr(0, 60),
       "the header length is 118 bytes but the file has only 50"},
      {"not_a_dict", v1("['descr', '<f4']"), "expected '{'"},
      {"unknown_key", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 7, 7, 3), 'x': 1}"),
       "unexpected key 'x'"},
      {"missing_shape", v1("{'descr': '<f4', 'fortran_order': False}"), "missing key(s) 'shape'"},
      {"duplicate_key",
       v1("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1, 7, 7, 3)}"),
       "key 'descr' appears twice"},
      {"shape_not_tuple", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (147)}"),
       "is not a tuple"},
      {"negative_dim", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1, -7, 7, 3)}"),
       "negative dimension"},
      {"float_dim", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 7.0, 7, 3)}"),
       "expected a plain integer"},
      {"order_not_bool", v1("{'descr': '<f4', 'fortran_order': 0, 'shape': (1, 7, 7, 3)}"),
       "True or False"},
      {"structured", v1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (147,)}"),
       "structured dtype"},
      // int32 is a dtype of quantized layers' files: valid, but not this float32 buffer's.
      {"int32", v1("{'descr': '<i4', 'fortran_order': False, 'shape': (1, 7, 7, 3)}"),
       "dtype int32 ('<i4') does not match kernel 'stem' buffer 'input', which is float32"},
      {"int16", v1("{'descr': '<i2', 'fortran_order': False, 'shape': (1, 7, 7, 3)}"),
       "dtype '<i2' is int16, expected"},
      {"junk_after", v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 7, 7, 3)} x"),
       "unexpected bytes after the header dict"},
      {"unterminated", v1("{'descr': '<f4, 'fortran_order': False, 'shape': (1, 7, 7, 3)}"),
       "expected ',' or '}' after the value of 'descr'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string bad = write_file(dir / (std::string("x_") + c.name + ".npy"), c.bytes);
    expect_error(with_input(bad), {"--input", bad, c.message});
  }
  // Not a regular file.
  expect_error(with_input(dir.string()), {"--input", dir.string(), "is a directory"});
}

// Valid files that differ from what xtensor writes: a header longer than 182 bytes (xtensor's
// header decoding shifted a negative value and refused it), versions 2.0 and 3.0, keys in another
// order, double quotes, no trailing comma, spaces and a newline inside. Each gives the output of
// the plain file, byte for byte.
TEST_F(PadfoldRunNpy, ValidHeadersOfEveryShapeLoad) {
  const fs::path y0 = dir / "y0.npy";
  auto r = run_padfold(with_input(x, y0.string()));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string want = read_file(y0);
  const std::string d = x_data();
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 7, 7, 3), }";
  const struct {
    const char* name;
    std::string bytes;
  } cases[] = {
      {"long_header_246", npy_bytes(1, padded(dict, 246), d)},  // 10 + 246 = 256
      {"long_header_1014", npy_bytes(1, padded(dict, 1014), d)},
      {"v2", npy_bytes(2, padded(dict, 116), d)},  // 12 + 116 = 128
      {"v3", npy_bytes(3, padded(dict, 244), d)},
      {"reordered", npy_bytes(1,
                              padded("{\"shape\": (1,7,7,3,), 'fortran_order' : False,"
                                     "'descr':'<f4'}",
                                     118),
                              d)},
      {"multiline", npy_bytes(1,
                              "{'descr': '<f4',\n 'fortran_order': False,\n"
                              " 'shape': ( 1 , 7 , 7 , 3 ) }\n",
                              d)},
      {"unpadded", npy_bytes(1, dict, d)},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string good = write_file(dir / (std::string("x_") + c.name + ".npy"), c.bytes);
    fs::remove(y);
    r = run_padfold(with_input(good));
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(read_file(y), want);
  }
}

// The output padfold writes is numpy's v1.0 format: the data starts at a multiple of 64.
TEST_F(PadfoldRunNpy, OutputIsNumpyV1WithAlignedData) {
  const auto r = run_padfold(with_input(x));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string out = read_file(y);
  ASSERT_GE(out.size(), 10u);
  EXPECT_EQ(out.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<unsigned char>(out[8]) |
                            static_cast<size_t>(static_cast<unsigned char>(out[9])) << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u);
  const std::string header = out.substr(10, header_len);
  EXPECT_EQ(header.substr(0, header.find('}') + 1),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 4, 8), }");
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(out.size(), 10 + header_len + 1 * 4 * 4 * 8 * sizeof(float));
}

// ---- Outputs that cannot be written: an error naming --output and the path, and no file left.

TEST_F(PadfoldRunNpy, WriteErrorsAreErrors) {
  // Linux always has /dev/full (every write fails with ENOSPC); its absence is a test failure.
  ASSERT_TRUE(fs::is_character_file("/dev/full"));
  const auto r = run_padfold("--layer stem --input " + shell_quote(x) + " --weights " +
                             shell_quote(w) + " --bias " + shell_quote(b) + " --output /dev/full");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "padfold: error: --output /dev/full: cannot write: ")) << r.output;
  EXPECT_TRUE(contains(r.output, "No space left on device")) << r.output;
  EXPECT_FALSE(contains(r.output, "wrote")) << r.output;
  // A device that takes the data is written in place.
  const auto ok = run_padfold("--layer stem --input " + shell_quote(x) + " --weights " +
                              shell_quote(w) + " --bias " + shell_quote(b) + " --output /dev/null");
  EXPECT_EQ(ok.status, 0) << ok.output;
}

TEST_F(PadfoldRunNpy, OutputInMissingDirectoryLeavesNothing) {
  const std::string out = (dir / "no_such_dir" / "y.npy").string();
  const auto r = run_padfold(with_input(x, out));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "padfold: error: --output " + out)) << r.output;
  EXPECT_TRUE(contains(r.output, "No such file or directory")) << r.output;
  EXPECT_FALSE(fs::exists(dir / "no_such_dir"));
  EXPECT_EQ(temp_files(dir), std::vector<std::string>{});
}

TEST_F(PadfoldRunNpy, OutputThatIsADirectoryIsAnError) {
  fs::create_directories(y);
  const auto r = run_padfold(with_input(x));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(
      contains(r.output, "padfold: error: --output " + y + ": cannot write: is a directory"))
      << r.output;
  EXPECT_TRUE(fs::is_directory(y));
  EXPECT_EQ(temp_files(dir), std::vector<std::string>{});
}

// A failed run keeps what the output path held; a successful one replaces it whole (a new file
// renamed over it), keeps its permissions, follows a symbolic link and leaves no temporary file.
TEST_F(PadfoldRunNpy, OutputIsReplacedAtomically) {
  write_file(y, "old contents");
  fs::permissions(y, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  const std::string full = read_file(x);
  const std::string bad = write_file(dir / "x_truncated.npy", full.substr(0, full.size() - 4));
  auto r = run_padfold(with_input(bad));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_EQ(read_file(y), "old contents");

  r = run_padfold(with_input(x));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "; wrote " + y)) << r.output;
  const xt::xarray<float> got = xt::load_npy<float>(y);
  EXPECT_EQ(got.size(), 1u * 4 * 4 * 8);
  EXPECT_EQ(fs::status(y).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(temp_files(dir), std::vector<std::string>{});

  const fs::path link = dir / "y_link.npy", real = dir / "y_real.npy";
  write_file(real, "old");
  fs::create_symlink(real, link);
  r = run_padfold(with_input(x, link.string()));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_file(real), read_file(y));
}

// ---- An --output that would replace a file of the open bundle (its shared library: writing it
// while mapped killed padfold with SIGBUS and destroyed the bundle). Refused before running; on a
// copy of the bundle, which must still open and run afterwards.
TEST_F(PadfoldRunNpy, OutputIntoTheBundleIsRefusedAndTheBundleStillWorks) {
  const fs::path copy = dir / "bundle";
  fs::copy(PF_TINY_BUNDLE, copy, fs::copy_options::recursive);
  std::vector<fs::path> libs;
  for (const auto& e : fs::recursive_directory_iterator(copy))
    if (e.path().extension() == ".so") libs.push_back(e.path());
  ASSERT_FALSE(libs.empty()) << "no .so in " << copy;
  std::map<std::string, std::string> before;
  for (const auto& e : fs::recursive_directory_iterator(copy))
    if (e.is_regular_file()) before[e.path().string()] = read_file(e.path());

  const fs::path hard = dir / "hard_link.so", soft = dir / "soft_link.so";
  fs::create_hard_link(libs[0], hard);
  fs::create_symlink(libs[0], soft);
  const std::string inputs = "--layer stem --input " + shell_quote(x) + " --weights " +
                             shell_quote(w) + " --bias " + shell_quote(b) + " --output ";
  const struct {
    std::string output, message;
  } cases[] = {
      {libs[0].string(), "is inside the bundle directory"},
      {(copy / "manifest.json").string(), "is inside the bundle directory"},
      {(copy / "new.npy").string(), "is inside the bundle directory"},
      {(copy / "." / libs[0].parent_path().filename() / ".." / "manifest.json").string(),
       "is inside the bundle directory"},
      {soft.string(), "is inside the bundle directory"},
      {hard.string(), "is the bundle's file "},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.output);
    const auto r = run_padfold(inputs + shell_quote(c.output), copy.string());
    EXPECT_NE(r.status, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "padfold: error: --output " + c.output + ": " + c.message))
        << r.output;
    if (c.output == hard.string()) {
      EXPECT_TRUE(contains(r.output, libs[0].filename().string())) << r.output;
    }
  }
  EXPECT_FALSE(fs::exists(copy / "new.npy"));
  for (const auto& [path, bytes] : before)
    EXPECT_TRUE(read_file(path) == bytes) << path << " changed";
  EXPECT_EQ(temp_files(copy), std::vector<std::string>{});

  // The bundle still opens and runs, and gives the reference output.
  const auto r = run_padfold(inputs + shell_quote(y), copy.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const xt::xarray<float> got = xt::load_npy<float>(y);
  EXPECT_TRUE(padfold::testing::matches_reference(
      padfold::ref::reference_output(tiny_layer("stem"), data), got.data(), got.size(), "stem"));
}

// ---- The reader and writer themselves (generator/base/npy.h), on bytes in memory.

// A runtime_error whose message contains every part; any other outcome fails.
::testing::AssertionResult parse_fails(const std::string& bytes,
                                       const std::vector<std::string>& parts) {
  try {
    padfold::parse_npy_f32(bytes, "mem.npy");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.rfind("mem.npy: ", 0) != 0)
      return ::testing::AssertionFailure() << "message does not start with the label: " << what;
    for (const auto& p : parts)
      if (!contains(what, p))
        return ::testing::AssertionFailure() << "no '" << p << "' in " << what;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "not a runtime_error: " << e.what();
  }
  return ::testing::AssertionFailure() << "parsed";
}

TEST(NpyF32, ParsesWhatItWrites) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {5}, {2, 3}, {1, 7, 7, 3}, {3, 0, 2}};
  for (const auto& shape : shapes) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    const int64_t n = padfold::ref::numel(shape);
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i) - 3;
    const std::string preamble = padfold::npy_preamble_f32(shape);
    EXPECT_EQ(preamble.size() % 64, 0u);
    EXPECT_EQ(preamble.back(), '\n');
    const padfold::NpyArray a = padfold::parse_npy_f32(preamble + f32_bytes(v), "mem.npy");
    EXPECT_EQ(a.shape, shape);
    EXPECT_EQ(a.data, v);
  }
  EXPECT_EQ(
      padfold::npy_preamble_f32({2, 3}),
      npy_bytes(1, padded("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 118), ""));
}

TEST(NpyF32, RefusesMalformedBytes) {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string d = f32_bytes(std::vector<float>(6, 1.0f));
  EXPECT_TRUE(parse_fails(npy_bytes(1, dict, d.substr(0, 20)),
                          {"file has 20 bytes of data, header promises 24"}));
  EXPECT_TRUE(parse_fails(npy_bytes(1, dict, d + "x"),
                          {"file has 25 bytes of data, header promises 24", "extra"}));
  EXPECT_TRUE(parse_fails(std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff{", 13),
                          {"header length 4294967295 exceeds the limit of 65536 bytes"}));
  EXPECT_TRUE(parse_fails(npy_bytes(3, std::string(65537, ' '), ""), {"exceeds the limit"}));
  EXPECT_TRUE(parse_fails(
      npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000, 100000, 3)}",
                ""),
      {"is too large"}));
  EXPECT_TRUE(
      parse_fails(npy_bytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)}", d + d),
                  {"'<f8' is float64", "float32"}));
  EXPECT_TRUE(
      parse_fails(npy_bytes(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}", d),
                  {"fortran_order True"}));
  EXPECT_TRUE(parse_fails("\x93NUMPZ\x01\x00", {"not a .npy file"}));
}

// The header is checked from the bounded prefix and the file size alone, before any data exists.
TEST(NpyF32, HeaderNeedsOnlyThePrefix) {
  const std::string preamble = padfold::npy_preamble_f32({1, 7, 7, 3});
  const padfold::NpyHeader h =
      padfold::parse_npy_header_f32(preamble, preamble.size() + 588, "mem.npy");
  EXPECT_EQ(h.shape, (std::vector<int64_t>{1, 7, 7, 3}));
  EXPECT_EQ(h.data_offset, preamble.size());
  EXPECT_EQ(h.data_bytes, 588u);
  EXPECT_THROW(padfold::parse_npy_header_f32(preamble, preamble.size() + 587, "mem.npy"),
               std::runtime_error);
}

// Every truncation and every single-byte change of a valid file: an array or a runtime_error.
TEST(NpyF32, DamagedFilesGiveRuntimeErrorsOnly) {
  const std::string good =
      padfold::npy_preamble_f32({2, 3}) + f32_bytes(std::vector<float>(6, 2.0f));
  const auto outcome = [](const std::string& bytes) {
    try {
      padfold::parse_npy_f32(bytes, "mem.npy");
      return true;
    } catch (const std::runtime_error&) {
      return true;
    } catch (...) {
      return false;
    }
  };
  for (size_t n = 0; n < good.size(); ++n) EXPECT_TRUE(parse_fails(good.substr(0, n), {})) << n;
  for (size_t i = 0; i < good.size(); ++i)
    for (int c : {0x00, 0x20, 0x27, 0x2c, 0x30, 0x39, 0x7f, 0xff}) {
      std::string bytes = good;
      bytes[i] = static_cast<char>(c);
      EXPECT_TRUE(outcome(bytes)) << "byte " << i << " = " << c;
    }
}

TEST(NpyF32, WriteThenReadAFile) {
  const fs::path dir = work_dir();
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  const std::string path = (dir / "a.npy").string();
  padfold::write_npy_f32(path, {3, 2}, v.data());
  const padfold::NpyArray a = padfold::read_npy_f32(path);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(a.data, v);
  const xt::xarray<float> x = xt::load_npy<float>(path);  // what other readers see
  EXPECT_EQ(x.shape(0), 3u);
  EXPECT_EQ(x(2, 1), 6.0f);
  try {
    padfold::read_npy_f32((dir / "missing.npy").string());
    ADD_FAILURE() << "read a missing file";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "missing.npy: cannot open: No such file or directory"))
        << e.what();
  }
  EXPECT_THROW(padfold::write_npy_f32((dir / "no" / "a.npy").string(), {3, 2}, v.data()),
               std::runtime_error);
  EXPECT_EQ(temp_files(dir), std::vector<std::string>{});
}

}  // namespace
