// Schedules without running kernels: the knob table (ranges, unknown knobs, wrong types, JSON),
// the strategy table, target families, op classes, capabilities, tile fitting, and resolved knobs
// (valid, stable when resolved again, and scheduling exactly like the knobs they came from).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "compile/lower.h"
#include "compile/target.h"
#include "frontend/spec.h"
#include "kernel_cases.h"
#include "schedules/cpu/cpu.h"
#include "schedules/schedule.h"
#include "schedules/tile_math.h"

namespace padfold {
namespace {

using json = nlohmann::json;

Layer one_layer(const json& layer) {
  const json spec = {{"model", "t"}, {"layers", json::array({layer})}};
  return parse_spec(spec.dump(), "test").layers.at(0);
}

json conv(int in_c, int out_c, int k, int groups = 1) {
  return {{"name", "l"},      {"op", "conv2d"},          {"input_shape", {1, 12, 12, in_c}},
          {"layout", "NHWC"}, {"weight_layout", "HWIO"}, {"out_channels", out_c},
          {"groups", groups}, {"kernel", {k, k}},        {"padding", "same"}};
}

std::string error_of(const json& overrides) {
  ScheduleParams p;
  try {
    update_from_json(p, overrides);
  } catch (const KnobError& e) {
    return e.what();
  }
  return "";
}

TEST(KnobTable, NamesAreUniqueAndDefaultsAreTheStructsAndInRange) {
  std::set<std::string> names;
  const ScheduleParams defaults;
  for (const Knob& k : knobs()) {
    EXPECT_TRUE(names.insert(k.name).second) << k.name;
    EXPECT_EQ(k.get(defaults), k.default_value) << k.name;
    EXPECT_GE(k.default_value, k.min) << k.name;
    EXPECT_LE(k.default_value, k.max) << k.name;
    EXPECT_EQ(find_knob(k.name), &k);
    for (int64_t v : k.search_values()) {
      EXPECT_GE(v, k.min) << k.name;
      EXPECT_LE(v, k.max) << k.name;
    }
    EXPECT_GE(k.search_values().size(), 2u) << k.name;
  }
  EXPECT_EQ(find_knob("no_such_knob"), nullptr);
}

TEST(KnobTable, JsonRoundTripsEveryKnob) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    ScheduleParams p;
    p.name = "t" + std::to_string(trial);
    for (const Knob& k : knobs())
      k.set(p, std::uniform_int_distribution<int64_t>(k.min, k.max)(rng));
    const json j = to_json(p);
    EXPECT_EQ(j.size(), knobs().size() + 1);
    for (const Knob& k : knobs())
      EXPECT_EQ(j.at(k.name).is_boolean(), k.type == KnobType::Bool) << k.name;
    ScheduleParams back;
    update_from_json(back, j);
    EXPECT_EQ(back, p) << j.dump();
  }
}

TEST(KnobTable, BadValuesNameTheKnobAndWhatIsExpected) {
  EXPECT_NE(error_of({{"tile_z", 2}})
                .find("unknown schedule knob 'tile_z'; the knobs are "
                      "vector_lanes, channel_vectors"),
            std::string::npos);
  EXPECT_EQ(error_of({{"tile_x", "4"}}),
            "schedule knob 'tile_x': expected an integer in [1, 64], got the string \"4\"");
  EXPECT_EQ(error_of({{"tile_x", 4.5}}),
            "schedule knob 'tile_x': expected an integer in [1, 64], got 4.5");
  EXPECT_EQ(error_of({{"tile_x", 0}}),
            "schedule knob 'tile_x': expected an integer in [1, 64], got 0");
  EXPECT_EQ(error_of({{"tile_x", 65}}),
            "schedule knob 'tile_x': expected an integer in [1, 64], got 65");
  EXPECT_EQ(error_of({{"rows_per_task", -1}}),
            "schedule knob 'rows_per_task': expected an integer in [0, 256], got -1");
  EXPECT_NE(error_of({{"tile_x", 18446744073709551615ull}}).find("expected an integer in [1, 64]"),
            std::string::npos);
  EXPECT_EQ(error_of({{"fit_tiles", 1}}),
            "schedule knob 'fit_tiles': expected true or false, got 1");
  EXPECT_EQ(error_of(json::array()),
            "schedule knobs: expected a JSON object of knob names, got an array");
  EXPECT_EQ(error_of({{"tile_x", 64}, {"fit_tiles", true}}), "");

  // A failed update changes nothing, even for the knobs before the bad one.
  ScheduleParams p;
  EXPECT_THROW(update_from_json(p, {{"channel_vectors", 3}, {"tile_x", 0}}), KnobError);
  EXPECT_EQ(p, ScheduleParams{});
}

