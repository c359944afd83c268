// Bad input never crashes the parser: random mutations of the shipped examples either parse or
// raise a SpecError that names the file; no other exception escapes.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>

#include "frontend/spec.h"

namespace padfold {
namespace {

using json = nlohmann::json;

json load(const std::string& name) {
  std::ifstream f(std::string(PADFOLD_EXAMPLES_DIR) + "/" + name);
  return json::parse(f);
}

// Replaces one random value somewhere in `j` with a random value of a random type.
void mutate(json& j, std::mt19937& rng) {
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  json* node = &j;
  while ((node->is_object() || node->is_array()) && !node->empty() && pick(4) != 0) {
    auto it = node->begin();
    std::advance(it, pick(static_cast<int>(node->size())));
    node = &*it;
  }
  const json values[] = {nullptr,
                         -1,
                         0,
                         1,
                         2,
                         3,
                         1000000000,
                         2.5,
                         -0.0,
                         "",
                         "same",
                         "NHWC",
                         "reflect",
                         "x",
                         true,
                         json::array(),
                         json::array({1, 2}),
                         json::array({-1, 0, 3}),
                         json::object(),
                         json::object({{"mode", 1}})};
  *node = values[pick(static_cast<int>(std::size(values)))];
}

TEST(SpecFuzz, MutatedExamplesNeverCrash) {
  std::mt19937 rng(42);
  int accepted = 0, rejected = 0;
  for (const char* example : {"tiny.json", "conventions.json", "efficientnet_b0_blocks.json"}) {
    const json base = load(example);
    for (int i = 0; i < 1500; ++i) {
      json j = base;
      for (int m = 0; m < 1 + i % 3; ++m) mutate(j, rng);
      try {
        const Model model = parse_spec(j.dump(), "fuzz.json");
        for (const Layer& L : model.layers) {
          EXPECT_FALSE(L.out_spatial.empty());
          for (int64_t o : L.out_spatial) EXPECT_GT(o, 0) << j.dump();
        }
        ++accepted;
      } catch (const SpecError& e) {
        EXPECT_EQ(std::string(e.what()).rfind("fuzz.json: ", 0), 0u) << e.what();
        ++rejected;
      }
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
}

// Sizes near and beyond every limit (int32, int64, uint64, float32, double): each mutated spec
// parses with every size and buffer within base/limits.h, or is a SpecError naming the file;
// no arithmetic on the sizes overflows on the way (products are checked in 128 bits here).
TEST(SpecFuzz, ExtremeValuesStayWithinTheLimits) {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const json values[] = {int64_t{2147483647},
                         int64_t{2147483648},
                         int64_t{65536},
                         int64_t{1} << 30,
                         int64_t{1} << 62,
                         std::numeric_limits<int64_t>::max(),
                         std::numeric_limits<int64_t>::min(),
                         std::numeric_limits<uint64_t>::max(),
                         -2147483647,
                         1e39,
                         -1e39,
                         3.4e38,
                         1e308,
                         json::array({int64_t{1} << 20, int64_t{1} << 20}),
                         json::array({2147483647, 1}),
                         json::array({1, 1, 2147483647, 2147483647})};
  int accepted = 0, rejected = 0;
  for (const char* example : {"tiny.json", "conventions.json", "efficientnet_b0_blocks.json"}) {
    const json base = load(example);
    for (int i = 0; i < 1500; ++i) {
      json j = base;
      for (int m = 0; m < 1 + i % 3; ++m) {
        json* node = &j;
        while ((node->is_object() || node->is_array()) && !node->empty() && pick(5) != 0) {
          auto it = node->begin();
          std::advance(it, pick(static_cast<int>(node->size())));
          node = &*it;
        }
        *node = values[pick(static_cast<int>(std::size(values)))];
      }
      try {
        const Model model = parse_spec(j.dump(), "fuzz.json");
        for (const Layer& L : model.layers) {
          for (const auto& shape : {L.input_shape(), L.output_shape_full(), L.weight_shape()}) {
            __extension__ __int128 elements = 1;
            for (int64_t v : shape) {
              EXPECT_GT(v, 0) << j.dump();
              EXPECT_LE(v, kMaxSize) << j.dump();
              elements *= v;
            }
            EXPECT_LT(elements * 4, kMaxBufferBytes) << j.dump();
          }
          for (const auto& p : L.pads.axes) {
            EXPECT_LE(p.before, kMaxSize);
            EXPECT_LE(p.after, kMaxSize);
          }
          EXPECT_TRUE(std::isfinite(L.border_value));
          EXPECT_TRUE(std::isfinite(L.activation_alpha));
        }
        ++accepted;
      } catch (const SpecError& e) {
        EXPECT_EQ(std::string(e.what()).rfind("fuzz.json: ", 0), 0u) << e.what();
        ++rejected;
      }
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
}

TEST(SpecFuzz, TruncatedTextIsAnErrorWithAPosition) {
  std::ifstream f(std::string(PADFOLD_EXAMPLES_DIR) + "/tiny.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  for (size_t cut = 0; cut + 1 < text.size(); cut += 7) {
    try {
      parse_spec(text.substr(0, cut), "cut.json");
      ADD_FAILURE() << "a truncated spec was accepted at byte " << cut;
    } catch (const SpecError& e) {
      // "cut.json:LINE:COL: invalid JSON: ..."
      EXPECT_TRUE(
          std::regex_search(e.what(), std::regex("^cut\\.json:[0-9]+:[0-9]+: invalid JSON")))
          << e.what();
    }
  }
}

}  // namespace
}  // namespace padfold