TEST(KnobTable, TableRowsRejectUnknownKnobsAndValuesOutOfRange) {
  EXPECT_EQ(with_knobs({}, {{"tile_x", 7}}).tile_x, 7);
  EXPECT_THROW(with_knobs({}, {{"tilex", 7}}), std::logic_error);
  EXPECT_THROW(with_knobs({}, {{"tile_x", 0}}), std::logic_error);
  EXPECT_THROW(with_knobs({}, {{"fit_tiles", 2}}), std::logic_error);
}

TEST(KnobTable, DocsTableIsTheGeneratedOne) {
  std::ifstream f(PADFOLD_KNOBS_DOC);
  ASSERT_TRUE(f) << PADFOLD_KNOBS_DOC;
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), knobs_markdown())
      << "regenerate with: build/bin/padfold knobs --markdown > docs/schedule-knobs.md";
  for (const Knob& k : knobs())
    EXPECT_NE(ss.str().find(std::string("`") + k.name + "`"), std::string::npos) << k.name;
}

const TargetFamily kFamilies[] = {TargetFamily::X86Avx512, TargetFamily::X86Avx2,
                                  TargetFamily::ArmNeon,   TargetFamily::RiscV,
                                  TargetFamily::Generic,   TargetFamily::Gpu};
const OpClass kOpClasses[] = {OpClass::Dense,      OpClass::Stem,    OpClass::Pointwise,
                              OpClass::Depthwise,  OpClass::Pooling, OpClass::Transposed,
                              OpClass::Elementwise};

TEST(StrategyTable, OneValidRowPerFamilyAndOpClass) {
  EXPECT_EQ(strategy_table().size(), std::size(kFamilies) * std::size(kOpClasses));
  for (TargetFamily f : kFamilies) {
    for (OpClass c : kOpClasses) {
      int count = 0;
      for (const StrategyRow& r : strategy_table()) count += r.family == f && r.op_class == c;
      EXPECT_EQ(count, 1) << to_string(f) << "." << to_string(c);
      const StrategyRow& row = strategy_row(f, c);
      ASSERT_FALSE(row.implementations.empty()) << row.defaults.name;
      std::set<std::string> names;
      for (const Implementation& i : row.implementations) {
        EXPECT_TRUE(names.insert(i.name).second) << row.defaults.name << " " << i.name;
        ASSERT_NE(i.strategy, nullptr) << row.defaults.name << " " << i.name;
        EXPECT_EQ(std::string(i.strategy->scope), f == TargetFamily::Gpu ? "gpu" : "cpu");
        EXPECT_GE(i.version, 1) << row.defaults.name << " " << i.name;
      }
      // The last computes every layer of the row, whatever the knobs: the fallback and what fused
      // blocks are built of.
      EXPECT_EQ(row.implementations.back().applies, nullptr) << row.defaults.name;
      EXPECT_EQ(row.implementations.back().chosen, nullptr) << row.defaults.name;
      EXPECT_NE(row.implementations.back().strategy->resolve, nullptr) << row.defaults.name;
      EXPECT_EQ(row.defaults.name, to_string(f) + "." + to_string(c));
      for (const Knob& k : knobs()) {
        EXPECT_GE(k.get(row.defaults), k.min) << row.defaults.name << " " << k.name;
        EXPECT_LE(k.get(row.defaults), k.max) << row.defaults.name << " " << k.name;
        EXPECT_TRUE(std::string(k.scope) == "cpu" || std::string(k.scope) == "gpu") << k.name;
      }
      // The defaults are what the tuner and the manifest start from: they read back as JSON.
      ScheduleParams back;
      update_from_json(back, to_json(row.defaults));
      EXPECT_EQ(back, row.defaults);
    }
  }
  // RISC-V takes the generic rows, scalar (Halide 21's RVV backend; see schedules/cpu/table.cpp).
  for (OpClass c : kOpClasses) {
    ScheduleParams riscv = strategy_row(TargetFamily::RiscV, c).defaults;
    ScheduleParams generic = strategy_row(TargetFamily::Generic, c).defaults;
    EXPECT_EQ(riscv.vector_lanes, 1);
    riscv.vector_lanes = generic.vector_lanes;
    riscv.name = generic.name;
    EXPECT_EQ(riscv, generic) << to_string(c);
  }
}

TEST(StrategyTable, NamesAreDistinct) {
  std::set<std::string> families, classes;
  for (TargetFamily f : kFamilies) EXPECT_TRUE(families.insert(to_string(f)).second);
  for (OpClass c : kOpClasses) EXPECT_TRUE(classes.insert(to_string(c)).second);
  EXPECT_EQ(to_string(TargetFamily::Gpu), "gpu");
  EXPECT_EQ(to_string(OpClass::Elementwise), "elementwise");
}

// Capabilities are the family's: every strategy of a family declares the same, so a target answers
// for all its layers. CPU families: Halide's BoundaryConditions, fused blocks, tuned. The GPU
// family: explicit borders, every layer its own kernel, not tuned.
TEST(StrategyTable, CapabilitiesAreTheFamilys) {
  for (TargetFamily f : kFamilies) {
    const Capabilities want =
        f == TargetFamily::Gpu ? Capabilities{true, false, false} : Capabilities{false, true, true};
    for (OpClass c : kOpClasses) {
      for (const Implementation& i : strategy_row(f, c).implementations) {
        const Capabilities& got = i.strategy->capabilities;
        const std::string what = to_string(f) + "." + to_string(c) + " " + i.name;
        EXPECT_EQ(got.explicit_border, want.explicit_border) << what;
        EXPECT_EQ(got.fuses, want.fuses) << what;
        EXPECT_EQ(got.tunable, want.tunable) << what;
      }
    }
  }
  for (const char* name : {"x86-64-linux-avx512_skylake", "x86-64-linux-avx2-fma", "x86-64-linux",
                           "arm-64-linux", "riscv-64-linux-rvv-vector_bits_128"}) {
    const Capabilities c = capabilities(resolve_target(name));
    EXPECT_FALSE(c.explicit_border) << name;
    EXPECT_TRUE(c.fuses) << name;
    EXPECT_TRUE(c.tunable) << name;
  }
  for (const char* name : {"host-cuda", "host-opencl", "x86-64-linux-avx2-fma-cuda"}) {
    const Capabilities c = capabilities(resolve_target(name));
    EXPECT_TRUE(c.explicit_border) << name;
    EXPECT_FALSE(c.fuses) << name;
    EXPECT_FALSE(c.tunable) << name;
  }
}

// A row lists implementations; the requested knobs choose one per layer (the first chosen), the
// resolved knobs name it and choose it again, and a manifest's knobs read back name the same.
TEST(Implementations, TheKnobsChooseOneAndTheResolvedKnobsNameIt) {
  const Halide::Target avx2 = resolve_target("x86-64-linux-avx2-fma");
  const Layer dense = one_layer(conv(16, 16, 3)), pointwise = one_layer(conv(16, 16, 1));
  const auto chosen = [&](const Layer& L, const Halide::Target& t, const json& knobs) {
    return std::string(implementation_for(L, t, requested_schedule(L, t, knobs)).name);
  };
  // 12x12 outputs: 36 tiles of F(2,3), 9 of F(4,3); the AVX2 row asks for F(4,3) from 32 tiles.
  EXPECT_EQ(chosen(dense, avx2, json::object()), "winograd");
  EXPECT_EQ(chosen(dense, avx2, {{"winograd", 0}}), "direct");
  EXPECT_EQ(chosen(dense, avx2, {{"winograd_min_tiles", 64}}), "direct");
  EXPECT_EQ(chosen(pointwise, avx2, {{"winograd", 2}}), "gemm");  // the AVX2 pointwise row's
  EXPECT_EQ(chosen(pointwise, avx2, {{"gemm_pixels", 0}}), "direct");
  EXPECT_EQ(chosen(dense, resolve_target("host-cuda"), {{"winograd", 2}}), "direct");
  for (const json& knobs : {json::object(), json{{"winograd", 0}}}) {
    const ScheduleParams r = resolve_schedule(dense, avx2, requested_schedule(dense, avx2, knobs));
    EXPECT_EQ(r.implementation, chosen(dense, avx2, knobs)) << knobs;
    EXPECT_EQ(implementation_for(dense, avx2, r).name, r.implementation) << knobs;
    EXPECT_EQ(resolve_schedule(dense, avx2, r), r) << knobs;
    ScheduleParams back;
    update_from_json(back, to_json(r));
    EXPECT_EQ(back, r) << knobs;
  }
  EXPECT_EQ(resolve_schedule(dense, avx2, default_schedule(dense, avx2)).winograd, 1);  // F(2,3)
  // Only the implementations that can compute a layer apply; fused blocks take the last.
  const auto names = [&](const Layer& L) {
    std::vector<std::string> all;
    for (const Implementation* i : applicable_implementations(L, avx2)) all.push_back(i->name);
    return all;
  };
  EXPECT_EQ(names(dense), (std::vector<std::string>{"winograd", "direct"}));
  EXPECT_EQ(names(pointwise), (std::vector<std::string>{"gemm", "direct"}));
  EXPECT_EQ(names(one_layer(conv(16, 16, 3, 16))), (std::vector<std::string>{"direct"}));
  EXPECT_EQ(std::string(fused_implementation(dense, avx2).name), "direct");
  // Overrides that name an implementation they do not choose are refused, naming the layer.
  EXPECT_NO_THROW(requested_schedule(dense, avx2, {{"implementation", "winograd"}}));
  try {
    requested_schedule(dense, avx2, {{"winograd", 0}, {"implementation", "winograd"}});
    ADD_FAILURE() << "a schedule naming an implementation its knobs do not choose was accepted";
  } catch (const KnobError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'l'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'winograd'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'direct'"), std::string::npos) << e.what();
  }
}

// Grouped float convs, channels last, on CPUs: vectors of output channels stay within a group
// (keep_vectors_in_groups), a power of two of at least 8 lanes dividing the channels per group,
// and the tile's vectors divide the channels (none shifted inwards into a group); else the row's
// lanes.
TEST(StrategyTable, GroupedConvVectorsStayInAGroup) {
  const Halide::Target avx512 =
      resolve_target("x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41");
  const Halide::Target avx2 = resolve_target("x86-64-linux-avx2-fma");
  const auto lanes = [](const json& spec, const Halide::Target& t) {
    const Layer L = one_layer(spec);
    return resolve_schedule(L, t, default_schedule(L, t)).vector_lanes;
  };
  EXPECT_EQ(lanes(conv(16, 16, 3), avx512), 16);
  EXPECT_EQ(lanes(conv(104, 104, 3, 13), avx512), 8);  // RegNetY: 8 per group
  EXPECT_EQ(lanes(conv(120, 120, 3, 5), avx512), 8);   // 24 per group
  EXPECT_EQ(lanes(conv(64, 64, 3, 4), avx512), 16);    // 16 per group
  EXPECT_EQ(lanes(conv(64, 64, 3, 16), avx512), 16);   // 4 per group: narrower lanes do not pay
  EXPECT_EQ(lanes(conv(104, 104, 3, 13), avx2), 8);
  for (const Halide::Target& t : {avx512, avx2})
    for (const json& spec : {conv(104, 104, 3, 13), conv(120, 120, 3, 5), conv(72, 72, 3, 9)}) {
      const Layer L = one_layer(spec);
      const ScheduleParams r = resolve_schedule(L, t, default_schedule(L, t));
      EXPECT_EQ(L.out_channels % (r.vector_lanes * r.channel_vectors), 0)
          << spec.dump() << " on " << t.to_string() << ": " << r.channel_vectors << " x "
          << r.vector_lanes;
    }
  EXPECT_EQ(lanes(conv(96, 96, 3, 96), avx512), 16);  // depthwise: its own schedule
  json nchw = conv(104, 104, 3, 13);
  nchw["layout"] = "NCHW";
  nchw["weight_layout"] = "OIHW";
  nchw["input_shape"] = {1, 104, 32, 32};
  EXPECT_EQ(lanes(nchw, avx512), 16);  // vectors along x
  // Knobs naming the lanes still choose them.
  const Layer L = one_layer(conv(104, 104, 3, 13));
  EXPECT_EQ(resolve_schedule(L, avx512, requested_schedule(L, avx512, {{"vector_lanes", 16}}))
                .vector_lanes,
            16);
}

TEST(StrategyTable, TargetFamilies) {
  const std::pair<const char*, TargetFamily> cases[] = {
      {"x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41", TargetFamily::X86Avx512},
      {"x86-64-linux-avx512_skylake", TargetFamily::X86Avx512},
      {"x86-64-linux-avx2-fma", TargetFamily::X86Avx2},
      {"x86-64-linux-tune_znver3-avx-avx2-f16c-fma-sse41", TargetFamily::X86Avx2},
      {"x86-64-linux-sse41", TargetFamily::Generic},
      {"x86-64-linux", TargetFamily::Generic},
      {"arm-64-linux", TargetFamily::ArmNeon},
      {"arm-32-linux", TargetFamily::ArmNeon},
      {"arm-32-linux-no_neon", TargetFamily::Generic},
      {"riscv-64-linux-rvv-vector_bits_128", TargetFamily::RiscV},
      {"host-cuda", TargetFamily::Gpu},
      {"host-opencl", TargetFamily::Gpu},
      {"x86-64-linux-avx2-fma-cuda-cuda_capability_80", TargetFamily::Gpu},
  };
  for (const auto& [name, family] : cases)
    EXPECT_EQ(target_family(resolve_target(name)), family) << name;
}

TEST(StrategyTable, OpClasses) {
  EXPECT_EQ(classify(one_layer(conv(16, 16, 3))), OpClass::Dense);
  EXPECT_EQ(classify(one_layer(conv(5, 16, 3))), OpClass::Dense);
  EXPECT_EQ(classify(one_layer(conv(4, 16, 3))), OpClass::Stem);
  EXPECT_EQ(classify(one_layer(conv(3, 16, 7))), OpClass::Stem);
  EXPECT_EQ(classify(one_layer(conv(16, 32, 1))), OpClass::Pointwise);
  EXPECT_EQ(classify(one_layer(conv(3, 32, 1))), OpClass::Pointwise);
  EXPECT_EQ(classify(one_layer(conv(16, 16, 3, 16))), OpClass::Depthwise);
  EXPECT_EQ(classify(one_layer(conv(16, 32, 5, 16))), OpClass::Depthwise);  // multiplier 2
  EXPECT_EQ(classify(one_layer(conv(16, 16, 1, 16))), OpClass::Depthwise);  // 1x1 depthwise
  EXPECT_EQ(classify(one_layer(conv(16, 16, 3, 2))), OpClass::Dense);       // 8 per group
  EXPECT_EQ(classify(one_layer(conv(8, 8, 3, 2))), OpClass::Stem);          // 4 per group
  json pool = {{"name", "p"},       {"op", "max_pool"}, {"input_shape", {1, 8, 8, 4}},
               {"layout", "NHWC"},  {"kernel", {2, 2}}, {"stride", {2, 2}},
               {"padding", "valid"}};
  EXPECT_EQ(classify(one_layer(pool)), OpClass::Pooling);
  pool["op"] = "avg_pool";
  EXPECT_EQ(classify(one_layer(pool)), OpClass::Pooling);
  json tr = conv(8, 4, 3);
  tr["op"] = "conv_transpose2d";
  tr["weight_layout"] = "HWOI";
  EXPECT_EQ(classify(one_layer(tr)), OpClass::Transposed);
}

TEST(TileFitting, FitTileComputesTheFewestPointsInItsWindow) {
  for (int preferred = 1; preferred <= 20; ++preferred) {
    for (int64_t extent = 1; extent <= 80; ++extent) {
      for (int most : {1, 3, 6, 16, 64}) {
        const int t = fit_tile(preferred, extent, most);
        auto computed = [&](int64_t tile) { return (extent + tile - 1) / tile * tile; };
        if (t != preferred) {
          EXPECT_GE(t, std::max(1, preferred / 2));
          EXPECT_LE(t, std::min<int64_t>({2 * preferred, extent, most}));
        }
        for (int64_t c = std::max(1, preferred / 2); c <= std::min<int64_t>(2 * preferred, extent);
             ++c) {
          if (c > most) break;
          EXPECT_LE(computed(t), computed(c))
              << "preferred " << preferred << " extent " << extent << " most " << most;
        }
      }
    }
  }
  EXPECT_EQ(fit_tile(16, 56, 16), 14);  // resnet_3x3: 56 columns
  EXPECT_EQ(fit_tile(4, 12, 8), 4);
}

TEST(TileFitting, DivisorAtMost) {
  for (int64_t extent = 1; extent <= 100; ++extent) {
    for (int most = 1; most <= 20; ++most) {
      const int d = divisor_at_most(extent, most);
      EXPECT_EQ(extent % d, 0);
      EXPECT_LE(d, std::max(1, most));
      for (int64_t c = d + 1; c <= std::min<int64_t>(most, extent); ++c) EXPECT_NE(extent % c, 0);
    }
  }
}

TEST(TileFitting, ClampInt) {
  EXPECT_EQ(clamp_int(2, 1, 3), 2);
  EXPECT_EQ(clamp_int(5, 1, 3), 3);
  EXPECT_EQ(clamp_int(-2, 1, 3), 1);
  EXPECT_EQ(clamp_int(int64_t{1} << 40, 1, 64), 64);  // 64-bit extents clamp before narrowing
}

TEST(TileFitting, RowTasksGroupToTheGrain) {
  ScheduleParams p;
  p.rows_per_task = 1;
  p.min_task_kflop = 500;
  // 56 row tiles of 0.13 MFLOP each (effnet_dw_s1): no divisor of 56 that keeps 16 tasks (at
  // most 3 tiles a task) reaches 500 kFLOP, so the largest of them, 2.
  EXPECT_EQ(cpu::grouped_rows_per_task(p, 56, 56 * 130e3), 2);
  // Enough work per tile: one tile a task.
  EXPECT_EQ(cpu::grouped_rows_per_task(p, 56, 56 * 1e6), 1);
  // Fewer than 32 row tiles: never grouped.
  EXPECT_EQ(cpu::grouped_rows_per_task(p, 31, 1.0), 1);
  // Tiny tiles: the largest divisor that keeps 16 tasks (112 = 16 x 7).
  EXPECT_EQ(cpu::grouped_rows_per_task(p, 112, 112.0), 7);
  p.min_task_kflop = 0;
  EXPECT_EQ(cpu::grouped_rows_per_task(p, 112, 112.0), 1);
}

// Resolved knobs are valid knobs, resolving them again changes nothing, and they schedule the
// layer exactly as the knobs they came from (same lowered statement). Each statement is lowered in
// a fork of this process: Halide numbers same-named Funcs per process, so both start alike.
std::string lowered_statement(const Layer& L, const Halide::Target& t, const ScheduleParams& p) {
  const std::string path = ::testing::TempDir() + "padfold_stmt_" + std::to_string(getpid());
  const pid_t pid = fork();
  if (pid == 0) {
    Kernel k = lower(L, t, p);
    k.pipeline.compile_to_lowered_stmt(path, k.arguments(), Halide::StmtOutputFormat::Text, t);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::filesystem::remove(path);
  return ss.str();
}

TEST(ResolvedKnobs, ValidStableAndScheduleAlike) {
  const char* targets[] = {"x86-64-linux-avx512_skylake", "x86-64-linux-avx2-fma",
                           "x86-64-linux-sse41", "arm-64-linux", "host-cuda"};
  int checked = 0;
  for (const auto& c : testing::make_kernel_cases(31, 1)) {
    const Model m = parse_spec(c.spec, c.name);
    const Layer& L = m.layers.at(0);
    for (const char* name : targets) {
      const Halide::Target t = resolve_target(name);
      const ScheduleParams requested = default_schedule(L, t);
      const ScheduleParams r = resolve_schedule(L, t, requested);
      EXPECT_EQ(resolve_schedule(L, t, r), r) << c.name << " " << name;
      EXPECT_EQ(r.name, requested.name);
      EXPECT_FALSE(r.fit_tiles);
      ScheduleParams back;
      update_from_json(back, to_json(r));  // the manifest's entry is a valid override
      EXPECT_EQ(back, r);
      if (checked++ % 7 == 0) {  // lowering is the slow part: a sample of the cases
        EXPECT_EQ(lower(L, t, requested).schedule, r);
        const std::string from_requested = lowered_statement(L, t, requested);
        EXPECT_FALSE(from_requested.empty());
        EXPECT_EQ(lowered_statement(L, t, r), from_requested) << c.name << " " << name;
      }
    }
  }
  EXPECT_GT(checked, 300);
}

TEST(ResolvedKnobs, FittedTilesAreRecorded) {
  // 56 columns, 16-column tiles on AVX-512: fitted to 14 columns, so the manifest says 14.
  json l = conv(64, 64, 3);
  l["input_shape"] = {1, 56, 56, 64};
  const Layer L = one_layer(l);
  const Halide::Target t = resolve_target("x86-64-linux-avx512_skylake");
  const ScheduleParams requested = default_schedule(L, t);
  EXPECT_EQ(requested.name, "avx512.dense");
  EXPECT_EQ(requested.tile_x, 16);
  const ScheduleParams r = resolve_schedule(L, t, requested);
  EXPECT_EQ(r.tile_x, 14);
  EXPECT_EQ(r.vector_lanes, 16);
  EXPECT_EQ(r.channel_vectors, 1);
  EXPECT_EQ(r.min_task_kflop, 0);
  // Natural width: vector_lanes 0 resolves to the target's (16 floats on AVX-512).
  ScheduleParams natural = requested;
  natural.vector_lanes = 0;
  EXPECT_EQ(resolve_schedule(L, t, natural).vector_lanes, 16);
}

// What a schedule decided comes back in its result: the knobs in effect, and where a block's
// producers could go (one layer alone is never in strips).
TEST(ScheduleResult, ResolvedKnobsAndThePixelTile) {
  const Layer L = one_layer(conv(16, 16, 3));
  for (const char* name : {"x86-64-linux-avx2-fma", "host-cuda"}) {
    const Halide::Target t = resolve_target(name);
    AlgorithmVariant v;
    v.explicit_border = capabilities(t).explicit_border;
    Algorithm a = build_algorithm(L, v);
    ScheduleParams requested = default_schedule(L, t);
    requested.winograd = 0;  // the direct loops (the algorithm built is direct)
    const ScheduleResult r = apply_schedule(a, requested, t);
    EXPECT_EQ(r.resolved, resolve_schedule(L, t, requested)) << name;
    EXPECT_FALSE(r.strips) << name;
    Halide::LoopLevel tile = r.pixel_tile;
    tile.lock();
    // CPU: one tile of pixels of the output (NHWC: a block of columns); GPU: none chosen.
    if (target_family(t) != TargetFamily::Gpu) {
      EXPECT_FALSE(tile.is_root());
      EXPECT_EQ(tile.func(), a.output.name());
    } else {
      EXPECT_TRUE(tile.is_root());
    }
  }
}

TEST(Lowering, KernelBuffersFollowTheManifestOrder) {
  json l = conv(8, 4, 3);
  l["bias"] = true;
  const Layer L = one_layer(l);
  const Kernel k = lower(L, resolve_target("x86-64-linux-avx2-fma"));
  ASSERT_EQ(k.buffers.size(), 4u);
  const char* names[] = {"input", "weights", "bias", "output"};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(k.buffers[i].info.name, names[i]);
  EXPECT_FALSE(k.buffers[3].param.defined());
  EXPECT_EQ(k.arguments().size(), 3u);
  EXPECT_EQ(k.buffers[1].info.shape, (std::vector<int64_t>{3, 3, 8, 4}));
  EXPECT_EQ(k.param("bias").dimensions(), 1);
  EXPECT_THROW(k.param("output"), std::invalid_argument);
  EXPECT_THROW(lower(L, resolve_target("x86-64-linux-avx2-fma"), json{{"tile_x", 0}}), KnobError);
}

// A kernel with less work than two tasks of min_task_kflop runs on one thread; larger ones keep
// their threads. Elementwise kernels count the elements they read and write.
TEST(ResolvedKnobs, KernelsTooSmallForTwoTasksRunOnOneThread) {
  const Halide::Target t = resolve_target("x86-64-linux-avx2-fma");
  const auto rows = [&](const json& layer) {
    const Layer L = one_layer(layer);
    return resolve_schedule(L, t, default_schedule(L, t)).rows_per_task;
  };
  json pool = {{"name", "p"},
               {"op", "avg_pool"},
               {"input_shape", {1, 7, 7, 1280}},
               {"layout", "NHWC"},
               {"kernel", {7, 7}}};
  EXPECT_EQ(rows(pool), 0);             // 63 kFLOP
  EXPECT_GT(rows(conv(64, 64, 3)), 0);  // 10.6 MFLOP
  json small = conv(8, 8, 3);           // 0.17 MFLOP
  EXPECT_EQ(rows(small), 0);
  small["input_shape"] = {1, 56, 56, 8};  // 3.6 MFLOP
  EXPECT_GT(rows(small), 0);
  const auto mul = [](const json& shape, const char* layout) {
    return json{{"model", "m"},
                {"defaults", {{"layout", layout}}},
                {"inputs", {{{"name", "x"}, {"shape", shape}}, {{"name", "s"}, {"shape", shape}}}},
                {"layers", {{{"name", "m"}, {"op", "mul"}, {"input", {"x", "s"}}}}}};
  };
  const auto mul_rows = [&](const json& spec) {
    const Model model = parse_spec(spec.dump(), "m.json");
    const Layer& L = model.layers.at(0);
    return resolve_schedule(L, t, default_schedule(L, t)).rows_per_task;
  };
  EXPECT_EQ(mul_rows(mul({1, 14, 14, 672}, "NHWC")), 0);  // 0.4 M elements
  EXPECT_GT(mul_rows(mul({1, 56, 56, 144}, "NHWC")), 0);  // 1.4 M
  EXPECT_GT(mul_rows(mul({1, 144, 56, 56}, "NCHW")), 0);
}

// Channels-first elementwise kernels hand out one round of tasks over channels, not one per
// channel over rows.
TEST(Lowering, ChannelsFirstElementwiseThreadsOverChannels) {
  const json spec = {{"model", "m"},
                     {"defaults", {{"layout", "NCHW"}}},
                     {"inputs",
                      {{{"name", "x"}, {"shape", {1, 144, 56, 56}}},
                       {{"name", "y"}, {"shape", {1, 144, 56, 56}}}}},
                     {"layers", {{{"name", "a"}, {"op", "add"}, {"input", {"x", "y"}}}}}};
  const Model m = parse_spec(spec.dump(), "m.json");
  const Halide::Target t = resolve_target("x86-64-linux-avx2-fma");
  Kernel k = lower(m.layers.at(0), t);
  const std::string path = ::testing::TempDir() + "/padfold_elementwise.stmt";
  k.pipeline.compile_to_lowered_stmt(path, k.arguments(), Halide::Text, codegen_target(t));
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  const std::string stmt = text.str();
  // One parallel loop, over channels, handed out once (not a loop over rows inside one over
  // channels, which would name the closure after y).
  EXPECT_NE(stmt.find("par_for_a_s0_c "), std::string::npos) << stmt;
  EXPECT_EQ(stmt.find("par_for_a_s0_y"), std::string::npos) << stmt;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace padfold
